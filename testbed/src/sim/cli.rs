//! `testbed sim TOPOLOGY.toml`: runs a topology file in virtual time and writes the trace,
//! captures and summary it asks for (`[output]`, `--trace`, `--pcap`, `--summary`; relative
//! paths are relative to the current directory), then prints the path of every file it wrote.

use super::host::HostNode;
use super::topo::{Built, Topology};
use super::Sim;
use anyhow::Context;
use cnm_proto::{Duration, Instant};
use serde_json::{json, Value};
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

/// Arguments of `testbed sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// The topology file (TOML; see the `testbed::sim::topo` documentation).
    pub topology: PathBuf,
    /// Run seed (overrides the file's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Virtual time to simulate (overrides the file's `duration`), e.g. `100ms`.
    #[arg(long)]
    pub duration: Option<Duration>,
    /// Trace file (overrides `[output] trace`).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Summary file (overrides `[output] summary`).
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Capture a link: `LINK=FILE` (repeatable; added to `[output] pcap`).
    #[arg(long, value_name = "LINK=FILE")]
    pub pcap: Vec<String>,
    /// Print only the summary JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `testbed sim`.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let mut topo = Topology::load(&args.topology)?;
    if let Some(s) = args.seed {
        topo.seed = s;
    }
    if let Some(d) = args.duration {
        topo.duration = d;
    }
    if let Some(t) = args.trace {
        topo.output.trace = Some(t);
    }
    if let Some(s) = args.summary {
        topo.output.summary = Some(s);
    }
    for p in &args.pcap {
        let (link, file) = p
            .split_once('=')
            .with_context(|| format!("--pcap {p:?}: expected LINK=FILE"))?;
        topo.output.pcap.push(super::topo::PcapSpec {
            link: link.into(),
            file: file.into(),
        });
    }
    let (mut sim, built) = topo.build()?;
    if let Some(path) = &topo.output.trace {
        let f = File::create(path).with_context(|| format!("trace {}", path.display()))?;
        sim.trace_to(Box::new(BufWriter::with_capacity(1 << 16, f)));
    }
    for p in &topo.output.pcap {
        let Some(link) = sim.link_id(&p.link) else {
            anyhow::bail!("{}: pcap: no link {:?}", topo.file, p.link);
        };
        let f = File::create(&p.file).with_context(|| format!("pcap {}", p.file.display()))?;
        sim.capture(link, Box::new(BufWriter::with_capacity(1 << 16, f)))?;
    }
    let wall = std::time::Instant::now();
    sim.run_until(Instant::ZERO + topo.duration);
    let wall = wall.elapsed();
    sim.finish()?;
    let summary = summarize(&mut sim, &built, &topo, wall);
    let text = serde_json::to_string_pretty(&summary)?;
    if let Some(path) = &topo.output.summary {
        std::fs::write(path, &text).with_context(|| format!("summary {}", path.display()))?;
    }
    if args.json {
        println!("{text}");
    } else {
        print_human(&summary);
    }
    // Every file written, with the path the topology gave it (relative to the current
    // directory when relative): on stderr under --json, whose stdout is the summary alone.
    let mut written: Vec<&std::path::Path> = Vec::new();
    written.extend(topo.output.trace.as_deref());
    written.extend(topo.output.pcap.iter().map(|p| p.file.as_path()));
    written.extend(topo.output.summary.as_deref());
    for p in written {
        let line = format!("wrote {}", p.display());
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    Ok(())
}

/// The engine's summary plus per-flow figures, the bottleneck and the run's speed.
pub fn summarize(
    sim: &mut Sim,
    built: &Built,
    topo: &Topology,
    wall: std::time::Duration,
) -> Value {
    let mut v = sim.summary();
    let now = sim.now();
    v["flows"] = Value::Array(flow_summary(sim, built, now));
    v["seed"] = json!(topo.seed);
    v["topology"] = json!(topo.file);
    let frames = sim.stats().deliveries;
    v["wall_s"] = json!(wall.as_secs_f64());
    v["frames_per_wall_s"] = json!(frames as f64 / wall.as_secs_f64().max(1e-9));
    v["virtual_per_wall"] = json!(now.as_secs_f64() / wall.as_secs_f64().max(1e-9));
    if let Some(link) = built.bottleneck {
        let name = sim.link_name(link).to_string();
        let util = v["links"]
            .as_array()
            .and_then(|ls| {
                ls.iter()
                    .find(|l| l["link"] == json!(name) && l["from"] == v_node_a(sim, link))
            })
            .map(|l| l["utilization"].clone())
            .unwrap_or(Value::Null);
        let drops: u64 = v["switches"]
            .as_array()
            .map(|s| s.iter().filter_map(|x| x["drops"].as_u64()).sum())
            .unwrap_or(0);
        let (a, ap, b, _) = sim.link_ends(link).map_or(
            (
                super::NodeId(0),
                String::new(),
                super::NodeId(0),
                String::new(),
            ),
            |(a, ap, b, bp)| (a, ap.to_string(), b, bp.to_string()),
        );
        let queue = sim
            .bridge(a)
            .and_then(|br| br.port_id(&ap))
            .and_then(|p| sim.queue_summary(a, p))
            .map(|(o, _)| o);
        v["bottleneck"] = json!({
            "link": name, "from": sim.node_name(a), "to": sim.node_name(b),
            "utilization": util, "output_queue": queue, "drops_all_switches": drops,
        });
    }
    v
}

fn v_node_a(sim: &Sim, link: super::LinkId) -> Value {
    sim.link_ends(link)
        .map_or(Value::Null, |(a, _, _, _)| json!(sim.node_name(a)))
}

/// What the simulator measured of one configured flow up to some instant.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlowReport {
    /// Flow name.
    pub name: String,
    /// Flow id (the `[[flow]]` index).
    pub id: u32,
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// Frames the source generated.
    pub generated: u64,
    /// Frames the sink received.
    pub received: u64,
    /// Octets received (a bulk TCP flow: the in-order octets its receiver took).
    pub bytes: u64,
    /// Frames the sink counted lost.
    pub lost: u64,
    /// Mean one-way delay (ns).
    pub delay_mean_ns: u64,
    /// Mean received rate over the flow's active period so far (bit/s).
    pub mean_rate_bps: f64,
}

/// One report per configured flow: generated and received frames, loss, mean rate over the
/// flow's active period up to `now`.
pub fn flow_reports(sim: &Sim, built: &Built, now: Instant) -> Vec<FlowReport> {
    let host = |name: &str| {
        built
            .hosts
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|&(_, id)| sim.host(id))
    };
    built
        .flows
        .iter()
        .map(|(name, id, src, dst, start, stop)| {
            let s = host(src);
            let generated = s.map_or(0, |h| h.generated(*id));
            let mac = s.map(HostNode::mac);
            let counters = host(dst).and_then(|h| {
                h.sink()
                    .flows()
                    .find(|((m, f), _)| Some(*m) == mac && f == id)
                    .map(|(_, c)| c.clone())
            });
            let end = (*stop).min(now);
            let secs = end.saturating_since(*start).as_secs_f64();
            let (frames, mut bytes, lost, delay) = counters.as_ref().map_or((0, 0, 0, 0), |c| {
                (c.frames, c.bytes, c.lost, c.delay_mean_ns())
            });
            // A bulk TCP flow (`pattern = "tcp"`): the in-order octets its receiver took.
            if let Some(t) = host(dst).and_then(HostNode::tcp) {
                bytes = bytes.max(t.received(super::tcp::bulk_conn(*id)));
            }
            FlowReport {
                name: name.clone(),
                id: *id,
                src: src.clone(),
                dst: dst.clone(),
                generated,
                received: frames,
                bytes,
                lost,
                delay_mean_ns: delay,
                mean_rate_bps: if secs > 0.0 {
                    bytes as f64 * 8.0 / secs
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// [`flow_reports`] as JSON objects (the `flows` of `testbed sim`'s summary).
pub fn flow_summary(sim: &Sim, built: &Built, now: Instant) -> Vec<Value> {
    flow_reports(sim, built, now)
        .iter()
        .map(|r| json!(r))
        .collect()
}

fn print_human(v: &Value) {
    println!(
        "simulated {:.3} s in {:.3} s of wall time ({:.2}x real time, {:.0} frame deliveries/s)",
        v["t"].as_u64().unwrap_or(0) as f64 / 1e9,
        v["wall_s"].as_f64().unwrap_or(0.0),
        v["virtual_per_wall"].as_f64().unwrap_or(0.0),
        v["frames_per_wall_s"].as_f64().unwrap_or(0.0),
    );
    if let Some(flows) = v["flows"].as_array() {
        for f in flows {
            println!(
                "flow {:<8} {:>6} -> {:<6} {:>10.3} Mb/s  received {:>9}  lost {:>7}",
                f["name"].as_str().unwrap_or(""),
                f["src"].as_str().unwrap_or(""),
                f["dst"].as_str().unwrap_or(""),
                f["mean_rate_bps"].as_f64().unwrap_or(0.0) / 1e6,
                f["received"].as_u64().unwrap_or(0),
                f["lost"].as_u64().unwrap_or(0),
            );
        }
    }
    if let Some(sw) = v["switches"].as_array() {
        for s in sw {
            println!(
                "switch {}: {} drops",
                s["node"].as_str().unwrap_or(""),
                s["drops"].as_u64().unwrap_or(0)
            );
        }
    }
    let b = &v["bottleneck"];
    if !b.is_null() {
        println!(
            "bottleneck {}: utilization {:.4}, output queue mean {:.0} B std {:.0} B p99 {} B",
            b["link"].as_str().unwrap_or(""),
            b["utilization"].as_f64().unwrap_or(0.0),
            b["output_queue"]["mean"].as_f64().unwrap_or(0.0),
            b["output_queue"]["std"].as_f64().unwrap_or(0.0),
            b["output_queue"]["p99"].as_u64().unwrap_or(0),
        );
    }
}

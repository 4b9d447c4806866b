//! `testbed run`, `testbed list`, `testbed compare`: scenarios on namespaces or in simulation.
//!
//! A run loads a [`Scenario`](crate::scenario::Scenario), executes it in one of two worlds and
//! fills a [`RunData`] (flows with their paths and throughput samples, links with capacities,
//! queue series and daemon events from the traces, bottlenecks, fidelity measurements), which
//! [`crate::report::write_run`] turns into the results directory: `summary.json`, CSV time
//! series, plots, `report.md`.
//!
//! * [`sim`] — the deterministic simulator with the papers' own numbers.
//! * [`netns`] — one network namespace per node, veth per link, `cp-switch` per switch,
//!   `rp-agent gen`/`sink` per host, the schedule run in wall-clock time at scale S
//!   (QCN-REFERENCE §5), fidelity measured, everything torn down on exit, error or Ctrl-C.
//!
//! Variants (`--variant`, `testbed compare --modes`) change the congestion points of every
//! switch (`output`, `input`, `off`, `fqcn`) and/or the reaction points of every host (`qcn-bs`,
//! `adaptive-bc`, ...), written `CP/RP`; `qcn` leaves the file as it is.

pub mod events;
pub mod incast;
pub mod iperf;
pub mod modes;
pub mod netns;
pub mod pcapfilter;
pub mod progress;
pub mod shape;
pub mod sim;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::analysis::{Bottleneck, FlowSeries, LinkSpec, Marker, QueueSeries, RunData, RunMeta};
use crate::report::{self, ReportOptions, RunReport};
use crate::scenario::Scenario;
use shape::Shape;

/// Where a scenario runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Network namespaces with the real daemons, scaled by S.
    Netns,
    /// The virtual-time simulator, unscaled.
    Sim,
}

impl Mode {
    /// `"netns"` / `"sim"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Netns => "netns",
            Mode::Sim => "sim",
        }
    }
}

/// The variants a run can apply: congestion-point placements (`output`, `input`, `off`) and
/// modes (`fqcn`) of every switch, reaction-point modes of every host (`adaptive-bc`,
/// `qcn-bs`, `adaptive-bc+qcn-bs`), or both (`explicit-rate`: the CPs advertise rates, the RPs
/// follow them). Combine with `/` (`input/qcn-bs`); `qcn` alone leaves the file as it is.
pub const VARIANTS: &[&str] = &[
    "qcn",
    "output",
    "input",
    "off",
    "fqcn",
    "adaptive-bc",
    "qcn-bs",
    "adaptive-bc+qcn-bs",
    "explicit-rate",
];

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Results directory (default `results/<scenario>-<mode>-<timestamp>`).
    pub out: Option<PathBuf>,
    /// World.
    pub mode: Mode,
    /// Capture the bottleneck port into `bottleneck.pcap`.
    pub capture: bool,
    /// Seed (default: the file's).
    pub seed: Option<u64>,
    /// Variant (`qcn`, `output`, `input`, `off`); `None` = as the file says.
    pub variant: Option<String>,
    /// `--cp-mode`, `--culprit`, `--rp-mode` (applied after the variant).
    pub modes: modes::ModeFlags,
    /// Directory of the `cp-switch` and `rp-agent` binaries (default: next to this program).
    pub bin_dir: Option<PathBuf>,
    /// No progress bar.
    pub quiet: bool,
    /// Skip the plots.
    pub no_plots: bool,
}

impl RunOptions {
    /// Defaults for `mode`.
    pub fn new(mode: Mode) -> RunOptions {
        RunOptions {
            out: None,
            mode,
            capture: false,
            seed: None,
            variant: None,
            modes: modes::ModeFlags::default(),
            bin_dir: None,
            quiet: false,
            no_plots: false,
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// The results directory.
    pub dir: PathBuf,
    /// Everything measured.
    pub data: RunData,
    /// The summary and the files written.
    pub report: RunReport,
}

const PLACEMENTS: &[&str] = &["output", "input", "off"];

/// Applies a variant to the scenario: `switch.*.bridge.cp.placement`, `switch.*.bridge.cp.mode`
/// and/or `host.*.agent.rp_mode`.
pub fn apply_variant(sc: &Scenario, variant: &str) -> anyhow::Result<Scenario> {
    let mut sets = Vec::new();
    for part in variant.split('/') {
        if part == "qcn" {
            continue;
        }
        if part == "fqcn" || part == "explicit-rate" {
            sets.extend(
                sc.topo
                    .switch
                    .keys()
                    .map(|s| format!("switch.{s}.bridge.cp.mode={part}")),
            );
        }
        if part == "fqcn" {
            continue;
        }
        if PLACEMENTS.contains(&part) {
            sets.extend(
                sc.topo
                    .switch
                    .keys()
                    .map(|s| format!("switch.{s}.bridge.cp.placement={part}")),
            );
        } else if VARIANTS.contains(&part) {
            sets.extend(
                sc.topo
                    .host
                    .keys()
                    .map(|h| format!("host.{h}.agent.rp_mode={part}")),
            );
        } else {
            anyhow::bail!(
                "unknown variant {part:?} (known: {}; combine as CP/RP)",
                VARIANTS.join(", ")
            );
        }
    }
    Ok(sc.with_overrides(&sets)?)
}

/// The results directory of a run.
pub fn default_out(sc: &Scenario, mode: Mode, variant: Option<&str>) -> PathBuf {
    let ts = timestamp();
    let v = variant.map(|v| format!("-{v}")).unwrap_or_default();
    PathBuf::from("results").join(format!("{}-{}{v}-{ts}", sc.name, mode.as_str()))
}

/// UTC `YYYYmmdd-HHMMSS` from the system clock.
pub fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Runs a scenario and writes its results directory.
pub fn run_scenario(sc: &Scenario, opts: &RunOptions) -> anyhow::Result<RunOutcome> {
    let sc = match &opts.variant {
        Some(v) => apply_variant(sc, v)?,
        None => sc.clone(),
    };
    let sc = modes::apply(&sc, &opts.modes)?;
    let label = match (opts.variant.as_deref(), opts.modes.label()) {
        (Some(v), Some(m)) => Some(format!("{v}-{m}")),
        (v, m) => m.or(v.map(str::to_string)),
    };
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out(&sc, opts.mode, label.as_deref()));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("results directory {}", dir.display()))?;
    let mut data = match opts.mode {
        Mode::Sim => sim::run(&sc, opts, &dir)?,
        Mode::Netns => netns::run(&sc, opts, &dir)?,
    };
    data.meta.variant = label;
    let ropts = ReportOptions {
        no_plots: opts.no_plots,
        ..ReportOptions::default()
    };
    let report = report::write_run(&dir, &data, &ropts)
        .with_context(|| format!("writing results into {}", dir.display()))?;
    Ok(RunOutcome { dir, data, report })
}

/// How the schedule and the loop are scaled in a world.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaling {
    /// Rates are divided by this (S in netns, 1 in sim).
    pub rate_div: f64,
    /// Loop times (delays, RP timer) are multiplied by this (S, 1).
    pub loop_mul: f64,
    /// Schedule times (duration, starts, stops, events, window) are multiplied by this.
    pub sched_mul: f64,
}

impl Scaling {
    /// Unscaled.
    pub const ONE: Scaling = Scaling {
        rate_div: 1.0,
        loop_mul: 1.0,
        sched_mul: 1.0,
    };

    /// The netns scaling of a scenario.
    pub fn netns(sc: &Scenario) -> Scaling {
        let s = sc.scale();
        let d = sc.topo.duration.as_secs_f64().max(1e-9);
        let sched = match sc.meta.netns.duration {
            Some(n) => n.as_secs_f64() / d,
            None => s,
        };
        Scaling {
            rate_div: s,
            loop_mul: s,
            sched_mul: sched,
        }
    }

    /// A rate in this world (bit/s).
    pub fn rate(&self, r: cnm_proto::Rate) -> f64 {
        r.as_f64() / self.rate_div
    }

    /// A schedule time in this world (seconds).
    pub fn at(&self, d: cnm_proto::Duration) -> f64 {
        d.as_secs_f64() * self.sched_mul
    }
}

/// The mode-independent part of a run's [`RunData`]: meta, links (both directions, with the
/// capacity steps of the events), flows (paths, activity, fair shares), bottleneck, markers.
pub fn skeleton(sc: &Scenario, mode: Mode, k: Scaling, seed: u64) -> (RunData, Shape) {
    let shape = Shape::of(&sc.topo);
    let duration = k.at(sc.topo.duration);
    let mut meta = RunMeta::new(&sc.name, mode.as_str(), duration, seed);
    meta.time_scale = k.rate_div;
    let (w0, w1) = sc.window_s();
    meta.steady_window = Some((w0 * k.sched_mul, w1 * k.sched_mul));
    let bn = sc.bottleneck();
    // Qeq and Qhigh of the bottleneck's switch.
    if let Some(li) = bn.as_deref().and_then(|b| shape.link_index(b)) {
        let sw = &shape.links[li].a.node;
        if let Some(cfg) = sc
            .topo
            .switch
            .get(sw)
            .and_then(|s| s.bridge.clone())
            .and_then(|t| t.try_into::<cp_switch::BridgeConfig>().ok())
        {
            if cfg.cp.placement != cp_switch::Placement::Off {
                meta.q_eq_bytes = Some(cfg.cp.cp_queue_set_point.get());
            }
            if cfg.lossless.mode != cp_switch::config::LosslessMode::None {
                meta.q_high_bytes = Some(cfg.lossless.qhigh.get());
            }
        } else if sc.topo.switch.contains_key(sw) {
            let d = cp_switch::BridgeConfig::default();
            meta.q_eq_bytes = Some(d.cp.cp_queue_set_point.get());
        }
        // Qeq moved by parameter events of that switch.
        for ev in &sc.topo.event {
            if let Ok(crate::sim::topo::EventKind::Switch { switch, set }) = ev.kind() {
                let qeq = set
                    .get("cp_queue_set_point")
                    .and_then(|v| toml::Value::try_into::<cnm_proto::Bytes>(v.clone()).ok());
                if let (true, Some(q)) = (switch == sw.as_str(), qeq) {
                    meta.q_eq_steps.push((k.at(ev.at), q.get()));
                }
            }
        }
        meta.q_eq_steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    // Every timed event: `sw0-r0 → 1gbit`, `sw0 cp_queue_set_point=20KB`, `h0 rp_mode=...`.
    for ev in sc.topo.event.iter().filter(|e| e.at < sc.topo.duration) {
        meta.markers.push(Marker {
            t_s: k.at(ev.at),
            label: ev.label(),
        });
    }
    for (i, f) in sc.topo.flow.iter().enumerate() {
        if f.start > cnm_proto::Duration::ZERO {
            let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
            meta.markers.push(Marker {
                t_s: k.at(f.start),
                label: format!("{name} starts"),
            });
        }
        if let Some(stop) = f.stop.filter(|s| *s < sc.topo.duration) {
            let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
            meta.markers.push(Marker {
                t_s: k.at(stop),
                label: format!("{name} stops"),
            });
        }
    }
    meta.markers.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut run = RunData::new(meta);
    for (li, l) in sc.topo.link.iter().enumerate() {
        for fwd in [true, false] {
            let name = shape.hop_name((li, fwd));
            let mut spec = LinkSpec::new(&name, cnm_proto::Rate::from_f64(k.rate(l.rate)));
            for ev in &sc.topo.event {
                use crate::sim::topo::{DirSpec, EventKind};
                let Ok(EventKind::Link { link, dir, rate }) = ev.kind() else {
                    continue;
                };
                let applies = link == shape.links[li].name
                    && match dir {
                        DirSpec::Both => true,
                        DirSpec::AToB => fwd,
                        DirSpec::BToA => !fwd,
                    };
                if applies {
                    spec = spec.step(k.at(ev.at), cnm_proto::Rate::from_f64(k.rate(rate)));
                }
            }
            run.add_link(spec);
        }
    }
    let macs = sc.topo.host_macs();
    // FQCN weights (by source MAC) of the switches running FQCN: the fair shares are then the
    // weighted max-min shares (QCN-REFERENCE §4.2).
    let fqcn_weights: Vec<(cnm_proto::wire::EthernetAddress, u32)> = sc
        .topo
        .switch
        .values()
        .filter_map(|s| s.bridge.clone())
        .filter_map(|t| t.try_into::<cp_switch::BridgeConfig>().ok())
        .filter(|c| {
            c.cp.mode == cp_switch::CpMode::Fqcn && c.cp.placement != cp_switch::Placement::Off
        })
        .flat_map(|c| c.cp.fqcn_weights)
        .filter_map(|w| Some((w.mac?, w.weight)))
        .collect();
    for (i, f) in sc.topo.flow.iter().enumerate() {
        let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
        let path: Vec<String> = shape
            .path(&f.src, &f.dst)
            .unwrap_or_default()
            .into_iter()
            .map(|h| shape.hop_name(h))
            .collect();
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let mut fs = FlowSeries::new(&name, &refs)
            .active(k.at(f.start), f.stop.map(|s| k.at(s)))
            .at_host(&f.src, Some(0));
        if let Some(m) = macs.get(&f.src) {
            fs = fs.source_mac(&m.to_string());
            if let Some((_, w)) = fqcn_weights.iter().find(|(mac, _)| mac == m) {
                fs = fs.weight(f64::from(*w));
            }
        }
        if let Ok(kind) = f.kind() {
            use crate::sim::topo::FlowKind;
            use rp_agent::gen::Pattern;
            let demand = match kind {
                FlowKind::Gen(Pattern::Greedy) | FlowKind::Tcp => None,
                FlowKind::Gen(Pattern::Cbr(r)) => Some(k.rate(r)),
                FlowKind::Gen(Pattern::OnOff { rate, .. })
                | FlowKind::Gen(Pattern::Poisson { rate, .. }) => Some(k.rate(rate)),
                // Measured as goodput in netns (payload of the wire rate), as frames in sim.
                FlowKind::Udp(r) if mode == Mode::Netns => {
                    Some(iperf::udp_app_rate(k.rate(r), f.frame_len).0)
                }
                FlowKind::Udp(r) => Some(k.rate(r)),
            };
            if let Some(r) = demand {
                fs = fs.demand(cnm_proto::Rate::from_f64(r));
            }
        }
        if let Some(share) = sc.meta.fair_share.get(&name) {
            fs = fs.fair_share(cnm_proto::Rate::from_f64(k.rate(*share)));
        }
        run.add_flow(fs);
    }
    if let Some(b) = bn {
        if let Some(li) = shape.link_index(&b) {
            let l = &shape.links[li];
            let key = QueueSeries::key(Some(&l.a.node), &l.a.port, 3, "output");
            let bott = Bottleneck::new(&b, &b, Some(&key));
            run.add_bottleneck(bott);
        }
    }
    (run, shape)
}

/// The short table printed after a run, plus the paths of plots and report.
pub fn print_outcome(out: &RunOutcome) {
    print!(
        "{}",
        crate::report::table::summary_table(&out.report.summary)
    );
    println!("results: {}", out.dir.display());
    for f in &out.report.files {
        let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
        if matches!(ext, "png" | "svg" | "md" | "pcap" | "json") {
            println!("  {}", f.display());
        }
    }
    for name in ["bottleneck.pcap", "cnms.pcap"] {
        let pcap = out.dir.join(name);
        if pcap.exists() {
            println!("  {}", pcap.display());
        }
    }
}

/// `testbed compare`: one scenario under several variants, side by side in `dir`.
pub fn compare(
    sc: &Scenario,
    variants: &[String],
    opts: &RunOptions,
    dir: &Path,
) -> anyhow::Result<(Vec<RunOutcome>, crate::report::compare::CompareReport)> {
    let mut outs = Vec::new();
    for v in variants {
        if crate::signals::requested() {
            anyhow::bail!("interrupted");
        }
        let mut o = opts.clone();
        o.variant = Some(v.clone());
        o.out = Some(dir.join(v));
        eprintln!("testbed compare: {} under {v}", sc.name);
        outs.push(run_scenario(sc, &o)?);
    }
    let datas: Vec<RunData> = outs.iter().map(|o| o.data.clone()).collect();
    let rep = crate::report::compare::write_compare(
        dir,
        &datas,
        &ReportOptions {
            no_plots: opts.no_plots,
            ..ReportOptions::default()
        },
    )?;
    Ok((outs, rep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_set_placement_and_rp_mode() {
        let sc = crate::scenario::load("chain3", &[]).unwrap();
        let v = apply_variant(&sc, "input/qcn-bs").unwrap();
        for sw in v.topo.switch.values() {
            let b = sw.bridge.clone().unwrap();
            assert_eq!(b["cp"]["placement"].as_str(), Some("input"));
        }
        for h in v.topo.host.values() {
            let a = h.agent.clone().unwrap();
            assert_eq!(a["rp_mode"].as_str(), Some("qcn-bs"));
        }
        assert!(apply_variant(&sc, "fastest").is_err());
        let er = apply_variant(&sc, "explicit-rate").unwrap();
        let b = er.topo.switch["sw0"].bridge.clone().unwrap();
        assert_eq!(b["cp"]["mode"].as_str(), Some("explicit-rate"));
        let a = er.topo.host["h0"].agent.clone().unwrap();
        assert_eq!(a["rp_mode"].as_str(), Some("explicit-rate"));
        let f = apply_variant(&sc, "fqcn").unwrap();
        let b = f.topo.switch["sw0"].bridge.clone().unwrap();
        assert_eq!(b["cp"]["mode"].as_str(), Some("fqcn"));
        assert!(f.topo.host["h0"].agent.is_none());
        let same = apply_variant(&sc, "qcn").unwrap();
        assert_eq!(same.tree, sc.tree);
    }

    #[test]
    fn timestamps_are_civil_dates() {
        let t = timestamp();
        assert_eq!(t.len(), 15);
        assert!(t.starts_with("20"), "{t}");
    }
}

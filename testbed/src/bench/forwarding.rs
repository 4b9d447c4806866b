//! `testbed bench forwarding`: how many frames per second a path from h1 to h2 carries.
//!
//! Topology, built in one [`Lab`]:
//!
//! ```text
//!   h1:d0  ─────────── veth ───────────  h2:d0        (a) the limit: no DUT at all
//!   h1:eth0 ── veth ── dut:p1 [DUT] dut:p2 ── veth ── h2:eth0
//!                           (b) Linux bridge br0   (c) cp-switch --port p1 --port p2
//! ```
//!
//! Every interface has its offloads off and IPv6 disabled (no stray frames). For each path and
//! frame size the blaster in h1 sends test frames ([`frame`]) to h2's MAC as fast
//! as its `PACKET_MMAP` ring drains, and the counter in h2 counts only frames of that
//! measurement; see [`blast`] for the method. The three paths are measured in the
//! same run, on the same machine state, with the same blaster, so their ratios are meaningful
//! even where absolute numbers move with the machine's load.

use std::path::{Path, PathBuf};

use cnm_proto::Duration;

use super::blast::{self, Endpoint};
use super::frame;
use super::report::{Outcome, PathKind, Report, Row};
use super::BenchError;
use crate::netns::{self, Lab, Namespace};
use crate::signals;

/// Settings of one benchmark run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Measurement window per (path, size).
    pub duration: Duration,
    /// Warm-up before each window.
    pub warmup: Duration,
    /// Frame sizes (octets on the socket, FCS excluded), [`frame::MIN_SIZE`]..=[`frame::MAX_SIZE`].
    pub sizes: Vec<usize>,
    /// The cp-switch binary; `None` or a missing file gives a "not built" row.
    pub cp_switch: Option<PathBuf>,
    /// How many times the whole sequence (veth, bridge, cp-switch) is repeated; each cell
    /// reports the round with the median received frames/s. Interleaving the paths makes
    /// their ratios robust against load that comes and goes on a shared machine.
    pub rounds: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            duration: Duration::from_secs(3),
            warmup: Duration::from_millis(500),
            sizes: vec![64, 1500],
            cp_switch: default_cp_switch_path(),
            rounds: 1,
        }
    }
}

/// `cp-switch` next to the running executable ([`crate::bins`]).
pub fn default_cp_switch_path() -> Option<PathBuf> {
    Some(crate::bins::path("cp-switch"))
}

/// MACs of the benchmark hosts (locally administered, IEEE 802-2014 clause 8.3).
const H1_MAC: [u8; 6] = [0x02, 0x71, 0x74, 0x62, 0x01, 0x01];
const H2_MAC: [u8; 6] = [0x02, 0x71, 0x74, 0x62, 0x02, 0x01];
const H1_DIRECT_MAC: [u8; 6] = [0x02, 0x71, 0x74, 0x62, 0x01, 0x02];
const H2_DIRECT_MAC: [u8; 6] = [0x02, 0x71, 0x74, 0x62, 0x02, 0x02];

/// How long cp-switch gets to start before it must be running.
const CP_SWITCH_START: std::time::Duration = std::time::Duration::from_millis(500);

/// The benchmark topology.
#[derive(Debug)]
struct Topology {
    // Declared first so it is dropped last, after the daemons' guards.
    lab: Lab,
    dut: Namespace,
    direct: (Endpoint, Endpoint),
    via_dut: (Endpoint, Endpoint),
}

impl Topology {
    fn build() -> Result<Topology, BenchError> {
        let lab = Lab::new("fwd")?;
        let h1 = lab.ns("h1")?;
        let dut = lab.ns("dut")?;
        let h2 = lab.ns("h2")?;
        for ns in [&h1, &dut, &h2] {
            ns.disable_ipv6()?;
        }
        lab.veth((&h1, "d0"), (&h2, "d0"))?.offloads_off()?;
        lab.veth((&h1, "eth0"), (&dut, "p1"))?.offloads_off()?;
        lab.veth((&dut, "p2"), (&h2, "eth0"))?.offloads_off()?;
        for (ns, ifname, mac) in [
            (&h1, "eth0", H1_MAC),
            (&h2, "eth0", H2_MAC),
            (&h1, "d0", H1_DIRECT_MAC),
            (&h2, "d0", H2_DIRECT_MAC),
        ] {
            ns.set_mac(ifname, &netns::format_mac(mac))?;
            ns.set_up(ifname)?;
        }
        dut.set_up("p1")?;
        dut.set_up("p2")?;
        let ep = |ns: &Namespace, ifname: &str, mac| Endpoint {
            ns: ns.clone(),
            ifname: ifname.to_owned(),
            mac,
        };
        Ok(Topology {
            direct: (ep(&h1, "d0", H1_DIRECT_MAC), ep(&h2, "d0", H2_DIRECT_MAC)),
            via_dut: (ep(&h1, "eth0", H1_MAC), ep(&h2, "eth0", H2_MAC)),
            dut,
            lab,
        })
    }
}

/// Runs the benchmark: builds the topology, measures every (path, size), tears down.
/// Failures of one cell become a `failed` row; setup failures and interrupts are errors.
pub fn run(cfg: &Config) -> Result<Report, BenchError> {
    if !netns::is_root() {
        return Err(BenchError::NotRoot);
    }
    for &s in &cfg.sizes {
        if !(frame::MIN_SIZE..=frame::MAX_SIZE).contains(&s) {
            return Err(BenchError::BadSize(s));
        }
    }
    let load_avg_1m = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok());
    let topo = Topology::build()?;
    let mut raw = Vec::new();
    let mut notes = Vec::new();
    for _round in 0..cfg.rounds.max(1) {
        // (a) veth pair.
        measure_all(cfg, PathKind::Veth, &topo.direct, &mut raw)?;

        // (b) Linux bridge.
        topo.dut.add_bridge("br0", &["p1", "p2"])?;
        topo.dut.offloads_off("br0")?;
        measure_all(cfg, PathKind::Bridge, &topo.via_dut, &mut raw)?;
        topo.dut.del_link("br0")?;

        // (c) cp-switch, unshaped.
        match cfg.cp_switch.as_deref().filter(|p| p.is_file()) {
            None => {
                let looked_for = cfg
                    .cp_switch
                    .as_deref()
                    .map_or_else(|| "no path".to_owned(), |p| p.display().to_string());
                for &size in &cfg.sizes {
                    raw.push(Row::new(
                        PathKind::CpSwitch,
                        size,
                        Outcome::NotBuilt {
                            looked_for: looked_for.clone(),
                        },
                    ));
                }
            }
            Some(bin) => run_cp_switch(cfg, &topo, bin, &mut raw, &mut notes)?,
        }
    }
    notes.dedup();
    let rows = aggregate(raw);

    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    notes.push(format!(
        "the blaster, the counter and the DUT (bridge softirq or cp-switch) share {cpus} CPU(s); \
         each path's figure is what it carries while competing with them. CPU b/c = CPU used \
         by the blaster / counter threads (for veth and the bridge, the forwarding itself runs \
         in the blaster's sendto)"
    ));
    notes.push(
        "rx = test frames the counter in h2 received during the window; sent = frames the \
         blaster in h1 handed to the kernel; sizes exclude the FCS"
            .to_owned(),
    );
    let mut report = Report {
        duration_s: cfg.duration.as_secs_f64(),
        warmup_s: cfg.warmup.as_secs_f64(),
        rounds: cfg.rounds.max(1),
        cpus,
        load_avg_1m,
        rows,
        ratios: Vec::new(),
        notes,
    };
    report.compute_ratios();
    drop(topo);
    Ok(report)
}

fn run_cp_switch(
    cfg: &Config,
    topo: &Topology,
    bin: &Path,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<(), BenchError> {
    let log = std::env::temp_dir().join(format!("{}-cp-switch.log", topo.lab.prefix()));
    let fail = |rows: &mut Vec<Row>, error: String| {
        for &size in &cfg.sizes {
            rows.push(Row::new(
                PathKind::CpSwitch,
                size,
                Outcome::Failed {
                    error: error.clone(),
                },
            ));
        }
    };
    let args = [
        bin.as_os_str(),
        "--port".as_ref(),
        "p1".as_ref(),
        "--port".as_ref(),
        "p2".as_ref(),
    ];
    let mut child = match topo.dut.spawn_logged(&args, &log) {
        Ok(c) => c,
        Err(e) => {
            fail(rows, e.to_string());
            return Ok(());
        }
    };
    if signals::sleep_or_interrupted(CP_SWITCH_START) {
        return Err(signals::Interrupted.into());
    }
    if let Ok(Some(status)) = child.try_wait() {
        fail(
            rows,
            format!("cp-switch exited at start ({status}): {}", log_tail(&log)),
        );
        return Ok(());
    }
    for &size in &cfg.sizes {
        let outcome = cell(cfg, &topo.via_dut, size)?;
        let outcome = match (outcome, child.try_wait()) {
            (o, Ok(None)) => o,
            (_, Ok(Some(status))) => Outcome::Failed {
                error: format!("cp-switch exited ({status}): {}", log_tail(&log)),
            },
            (_, Err(e)) => Outcome::Failed {
                error: e.to_string(),
            },
        };
        rows.push(Row::new(PathKind::CpSwitch, size, outcome));
    }
    let _ = child.stop(std::time::Duration::from_secs(2));
    notes.push(format!("cp-switch log: {}", log.display()));
    Ok(())
}

/// Merges the rounds: one row per (path, size) in first-seen order, holding the measured
/// round with the median received frames/s (the upper median for an even count) and every
/// round's figure; a cell never measured keeps its last outcome.
fn aggregate(raw: Vec<Row>) -> Vec<Row> {
    let mut keys: Vec<(PathKind, usize)> = Vec::new();
    for r in &raw {
        if !keys.contains(&(r.path, r.size)) {
            keys.push((r.path, r.size));
        }
    }
    keys.into_iter()
        .filter_map(|(path, size)| {
            let cells: Vec<&Row> = raw
                .iter()
                .filter(|r| r.path == path && r.size == size)
                .collect();
            let mut measured: Vec<_> = cells
                .iter()
                .filter_map(|r| match r.outcome {
                    Outcome::Measured(m) => Some(m),
                    _ => None,
                })
                .collect();
            measured.sort_by(|a, b| a.rx_fps.total_cmp(&b.rx_fps));
            let mut row = match measured.get(measured.len() / 2) {
                Some(m) => Row::new(path, size, Outcome::Measured(*m)),
                None => (*cells.last()?).clone(),
            };
            row.rounds_rx_fps = measured.iter().map(|m| m.rx_fps).collect();
            Some(row)
        })
        .collect()
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(3).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

fn measure_all(
    cfg: &Config,
    path: PathKind,
    ends: &(Endpoint, Endpoint),
    rows: &mut Vec<Row>,
) -> Result<(), BenchError> {
    for &size in &cfg.sizes {
        let outcome = cell(cfg, ends, size)?;
        rows.push(Row::new(path, size, outcome));
    }
    Ok(())
}

/// One measurement; an interrupt is an error, anything else a `failed` cell.
fn cell(cfg: &Config, ends: &(Endpoint, Endpoint), size: usize) -> Result<Outcome, BenchError> {
    if signals::requested() {
        return Err(signals::Interrupted.into());
    }
    let spec = blast::Spec {
        size,
        warmup: cfg.warmup,
        window: cfg.duration,
    };
    match blast::measure(&ends.0, &ends.1, &spec) {
        Ok(m) => Ok(Outcome::Measured(m)),
        Err(BenchError::Interrupted(i)) => Err(BenchError::Interrupted(i)),
        Err(e) => Ok(Outcome::Failed {
            error: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Measurement;

    fn measured(path: PathKind, size: usize, rx: u64) -> Row {
        Row::new(
            path,
            size,
            Outcome::Measured(Measurement::from_counts(size, 1.0, rx, rx)),
        )
    }

    #[test]
    fn aggregate_takes_median_round() {
        let failed = Row::new(
            PathKind::CpSwitch,
            64,
            Outcome::Failed {
                error: "gone".into(),
            },
        );
        let raw = vec![
            measured(PathKind::Veth, 64, 30),
            failed.clone(),
            measured(PathKind::Veth, 64, 10),
            measured(PathKind::Bridge, 64, 5),
            measured(PathKind::Veth, 64, 20),
            failed.clone(),
        ];
        let rows = aggregate(raw);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].path, PathKind::Veth);
        assert_eq!(rows[0].rounds_rx_fps, vec![10.0, 20.0, 30.0]);
        match rows[0].outcome {
            Outcome::Measured(m) => assert_eq!(m.rx_frames, 20),
            ref o => panic!("{o:?}"),
        }
        assert_eq!(rows[1], failed);
        assert_eq!(rows[2].rounds_rx_fps, vec![5.0]);
    }

    #[test]
    fn cp_switch_is_looked_for_next_to_the_executable() {
        let p = default_cp_switch_path().unwrap();
        assert_eq!(p.file_name().unwrap(), "cp-switch");
        // Test binaries live in target/<profile>/deps; the daemon one level up.
        assert_ne!(p.parent().unwrap().file_name().unwrap(), "deps");
    }
}

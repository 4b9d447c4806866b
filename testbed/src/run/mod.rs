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
//! `--twin` (netns): the simulator then runs the same scenario and seed into `twin-sim/`, and
//! the run's summary compares the two per metric ([`crate::analysis::twin::twin`]); the
//! run is faithful only within the comparison's limits.
//!
//! Variants (`--variant`, `testbed compare --variants`) change the congestion points of every
//! switch (`output`, `input`, `off`, `fqcn`) and/or the reaction points of every host (`qcn-bs`,
//! `adaptive-bc`, ...), written `CP/RP`; `qcn` leaves the file as it is.

pub mod capture;
pub mod incast;
pub mod iperf;
pub mod modes;
pub mod netns;
pub mod pcapfilter;
pub mod progress;
pub mod runner;
pub mod sim;
pub mod skeleton;
pub mod world;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::analysis::summary::Summary;
use crate::analysis::RunData;
use crate::report::{self, ReportOptions, RunReport};
use crate::scenario::Scenario;
pub use skeleton::skeleton;
pub use world::Scaling;

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
    /// Links to capture into pcap files ([`capture`]).
    pub capture: capture::Capture,
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
    /// After a netns run, run the simulator on the same scenario and seed (into `twin-sim/`)
    /// and compare ([`crate::analysis::twin::twin`]).
    pub twin: bool,
    /// Seeds the twin runs: the run's, then the following ones (the per-flow shares are
    /// judged against the simulator's spread over them); at least 1.
    pub twin_seeds: u32,
    /// Netns runs: `--sched` of every `cp-switch` (`None`: the daemon's default).
    pub switch_sched: Option<daemon_kit::sched::SchedPolicy>,
    /// Netns runs: `--sched` of the `rp-agent hosts` process (`None`: `fifo:50` when its loop
    /// has a CPU of its own, `netns::Pinning::HOSTS_SCHED`; time-shared otherwise).
    pub hosts_sched: Option<daemon_kit::sched::SchedPolicy>,
    /// Netns runs: pin each switch's loop and the hosts process's loop to a CPU of its own
    /// when the runner has enough ([`netns::Pinning`]). Default true.
    pub pin: bool,
}

impl RunOptions {
    /// Defaults for `mode`.
    pub fn new(mode: Mode) -> RunOptions {
        RunOptions {
            out: None,
            mode,
            capture: capture::Capture::Off,
            seed: None,
            variant: None,
            modes: modes::ModeFlags::default(),
            bin_dir: None,
            quiet: false,
            no_plots: false,
            twin: false,
            twin_seeds: 10,
            switch_sched: None,
            hosts_sched: None,
            pin: true,
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
    opts.capture.check(&sc.topo.graph())?;
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out(&sc, opts.mode, label.as_deref()));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("results directory {}", dir.display()))?;
    let mut data = runner::run(&sc, opts, &dir)?;
    data.meta.variant = label.clone();
    let ropts = ReportOptions {
        no_plots: opts.no_plots,
        ..ReportOptions::default()
    };
    let twin = match (opts.twin, opts.mode) {
        (true, Mode::Netns) => Some(run_twin(&sc, opts, &dir, label, &ropts)?),
        _ => None,
    };
    let report = report::write_run_with_twin(
        &dir,
        &data,
        &ropts,
        twin.as_ref().map(|t| report::TwinRef {
            sim: &t.sim,
            others: &t.others,
            dir: Some(&t.dir),
            note: t.note.as_deref(),
        }),
    )
    .with_context(|| format!("writing results into {}", dir.display()))?;
    Ok(RunOutcome { dir, data, report })
}

/// What the simulator twin of a netns run gave.
struct TwinRuns {
    /// The summary on the run's seed.
    sim: Summary,
    /// The summaries on the following seeds.
    others: Vec<Summary>,
    /// `twin-sim/` of the run's directory.
    dir: String,
    /// How the twin's schedule differs from the scenario as written, if it does.
    note: Option<String>,
}

/// The simulator on the same scenario (variant and modes applied) and seed into
/// `dir/twin-sim/`, then on the `opts.twin_seeds − 1` following seeds into
/// `dir/twin-sim/seed-N/` (no plots): the spread the per-flow shares are judged against.
fn run_twin(
    sc: &Scenario,
    opts: &RunOptions,
    dir: &Path,
    label: Option<String>,
    ropts: &ReportOptions,
) -> anyhow::Result<TwinRuns> {
    let twin_dir = dir.join("twin-sim");
    // The experiment the netns run performed: its schedule compressed below S (`[scenario.netns]
    // duration`) gives the loop less time than the scenario as written does, so the twin
    // simulates the same compressed schedule at the scenario's own rates.
    let k = Scaling::netns(sc);
    let c = k.sched_mul / k.loop_mul;
    let (compressed, note) = if c < 0.99 {
        (
            Some(sc.schedule_scaled(c)),
            Some(format!(
                "the twin simulates the netns run's schedule, the scenario's compressed × {c:.3} \
                 (the netns schedule runs × {:.3} where its loop runs × {}): flows, events and \
                 window as the netns run had them; the scenario as written, with {:.0} × the \
                 loop time in its window, may give other figures (slow ones: fairness, \
                 convergence), see `testbed run --mode sim`",
                k.sched_mul,
                k.loop_mul,
                1.0 / c
            )),
        )
    } else {
        (None, None)
    };
    let note = match (note, twin_transport_note(sc)) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or_else(|| b.map(str::to_string)),
    };
    let sc = compressed.as_ref().unwrap_or(sc);
    let mut o = opts.clone();
    o.mode = Mode::Sim;
    o.capture = capture::Capture::Off;
    let seed = opts.seed.unwrap_or(sc.topo.seed);
    // The seeds are independent single-threaded runs: they share the machine's cores (the netns
    // run is over by now), each writing its own directory, and come back in seed order.
    let n = usize::try_from(opts.twin_seeds.max(1)).unwrap_or(1);
    let workers = std::thread::available_parallelism().map_or(1, |c| c.get());
    let done = crate::pool::map_indexed(n, workers, |k| -> anyhow::Result<Summary> {
        let s = seed.wrapping_add(k as u64);
        let d = if k == 0 {
            twin_dir.clone()
        } else {
            twin_dir.join(format!("seed-{s}"))
        };
        std::fs::create_dir_all(&d)
            .with_context(|| format!("results directory {}", d.display()))?;
        let mut o = o.clone();
        o.seed = Some(s);
        let mut sim = runner::run(sc, &o, &d)?;
        sim.meta.variant = label.clone();
        let r = ReportOptions {
            no_plots: ropts.no_plots || k > 0,
            ..*ropts
        };
        let rep = report::write_run(&d, &sim, &r)
            .with_context(|| format!("writing results into {}", d.display()))?;
        Ok(rep.summary)
    });
    let run = done.iter().filter(|r| r.is_some()).count();
    if run < n {
        anyhow::bail!("the twin was interrupted ({run} of {n} seeds run)");
    }
    let mut summaries = Vec::with_capacity(n);
    for (k, r) in done.into_iter().flatten().enumerate() {
        summaries.push(r.with_context(|| format!("twin seed {}", seed.wrapping_add(k as u64)))?);
    }
    let sim = summaries.remove(0);
    Ok(TwinRuns {
        sim,
        others: summaries,
        dir: twin_dir.display().to_string(),
        note,
    })
}

/// What a twin does not reproduce of a netns run by construction: its hosts' TCP (an incast, a
/// `tcp` flow). The netns hosts run Linux's (Reno's window rules on incast hosts, see the
/// netns lab's `LabTcp`; SACK, tail loss probes and RACK everywhere), the twin the simulator's
/// NewReno-like model without SACK ([`crate::sim::tcp`]). Where losses come the two recover
/// differently: the incast's netns rounds mostly end without a timeout where the model's take
/// one each (34-63 % of the bottleneck against 13 % at S = 10, in the runs measured). The note
/// says so next to the twin's verdict, which stays as the metrics give it. `None` without TCP.
fn twin_transport_note(sc: &Scenario) -> Option<&'static str> {
    let tcp = !sc.topo.incast.is_empty()
        || sc
            .topo
            .flow
            .iter()
            .any(|f| f.kind == crate::sim::topo::FlowKind::Tcp);
    tcp.then_some(
        "the netns hosts run their kernels' TCP, whose loss recovery (SACK, tail loss probes, \
         RACK) is not the twin's NewReno-like model without SACK (`sim::tcp`): where losses \
         come the two recover differently, and utilization, shares and incast rounds may differ \
         for that reason alone",
    )
}

/// The short table printed after a run, then every file the run wrote ([`print_files`]).
pub fn print_outcome(out: &RunOutcome) {
    print!(
        "{}",
        crate::report::table::summary_table(&out.report.summary)
    );
    print_files(&out.dir, false);
}

/// Every file under `dir`, recursively, sorted by path (unreadable directories are skipped).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(p),
                Ok(_) => out.push(p),
                Err(_) => {}
            }
        }
    }
    out.sort();
    out
}

/// `results: DIR` and every file under it, one per line (on stderr when `to_stderr`, so that
/// a `--json` document on stdout stays the only thing there).
pub fn print_files(dir: &Path, to_stderr: bool) {
    let mut text = format!("results: {}\n", dir.display());
    for f in files_under(dir) {
        text.push_str(&format!("  {}\n", f.display()));
    }
    if to_stderr {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
}

/// Checks every variant of a comparison against the scenario (with the run's `--cp-mode`,
/// `--culprit`, `--rp-mode` on top) before any of them runs: an unknown or inapplicable
/// variant, a repeated one or an empty list is an error naming it.
pub fn check_variants(sc: &Scenario, variants: &[String], opts: &RunOptions) -> anyhow::Result<()> {
    if variants.is_empty() {
        anyhow::bail!("--variants: no variant given (e.g. --variants qcn,off)");
    }
    opts.capture.check(&sc.topo.graph())?;
    for (i, v) in variants.iter().enumerate() {
        if variants[..i].contains(v) {
            anyhow::bail!("--variants: {v:?} is given twice");
        }
        let applied = apply_variant(sc, v).with_context(|| format!("--variants: {v:?}"))?;
        modes::apply(&applied, &opts.modes).with_context(|| format!("--variants: {v:?}"))?;
    }
    Ok(())
}

/// `testbed compare`: one scenario under several variants, side by side in `dir`; every
/// variant is checked ([`check_variants`]) before the first run starts.
pub fn compare(
    sc: &Scenario,
    variants: &[String],
    opts: &RunOptions,
    dir: &Path,
) -> anyhow::Result<(Vec<RunOutcome>, crate::report::compare::CompareReport)> {
    check_variants(sc, variants, opts)?;
    let mut outs = Vec::new();
    for v in variants {
        if crate::signals::requested() {
            anyhow::bail!("interrupted");
        }
        let mut o = opts.clone();
        o.variant = Some(v.clone());
        o.out = Some(dir.join(v));
        tracing::info!("testbed compare: {} under {v}", sc.name);
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

    /// The twin names the transports' difference for a scenario with TCP, and only then.
    #[test]
    fn the_twin_notes_the_hosts_tcp() {
        let inc = crate::scenario::load("incast", &[]).unwrap();
        assert!(twin_transport_note(&inc).is_some_and(|n| n.contains("SACK")));
        let db = crate::scenario::load("dumbbell", &[]).unwrap();
        assert_eq!(twin_transport_note(&db), None);
    }

    #[test]
    fn variants_set_placement_and_rp_mode() {
        let sc = crate::scenario::load("chain3", &[]).unwrap();
        let v = apply_variant(&sc, "input/qcn-bs").unwrap();
        for sw in v.topo.switch.values() {
            let b = sw.bridge.clone().unwrap();
            assert_eq!(b.config.cp.placement, cp_switch::Placement::Input);
        }
        for h in v.topo.host.values() {
            let a = h.agent.clone().unwrap();
            assert_eq!(a.config.rp_mode, rp_agent::RpMode::QcnBs);
        }
        assert!(apply_variant(&sc, "fastest").is_err());
        let er = apply_variant(&sc, "explicit-rate").unwrap();
        let b = er.topo.switch["sw0"].bridge.clone().unwrap();
        assert_eq!(b.config.cp.mode, cp_switch::CpMode::ExplicitRate);
        let a = er.topo.host["h0"].agent.clone().unwrap();
        assert_eq!(a.config.rp_mode, rp_agent::RpMode::ExplicitRate);
        let f = apply_variant(&sc, "fqcn").unwrap();
        let b = f.topo.switch["sw0"].bridge.clone().unwrap();
        assert_eq!(b.config.cp.mode, cp_switch::CpMode::Fqcn);
        assert!(f.topo.host["h0"].agent.is_none());
        let same = apply_variant(&sc, "qcn").unwrap();
        assert_eq!(same.tree, sc.tree);
    }

    #[test]
    fn compare_checks_every_variant_before_running() {
        let sc = crate::scenario::load("chain3", &[]).unwrap();
        let opts = RunOptions::new(Mode::Sim);
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_variants(&sc, &v(&["qcn", "fqcn", "input/qcn-bs"]), &opts).is_ok());
        let e = check_variants(&sc, &v(&["fqcn", "bogus"]), &opts).unwrap_err();
        assert!(format!("{e:#}").contains("\"bogus\""), "{e:#}");
        let e = check_variants(&sc, &v(&["qcn", "qcn"]), &opts).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        assert!(check_variants(&sc, &[], &opts).is_err());
        // compare() refuses before it creates anything.
        let dir = std::env::temp_dir().join(format!("compare-check-{}", std::process::id()));
        assert!(compare(&sc, &v(&["qcn", "bogus"]), &opts, &dir).is_err());
        assert!(!dir.exists());
    }

    #[test]
    fn timestamps_are_civil_dates() {
        let t = timestamp();
        assert_eq!(t.len(), 15);
        assert!(t.starts_with("20"), "{t}");
    }
}

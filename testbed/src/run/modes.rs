//! `--cp-mode`, `--culprit`, `--rp-mode`: the congestion-control variant of every node at once,
//! and the check that the scenario's combination of CP and RP modes makes sense.
//!
//! The flags rewrite the scenario table before the run: `--cp-mode` sets
//! `switch.*.bridge.cp.mode`, `--culprit` sets `switch.*.bridge.cp.culprit`, `--rp-mode` sets
//! `host.*.agent.rp_mode` (QCN-REFERENCE §4 names). [`check`] then looks at what every switch
//! and every sending host ends up with and rejects the combinations that cannot work:
//!
//! * an occupancy or arrival culprit other than `arrival` with `fqcn` or `explicit-rate` CPs
//!   (FQCN picks its culprits by eq. 7-8, the explicit-rate CP addresses every active source);
//! * a CP mode or culprit on a switch whose congestion points are off (`cp.placement = "off"`);
//! * a flow whose source follows rate feedback (`rp_mode = "explicit-rate"`) crossing a switch
//!   that sends CNMs (`qcn`, `fqcn`), or a flow whose source reacts to CNMs crossing an
//!   explicit-rate switch: each side ignores the other's messages (`rp_agent` counts them as
//!   ignored), so the loop would be open.
//!
//! Errors name the flag when a flag caused the value and the scenario field otherwise.

use std::collections::BTreeMap;

use cp_switch::{CpMode, Culprit, Placement};
use rp_agent::RpMode;

use crate::scenario::Scenario;

/// `--cp-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CpModeArg {
    /// Standard 802.1Qau (QCN-REFERENCE §4.1).
    Qcn,
    /// Fair QCN (§4.2).
    Fqcn,
    /// Explicit-rate feedback (§4.6).
    ExplicitRate,
}

/// `--culprit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CulpritArg {
    /// The sampled frame's source (standard).
    Arrival,
    /// The flow holding the most queue (§4.3).
    OccupancyDeterministic,
    /// A flow drawn with probability proportional to its occupancy (§4.3).
    OccupancyRandom,
}

/// `--rp-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RpModeArg {
    /// Standard reaction point.
    Qcn,
    /// BC_LIMIT = K·CR (§4.4).
    AdaptiveBc,
    /// One limiter per congestion point (§4.5).
    QcnBs,
    /// Both.
    #[value(name = "adaptive-bc+qcn-bs")]
    AdaptiveBcQcnBs,
    /// Follows rate feedback (§4.6).
    ExplicitRate,
}

impl CpModeArg {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            CpModeArg::Qcn => "qcn",
            CpModeArg::Fqcn => "fqcn",
            CpModeArg::ExplicitRate => "explicit-rate",
        }
    }
}

impl CulpritArg {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            CulpritArg::Arrival => "arrival",
            CulpritArg::OccupancyDeterministic => "occupancy-deterministic",
            CulpritArg::OccupancyRandom => "occupancy-random",
        }
    }
}

impl RpModeArg {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            RpModeArg::Qcn => "qcn",
            RpModeArg::AdaptiveBc => "adaptive-bc",
            RpModeArg::QcnBs => "qcn-bs",
            RpModeArg::AdaptiveBcQcnBs => "adaptive-bc+qcn-bs",
            RpModeArg::ExplicitRate => "explicit-rate",
        }
    }
}

/// The three flags; `None` leaves the scenario's own setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModeFlags {
    /// `--cp-mode`.
    pub cp_mode: Option<CpModeArg>,
    /// `--culprit`.
    pub culprit: Option<CulpritArg>,
    /// `--rp-mode`.
    pub rp_mode: Option<RpModeArg>,
}

impl ModeFlags {
    /// True when no flag is given.
    pub fn is_empty(&self) -> bool {
        *self == ModeFlags::default()
    }

    /// A short label for results directories (`fqcn+occupancy-random+qcn-bs`).
    pub fn label(&self) -> Option<String> {
        let parts: Vec<&str> = [
            self.cp_mode.map(CpModeArg::name),
            self.culprit.map(CulpritArg::name),
            self.rp_mode.map(RpModeArg::name),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join("_"))
    }
}

/// Applies the flags to every switch and host, then [`check`]s the result.
pub fn apply(sc: &Scenario, flags: &ModeFlags) -> anyhow::Result<Scenario> {
    let mut sets = Vec::new();
    for s in sc.topo.switch.keys() {
        if let Some(m) = flags.cp_mode {
            sets.push(format!("switch.{s}.bridge.cp.mode={}", m.name()));
        }
        if let Some(c) = flags.culprit {
            sets.push(format!("switch.{s}.bridge.cp.culprit={}", c.name()));
        }
    }
    if let Some(m) = flags.rp_mode {
        for h in sc.topo.host.keys() {
            sets.push(format!("host.{h}.agent.rp_mode={}", m.name()));
        }
    }
    // The switches first, on the file's values with the flags substituted: the override below
    // re-validates every bridge and would otherwise report a clash without naming the flag.
    check_switches(sc, flags)?;
    let out = if sets.is_empty() {
        sc.clone()
    } else {
        sc.with_overrides(&sets)?
    };
    check(&out, flags)?;
    Ok(out)
}

/// A switch's congestion-point settings as the run will use them.
struct CpView {
    placement: Placement,
    mode: CpMode,
    culprit: Culprit,
}

fn switch_cp(sc: &Scenario, name: &str, flags: &ModeFlags) -> CpView {
    // Typed when the scenario was parsed.
    let cfg = sc
        .topo
        .switch
        .get(name)
        .map(|s| s.bridge_spec().config)
        .unwrap_or_default();
    let mode = match flags.cp_mode {
        Some(CpModeArg::Qcn) => CpMode::Qcn,
        Some(CpModeArg::Fqcn) => CpMode::Fqcn,
        Some(CpModeArg::ExplicitRate) => CpMode::ExplicitRate,
        None => cfg.cp.mode,
    };
    let culprit = match flags.culprit {
        Some(CulpritArg::Arrival) => Culprit::Arrival,
        Some(CulpritArg::OccupancyDeterministic) => Culprit::OccupancyDeterministic,
        Some(CulpritArg::OccupancyRandom) => Culprit::OccupancyRandom,
        None => cfg.cp.culprit,
    };
    CpView {
        placement: cfg.cp.placement,
        mode,
        culprit,
    }
}

/// A host's reaction-point mode as the file gives it (typed when the scenario was parsed).
fn host_rp(sc: &Scenario, name: &str) -> RpMode {
    sc.topo
        .host
        .get(name)
        .map(|h| h.agent_spec().config.rp_mode)
        .unwrap_or_default()
}

fn cp_src(flags: &ModeFlags, s: &str) -> String {
    match flags.cp_mode {
        Some(m) => format!("--cp-mode {}", m.name()),
        None => format!("switch.{s}.bridge.cp.mode"),
    }
}

fn culprit_src(flags: &ModeFlags, s: &str) -> String {
    match flags.culprit {
        Some(c) => format!("--culprit {}", c.name()),
        None => format!("switch.{s}.bridge.cp.culprit"),
    }
}

fn rp_src(flags: &ModeFlags, h: &str) -> String {
    match flags.rp_mode {
        Some(m) => format!("--rp-mode {}", m.name()),
        None => format!("host.{h}.agent.rp_mode"),
    }
}

/// Rejects CP/RP combinations that cannot work (module docs). `flags` only shapes the
/// messages (which flag to blame).
pub fn check(sc: &Scenario, flags: &ModeFlags) -> anyhow::Result<()> {
    let mut cps = check_switches(sc, flags)?;
    let mut rps: BTreeMap<&str, RpMode> = BTreeMap::new();
    for h in sc.topo.host.keys() {
        rps.insert(h, host_rp(sc, h));
    }
    check_flows(sc, flags, &cps, &rps).map_err(|e| anyhow::anyhow!("{}: {e}", sc.file))?;
    // Parameter-change events may switch modes during the run: every state the run passes
    // through must make sense too.
    let mut events: Vec<_> = sc.topo.event.iter().collect();
    events.sort_by_key(|e| e.at);
    let mut k = 0;
    while k < events.len() {
        let at = events[k].at;
        while k < events.len() && events[k].at == at {
            apply_event(events[k], &mut cps, &mut rps);
            k += 1;
        }
        let when = |e: anyhow::Error| anyhow::anyhow!("{}: after the events at {at}: {e}", sc.file);
        for (s, v) in &cps {
            if v.placement != Placement::Off
                && v.mode != CpMode::Qcn
                && v.culprit != Culprit::Arrival
            {
                return Err(when(anyhow::anyhow!(
                    "switch {s} would run cp mode {} with culprit {}; a culprit other than \
                     arrival only works with cp mode qcn",
                    v.mode,
                    v.culprit
                )));
            }
        }
        check_flows(sc, flags, &cps, &rps).map_err(when)?;
    }
    Ok(())
}

/// Folds one switch or host event's mode settings into the running state.
fn apply_event(
    ev: &crate::sim::topo::EventEntry,
    cps: &mut BTreeMap<&str, CpView>,
    rps: &mut BTreeMap<&str, RpMode>,
) {
    use crate::sim::topo::EventKind;
    // The patches were typed when the scenario was parsed.
    match ev.kind() {
        EventKind::Switch { switch, set } => {
            let Some(v) = cps.get_mut(switch.as_str()) else {
                return;
            };
            if let Some(m) = set.patch.mode {
                v.mode = m;
            }
            if let Some(c) = set.patch.culprit {
                v.culprit = c;
            }
            if let Some(p) = set.patch.placement {
                v.placement = p;
            }
        }
        EventKind::Host { host, set } => {
            if let (Some(m), Some(r)) = (set.patch.rp_mode, rps.get_mut(host.as_str())) {
                *r = m;
            }
        }
        EventKind::Link { .. } => {}
    }
}

/// The per-switch part of [`check`], on the scenario's values with `flags` substituted.
fn check_switches<'a>(
    sc: &'a Scenario,
    flags: &ModeFlags,
) -> anyhow::Result<BTreeMap<&'a str, CpView>> {
    let mut cps: BTreeMap<&str, CpView> = BTreeMap::new();
    for s in sc.topo.switch.keys() {
        let v = switch_cp(sc, s, flags);
        // The flags act on every congestion point; a switch without any is left alone (an edge
        // switch), unless no switch has congestion points at all (below).
        if v.placement != Placement::Off && v.mode != CpMode::Qcn && v.culprit != Culprit::Arrival {
            let why = if v.mode == CpMode::Fqcn {
                "FQCN picks its culprits itself from the per-flow byte counts (eq. 7-8)"
            } else {
                "the explicit-rate CP advertises one rate to every active source"
            };
            anyhow::bail!(
                "{} with {} (switch {s}): {why}; a culprit other than arrival only works with \
                 cp mode qcn",
                culprit_src(flags, s),
                cp_src(flags, s),
            );
        }
        cps.insert(s, v);
    }
    if !cps.is_empty() && cps.values().all(|v| v.placement == Placement::Off) {
        let flag = if flags.cp_mode.is_some_and(|m| m != CpModeArg::Qcn) {
            flags.cp_mode.map(|m| format!("--cp-mode {}", m.name()))
        } else if flags.culprit.is_some_and(|c| c != CulpritArg::Arrival) {
            flags.culprit.map(|c| format!("--culprit {}", c.name()))
        } else {
            None
        };
        if let Some(flag) = flag {
            anyhow::bail!(
                "{}: no switch has congestion points (cp.placement = \"off\" everywhere), so \
                 {flag} has nothing to act on; set cp.placement or drop the flag",
                sc.file,
            );
        }
    }
    Ok(cps)
}

/// The per-flow part of [`check`]: the source's RP mode against every CP on the path.
fn check_flows(
    sc: &Scenario,
    flags: &ModeFlags,
    cps: &BTreeMap<&str, CpView>,
    rps: &BTreeMap<&str, RpMode>,
) -> anyhow::Result<()> {
    let graph = sc.topo.graph();
    for (i, f) in sc.topo.flow.iter().enumerate() {
        let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
        let rp = rps.get(f.src.as_str()).copied().unwrap_or(RpMode::Qcn);
        let Some(path) = graph.path(&f.src, &f.dst) else {
            continue;
        };
        for hop in path {
            let tx = &graph.tx_end(hop).node;
            let Some(cp) = cps.get(tx.as_str()) else {
                continue;
            };
            if cp.placement == Placement::Off {
                continue;
            }
            let er_cp = cp.mode == CpMode::ExplicitRate;
            if er_cp && !rp.explicit_rate() {
                anyhow::bail!(
                    "flow {name} ({} → {}): {} = {rp} reacts to CNMs, but {} = explicit-rate on \
                     switch {tx} sends rate feedback instead; use --rp-mode explicit-rate with \
                     --cp-mode explicit-rate",
                    f.src,
                    f.dst,
                    rp_src(flags, &f.src),
                    cp_src(flags, tx),
                );
            }
            if !er_cp && rp.explicit_rate() {
                anyhow::bail!(
                    "flow {name} ({} → {}): {} = explicit-rate follows rate feedback and ignores \
                     CNMs, but {} = {} on switch {tx} sends CNMs; use --cp-mode explicit-rate \
                     with --rp-mode explicit-rate",
                    f.src,
                    f.dst,
                    rp_src(flags, &f.src),
                    cp_src(flags, tx),
                    cp.mode,
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(cp: Option<CpModeArg>, c: Option<CulpritArg>, rp: Option<RpModeArg>) -> ModeFlags {
        ModeFlags {
            cp_mode: cp,
            culprit: c,
            rp_mode: rp,
        }
    }

    #[test]
    fn flags_set_every_node() {
        let sc = crate::scenario::load("chain3", &[]).unwrap();
        let f = flags(
            Some(CpModeArg::Qcn),
            Some(CulpritArg::OccupancyRandom),
            Some(RpModeArg::AdaptiveBcQcnBs),
        );
        let v = apply(&sc, &f).unwrap();
        for sw in v.topo.switch.values() {
            let b = sw.bridge.clone().unwrap();
            assert_eq!(b.config.cp.mode, CpMode::Qcn);
            assert_eq!(b.config.cp.culprit, Culprit::OccupancyRandom);
        }
        for h in v.topo.host.values() {
            let a = h.agent.clone().unwrap();
            assert_eq!(a.config.rp_mode, RpMode::AdaptiveBcQcnBs);
        }
        assert_eq!(
            f.label().as_deref(),
            Some("qcn_occupancy-random_adaptive-bc+qcn-bs")
        );
        assert_eq!(ModeFlags::default().label(), None);
        let same = apply(&sc, &ModeFlags::default()).unwrap();
        assert_eq!(same.tree, sc.tree);
    }

    #[test]
    fn explicit_rate_needs_both_sides() {
        let sc = crate::scenario::load("dumbbell", &[]).unwrap();
        let e = apply(&sc, &flags(Some(CpModeArg::ExplicitRate), None, None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--cp-mode explicit-rate"), "{e}");
        assert!(e.contains("host.h0.agent.rp_mode"), "{e}");
        let e = apply(&sc, &flags(None, None, Some(RpModeArg::ExplicitRate)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--rp-mode explicit-rate"), "{e}");
        assert!(e.contains("ignores CNMs"), "{e}");
        let ok = flags(
            Some(CpModeArg::ExplicitRate),
            None,
            Some(RpModeArg::ExplicitRate),
        );
        apply(&sc, &ok).unwrap();
    }

    #[test]
    fn culprits_only_with_qcn() {
        let sc = crate::scenario::load("dumbbell", &[]).unwrap();
        let e = apply(
            &sc,
            &flags(
                Some(CpModeArg::Fqcn),
                Some(CulpritArg::OccupancyDeterministic),
                None,
            ),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--culprit occupancy-deterministic"), "{e}");
        assert!(e.contains("--cp-mode fqcn"), "{e}");
        apply(
            &sc,
            &flags(
                Some(CpModeArg::Qcn),
                Some(CulpritArg::OccupancyDeterministic),
                Some(RpModeArg::QcnBs),
            ),
        )
        .unwrap();
    }

    #[test]
    fn modes_need_congestion_points() {
        let sc = crate::scenario::load("dumbbell", &["switch.sw0.bridge.cp.placement=off".into()])
            .unwrap();
        let e = apply(&sc, &flags(Some(CpModeArg::Fqcn), None, None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no switch has congestion points"), "{e}");
        // An off switch does not care what the hosts do.
        apply(&sc, &flags(None, None, Some(RpModeArg::ExplicitRate))).unwrap();
        // A CP-less edge switch beside one with CPs: the flags act on the CPs there are.
        let two = crate::scenario::load("repro-inputcp-victim-2src", &[]).unwrap();
        let v = apply(&two, &flags(None, Some(CulpritArg::OccupancyRandom), None)).unwrap();
        let b = v.topo.switch["sw0"].bridge.clone().unwrap();
        assert_eq!(b.config.cp.culprit, Culprit::OccupancyRandom);
    }

    #[test]
    fn shipped_scenarios_pass_the_check() {
        for (name, _) in crate::scenario::list() {
            let sc = crate::scenario::load(&name, &[]).unwrap();
            check(&sc, &ModeFlags::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/repro");
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let sc = crate::scenario::load(p.to_str().unwrap(), &[]).unwrap();
            check(&sc, &ModeFlags::default()).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
    }

    #[test]
    fn mode_changes_by_events_are_checked_too() {
        let sc = crate::scenario::load("dumbbell", &[]).unwrap();
        let mut text = toml::to_string(&sc.tree).unwrap();
        text.push_str(
            "\n[[event]]\nat = \"3s\"\nhost = \"h1\"\nset = { rp_mode = \"explicit-rate\" }\n",
        );
        let dir = std::env::temp_dir().join(format!("modes-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("er-midway.toml");
        std::fs::write(&path, &text).unwrap();
        let bad = crate::scenario::load(path.to_str().unwrap(), &[]);
        let _ = std::fs::remove_dir_all(&dir);
        let e = check(&bad.unwrap(), &ModeFlags::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("after the events at 3s"), "{e}");
        assert!(e.contains("host.h1.agent.rp_mode"), "{e}");
    }
}

//! The runner: one loop that drives either [`World`] through a scenario's schedule.
//!
//! ```text
//!   skeleton(scenario)  ──►  RunData (links, flows, paths, fair shares, markers)
//!   plan(scenario)      ──►  [Timed] (flow and incast starts, events, in time order)
//!   world.start(plan)        the simulator queues the plan in virtual time; the lab starts
//!                            its wall clock
//!   loop:  due actions ──► world.apply      (lab only: the simulator holds them already)
//!          cadence     ──► world.sample     (throughput, CNMs, bottleneck, CPU)
//!          progress;  stop at the span;  world.advance (one tick)
//!   world.finish        ──►  traces, reports and statistics into RunData; teardown
//! ```
//!
//! The loop checks for Ctrl-C ([`crate::signals`]) on every tick; the worlds' guards clean up
//! on the error it returns.

use std::path::Path;

use anyhow::bail;

use super::netns::NetnsWorld;
use super::progress::Progress;
use super::sim::SimWorld;
use super::skeleton::skeleton;
use super::world::{plan, Scaling, World};
use super::{Mode, RunOptions};
use crate::analysis::RunData;
use crate::scenario::Scenario;

/// Drives `world` through the schedule of `sc` (scaled by `k`), filling `run`.
pub fn drive<W: World>(
    mut world: W,
    sc: &Scenario,
    k: Scaling,
    run: &mut RunData,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let plan = plan(sc, k);
    let queued = world.start(&plan, run)?;
    let mut next = if queued { plan.len() } else { 0 };
    let span = world.span();
    let every = world.cadence().sample_every;
    let mut now = 0.0;
    let mut last_sample = 0.0;
    progress.note("");
    loop {
        if crate::signals::requested() {
            bail!("interrupted");
        }
        while let Some(t) = plan.get(next).filter(|t| t.at_s <= now) {
            world.apply(now, t, run)?;
            next += 1;
        }
        let due = match every {
            None => now > 0.0,
            Some(e) => now - last_sample >= e,
        };
        if due {
            last_sample = now;
            world.sample(now, run)?;
        }
        progress.set(now.min(span));
        if now >= span {
            break;
        }
        now = world.advance()?;
    }
    progress.note("collecting");
    world.finish(run)?;
    progress.finish();
    Ok(())
}

/// Runs `sc` in the world `opts.mode` names, writing logs, traces and captures into `dir`.
pub fn run(sc: &Scenario, opts: &RunOptions, dir: &Path) -> anyhow::Result<RunData> {
    let seed = opts.seed.unwrap_or(sc.topo.seed);
    match opts.mode {
        Mode::Sim => {
            let k = Scaling::ONE;
            let (mut run, _) = skeleton(sc, Mode::Sim, k, seed);
            let world = SimWorld::build(sc, opts, dir, &mut run)?;
            let label = format!("sim {}", sc.name);
            let mut progress = Progress::new(&label, world.span(), opts.quiet);
            drive(world, sc, k, &mut run, &mut progress)?;
            Ok(run)
        }
        Mode::Netns => {
            let k = Scaling::netns(sc);
            let (mut run, _) = skeleton(sc, Mode::Netns, k, seed);
            let label = format!("netns {}", sc.name);
            let mut progress = Progress::new(&label, k.at(sc.topo.duration), opts.quiet);
            let world = NetnsWorld::build(sc, opts, dir, seed, &mut run, &mut progress)?;
            drive(world, sc, k, &mut run, &mut progress)?;
            Ok(run)
        }
    }
}

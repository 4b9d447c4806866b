//! The seam between the runner and the two worlds a scenario runs in.
//!
//! A run goes through the same phases in either world, and the [`World`] trait names them:
//!
//! 1. **build** — each world's own constructor: the simulator builds its engine from the
//!    topology ([`super::sim::SimWorld::build`]); the lab builds namespaces, links, daemons,
//!    sinks and servers ([`super::netns::NetnsWorld::build`]).
//! 2. **start** ([`World::start`]) — the clock starts; time 0 of the schedule is now. A world
//!    with its own event queue (the simulator's virtual time) takes every timed action here,
//!    at its instant, and says so; a wall-clock world takes them one by one.
//! 3. **advance / apply / sample** — the runner ([`super::runner`]) lets one tick of the
//!    world's time pass ([`World::advance`]), hands over the timed actions that have come due
//!    ([`World::apply`]) and, at the world's sampling cadence, reads its measurements into the
//!    run data ([`World::sample`]).
//! 4. **finish** ([`World::finish`]) — stop, collect what the processes or the engine wrote,
//!    tear down.
//!
//! The schedule itself ([`plan`]) is the same for both worlds: the flows' and incasts' starts
//! and the `[[event]]` entries, in scenario time, each with its time in the world's schedule
//! ([`Scaling::at`]).

use cnm_proto::Duration;

use crate::analysis::RunData;
use crate::scenario::Scenario;

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
    pub fn at(&self, d: Duration) -> f64 {
        d.as_secs_f64() * self.sched_mul
    }
}

/// What happens at a point of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `[[flow]]` number N starts.
    StartFlow(usize),
    /// `[[incast]]` number N starts.
    StartIncast(usize),
    /// `[[event]]` number N (a link rate, a switch's CP settings, a host's RP settings).
    Event(usize),
}

/// One action of the schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    /// Scenario time.
    pub at: Duration,
    /// Seconds of the world's schedule ([`Scaling::at`] of `at`).
    pub at_s: f64,
    /// What happens.
    pub action: Action,
}

/// The schedule of a scenario in a world: every flow's start, every incast's start and every
/// event, in time order (ties in that order, then file order).
pub fn plan(sc: &Scenario, k: Scaling) -> Vec<Timed> {
    let timed = |at: Duration, action| Timed {
        at,
        at_s: k.at(at),
        action,
    };
    let mut out: Vec<Timed> = Vec::new();
    out.extend(
        sc.topo
            .flow
            .iter()
            .enumerate()
            .map(|(i, f)| timed(f.start, Action::StartFlow(i))),
    );
    out.extend(
        sc.topo
            .incast
            .iter()
            .enumerate()
            .map(|(j, inc)| timed(inc.start, Action::StartIncast(j))),
    );
    out.extend(
        sc.topo
            .event
            .iter()
            .enumerate()
            .map(|(i, ev)| timed(ev.at, Action::Event(i))),
    );
    out.sort_by_key(|t| t.at);
    out
}

/// How often a world's loop turns and samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cadence {
    /// Sample after every `every`-th second of the schedule (`None`: after every tick).
    pub sample_every: Option<f64>,
}

/// One world a scenario runs in. See the module documentation for the phases.
pub trait World {
    /// The length of the run in seconds of this world's schedule.
    fn span(&self) -> f64;

    /// The loop's sampling cadence.
    fn cadence(&self) -> Cadence;

    /// Starts the clock. A world that queues timed actions in its own time takes all of
    /// `plan` here and returns `true`; otherwise `false`, and the runner hands each action to
    /// [`World::apply`] when its time has come.
    fn start(&mut self, plan: &[Timed], run: &mut RunData) -> anyhow::Result<bool>;

    /// Lets one tick of the world's time pass; returns the time now (seconds of the
    /// schedule).
    fn advance(&mut self) -> anyhow::Result<f64>;

    /// Carries out `action`, whose time has come (`now` ≥ its time).
    fn apply(&mut self, now: f64, action: &Timed, run: &mut RunData) -> anyhow::Result<()>;

    /// Reads the measurements of the moment `now` into `run`.
    fn sample(&mut self, now: f64, run: &mut RunData) -> anyhow::Result<()>;

    /// Stops the world, reads what it wrote into `run`, tears it down.
    fn finish(self, run: &mut RunData) -> anyhow::Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_orders_starts_and_events_by_time() {
        let text = r#"
            duration = "100ms"
            [scenario]
            scale = 10
            [switch.sw0]
            [host.h0]
            [host.h1]
            [host.r0]
            [[link]]
            a = "h0"
            b = "sw0"
            rate = "10gbit"
            [[link]]
            a = "h1"
            b = "sw0"
            rate = "10gbit"
            [[link]]
            a = "sw0"
            b = "r0"
            rate = "10gbit"
            [[flow]]
            src = "h0"
            dst = "r0"
            pattern = "greedy"
            start = "20ms"
            [[flow]]
            src = "h1"
            dst = "r0"
            pattern = "greedy"
            [[event]]
            at = "20ms"
            link = "sw0-r0"
            rate = "1gbit"
            [[event]]
            at = "5ms"
            switch = "sw0"
            set = { cp_queue_set_point = "20KB" }
        "#;
        let sc = crate::scenario::parse(text, "p.toml", "p", &[]).unwrap();
        let k = Scaling::netns(&sc);
        let p = plan(&sc, k);
        let got: Vec<(u64, Action)> = p.iter().map(|t| (t.at.as_nanos(), t.action)).collect();
        assert_eq!(
            got,
            [
                (0, Action::StartFlow(1)),
                (5_000_000, Action::Event(1)),
                (20_000_000, Action::StartFlow(0)),
                (20_000_000, Action::Event(0)),
            ]
        );
        assert!((p[1].at_s - 0.05).abs() < 1e-12, "{}", p[1].at_s);
        assert_eq!(plan(&sc, Scaling::ONE)[3].at_s, 0.02);
    }
}

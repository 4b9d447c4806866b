//! Timed parameter-change events in netns mode: `[[event]]` entries with `switch` + `set`
//! (congestion points) or `host` + `set` (reaction points) become control-socket commands to
//! the running daemons at the event's (scaled) time.
//!
//! * A switch event is `cp-switch ctl set cp KEY=VALUE...` on that switch's control socket.
//! * A host event is `rp-agent ctl set rp KEY=VALUE...` on the control socket of every
//!   generator (`rp-agent gen --ctl`, one per flow) of that host whose flow is active at the
//!   event's time. A generator that starts later gets the change in its configuration file
//!   instead ([`super::config::agent_config_at`]): every host event at or before its flow's start is folded
//!   into the host's `[host.X.agent]` table.
//!
//! Values follow the time scaling exactly as the static configuration does: the event's patch
//! (typed when the scenario was parsed) is scaled by its type's `Scale`, the same rules as the
//! configuration types' (rates ÷ S, loop times × S, octets unchanged), and the command carries
//! the scaled values of the event's keys. So `cp_queue_set_point = "20KB"` is sent unchanged,
//! `rpg_ai_rate = "10mbit"` at S = 100 as `100kbit`, `rpg_time_reset = "1ms"` as `100ms`.
//!
//! A command the daemon refuses, or a socket that does not answer, becomes a warning of the
//! run (the scenario's values were checked at load, so this means a daemon problem).

use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

use cnm_proto::Duration;

use super::super::world::Scaling;
use super::daemons::ctl;
use crate::scenario::Scenario;
use crate::sim::topo::{word, EventKind, ParamSet};
use cnm_proto::Scale;

/// What one scheduled command changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every congestion point of this switch.
    Switch(String),
    /// The generators of this host whose flow is active at the event's time: their flow
    /// indices.
    Host(String, Vec<usize>),
}

/// One parameter event, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamEvent {
    /// Index of the `[[event]]`.
    pub event: usize,
    /// When, in seconds of the run's schedule (scaled).
    pub at_s: f64,
    /// Scenario time of the event.
    pub at: Duration,
    /// Who gets it.
    pub target: Target,
    /// The command words after `set cp` / `set rp`: `KEY=VALUE`, values scaled.
    pub words: Vec<String>,
}

impl ParamEvent {
    /// The whole control command.
    pub fn command(&self) -> String {
        let what = match self.target {
            Target::Switch(_) => "cp",
            Target::Host(..) => "rp",
        };
        format!("set {what} {}", self.words.join(" "))
    }
}

/// The parameter events of a scenario in schedule order.
#[derive(Debug, Clone)]
pub struct ParamEvents {
    events: Vec<ParamEvent>,
}

/// The scaled command words of a parameter event: each operand as written, except the values
/// time scaling changes (the patch type's `Scale`: rates ÷ S, loop times × S, octets
/// unchanged), which are written scaled. A key loses `prefix` (`rp.` of a host event: the
/// command names the field bare).
fn scaled_words<P: serde::Serialize + Scale>(
    set: &ParamSet<P>,
    k: Scaling,
    prefix: &str,
) -> anyhow::Result<Vec<String>> {
    let before = toml::Table::try_from(&set.patch)?;
    let after = toml::Table::try_from(set.patch.scale(k.loop_mul))?;
    Ok(set
        .operands
        .iter()
        .map(|(key, text)| {
            let key = key.strip_prefix(prefix).unwrap_or(key);
            let value = match (before.get(key), after.get(key)) {
                (Some(a), Some(b)) if a != b => word(b),
                _ => text.clone(),
            };
            format!("{key}={value}")
        })
        .collect())
}

impl ParamEvents {
    /// The scenario's switch and host events with their scaled commands, in time order.
    pub fn new(sc: &Scenario, k: Scaling) -> anyhow::Result<ParamEvents> {
        let mut events = Vec::new();
        for (i, ev) in sc.topo.event.iter().enumerate() {
            let (target, words) = match ev.kind() {
                EventKind::Switch { switch, set } => {
                    (Target::Switch(switch.clone()), scaled_words(set, k, "")?)
                }
                EventKind::Host { host, set } => {
                    let flows = sc
                        .topo
                        .flow
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| {
                            f.src == *host
                                && f.start < ev.at
                                && f.stop.map_or(ev.at < sc.topo.duration, |s| ev.at < s)
                        })
                        .map(|(j, _)| j)
                        .collect();
                    (
                        Target::Host(host.clone(), flows),
                        scaled_words(set, k, "rp.")?,
                    )
                }
                EventKind::Link { .. } => continue,
            };
            events.push(ParamEvent {
                event: i,
                at_s: k.at(ev.at),
                at: ev.at,
                target,
                words,
            });
        }
        events.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        Ok(ParamEvents { events })
    }

    /// The events, in time order.
    pub fn events(&self) -> &[ParamEvent] {
        &self.events
    }

    /// Sends the change of `[[event]]` number `event` (nothing when it is not a parameter
    /// event): a switch command to the socket `switch_ctl(name)` gives, a host command to
    /// each active generator's socket `gen_ctl(flow)`. Failures are pushed to `warnings`.
    pub fn send(
        &self,
        event: usize,
        switch_ctl: &dyn Fn(&str) -> Option<PathBuf>,
        gen_ctl: &dyn Fn(usize) -> PathBuf,
        warnings: &mut Vec<String>,
    ) {
        let Some(ev) = self.events.iter().find(|e| e.event == event) else {
            return;
        };
        let cmd = ev.command();
        let socks: Vec<(String, PathBuf)> = match &ev.target {
            Target::Switch(sw) => match switch_ctl(sw) {
                Some(p) => vec![(sw.clone(), p)],
                None => {
                    warnings.push(format!("event at {}: no switch {sw}", ev.at));
                    Vec::new()
                }
            },
            Target::Host(h, flows) => {
                if flows.is_empty() {
                    warnings.push(format!(
                        "event at {} on {h}: no flow of {h} is active then (later \
                         generators start with the change)",
                        ev.at
                    ));
                }
                flows
                    .iter()
                    .map(|&f| (format!("{h} flow {f}"), gen_ctl(f)))
                    .collect()
            }
        };
        for (who, sock) in socks {
            if let Err(e) = ask_retrying(&sock, &cmd) {
                warnings.push(format!("event at {} on {who} ({cmd}): {e}", ev.at));
            }
        }
    }
}

/// [`ctl`], retried for up to 0.5 s while the socket is not there yet (a generator started a
/// moment ago). A refusal (an error answer) is not retried.
fn ask_retrying(sock: &Path, cmd: &str) -> anyhow::Result<serde_json::Value> {
    let deadline = std::time::Instant::now() + StdDuration::from_millis(500);
    loop {
        if sock.exists() || std::time::Instant::now() >= deadline {
            return ctl(sock, cmd);
        }
        std::thread::sleep(StdDuration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::agent_config_at;
    use super::*;
    use cnm_proto::Rate;

    const SC: &str = r#"
        duration = "100ms"
        [scenario]
        scale = 100
        [switch.sw0]
        [host.h0]
        [host.r0]
        [[link]]
        a = "h0"
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
        start = "10ms"
        [[event]]
        at = "50ms"
        switch = "sw0"
        set = { cp_queue_set_point = "20KB", er_interval = "30us", cnpv = [3, 5] }
        [[event]]
        at = "60ms"
        host = "h0"
        set = { rp_mode = "adaptive-bc", rpg_ai_rate = "10mbit", rpg_time_reset = "1ms" }
        [[event]]
        at = "5ms"
        host = "h0"
        set = { rpg_gd = 6 }
    "#;

    fn scenario() -> Scenario {
        crate::scenario::parse(SC, "sc.toml", "sc", &[]).unwrap()
    }

    #[test]
    fn commands_carry_scaled_values() {
        let sc = scenario();
        let k = Scaling::netns(&sc);
        let ev = ParamEvents::new(&sc, k).unwrap();
        let e = ev.events();
        assert_eq!(e.len(), 3);
        assert_eq!(
            e[0].target,
            Target::Host("h0".into(), vec![]),
            "before the flow"
        );
        assert_eq!(e[1].target, Target::Switch("sw0".into()));
        assert!((e[1].at_s - 5.0).abs() < 1e-9, "{}", e[1].at_s);
        assert_eq!(
            e[1].command(),
            "set cp cnpv=[3,5] cp_queue_set_point=20KB er_interval=3ms"
        );
        assert_eq!(e[2].target, Target::Host("h0".into(), vec![0]));
        assert_eq!(
            e[2].command(),
            "set rp rp_mode=adaptive-bc rpg_ai_rate=100kbit rpg_time_reset=100ms"
        );
    }

    #[test]
    fn generators_start_with_the_earlier_host_events() {
        let sc = scenario();
        let k = Scaling::netns(&sc);
        let r = Rate::from_gbps(10);
        let at = |ms| {
            let text = agent_config_at(&sc, "h0", r, k, Duration::from_millis(ms)).unwrap();
            text.parse::<toml::Table>().unwrap()
        };
        let early = at(1);
        assert!(early["rp"].get("rpg_gd").is_none());
        let t = at(10);
        assert_eq!(t["rp"]["rpg_gd"].as_integer(), Some(6));
        assert!(t.get("rp_mode").is_none());
        let late = at(70);
        assert_eq!(late["rp_mode"].as_str(), Some("adaptive-bc"));
        assert_eq!(late["rp"]["rpg_ai_rate"].as_str(), Some("100kbit"));
    }

    #[test]
    fn generators_start_at_the_uplink_rate_in_force() {
        // h0's uplink capped to 1 Gb/s at 20 ms (h0 → sw0 only), and the other way at 30 ms.
        let text = format!(
            "{SC}\n[[event]]\nat = \"20ms\"\nlink = \"h0-sw0\"\ndir = \"a-to-b\"\nrate = \"1gbit\"\n\
             [[event]]\nat = \"30ms\"\nlink = \"h0-sw0\"\ndir = \"b-to-a\"\nrate = \"2gbit\"\n"
        );
        let sc = crate::scenario::parse(&text, "t.toml", "t", &[]).unwrap();
        let k = Scaling::netns(&sc);
        let line = |ms| {
            let text =
                agent_config_at(&sc, "h0", Rate::from_gbps(10), k, Duration::from_millis(ms))
                    .unwrap();
            let t = text.parse::<toml::Table>().unwrap();
            t["line_rate"].as_str().unwrap().to_string()
        };
        assert_eq!(line(10), "100mbit");
        assert_eq!(line(25), "10mbit");
        assert_eq!(line(40), "10mbit");
    }

    #[test]
    fn words_have_no_spaces() {
        let v: toml::Table =
            toml::from_str(r#"a = [{ mac = "02:00:00:00:00:01", weight = 2 }]"#).unwrap();
        assert_eq!(word(&v["a"]), r#"[{mac="02:00:00:00:00:01",weight=2}]"#);
        assert_eq!(word(&toml::Value::String("20KB".into())), "20KB");
        assert_eq!(word(&toml::Value::Float(1.5)), "1.5");
    }
}

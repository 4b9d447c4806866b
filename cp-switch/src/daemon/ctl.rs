//! The control socket: a Unix stream socket (mode 0600) that takes one command per line and
//! answers one JSON object per line, `{"ok":true,"data":...}` or `{"ok":false,"error":"..."}`.
//!
//! Commands are the words users type after `cp-switch ctl --socket PATH`: `show ports`,
//! `show fdb`, `show queues`, `show cps`, `stats`, `set rate PORT RATE`, `set delay PORT DUR`,
//! `set cp KEY=VALUE...` (or `set cp KEY VALUE`: congestion-point settings under their `[cp]`
//! names, applied to every CP at once with the rules of `cp_switch::Bridge::set_cp_config`;
//! the answer echoes the settings now in force and whether the CPs were rebuilt). The listener
//! runs on the daemon's second thread; every command is handed to the dataplane thread through a
//! channel and answered from the dataplane's own state between two batches, so the dataplane
//! never shares its state behind a lock. The socket machinery (bounded connections, line
//! length and deadlines) is [`daemon_kit::ctl`]; this module holds the switch's commands.

use cnm_proto::{Duration, Rate};
use daemon_kit::ctl as socket;

pub use socket::{answer_pending, ask, channel, client, CtlServer};

/// A parsed control command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show ports`
    ShowPorts,
    /// `show fdb`
    ShowFdb,
    /// `show queues`
    ShowQueues,
    /// `show cps` (congestion points)
    ShowCps,
    /// `stats`
    Stats,
    /// `set rate PORT RATE` (`none` or `0` removes shaping)
    SetRate {
        /// Port name.
        port: String,
        /// New line rate; `None` = unshaped.
        rate: Option<Rate>,
    },
    /// `set delay PORT DUR`
    SetDelay {
        /// Port name.
        port: String,
        /// New propagation delay.
        delay: Duration,
    },
    /// `set cp KEY=VALUE...` or `set cp KEY VALUE`
    SetCp {
        /// The `[cp]` settings to change, as typed (values are read as by
        /// `daemon_kit::patch::table`).
        set: Vec<(String, String)>,
    },
}

pub use socket::parse_pairs;

impl Command {
    /// Parses the command words (`["set", "rate", "p1", "10mbit"]`).
    pub fn parse(w: &[&str]) -> Result<Command, String> {
        match w {
            ["show", "ports"] => Ok(Command::ShowPorts),
            ["show", "fdb"] => Ok(Command::ShowFdb),
            ["show", "queues"] => Ok(Command::ShowQueues),
            ["show", "cps"] => Ok(Command::ShowCps),
            ["stats"] => Ok(Command::Stats),
            ["set", "rate", port, rate] => {
                let rate = match *rate {
                    "none" | "off" | "0" => None,
                    r => Some(
                        r.parse::<Rate>()
                            .map_err(|e| format!("set rate: invalid rate {r:?}: {e}"))?,
                    ),
                };
                Ok(Command::SetRate {
                    port: port.to_string(),
                    rate,
                })
            }
            ["set", "delay", port, d] => Ok(Command::SetDelay {
                port: port.to_string(),
                delay: d
                    .parse::<Duration>()
                    .map_err(|e| format!("set delay: invalid duration {d:?}: {e}"))?,
            }),
            ["set", "cp", rest @ ..] => Ok(Command::SetCp {
                set: parse_pairs(rest).map_err(|e| format!("set cp: {e}"))?,
            }),
            _ => Err(format!(
                "unknown command {:?}; expected one of: show ports | show fdb | show queues | show cps | \
                 stats | set rate PORT RATE | set delay PORT DUR | set cp KEY=VALUE...",
                w.join(" ")
            )),
        }
    }
}

/// A command on its way to the dataplane, with the channel for its answer.
pub type Request = socket::Request<Command>;

/// Column order of the human tables: what a row is (name, state, rate, delay), then its
/// traffic, then its drops and control frames; FDB rows: station, port, kind, age.
const COLUMN_ORDER: [&str; 21] = [
    "name",
    "index",
    "up",
    "rate",
    "delay",
    "rx_frames",
    "tx_frames",
    "rx_bytes",
    "tx_bytes",
    "drops",
    "pause_tx",
    "pause_rx",
    "cnm_tx",
    "rate_fb_tx",
    "flooded",
    "mac",
    "vid",
    "port",
    "is_static",
    "age_s",
    "age_ns",
];

/// Prints an array of flat objects as an aligned text table (the non-`--json` output of `ctl`):
/// columns in [`COLUMN_ORDER`], FDB ages (`age_ns`) in seconds (`age_s`, one decimal).
pub fn print_table(rows: &serde_json::Value) -> String {
    let mut rows = rows.clone();
    if let Some(list) = rows.as_array_mut() {
        for r in list.iter_mut().filter_map(|r| r.as_object_mut()) {
            if let Some(ns) = r.get("age_ns").and_then(|v| v.as_u64()) {
                r.remove("age_ns");
                r.insert("age_s".into(), format!("{:.1}", ns as f64 / 1e9).into());
            }
        }
    }
    socket::print_table(&rows, &COLUMN_ORDER)
}

/// The human form of any answer: an array as one table; an object as `key: value` lines for its
/// scalars (nested objects flattened as `outer.inner`), then one titled table per array member
/// (`stats` shows its ports, queues and CPs this way).
pub fn print_answer(v: &serde_json::Value) -> String {
    let Some(obj) = v.as_object() else {
        return print_table(v);
    };
    let mut scalars = String::new();
    let mut tables = String::new();
    let mut flat = |prefix: &str, o: &serde_json::Map<String, serde_json::Value>| {
        for (k, val) in o {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match val {
                serde_json::Value::Array(_) => {
                    tables.push_str(&format!("\n[{key}]\n{}", print_table(val)));
                }
                serde_json::Value::Object(inner) => {
                    for (ik, iv) in inner {
                        let shown = match iv {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        scalars.push_str(&format!("{key}.{ik}: {shown}\n"));
                    }
                }
                serde_json::Value::String(s) => scalars.push_str(&format!("{key}: {s}\n")),
                other => scalars.push_str(&format!("{key}: {other}\n")),
            }
        }
    };
    flat("", obj);
    scalars + &tables
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_print_as_lines_and_tables_not_json() {
        let stats = serde_json::json!({
            "uptime_s": 3,
            "fdb": {"learned": 2, "aged": 0},
            "ports": [{"name": "p1", "up": true, "drops": 0}],
        });
        let t = print_answer(&stats);
        assert!(!t.contains('{'), "{t}");
        assert!(t.contains("uptime_s: 3\n"), "{t}");
        assert!(t.contains("fdb.learned: 2\n"), "{t}");
        assert!(
            t.contains("\n[ports]\nname  up    drops\np1    true  0\n"),
            "{t}"
        );
        // An array answer is just its table.
        let ports = serde_json::json!([{"name": "p1"}]);
        assert_eq!(print_answer(&ports), print_table(&ports));
    }

    #[test]
    fn tables_order_columns_and_print_ages_in_seconds() {
        let fdb = serde_json::json!([
            {"age_ns": 2_500_000_000u64, "is_static": false, "mac": "02:00:00:00:00:01", "port": 1, "vid": 0},
        ]);
        let t = print_table(&fdb);
        let mut lines = t.lines();
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(head, ["mac", "vid", "port", "is_static", "age_s"]);
        assert!(lines.next().unwrap().ends_with("2.5"), "{t}");
        let ports = serde_json::json!([
            {"drops": 3, "delay": "0ns", "flooded": 1, "name": "p1", "rate": "10mbit", "rx_frames": 7, "up": true},
        ]);
        let t = print_table(&ports);
        let head: Vec<&str> = t.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            head,
            [
                "name",
                "up",
                "rate",
                "delay",
                "rx_frames",
                "drops",
                "flooded"
            ]
        );
    }

    #[test]
    fn parses_commands() {
        assert_eq!(Command::parse(&["stats"]).unwrap(), Command::Stats);
        assert_eq!(
            Command::parse(&["set", "rate", "p1", "10mbit"]).unwrap(),
            Command::SetRate {
                port: "p1".into(),
                rate: Some(Rate::from_mbps(10))
            }
        );
        assert_eq!(
            Command::parse(&["set", "rate", "p1", "none"]).unwrap(),
            Command::SetRate {
                port: "p1".into(),
                rate: None
            }
        );
        assert!(Command::parse(&["set", "rate", "p1", "fast"]).is_err());
        assert!(Command::parse(&["reboot"]).is_err());
        assert_eq!(
            Command::parse(&["set", "cp", "cp_queue_set_point", "20KB"]).unwrap(),
            Command::SetCp {
                set: vec![("cp_queue_set_point".into(), "20KB".into())]
            }
        );
        assert_eq!(
            Command::parse(&["set", "cp", "cp_feedback_weight=4", "mode=fqcn"]).unwrap(),
            Command::SetCp {
                set: vec![
                    ("cp_feedback_weight".into(), "4".into()),
                    ("mode".into(), "fqcn".into())
                ]
            }
        );
        assert!(Command::parse(&["set", "cp"]).is_err());
        assert!(Command::parse(&["set", "cp", "a=1", "b"]).is_err());
        assert!(Command::parse(&["set", "cp", "=1"]).is_err());
        assert!(Command::parse(&["set", "cp", "a", "b", "c"]).is_err());
        assert_eq!(
            Command::parse(&["set", "delay", "p2", "25us"]).unwrap(),
            Command::SetDelay {
                port: "p2".into(),
                delay: Duration::from_micros(25)
            }
        );
    }
}

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

/// Prints an array of flat objects as an aligned text table (the non-`--json` output of `ctl`).
pub fn print_table(rows: &serde_json::Value) -> String {
    socket::print_table(rows, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

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

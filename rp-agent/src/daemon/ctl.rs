//! The control socket: a Unix stream socket (mode 0600) taking one command per line and
//! answering one JSON object per line, `{"ok":true,"data":...}` or `{"ok":false,"error":"..."}`.
//!
//! Commands: `show flows`, `stats`, `set rp KEY=VALUE...` (or `set rp KEY VALUE`: `rp_mode`
//! and the `[rp]` parameters under their configuration names, applied with the rules of
//! `rp_agent::Agent::set_rp_config`; the answer echoes the settings now in force and what
//! happened to the live limiters). Both the daemon (`run --ctl`) and the generator
//! (`gen --ctl`) serve them. A listener thread hands each command to the dataplane
//! through a channel; the dataplane answers between two batches from its own state. The socket
//! machinery (bounded connections, line length and deadlines) is [`daemon_kit::ctl`]; this module
//! holds the agent's commands.

use daemon_kit::ctl as socket;

pub use socket::{answer_pending, channel, client, CtlServer};

/// A control command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show flows`
    ShowFlows,
    /// `stats`
    Stats,
    /// `set rate RATE`: the host's line rate (a link-rate change on its uplink).
    SetRate(cnm_proto::Rate),
    /// `set rp KEY=VALUE...` or `set rp KEY VALUE`
    SetRp {
        /// The settings to change, as typed (values read by
        /// `daemon_kit::patch::table`).
        set: Vec<(String, String)>,
    },
}

impl Command {
    /// Parses the command words.
    pub fn parse(w: &[&str]) -> Result<Command, String> {
        match w {
            ["show", "flows"] => Ok(Command::ShowFlows),
            ["stats"] => Ok(Command::Stats),
            ["set", "rate", r] => r
                .parse::<cnm_proto::Rate>()
                .ok()
                .filter(|r| r.bps() > 0)
                .map(Command::SetRate)
                .ok_or_else(|| format!("set rate: {r:?} is not a positive rate (100mbit, 1gbit)")),
            ["set", "rp", rest @ ..] => Ok(Command::SetRp {
                set: parse_pairs(rest).map_err(|e| format!("set rp: {e}"))?,
            }),
            _ => Err(format!(
                "unknown command {:?}; expected: show flows | stats | set rate RATE | set rp KEY=VALUE...",
                w.join(" ")
            )),
        }
    }
}

pub use socket::parse_pairs;

/// A command on its way to the dataplane, with the channel for its answer.
pub type Request = socket::Request<Command>;

/// Columns shown first, in this order (the rest follow alphabetically).
const COLUMN_ORDER: [&str; 13] = [
    "flow",
    "dst",
    "priority",
    "five_tuple",
    "rpid",
    "state",
    "cr_bps",
    "tr_bps",
    "cnm_rx",
    "tx_frames",
    "tx_bytes",
    "queued_frames",
    "queued_bytes",
];

/// An array of flat objects as an aligned text table, [`COLUMN_ORDER`] first.
pub fn table(rows: &serde_json::Value) -> String {
    socket::print_table(rows, &COLUMN_ORDER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_commands() {
        assert_eq!(
            Command::parse(&["show", "flows"]).unwrap(),
            Command::ShowFlows
        );
        assert_eq!(Command::parse(&["stats"]).unwrap(), Command::Stats);
        assert!(Command::parse(&["reboot"]).is_err());
        assert_eq!(
            Command::parse(&["set", "rp", "rpg_ai_rate", "10mbit"]).unwrap(),
            Command::SetRp {
                set: vec![("rpg_ai_rate".into(), "10mbit".into())]
            }
        );
        assert_eq!(
            Command::parse(&["set", "rp", "rp_mode=adaptive-bc", "rpg_gd=6"]).unwrap(),
            Command::SetRp {
                set: vec![
                    ("rp_mode".into(), "adaptive-bc".into()),
                    ("rpg_gd".into(), "6".into())
                ]
            }
        );
        assert!(Command::parse(&["set", "rp"]).is_err());
        assert_eq!(
            Command::parse(&["set", "rate", "10mbit"]).unwrap(),
            Command::SetRate(cnm_proto::Rate::from_mbps(10))
        );
        assert!(Command::parse(&["set", "rate", "0"]).is_err());
        assert!(Command::parse(&["set", "rate", "fast"]).is_err());
        assert!(Command::parse(&["set", "rp", "x=1", "y"]).is_err());
    }

    #[test]
    fn flow_columns_come_first() {
        let t = table(&json!([{"state": "rp", "dst": "x", "flow": 0, "extra": 1}]));
        assert_eq!(t, "flow  dst  state  extra\n0     x    rp     1\n");
    }
}

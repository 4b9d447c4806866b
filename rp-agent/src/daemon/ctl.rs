//! The control socket: a Unix stream socket (mode 0600) taking one command per line and
//! answering one JSON object per line, `{"ok":true,"data":...}` or `{"ok":false,"error":"..."}`.
//!
//! Commands: `show flows`, `stats`. A listener thread hands each command to the dataplane
//! through a channel; the dataplane answers between two batches from its own state. The socket
//! machinery is [`cnm_proto::phy::ctl`]; this module holds the agent's commands.

use cnm_proto::phy::ctl as socket;

pub use socket::{answer_pending, channel, client, CtlServer};

/// A control command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `show flows`
    ShowFlows,
    /// `stats`
    Stats,
}

impl Command {
    /// Parses the command words.
    pub fn parse(w: &[&str]) -> Result<Command, String> {
        match w {
            ["show", "flows"] => Ok(Command::ShowFlows),
            ["stats"] => Ok(Command::Stats),
            _ => Err(format!(
                "unknown command {:?}; expected: show flows | stats",
                w.join(" ")
            )),
        }
    }
}

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
    }

    #[test]
    fn flow_columns_come_first() {
        let t = table(&json!([{"state": "rp", "dst": "x", "flow": 0, "extra": 1}]));
        assert_eq!(t, "flow  dst  state  extra\n0     x    rp     1\n");
    }
}

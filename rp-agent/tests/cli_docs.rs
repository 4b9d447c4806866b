//! The `rp-agent` binary documents itself: `ctl --help` names every control command, and the
//! hidden `completions` and `man` subcommands generate from the clap definition. No root needed.
#![allow(clippy::unwrap_used)]

use daemon_kit::cli::testing::{completions_name, help_lists, man_page_names, man_pages_written};

const BIN: &str = env!("CARGO_BIN_EXE_rp-agent");

#[test]
fn ctl_help_lists_every_command() {
    help_lists(
        BIN,
        &["ctl", "--help"],
        &["show flows", "stats", "set rate RATE", "set rp KEY=VALUE"],
    );
    help_lists(BIN, &["--help"], &["gen", "sink", "ctl"]);
}

#[test]
fn completions_and_man_pages_generate() {
    completions_name(BIN, &["uplink", "sink"]);
    man_page_names(BIN, "rp-agent", &[]);
    let dir = tempfile::Builder::new()
        .prefix("rpa-man-")
        .tempdir()
        .unwrap();
    man_pages_written(
        BIN,
        dir.path(),
        &[
            "rp-agent.1",
            "rp-agent-gen.1",
            "rp-agent-sink.1",
            "rp-agent-hosts.1",
            "rp-agent-ctl.1",
        ],
    );
}

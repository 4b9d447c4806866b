//! The `cp-switch` binary documents itself: `ctl --help` names every control command, and the
//! hidden `completions` and `man` subcommands generate from the clap definition. No root needed.
#![allow(clippy::unwrap_used)]

use daemon_kit::cli::testing::{completions_name, help_lists, man_page_names, man_pages_written};

const BIN: &str = env!("CARGO_BIN_EXE_cp-switch");

#[test]
fn ctl_help_lists_every_command() {
    help_lists(
        BIN,
        &["ctl", "--help"],
        &[
            "show ports",
            "show fdb",
            "show queues",
            "show cps",
            "stats",
            "set rate PORT RATE",
            "set delay PORT DUR",
            "set cp KEY=VALUE",
        ],
    );
}

#[test]
fn completions_and_man_pages_generate() {
    completions_name(BIN, &["default-rate", "ctl"]);
    man_page_names(BIN, "cp-switch", &["default\\-rate"]);
    let dir = tempfile::Builder::new()
        .prefix("cpsw-man-")
        .tempdir()
        .unwrap();
    let files = man_pages_written(BIN, dir.path(), &["cp-switch.1", "cp-switch-ctl.1"]);
    let ctl = std::fs::read_to_string(&files[1]).unwrap();
    assert!(ctl.contains("set cp"), "{ctl}");
}

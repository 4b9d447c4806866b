//! The `cp-switch` binary documents itself: `ctl --help` names every control command, and the
//! hidden `completions` and `man` subcommands generate from the clap definition. No root needed.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cp-switch"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn ctl_help_lists_every_command() {
    let help = run(&["ctl", "--help"]);
    for cmd in [
        "show ports",
        "show fdb",
        "show queues",
        "show cps",
        "stats",
        "set rate PORT RATE",
        "set delay PORT DUR",
        "set cp KEY=VALUE",
    ] {
        assert!(help.contains(cmd), "{cmd:?} missing from:\n{help}");
    }
}

#[test]
fn completions_and_man_pages_generate() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = run(&["completions", shell]);
        assert!(script.contains("default-rate"), "{shell}");
        assert!(script.contains("ctl"), "{shell}");
    }
    let page = run(&["man"]);
    assert!(page.contains(".TH cp-switch 1"), "{page}");
    assert!(page.contains("default\\-rate"), "{page}");
    let dir = tempfile::Builder::new()
        .prefix("cpsw-man-")
        .tempdir()
        .unwrap();
    let listed = run(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    let files: Vec<&str> = listed.lines().collect();
    assert_eq!(files.len(), 2, "{listed}");
    assert!(files[0].ends_with("/cp-switch.1") && files[1].ends_with("/cp-switch-ctl.1"));
    let ctl = std::fs::read_to_string(files[1]).unwrap();
    assert!(ctl.contains("set cp"), "{ctl}");
}

//! The `rp-agent` binary documents itself: `ctl --help` names every control command, and the
//! hidden `completions` and `man` subcommands generate from the clap definition. No root needed.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rp-agent"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn ctl_help_lists_every_command() {
    let help = run(&["ctl", "--help"]);
    for cmd in ["show flows", "stats", "set rate RATE", "set rp KEY=VALUE"] {
        assert!(help.contains(cmd), "{cmd:?} missing from:\n{help}");
    }
    let top = run(&["--help"]);
    for sub in ["gen", "sink", "ctl"] {
        assert!(top.contains(sub), "{sub:?} missing from:\n{top}");
    }
}

#[test]
fn completions_and_man_pages_generate() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = run(&["completions", shell]);
        assert!(script.contains("uplink"), "{shell}");
        assert!(script.contains("sink"), "{shell}");
    }
    assert!(run(&["man"]).contains(".TH rp-agent 1"));
    let dir = tempfile::Builder::new()
        .prefix("rpa-man-")
        .tempdir()
        .unwrap();
    let listed = run(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    let names: Vec<String> = listed
        .lines()
        .map(|l| l.rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "rp-agent.1",
            "rp-agent-gen.1",
            "rp-agent-sink.1",
            "rp-agent-ctl.1"
        ]
    );
}

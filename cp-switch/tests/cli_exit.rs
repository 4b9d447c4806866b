//! Exit statuses of the `cp-switch` binary: 2 for an invalid configuration, 141 (never a
//! panic) when `ctl`'s output pipe is closed early. No root needed.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};

fn cp_switch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cp-switch"))
}

/// Runs `cp-switch ARGS`, asserts it exits 2 (an invalid configuration) and returns its
/// standard error.
fn config_error(args: &[&str]) -> String {
    let out = cp_switch().args(args).output().expect("cp-switch runs");
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_invalid_configuration_exits_2() {
    assert!(config_error(&["--port", "no-such-if0"]).contains("no-such-if0"));
    config_error(&["--port", "p1", "--cp-weight", "3"]);
    // What only the ingress stage applies, with the stage off (checked before any interface).
    let err = config_error(&[
        "--port",
        "no-such-if0,stamps=on",
        "--ingress-stage",
        "false",
    ]);
    assert!(
        err.contains(
            "port no-such-if0: ingress_delay and departure_stamps are applied by the ingress stage"
        ),
        "{err}"
    );
    let err = config_error(&["--port", "no-such-if0,stamps=on"]);
    assert!(
        err.contains("port no-such-if0: departure_stamps needs an ingress_delay"),
        "{err}"
    );
    // A wake quantum needs every port's stage to hold at least twice it (checked before any
    // interface): 40 µs is short of 2 × 25 µs; with 50 µs the interface is what is missing.
    let quantum = |in_delay: &str| {
        let port = format!("no-such-if0,in-delay={in_delay}");
        config_error(&["--port", &port, "--wake-quantum", "25us"])
    };
    let err = quantum("40us");
    assert!(err.contains("wake_quantum 25us"), "{err}");
    assert!(err.contains("port no-such-if0 has 40us"), "{err}");
    let err = quantum("50us");
    assert!(!err.contains("wake_quantum"), "{err}");
    assert!(err.contains("no-such-if0"), "{err}");
    // At most MAX_SLEEP (10 ms): control requests and signals wait for it.
    let err = config_error(&[
        "--port",
        "no-such-if0,in-delay=1s",
        "--wake-quantum",
        "20ms",
    ]);
    assert!(err.contains("wake_quantum 20ms: at most 10ms"), "{err}");
}

#[test]
fn ctl_into_a_closed_pipe_exits_141_without_a_panic() {
    let dir = tempfile::Builder::new()
        .prefix("cpsw-epipe-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("ctl.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    // A stand-in daemon: answers `stats` with a large table, but only once told to (after the
    // reader of ctl's output is gone).
    let server = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        go_rx.recv().unwrap();
        let rows: Vec<String> = (0..2000)
            .map(|i| format!("{{\"name\":\"p{i}\",\"rx_frames\":{i}}}"))
            .collect();
        let answer = format!("{{\"ok\":true,\"data\":[{}]}}\n", rows.join(","));
        let _ = (&s).write_all(answer.as_bytes());
    });
    let mut child = cp_switch()
        .arg("ctl")
        .arg("--socket")
        .arg(&path)
        .arg("show")
        .arg("ports")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    go_tx.send(()).unwrap();
    let out = child.wait_with_output().unwrap();
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(141), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

//! The Mininet integration (`mininet/qcn_mininet.py`): `mininet/check_qcn_mininet.py` builds a
//! topology of `QcnSwitch` (cp-switch) and `QcnHost` (rp-agent with a TAP) nodes, runs a ping and
//! an iperf3 through a 10 Mb/s QCN bottleneck and checks that the bottleneck's congestion point
//! sent CNMs; it also converts `testbed/scenarios/dumbbell.toml` to a Mininet topology.
//!
//! Needs root, Debian's `mininet` package (scripts/install-deps.sh installs it) and the release
//! binaries (`cargo build --release`); without them the test prints why and returns. Mininet's
//! node names (and so its interface names) carry the process id; `net.stop()` removes them also
//! when a check fails.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

#[test]
fn ping_and_iperf3_through_a_qcn_bottleneck_in_mininet() {
    if !is_root() {
        eprintln!("skipped: Mininet needs root");
        return;
    }
    let bins = testbed::bins::dir();
    for b in ["cp-switch", "rp-agent"] {
        if !bins.join(b).exists() {
            eprintln!(
                "skipped: {} missing (cargo build --release)",
                bins.join(b).display()
            );
            return;
        }
    }
    // Debian's Mininet lives in the system Python's packages.
    let python = ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import mininet.net"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(python) = python else {
        eprintln!("skipped: Mininet is not installed (scripts/install-deps.sh installs it)");
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("mininet")
        .join("check_qcn_mininet.py");
    // A short prefix keeps the interface names ("m12345h1-eth0") within 15 characters.
    let prefix = format!("m{}", std::process::id() % 100_000);
    // The daemons' sockets and logs go into a directory removed when the test ends, passed or
    // failed (the logs are part of the failure message).
    let run_dir = tempfile::Builder::new()
        .prefix(&format!("qcn-mn-{prefix}-"))
        .tempdir()
        .unwrap();
    let out = Command::new(python)
        .arg(&script)
        .arg(&prefix)
        .arg(run_dir.path())
        .env("QCN_BIN_DIR", &bins)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    if !out.status.success() {
        let mut logs = String::new();
        for e in std::fs::read_dir(run_dir.path()).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "log") {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                logs.push_str(&format!("--- {}\n{text}\n", e.path().display()));
            }
        }
        panic!(
            "check_qcn_mininet.py failed ({}):\n{stdout}\n{stderr}\n{logs}",
            out.status
        );
    }
    let leftover: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(&format!("qcn-mn-{prefix}")) && e.path() != run_dir.path()
        })
        .collect();
    assert!(leftover.is_empty(), "left behind: {leftover:?}");
    assert!(stdout.contains("\"switch_cnms\""), "{stdout}");
}

//! The `testbed` binary end to end: a short forwarding benchmark, teardown on SIGINT, and
//! `testbed down` after a crash. Run as root; otherwise each prints why it skips.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testbed::netns::{can_run_network_tests, list_namespaces};

const BIN: &str = env!("CARGO_BIN_EXE_testbed");

/// Namespaces created by process `pid`.
fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("qtb-{pid}-");
    list_namespaces()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

fn wait_for_namespaces(pid: u32, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while namespaces_of(pid).len() < n {
        assert!(
            Instant::now() < deadline,
            "the run never built its topology"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bench_forwarding_json_smoke() {
    if !can_run_network_tests("bench_forwarding_json_smoke") {
        return;
    }
    let out = Command::new(BIN)
        .args([
            "bench",
            "forwarding",
            "--duration",
            "200ms",
            "--warmup",
            "100ms",
            "--sizes",
            "60,1514",
            "--cp-switch",
            "/nonexistent/cp-switch",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for r in rows {
        match r["path"].as_str().unwrap() {
            "veth" | "bridge" => {
                assert_eq!(r["status"], "measured", "{r}");
                assert!(r["rx_frames"].as_u64().unwrap() > 0, "{r}");
                assert!(r["rx_fps"].as_f64().unwrap() > 0.0, "{r}");
            }
            "cp-switch" => assert_eq!(r["status"], "not-built", "{r}"),
            other => panic!("unexpected path {other}"),
        }
    }
    assert_eq!(report["ratios"].as_array().unwrap().len(), 2);
}

#[test]
fn bench_rejects_bad_sizes() {
    let out = Command::new(BIN)
        .args(["bench", "forwarding", "--sizes", "20"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("frame size 20") || stderr.contains("root"),
        "{stderr}"
    );
}

#[test]
fn sigint_tears_down_and_exits_130() {
    if !can_run_network_tests("sigint_tears_down_and_exits_130") {
        return;
    }
    let child = Command::new(BIN)
        .args(["bench", "forwarding", "--duration", "30s", "--sizes", "64"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for_namespaces(pid, 3);
    std::thread::sleep(Duration::from_millis(1500));
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        namespaces_of(pid).is_empty(),
        "left: {:?}",
        namespaces_of(pid)
    );
}

#[test]
fn down_cleans_up_after_a_killed_run() {
    if !can_run_network_tests("down_cleans_up_after_a_killed_run") {
        return;
    }
    let mut child = Command::new(BIN)
        .args(["bench", "forwarding", "--duration", "30s", "--sizes", "64"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for_namespaces(pid, 3);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(namespaces_of(pid).len(), 3, "SIGKILL leaves the topology");

    let out = Command::new(BIN).args(["down", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let removed: Vec<&str> = report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let left = namespaces_of(pid);
    assert!(
        left.is_empty(),
        "{left:?} left after testbed down (removed {removed:?})"
    );
    assert!(removed.len() >= 3, "{removed:?}");
    assert!(
        !report["state_files"].as_array().unwrap().is_empty(),
        "the state file was used: {report}"
    );
}

#[test]
fn bench_reports_a_cp_switch_that_fails_to_start() {
    if !can_run_network_tests("bench_reports_a_cp_switch_that_fails_to_start") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("qtb-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("cp-switch");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"cannot open port: $*\" >&2\nexit 2\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let out = Command::new(BIN)
        .args([
            "bench",
            "forwarding",
            "--duration",
            "100ms",
            "--warmup",
            "50ms",
            "--sizes",
            "64",
            "--json",
            "--cp-switch",
        ])
        .arg(&fake)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "cp-switch")
        .unwrap()
        .clone();
    assert_eq!(row["status"], "failed", "{row}");
    let error = row["error"].as_str().unwrap();
    assert!(
        error.contains("exited at start")
            && error.contains("cannot open port: --port p1 --port p2"),
        "{error}"
    );
}

/// Runs `testbed <args>`: (exit code, stderr).
fn run_code_and_stderr(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mode_flags_reject_nonsense_before_running() {
    // Explicit-rate switches with CNM-driven sources: an open loop, refused up front.
    let (code, err) = run_code_and_stderr(&[
        "run",
        "dumbbell",
        "--mode",
        "sim",
        "--cp-mode",
        "explicit-rate",
        "--no-plots",
        "--quiet",
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--cp-mode explicit-rate"), "{err}");
    assert!(err.contains("--rp-mode explicit-rate"), "{err}");
    // FQCN picks its own culprits.
    let (code, err) = run_code_and_stderr(&[
        "run",
        "dumbbell",
        "--mode",
        "sim",
        "--cp-mode",
        "fqcn",
        "--culprit",
        "occupancy-random",
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--culprit occupancy-random"), "{err}");
    // Unknown values are clap's business.
    let (code, err) = run_code_and_stderr(&["run", "dumbbell", "--rp-mode", "fastest"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("adaptive-bc+qcn-bs"), "{err}");
}

#[test]
fn mode_flags_run_in_the_simulator() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-mode-flags-{}", std::process::id()));
    let out = Command::new(BIN)
        .args([
            "run",
            "dumbbell",
            "--mode",
            "sim",
            "--set",
            "duration=60ms",
            "--set",
            "scenario.window=[\"20ms\",\"60ms\"]",
            "--cp-mode",
            "fqcn",
            "--rp-mode",
            "adaptive-bc",
            "--no-plots",
            "--quiet",
            "--json",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "sim");
    assert_eq!(v["variant"], "fqcn_adaptive-bc");
    assert!(v["jain"].as_f64().unwrap() > 0.9, "{v}");
}

#[test]
fn bench_app_json_smoke() {
    if !can_run_network_tests("bench_app_json_smoke") {
        return;
    }
    if Command::new("iperf3").arg("--version").output().is_err() {
        eprintln!("skipping bench_app_json_smoke: iperf3 is not installed");
        return;
    }
    let out = Command::new(BIN)
        .args([
            "bench",
            "app",
            "--duration",
            "1s",
            "--warmup",
            "0s",
            "--rounds",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["error"].is_null(), "{report}");
    for path in ["bridge", "agents", "agents_no_offload", "shaped"] {
        let p = &report[path];
        assert!(p["error"].is_null(), "{path}: {p}");
        let rounds = p["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 1, "{path}: {p}");
        assert!(rounds[0]["gbps"].as_f64().unwrap() > 0.0, "{path}: {p}");
    }
    assert!(report["ratio"].as_f64().unwrap() > 0.0, "{report}");
    assert!(report["shaped_share"].as_f64().unwrap() > 0.0, "{report}");
}

#[test]
fn completions_and_man_pages_generate() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = run(&["completions", shell]);
        assert!(script.contains("variants"), "{shell}");
        assert!(script.contains("sweep"), "{shell}");
    }
    assert!(run(&["man"]).contains(".TH testbed 1"));
    let dir = tempfile::Builder::new()
        .prefix("tb-man-")
        .tempdir()
        .unwrap();
    let listed = run(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    let names: Vec<String> = listed
        .lines()
        .map(|l| l.rsplit('/').next().unwrap().to_string())
        .collect();
    for page in [
        "testbed.1",
        "testbed-run.1",
        "testbed-compare.1",
        "testbed-bench-qcn.1",
    ] {
        assert!(names.iter().any(|n| n == page), "{page} missing: {names:?}");
    }
    // Hidden helpers have no page.
    assert!(!names.iter().any(|n| n.contains("incast")), "{names:?}");
    let compare = std::fs::read_to_string(dir.path().join("testbed-compare.1")).unwrap();
    assert!(compare.contains("variants"), "{compare}");
}

#[test]
fn compare_rejects_a_bad_variant_before_running_and_keeps_the_old_option_name() {
    let dir = tempfile::Builder::new()
        .prefix("tb-cmp-")
        .tempdir()
        .unwrap();
    let out_dir = dir.path().join("out");
    for flag in ["--variants", "--modes"] {
        let out = Command::new(BIN)
            .args([
                "compare",
                "dumbbell",
                "--mode",
                "sim",
                flag,
                "qcn,bogus",
                "--out",
            ])
            .arg(&out_dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag}: {stderr}");
        assert!(stderr.contains("\"bogus\""), "{flag}: {stderr}");
        assert!(
            !stderr.contains("under qcn"),
            "{flag}: qcn ran first: {stderr}"
        );
        assert!(
            !out_dir.exists(),
            "{flag}: results written before the check"
        );
    }
}

/// `--capture` with a link the scenario does not have is refused before anything runs (no
/// results directory, netns or sim), naming the scenario's links; `--capture` alone still takes
/// no value when an option follows it.
#[test]
fn capture_refuses_unknown_links_before_running() {
    let dir = tempfile::Builder::new()
        .prefix("tb-cap-")
        .tempdir()
        .unwrap();
    let out_dir = dir.path().join("out");
    for (cmd, mode) in [("run", "netns"), ("run", "sim"), ("compare", "sim")] {
        let out = Command::new(BIN)
            .args([
                cmd,
                "dumbbell",
                "--mode",
                mode,
                "--capture",
                "sw0-r0,nowhere-x",
            ])
            .arg("--out")
            .arg(&out_dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd} {mode}: {stderr}");
        assert!(stderr.contains("\"nowhere-x\""), "{cmd} {mode}: {stderr}");
        assert!(
            stderr.contains("sw0-r0") && stderr.contains("h0-sw0"),
            "{cmd} {mode}: {stderr}"
        );
        assert!(!out_dir.exists(), "{cmd} {mode}: results written first");
    }
    // `--capture --out DIR`: the bottleneck capture; every file written is printed.
    let out = Command::new(BIN)
        .args([
            "run",
            "dumbbell",
            "--mode",
            "sim",
            "--set",
            "duration=20ms",
            "--no-plots",
            "--quiet",
            "--capture",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in testbed::run::files_under(&out_dir) {
        assert!(
            stdout.contains(&f.display().to_string()),
            "{} not printed:\n{stdout}",
            f.display()
        );
    }
    assert!(out_dir.join("bottleneck.pcap").is_file());
    assert!(stdout.contains("trace.jsonl") && stdout.contains("summary.json"));
}

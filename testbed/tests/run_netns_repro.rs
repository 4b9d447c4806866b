//! The FQCN dumbbell reproduction scenario (`repro-fqcn-dumbbell4`) on namespaces, under the
//! `fqcn` variant (root only): every flow carries traffic, the congestion point sends CNMs, the
//! results directory is written and nothing is left behind. The claim's own threshold (Jain
//! ≥ 0.98) is not asserted here: a short wall-clock run on a shared machine is too noisy for
//! it; `scripts/reproduce-netns.sh` measures it.
#![allow(clippy::unwrap_used)]

mod common;

use common::netns::{assert_clean, namespaces_of, out_dir, prefix_of, summary, testbed};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the run if the test fails while it is going (the runner then tears its lab down),
/// deletes any namespace of the run's lab still there, and removes the results directory.
struct Guard {
    child: Option<Child>,
    dir: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            if c.try_wait().ok().flatten().is_none() {
                // SIGINT first: the runner cleans up on it.
                let _ = Command::new("kill")
                    .args(["-INT", &c.id().to_string()])
                    .status();
                let deadline = Instant::now() + Duration::from_secs(10);
                while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if let Some(prefix) = prefix_of(&self.dir) {
            for n in namespaces_of(&prefix).unwrap_or_default() {
                let _ = Command::new("ip").args(["netns", "del", &n]).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn repro_fqcn_dumbbell_runs_in_netns() {
    if !testbed::netns::can_run_network_tests("repro_fqcn_dumbbell_runs_in_netns") {
        return;
    }
    let dir = out_dir("run-netns-repro", "fqcn");
    let mut guard = Guard {
        child: None,
        dir: dir.clone(),
    };
    // 12 s of wall clock instead of the file's 20 s (the schedule is compressed, the loop's
    // own times stay × S); the steady-state window is then 6-12 s.
    let child = testbed()
        .args([
            "repro-fqcn-dumbbell4",
            "--mode",
            "netns",
            "--variant",
            "fqcn",
            "--quiet",
            "--no-plots",
            "--set",
            "scenario.netns.duration=12s",
        ])
        .arg("--out")
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    guard.child = Some(child);
    let deadline = Instant::now() + Duration::from_secs(50);
    let status = loop {
        if let Some(s) = guard.child.as_mut().unwrap().try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the run took more than 50 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}");

    let s = summary(&dir);
    assert_eq!(s["scenario"], "repro-fqcn-dumbbell4");
    assert_eq!(s["mode"], "netns");
    assert_eq!(s["variant"], "fqcn");
    assert_eq!(s["time_scale"], 100.0);
    let flows = s["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 4, "{s}");
    for f in flows {
        let r = f["mean_bps"].as_f64().unwrap_or(0.0);
        // Every flow got traffic through the 100 Mb/s bottleneck (10 Gb/s ÷ 100).
        assert!(r > 1e6 && r < 105e6, "flow {}: {r} bit/s", f["name"]);
    }
    let total: f64 = flows.iter().map(|f| f["mean_bps"].as_f64().unwrap()).sum();
    assert!(
        total < 105e6,
        "sum of the flow rates {total} above the bottleneck"
    );
    let cnms: u64 = flows.iter().map(|f| f["cnm_rx"].as_u64().unwrap()).sum();
    assert!(cnms > 0, "no CNMs: {s}");
    let jain = s["jain_rates"].as_f64().unwrap();
    assert!((0.25..=1.0 + 1e-9).contains(&jain), "jain {jain}");
    let q = s["bottlenecks"][0]["queue_mean_bytes"].as_f64().unwrap();
    assert!(q < 150_000.0, "queue mean {q} above the buffer");
    assert!(s["faithful"].is_boolean());
    assert!(dir.join("trace-sw0.jsonl").exists());
    assert!(dir.join("flows.csv").exists());

    assert_clean(&prefix_of(&dir).unwrap());
}

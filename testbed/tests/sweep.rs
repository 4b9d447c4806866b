//! `testbed sweep`: a small grid run locally in parallel and the same grid emitted as commands
//! (run here one by one through `sh`, as a cluster runner would) give the same merged summary.

use std::path::{Path, PathBuf};
use std::process::Command;

fn testbed() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_testbed"))
}

fn scenario() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/repro/qcnbs_chain.toml")
        .display()
        .to_string()
}

/// The grid: 2 seeds × 2 variants, a short run (the steady window of the file ends at 200 ms).
fn grid_args(out: &Path) -> Vec<String> {
    [
        "sweep",
        &scenario(),
        "--seeds",
        "1..2",
        "--variant",
        "qcn,adaptive-bc+qcn-bs",
        "--set",
        "duration=200ms",
        "--criterion",
        "f1.share_ratio>=0.8",
        "--out",
        &out.display().to_string(),
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("summary JSON")
}

#[test]
fn parallel_and_emitted_sweeps_merge_to_the_same_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("local");
    let emitted = tmp.path().join("emitted");

    // Local, two runs at a time.
    let mut a = grid_args(&local);
    a.extend(["--jobs".into(), "2".into(), "--json".into()]);
    let local_summary = json(&Command::new(testbed()).args(&a).output().unwrap());

    // Emitted: one command per line; nothing has run yet.
    let mut e = grid_args(&emitted);
    e.extend(["--emit".into(), "commands".into()]);
    let out = Command::new(testbed()).args(&e).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let commands = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = commands.lines().collect();
    assert_eq!(lines.len(), 4, "{commands}");
    assert!(lines.iter().all(|l| l.contains(" run ")), "{commands}");
    assert_eq!(
        std::fs::read_to_string(emitted.join("commands.txt")).unwrap(),
        commands
    );
    // Before any run, the merge reports every seed missing.
    let mut m = vec![
        "sweep".to_string(),
        "--merge".into(),
        emitted.display().to_string(),
    ];
    m.push("--json".into());
    let before = json(&Command::new(testbed()).args(&m).output().unwrap());
    for p in before["points"].as_array().unwrap() {
        assert_eq!(p["seeds_missing"], serde_json::json!([1, 2]));
    }
    // A cluster runner would start these anywhere; here, one after another.
    for l in &lines {
        let st = Command::new("sh").arg("-c").arg(l).status().unwrap();
        assert!(st.success(), "{l}");
    }
    let merged = json(&Command::new(testbed()).args(&m).output().unwrap());

    assert_eq!(local_summary, merged);
    // The summary is the same file a local sweep writes.
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(local.join("sweep-summary.json")).unwrap())
            .unwrap();
    assert_eq!(written, local_summary);
    // And it says something: 4 points × 2 seeds done, metrics and criteria present.
    let points = local_summary["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        assert_eq!(p["seeds_done"], serde_json::json!([1, 2]));
        assert!(p["metrics"]["f1.share_ratio"]["n"] == 2, "{p}");
        assert_eq!(p["criteria"][0]["of"], 2);
    }
    assert_eq!(points[1]["variant"], "adaptive-bc+qcn-bs");

    // The Slurm form names the array and the commands file.
    let mut s = grid_args(&tmp.path().join("slurm"));
    s.extend(["--emit".into(), "slurm".into()]);
    let out = Command::new(testbed()).args(&s).output().unwrap();
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(script.contains("#SBATCH --array=1-4\n"), "{script}");
    assert!(script.contains("SLURM_ARRAY_TASK_ID"), "{script}");
}

#[test]
fn a_bad_override_is_refused_before_any_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(testbed())
        .args([
            "sweep",
            &scenario(),
            "--seeds",
            "1..3",
            "--set",
            "no.such.key=1,2",
        ])
        .arg("--out")
        .arg(tmp.path().join("s"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no.such.key") || err.contains("no"), "{err}");
    assert!(
        !tmp.path().join("s").exists(),
        "nothing is written for a refused sweep"
    );
    let out = Command::new(testbed())
        .args(["sweep", "--merge"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a sweep directory"));
}

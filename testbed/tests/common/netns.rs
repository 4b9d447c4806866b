//! `testbed run --mode netns` from the tests: the command, the run's lab prefix, the summary,
//! and the check that a run left no namespace or process behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The environment variable the runner sets, to its lab prefix, in every process it starts.
pub const RUN_ENV: &str = "TESTBED_RUN";

/// `<temp>/<stem>-<pid>-<tag>`: a results directory unique to this test process.
pub fn out_dir(stem: &str, tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{stem}-{}-{tag}", std::process::id()))
}

/// `testbed run --bin-dir <daemons>`; the daemons are next to the test binary's parent
/// directory (target/<profile>).
pub fn testbed() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_testbed"));
    c.arg("run").arg("--bin-dir").arg(testbed::bins::dir());
    c
}

/// `testbed run dumbbell --quiet --no-plots --set scenario.scale=100 ARGS... --out DIR`, its
/// output discarded, not started yet. At S = 100 (100 Mb/s) rather than the built-in's
/// S = 10, which needs the machine to itself: tests share it.
pub fn dumbbell(dir: &Path, args: &[&str]) -> Command {
    let mut c = testbed();
    c.args(["dumbbell", "--quiet", "--no-plots"])
        .args(["--set", "scenario.scale=100"])
        .args(args)
        .arg("--out")
        .arg(dir)
        .stdout(std::process::Stdio::null());
    c
}

/// [`dumbbell`], run to its end.
pub fn run_dumbbell(dir: &Path, args: &[&str]) -> std::process::ExitStatus {
    dumbbell(dir, args).status().unwrap()
}

/// The lab prefix a run wrote into its results directory.
pub fn prefix_of(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("lab-prefix.txt"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Namespaces of the lab `prefix`.
pub fn namespaces_of(prefix: &str) -> Result<Vec<String>, testbed::netns::NetnsError> {
    Ok(testbed::netns::list_namespaces()?
        .into_iter()
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .collect())
}

/// Pids of processes carrying `TESTBED_RUN=<prefix>`.
pub fn processes_of(prefix: &str) -> Vec<u32> {
    let want = format!("{RUN_ENV}={prefix}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// Within 5 s, no namespace and no process of the lab `prefix` is left.
pub fn assert_clean(prefix: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (n, p) = (namespaces_of(prefix).unwrap(), processes_of(prefix));
        if n.is_empty() && p.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: namespaces {n:?}, processes {p:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The run's `summary.json`.
pub fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// The run exited successfully (its stderr in the message otherwise).
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

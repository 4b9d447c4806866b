//! What the namespace benchmarks ([`super::qcn`], [`super::app`]) share around their labs: the
//! line topologies (two hosts cabled back to back, or through a middle namespace), a working
//! directory removed on drop, waiting for a daemon's control socket, asking a daemon's `ctl`
//! for JSON, and the interruptible sleep.
//!
//! Every link is a veth pair with its offloads off and every namespace has IPv6 off, so the
//! only frames on a link are the benchmark's own.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::BenchError;
use crate::netns::{Child, Lab, Namespace};
use crate::signals;

/// An I/O error of `role` with the message `msg`.
pub(super) fn other(role: &'static str, msg: impl Into<String>) -> BenchError {
    BenchError::Io {
        role,
        source: std::io::Error::other(msg.into()),
    }
}

/// Sleeps `d`, or fails with [`signals::Interrupted`] as soon as SIGINT/SIGTERM arrives.
pub(super) fn sleep(d: std::time::Duration) -> Result<(), BenchError> {
    if signals::sleep_or_interrupted(d) {
        return Err(signals::Interrupted.into());
    }
    Ok(())
}

/// Waits until `path` exists (a daemon's control socket) or `child` exits.
pub(super) fn wait_for_socket(
    child: &mut Child,
    path: &Path,
    log: &Path,
) -> Result<(), BenchError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !path.exists() {
        if !child.is_running() || std::time::Instant::now() > deadline {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(other("daemon", format!("did not start: {text}")));
        }
        sleep(std::time::Duration::from_millis(50))?;
    }
    Ok(())
}

/// A working directory under the temporary directory, removed on drop.
pub(super) struct WorkDir(PathBuf);

impl WorkDir {
    pub(super) fn new(lab: &Lab) -> Result<WorkDir, BenchError> {
        let p = std::env::temp_dir().join(format!("{}-qcn", lab.prefix()));
        std::fs::create_dir_all(&p).map_err(|source| BenchError::Io {
            role: "workdir",
            source,
        })?;
        Ok(WorkDir(p))
    }

    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes the configuration file `name` and returns its path.
    pub(super) fn write_config(&self, name: &str, text: &str) -> Result<PathBuf, BenchError> {
        let p = self.path(name);
        std::fs::write(&p, text).map_err(|source| BenchError::Io {
            role: "config",
            source,
        })?;
        Ok(p)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Three namespaces named `names` in a line: `eth0` of the first cabled to `p1` of the middle
/// one, `p2` of the middle one to `eth0` of the last; links up.
pub(super) fn line(
    lab: &Lab,
    names: [&str; 3],
) -> Result<(Namespace, Namespace, Namespace), BenchError> {
    let h1 = lab.ns(names[0])?;
    let mid = lab.ns(names[1])?;
    let h2 = lab.ns(names[2])?;
    for ns in [&h1, &mid, &h2] {
        ns.disable_ipv6()?;
    }
    lab.veth((&h1, "eth0"), (&mid, "p1"))?
        .offloads_off()?
        .up()?;
    lab.veth((&mid, "p2"), (&h2, "eth0"))?
        .offloads_off()?
        .up()?;
    Ok((h1, mid, h2))
}

/// Two namespaces `h1`, `h2` whose `eth0`s are cabled back to back; link up.
pub(super) fn pair(lab: &Lab) -> Result<(Namespace, Namespace), BenchError> {
    let h1 = lab.ns("h1")?;
    let h2 = lab.ns("h2")?;
    for ns in [&h1, &h2] {
        ns.disable_ipv6()?;
    }
    lab.veth((&h1, "eth0"), (&h2, "eth0"))?
        .offloads_off()?
        .up()?;
    Ok((h1, h2))
}

/// `BIN ctl --socket CTL WORDS... --json` of a running daemon, parsed (`None` when the daemon
/// cannot be asked or its answer is not JSON).
pub(super) fn ctl_json(bin: &Path, ctl: &Path, words: &[&str]) -> Option<Value> {
    let out = std::process::Command::new(bin)
        .arg("ctl")
        .arg("--socket")
        .arg(ctl)
        .args(words)
        .arg("--json")
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// The sum of `cps[].key` in the `stats` of a running cp-switch (0 when unknown).
pub(super) fn cps_sum(bin: &Path, ctl: &Path, key: &str) -> u64 {
    ctl_json(bin, ctl, &["stats"])
        .and_then(|v| {
            v["cps"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c[key].as_u64()).sum())
        })
        .unwrap_or(0)
}

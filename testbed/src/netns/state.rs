//! The record of what a lab created, and `testbed down`, which removes what crashed runs left.
//!
//! Each [`Lab`](super::Lab) writes `<state dir>/<lab prefix>.json` when it creates something
//! and deletes the file after teardown. The state directory is `$QCN_TESTBED_STATE_DIR` if set,
//! else `/run/qcn-testbed` when writable (root), else `$XDG_RUNTIME_DIR/qcn-testbed`, else
//! `<temp dir>/qcn-testbed`.
//!
//! [`down`] removes, for every state file whose owner process is gone, the namespaces (killing
//! the processes in them first) and root-side interfaces it lists; then it scans
//! `ip netns list` and the initial namespace's links for testbed names (prefix `qtb`, see
//! [`names`]) whose owner process is gone. With `all`, live owners' objects go too.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{cmd, delete_namespace, list_namespaces, names, NetnsError};

/// Contents of one lab's state file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabRecord {
    /// The process that built the lab.
    pub owner_pid: u32,
    /// The lab's name prefix (`qtb-<pid>-<n>-<tag>`).
    pub prefix: String,
    /// Full names of the namespaces created, in creation order.
    pub namespaces: Vec<String>,
    /// Interfaces created in the initial namespace.
    pub root_links: Vec<String>,
}

/// The directory holding state files (created if missing).
pub fn state_dir() -> PathBuf {
    let candidates = std::env::var_os("QCN_TESTBED_STATE_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/run/qcn-testbed")])
        .chain(std::env::var_os("XDG_RUNTIME_DIR").map(|d| PathBuf::from(d).join("qcn-testbed")))
        .chain([std::env::temp_dir().join("qcn-testbed")]);
    let mut last = PathBuf::from("/run/qcn-testbed");
    for dir in candidates {
        if std::fs::create_dir_all(&dir).is_ok() && writable(&dir) {
            return dir;
        }
        last = dir;
    }
    last
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// Writes `rec` to `path` atomically (temporary file + rename).
pub(crate) fn write_record(path: &Path, rec: &LabRecord) -> Result<(), NetnsError> {
    let err = |source| NetnsError::State {
        path: path.display().to_string(),
        source,
    };
    let json = serde_json::to_vec_pretty(rec).map_err(|e| err(e.into()))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Reads a state file.
pub fn read_record(path: &Path) -> Result<LabRecord, NetnsError> {
    let err = |source| NetnsError::State {
        path: path.display().to_string(),
        source,
    };
    let text = std::fs::read(path).map_err(err)?;
    serde_json::from_slice(&text).map_err(|e| err(e.into()))
}

/// What [`down`] removed (or, with `dry_run`, would remove).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct DownReport {
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Root-side interfaces deleted.
    pub links: Vec<String>,
    /// State files removed.
    pub state_files: Vec<String>,
    /// Objects skipped because their owner process is still running.
    pub skipped_live: Vec<String>,
    /// Failures (the object is named in the message).
    pub errors: Vec<String>,
}

/// Removes what crashed runs left: see the module documentation. Never touches objects of
/// this process.
pub fn down(all: bool, dry_run: bool) -> Result<DownReport, NetnsError> {
    let me = std::process::id();
    let removable = |owner: u32| owner != me && (all || !cmd::pid_alive(owner));
    let mut report = DownReport::default();

    let dir = state_dir();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            let Ok(rec) = read_record(&path) else {
                continue;
            };
            if !removable(rec.owner_pid) {
                report.skipped_live.push(path.display().to_string());
                continue;
            }
            for l in &rec.root_links {
                remove_root_link(l, dry_run, &mut report);
            }
            for n in rec.namespaces.iter().rev() {
                remove_ns(n, dry_run, &mut report)?;
            }
            if !dry_run {
                let _ = std::fs::remove_file(&path);
            }
            report.state_files.push(path.display().to_string());
        }
    }

    for n in list_namespaces()? {
        match names::owner_of_ns(&n) {
            Some(owner) if removable(owner) => remove_ns(&n, dry_run, &mut report)?,
            Some(owner) if owner != me => report.skipped_live.push(n),
            _ => {}
        }
    }
    for l in root_links()? {
        match names::owner_of_root_if(&l) {
            Some(owner) if removable(owner) => remove_root_link(&l, dry_run, &mut report),
            Some(owner) if owner != me => report.skipped_live.push(l),
            _ => {}
        }
    }
    report.skipped_live.sort();
    report.skipped_live.dedup();
    Ok(report)
}

fn remove_ns(name: &str, dry_run: bool, report: &mut DownReport) -> Result<(), NetnsError> {
    if report.namespaces.iter().any(|n| n == name) || !list_namespaces()?.iter().any(|n| n == name)
    {
        return Ok(());
    }
    if !dry_run {
        if let Err(e) = delete_namespace(name) {
            report.errors.push(e.to_string());
            return Ok(());
        }
    }
    report.namespaces.push(name.to_owned());
    Ok(())
}

fn remove_root_link(name: &str, dry_run: bool, report: &mut DownReport) {
    if report.links.iter().any(|n| n == name) {
        return;
    }
    let exists = cmd::output(&mut cmd::command("ip", &["link", "show", "dev", name]))
        .is_ok_and(|o| o.status.success());
    if !exists {
        return;
    }
    if !dry_run {
        if let Err(e) = cmd::checked(&mut cmd::command("ip", &["link", "del", "dev", name])) {
            report.errors.push(e.to_string());
            return;
        }
    }
    report.links.push(name.to_owned());
}

/// Names of the interfaces in the initial namespace.
pub(crate) fn root_links() -> Result<Vec<String>, NetnsError> {
    let out = cmd::checked(&mut cmd::command("ip", &["-o", "link", "show"]))?;
    // Lines look like `7: name@peer: <FLAGS> ...`.
    Ok(out
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_roundtrip() {
        let dir = std::env::temp_dir().join(format!("qtb-state-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.json");
        let rec = LabRecord {
            owner_pid: 12,
            prefix: "qtb-12-0-t".into(),
            namespaces: vec!["qtb-12-0-t-h1".into()],
            root_links: vec!["qtb00000c00000".into()],
        };
        write_record(&path, &rec).unwrap();
        assert_eq!(read_record(&path).unwrap(), rec);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

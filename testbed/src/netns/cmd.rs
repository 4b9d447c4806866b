//! Running `ip`, `ethtool`, `kill` and friends, with errors that say what was run.

use std::ffi::OsStr;
use std::process::{Command, Output, Stdio};

use super::NetnsError;

/// Renders a command line for error messages.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion and returns its output whatever the exit status.
pub(crate) fn output(cmd: &mut Command) -> Result<Output, NetnsError> {
    cmd.stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn {
            cmd: describe(cmd),
            source,
        })
}

/// Runs `cmd`; a non-zero exit is an error carrying its stderr. Returns stdout.
pub(crate) fn checked(cmd: &mut Command) -> Result<String, NetnsError> {
    let out = output(cmd)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetnsError::Command {
            cmd: describe(cmd),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// `program args...` as a [`Command`].
pub(crate) fn command<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Command {
    let mut c = Command::new(program);
    c.args(args);
    c
}

/// Sends `signal` (a name such as `TERM` or `KILL`) to process `pid`, or to process group
/// `pid` when `group` is set. Errors (e.g. the process is gone) are ignored: callers only use
/// this on teardown paths, where "already gone" is success.
pub(crate) fn kill(pid: u32, signal: &str, group: bool) {
    let target = if group {
        format!("-{pid}")
    } else {
        pid.to_string()
    };
    // The shell's built-in `kill` (POSIX), so that no procps package is needed.
    let mut c = Command::new("sh");
    c.args(["-c", "kill -s \"$1\" -- \"$2\"", "sh", signal, &target])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _ = output(&mut c);
}

/// Whether process `pid` exists (and is not a zombie).
pub(crate) fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

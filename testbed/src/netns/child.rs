//! A guarded background process.

use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use super::{cmd, NetnsError};

/// How long [`Child`]'s `Drop` waits after SIGTERM before SIGKILL.
pub const DROP_GRACE: Duration = Duration::from_secs(2);

/// A process started in its own process group. Dropping it sends SIGTERM to the group, waits
/// up to [`DROP_GRACE`] for the leader to exit, then SIGKILLs the group and reaps the leader.
#[derive(Debug)]
pub struct Child {
    child: std::process::Child,
    label: String,
    status: Option<ExitStatus>,
}

impl Child {
    /// Spawns `cmd` in a new process group (stdin from /dev/null unless set otherwise). The
    /// child gets SIGTERM if the spawning thread dies, so a runner killed with SIGKILL leaves
    /// no daemon behind (`testbed down` stays the safety net).
    pub fn spawn(mut cmd: Command) -> Result<Child, NetnsError> {
        let label = cmd::describe(&cmd);
        cmd.process_group(0).stdin(Stdio::null());
        cnm_proto::phy::process::die_with_parent_on_spawn(&mut cmd);
        let child = cmd.spawn().map_err(|source| NetnsError::Spawn {
            cmd: label.clone(),
            source,
        })?;
        Ok(Child {
            child,
            label,
            status: None,
        })
    }

    /// The process id (also the process group id).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The command line, for messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The exit status if the process has exited (reaps it), `None` while it runs.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, NetnsError> {
        if self.status.is_none() {
            self.status = self.child.try_wait().map_err(|source| NetnsError::Spawn {
                cmd: self.label.clone(),
                source,
            })?;
        }
        Ok(self.status)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.try_wait(), Ok(None))
    }

    /// Sends SIGTERM to the process group, waits up to `grace` for the leader to exit, then
    /// SIGKILLs the group. Returns the leader's exit status.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus, NetnsError> {
        let pgid = self.id();
        if self.try_wait()?.is_none() {
            cmd::kill(pgid, "TERM", true);
            let deadline = Instant::now() + grace;
            while self.try_wait()?.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Also reaches group members that outlived the leader.
        cmd::kill(pgid, "KILL", true);
        if let Some(s) = self.status {
            return Ok(s);
        }
        let s = self.child.wait().map_err(|source| NetnsError::Spawn {
            cmd: self.label.clone(),
            source,
        })?;
        self.status = Some(s);
        Ok(s)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.stop(DROP_GRACE);
    }
}

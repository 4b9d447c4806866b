//! A guarded background process.

use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use super::{cmd, NetnsError};

/// How long [`Child`]'s `Drop` waits after SIGTERM before SIGKILL.
pub const DROP_GRACE: Duration = Duration::from_secs(2);

/// The nice value children start with ([`set_children_nice`]); `i32::MIN`: the spawning
/// thread's.
static CHILDREN_NICE: AtomicI32 = AtomicI32::new(i32::MIN);

/// Children spawned from now on start with nice value `value` (`None`: the spawning thread's).
/// A runner that lowers its own priority while it samples a lab keeps its daemons at the one
/// it had ([`LowPriority`]).
fn set_children_nice(value: Option<i32>) {
    CHILDREN_NICE.store(value.unwrap_or(i32::MIN), Ordering::Relaxed);
}

/// The calling thread runs `by` nice steps below its priority until this is dropped, and the
/// children it spawns meanwhile keep the priority it had.
///
/// A namespace run's runner wakes every 250 ms to sample the lab (`/proc`, the bottleneck's
/// `stats`), and for 2-3 ms of CPU each time: at the default priority it preempted the
/// daemons it measures (perf sched: the hosts loop waited 2.7 ms behind it), and a sender
/// descheduled for that long sends its frames later than its link's delay can absorb.
/// Measured on the dumbbell at S = 10 with the daemons' processes pinned (3 runs each): 0.59 to
/// 0.89 % of the stamped frames came late with the runner at nice 0, 0.52 to 0.66 % at 10.
#[derive(Debug)]
pub struct LowPriority {
    base: i32,
}

impl LowPriority {
    /// Lowers the calling thread's priority by `by` steps; `None` when its nice value cannot be
    /// read or changed (the run goes on at the priority it has).
    pub fn lower(by: i32) -> Option<LowPriority> {
        let base = cnm_proto::phy::process::nice().ok()?;
        // Giving the priority back (to the children, and to the thread at the end) needs
        // CAP_SYS_NICE or a nice rlimit; a root without it (a container) must not lower what
        // it cannot raise again. A scratch thread (it starts at this thread's value) tries.
        let can_raise = std::thread::spawn(move || {
            cnm_proto::phy::process::set_nice(base + by).is_ok()
                && cnm_proto::phy::process::set_nice(base).is_ok()
        })
        .join()
        .unwrap_or(false);
        if !can_raise {
            return None;
        }
        cnm_proto::phy::process::set_nice(base + by).ok()?;
        set_children_nice(Some(base));
        Some(LowPriority { base })
    }
}

/// The calling thread keeps to the CPUs given until this is dropped (sched_setaffinity(2));
/// the processes it spawns meanwhile inherit that affinity.
#[derive(Debug)]
pub struct Confined {
    before: Vec<usize>,
}

impl Confined {
    /// Restricts the calling thread to `cpus`; `None` when its affinity cannot be read or
    /// set (the run goes on unconfined).
    pub fn to(cpus: &[usize]) -> Option<Confined> {
        let before = cnm_proto::phy::process::affinity().ok()?;
        cnm_proto::phy::process::set_affinity(cpus).ok()?;
        Some(Confined { before })
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        let _ = cnm_proto::phy::process::set_affinity(&self.before);
    }
}

impl Drop for LowPriority {
    fn drop(&mut self) {
        set_children_nice(None);
        // Raising a priority back needs CAP_SYS_NICE; without it the thread stays lower.
        let _ = cnm_proto::phy::process::set_nice(self.base);
    }
}

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
        let nice = CHILDREN_NICE.load(Ordering::Relaxed);
        if nice != i32::MIN {
            cnm_proto::phy::process::nice_on_spawn(&mut cmd, nice);
        }
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

//! Process-level controls a daemon needs from the kernel: dying with its parent.

use std::io;

/// Asks the kernel to send `SIGTERM` to this process when its parent dies (prctl(2)
/// `PR_SET_PDEATHSIG`), so a daemon started by a runner that is killed (even with `SIGKILL`)
/// shuts down cleanly instead of running on. Returns `Ok(false)` when the parent is already
/// gone (the process was re-parented before the call), in which case the caller should stop.
///
/// The setting belongs to the calling thread's parent *thread*: call it from the main thread
/// of a process started directly by the runner.
pub fn die_with_parent() -> io::Result<bool> {
    // SAFETY: getppid has no arguments and cannot fail.
    let parent = unsafe { libc::getppid() };
    // SAFETY: PR_SET_PDEATHSIG takes one signal number; no memory is passed.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // The parent may have died between the fork and the prctl: then no signal will ever come.
    // SAFETY: as above.
    Ok(unsafe { libc::getppid() } == parent)
}

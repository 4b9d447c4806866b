//! Process-level controls the daemons and their runner need from the kernel: dying with the
//! parent.

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

/// Makes a child spawned from `cmd` receive `SIGTERM` when the thread that spawns it dies
/// (prctl(2) `PR_SET_PDEATHSIG` between fork and exec; the setting survives the exec of a
/// program that is not set-user-ID). A runner that starts daemons this way cannot leave them
/// behind, even when it is killed with `SIGKILL`.
///
/// The "parent" is the spawning *thread*: spawn from a thread that lives as long as the child
/// should.
pub fn die_with_parent_on_spawn(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl(2),
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let rc = libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            );
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_child_dies_with_the_thread_that_spawned_it() {
        // The spawning thread ends at once; without the parent-death signal `sleep` would run
        // its full 60 s.
        let mut child = std::thread::spawn(|| {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("60");
            die_with_parent_on_spawn(&mut cmd);
            cmd.spawn().expect("spawn sleep")
        })
        .join()
        .expect("spawning thread");
        let mut status = None;
        for _ in 0..2_000 {
            if let Some(s) = child.try_wait().expect("try_wait") {
                status = Some(s);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child outlived its parent thread");
        };
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }
}

//! Process-level controls the daemons and their runner need from the kernel: dying with the
//! parent; the calling thread's scheduling policy and CPU affinity (sched(7)).

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

/// A scheduling policy of sched(7), as the kernel reports it for a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `SCHED_OTHER`, the default time-sharing policy.
    Other,
    /// `SCHED_FIFO` at a static priority of 1-99: runs before every `SCHED_OTHER` thread of its
    /// CPU until it blocks or a higher priority becomes runnable.
    Fifo(u8),
    /// `SCHED_RR` at a static priority (set by someone else; reported, never set here).
    RoundRobin(u8),
    /// `SCHED_BATCH`, `SCHED_IDLE`, `SCHED_DEADLINE` or an unknown number.
    Unknown(i32),
}

/// Sets the scheduling policy of the *calling thread* (sched_setscheduler(2) with pid 0, which
/// Linux applies to the caller's thread only; threads it starts later inherit it). `EPERM`
/// means neither root nor `CAP_SYS_NICE` (nor an `RLIMIT_RTPRIO` high enough); `EINVAL` a
/// priority out of 1-99 for `Fifo`.
pub fn set_policy(policy: Policy) -> io::Result<()> {
    let (pol, prio) = match policy {
        Policy::Other => (libc::SCHED_OTHER, 0),
        Policy::Fifo(p) => (libc::SCHED_FIFO, i32::from(p)),
        Policy::RoundRobin(p) => (libc::SCHED_RR, i32::from(p)),
        Policy::Unknown(_) => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 is the caller.
    let rc = unsafe { libc::sched_setscheduler(0, pol, &param) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's scheduling policy (sched_getscheduler(2), sched_getparam(2)).
pub fn policy() -> io::Result<Policy> {
    // SAFETY: pid 0 is the caller; no memory is passed.
    let pol = unsafe { libc::sched_getscheduler(0) };
    if pol < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable sched_param.
    if unsafe { libc::sched_getparam(0, &mut param) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let prio = u8::try_from(param.sched_priority).unwrap_or(0);
    Ok(match pol {
        libc::SCHED_OTHER => Policy::Other,
        libc::SCHED_FIFO => Policy::Fifo(prio),
        libc::SCHED_RR => Policy::RoundRobin(prio),
        other => Policy::Unknown(other),
    })
}

/// Restricts the *calling thread* to the CPUs in `cpus` (sched_setaffinity(2) with pid 0).
/// `EINVAL`: no CPU of the set is online (or a number is past `CPU_SETSIZE`, refused here
/// before the call).
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `c` is below CPU_SETSIZE, the number of bits of `set` (checked above).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the caller.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the calling thread may run on (sched_getaffinity(2)), in increasing order.
pub fn affinity() -> io::Result<Vec<usize>> {
    // SAFETY: as in `set_affinity`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE, the number of bits of `set`.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// The nice value of the *calling thread* (getpriority(2) with `PRIO_PROCESS` and pid 0: on
/// Linux each thread has its own).
pub fn nice() -> io::Result<i32> {
    // getpriority can return -1 as a value: errno tells an error apart.
    // SAFETY: errno is thread-local; writing 0 to it and calling getpriority touch nothing else.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: getpriority takes plain integers.
    let v = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    // SAFETY: as above.
    if v == -1 && unsafe { *libc::__errno_location() } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// Sets the nice value of the *calling thread* (setpriority(2), pid 0), clamped to −20..=19.
/// Lowering it below the current value needs `CAP_SYS_NICE`.
pub fn set_nice(value: i32) -> io::Result<()> {
    // SAFETY: setpriority takes plain integers.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, value.clamp(-20, 19)) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes a child spawned from `cmd` start with nice value `value` (setpriority(2) between
/// fork and exec), whatever the spawning thread's: a runner that lowered its own priority
/// starts its daemons at the one it had. Best effort: a child that may not raise its priority
/// (no `CAP_SYS_NICE`) starts at the spawning thread's, and the spawn still succeeds.
pub fn nice_on_spawn(cmd: &mut std::process::Command, value: i32) {
    use std::os::unix::process::CommandExt;
    let v = value.clamp(-20, 19);
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // setpriority(2), which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let _ = libc::setpriority(libc::PRIO_PROCESS, 0, v);
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_thread_lowers_its_priority_and_its_children_start_at_the_one_given() {
        // In a thread of its own, so that the test harness's threads keep theirs.
        std::thread::spawn(|| {
            let base = nice().unwrap();
            set_nice(base + 5).unwrap();
            assert_eq!(nice().unwrap(), (base + 5).min(19));
            let mut cmd = std::process::Command::new("sh");
            cmd.args(["-c", "cut -d' ' -f19 /proc/self/stat"]);
            // Lowering a priority needs no privilege: the child starts 2 steps below the
            // thread.
            let want = (base + 7).min(19);
            nice_on_spawn(&mut cmd, want);
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{out:?}");
            let got: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            assert_eq!(got, want);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_reads_back_its_affinity_and_policy() {
        // On a thread of its own: the test runner's threads keep theirs.
        std::thread::spawn(|| {
            let all = affinity().expect("affinity");
            assert!(!all.is_empty());
            set_affinity(&all[..1]).expect("one CPU of the allowed set");
            assert_eq!(affinity().expect("affinity"), all[..1]);
            assert_eq!(
                set_affinity(&[libc::CPU_SETSIZE as usize])
                    .unwrap_err()
                    .raw_os_error(),
                Some(libc::EINVAL)
            );
            set_policy(Policy::Other).expect("SCHED_OTHER is always allowed");
            assert_eq!(policy().expect("policy"), Policy::Other);
            assert!(
                set_policy(Policy::Fifo(0)).is_err(),
                "FIFO priorities are 1-99"
            );
        })
        .join()
        .expect("thread");
    }

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

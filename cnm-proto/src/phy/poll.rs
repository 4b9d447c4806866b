//! Waiting for readiness: ppoll(2) with a nanosecond `timespec`, so a dataplane loop can sleep
//! exactly until its next shaper or pacer departure.
//!
//! The kernel adds the thread's timer slack (50 µs by default, prctl(2) `PR_SET_TIMERSLACK`) to
//! every sleep; [`set_timer_slack`] lowers it for a pacing thread.

use std::io;
use std::os::fd::RawFd;

use crate::Duration;

/// The most descriptors one [`wait`] call takes.
pub const MAX_FDS: usize = 128;

/// Which of the descriptors passed to [`wait`] are ready, by index.
///
/// A descriptor with an error or hang-up condition counts as ready (reading it surfaces the
/// error) and is also reported by [`Ready::has_error`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ready {
    ready: u128,
    error: u128,
}

impl Ready {
    /// True when `fds[index]` is readable (or has an error condition).
    pub fn is_ready(&self, index: usize) -> bool {
        index < MAX_FDS && self.ready & (1u128 << index) != 0
    }

    /// True when `fds[index]` reported `POLLERR`, `POLLHUP` or `POLLNVAL`.
    pub fn has_error(&self, index: usize) -> bool {
        index < MAX_FDS && self.error & (1u128 << index) != 0
    }

    /// Number of ready descriptors.
    pub fn len(&self) -> usize {
        self.ready.count_ones() as usize
    }

    /// True when nothing is ready (timeout or signal).
    pub fn is_empty(&self) -> bool {
        self.ready == 0
    }

    /// Indices of the ready descriptors, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let bits = self.ready;
        (0..MAX_FDS).filter(move |i| bits & (1u128 << i) != 0)
    }
}

/// Wait until one of `fds` is readable or `timeout` passes (`None` = forever,
/// `Some(Duration::ZERO)` = just look). Negative descriptors are ignored, as poll(2) does.
/// An interrupted wait (`EINTR`) returns an empty [`Ready`], not an error.
pub fn wait(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Ready> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("poll: {} descriptors, at most {MAX_FDS}", fds.len()),
        ));
    }
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; MAX_FDS];
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = *fd;
        p.events = libc::POLLIN;
    }
    let ts = timeout.map(|d| {
        let ns = d.as_nanos();
        libc::timespec {
            tv_sec: libc::time_t::try_from(ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
            // Always < 1e9, fits every `c_long`.
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        }
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` holds `fds.len()` initialised entries; `ts_ptr` is null or points to a
    // timespec living across the call; a null sigmask keeps the current mask.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(Ready::default());
        }
        return Err(err);
    }
    let mut out = Ready::default();
    if rc == 0 {
        return Ok(out);
    }
    for (i, p) in pfds[..fds.len()].iter().enumerate() {
        let bad = p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0;
        if p.revents & libc::POLLIN != 0 || bad {
            out.ready |= 1u128 << i;
        }
        if bad {
            out.error |= 1u128 << i;
        }
    }
    Ok(out)
}

/// Set the calling thread's timer slack (prctl(2) `PR_SET_TIMERSLACK`); the kernel may delay
/// any timed wakeup by up to this much. 1 ns is the minimum (0 restores the default).
pub fn set_timer_slack(slack: Duration) -> io::Result<()> {
    let ns = libc::c_ulong::try_from(slack.as_nanos()).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument; no memory is passed.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn timeout_and_readiness() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let fds = [a.as_raw_fd(), -1, b.as_raw_fd()];
        let t0 = crate::phy::clock::now();
        let r = wait(&fds, Some(Duration::from_micros(300))).unwrap();
        assert!(r.is_empty());
        assert!(crate::phy::clock::now() - t0 >= Duration::from_micros(300));
        use std::io::Write;
        (&b).write_all(b"x").unwrap();
        let r = wait(&fds, None).unwrap();
        assert!(r.is_ready(0));
        assert!(!r.is_ready(1) && !r.is_ready(2));
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![0]);
        drop(b);
        let r = wait(&fds[..1], Some(Duration::ZERO)).unwrap();
        assert!(r.is_ready(0));
    }

    #[test]
    fn too_many_fds() {
        let fds = vec![-1; MAX_FDS + 1];
        assert!(wait(&fds, Some(Duration::ZERO)).is_err());
    }
}

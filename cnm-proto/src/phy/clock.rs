//! The dataplane clock: `CLOCK_MONOTONIC` (clock_gettime(2)), as a [`crate::Instant`] in
//! nanoseconds since an arbitrary epoch (boot). Daemons read it once per loop iteration and
//! hand it to the sans-IO cores.
//!
//! A daemon's loop does two things with time: it reads it, and it sleeps until a port is
//! readable or a deadline comes. [`Clock`] is that pair, so the same loop runs on the real clock
//! ([`Monotonic`]: `clock_gettime` + `ppoll`) in production and on a [`WarpClock`] in tests.
//! The warped clock stands still until the test moves it ([`WarpClock::advance`]) or, in
//! automatic mode, jumps to each deadline the loop sleeps towards when nothing is readable
//! (Open vSwitch's `time/stop` + `time/warp` are the model). A test can then assert *which*
//! deadline the loop slept towards ([`WarpClock::last_deadline`]) instead of timing it.

use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use super::poll::{self, Ready};
use crate::{Duration, Instant};

/// The current `CLOCK_MONOTONIC` time.
pub fn now() -> Instant {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec. CLOCK_MONOTONIC always exists on Linux, so
    // the call cannot fail (EINVAL/EFAULT are impossible with these arguments).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    Instant::from_nanos(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

/// What a dataplane loop needs of time: read it, and sleep until a descriptor is readable or
/// a deadline comes.
pub trait Clock {
    /// The current time.
    fn now(&self) -> Instant;
    /// Waits until one of `fds` is readable or the clock reaches `deadline` (returns at once
    /// when it already has). Negative descriptors are ignored; an interrupted wait returns an
    /// empty [`Ready`].
    fn wait(&self, fds: &[RawFd], deadline: Instant) -> io::Result<Ready>;
}

/// The real clock: [`now`] and [`poll::wait`] with the nanosecond timeout left to `deadline`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotonic;

impl Clock for Monotonic {
    fn now(&self) -> Instant {
        now()
    }

    fn wait(&self, fds: &[RawFd], deadline: Instant) -> io::Result<Ready> {
        let timeout = deadline.saturating_since(now());
        poll::wait(fds, Some(timeout))
    }
}

/// A test clock that moves only when told to (see the module documentation). Clones share
/// one time, so a test keeps a clone and moves the time a loop in another thread reads.
#[derive(Debug, Clone)]
pub struct WarpClock {
    inner: Arc<Mutex<Warp>>,
}

#[derive(Debug)]
struct Warp {
    now: Instant,
    /// Jump to the deadline of a wait that finds nothing readable.
    auto: bool,
    /// Waits made so far (a test's measure of the loop's progress).
    waits: u64,
    /// The deadline of the latest wait.
    last_deadline: Option<Instant>,
}

/// How long a [`WarpClock`] wait blocks in real time before letting its loop look again
/// (control requests, the stop flag) when the warped time has not reached the deadline.
const WARP_REAL_WAIT: Duration = Duration::from_millis(1);

impl WarpClock {
    /// A clock standing at `start`, moved only by [`advance`](Self::advance) and
    /// [`set`](Self::set).
    pub fn stopped(start: Instant) -> WarpClock {
        Self::with_mode(start, false)
    }

    /// A clock standing at `start` that also jumps to the deadline of every wait that finds
    /// no descriptor readable: the loop runs as fast as it can through simulated time.
    pub fn auto(start: Instant) -> WarpClock {
        Self::with_mode(start, true)
    }

    fn with_mode(start: Instant, auto: bool) -> WarpClock {
        WarpClock {
            inner: Arc::new(Mutex::new(Warp {
                now: start,
                auto,
                waits: 0,
                last_deadline: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Warp> {
        // Every update is a single field store: a poisoned lock holds a consistent state.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the time forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut w = self.lock();
        w.now += d;
    }

    /// Sets the time to `t` if that is later than now (the clock never goes back).
    pub fn set(&self, t: Instant) {
        let mut w = self.lock();
        w.now = w.now.max(t);
    }

    /// Waits made so far.
    pub fn waits(&self) -> u64 {
        self.lock().waits
    }

    /// The deadline of the latest wait.
    pub fn last_deadline(&self) -> Option<Instant> {
        self.lock().last_deadline
    }
}

impl Clock for WarpClock {
    fn now(&self) -> Instant {
        self.lock().now
    }

    fn wait(&self, fds: &[RawFd], deadline: Instant) -> io::Result<Ready> {
        {
            let mut w = self.lock();
            w.waits += 1;
            w.last_deadline = Some(deadline);
            if w.now >= deadline {
                return poll::wait(fds, Some(Duration::ZERO));
            }
        }
        let ready = poll::wait(fds, Some(WARP_REAL_WAIT))?;
        let mut w = self.lock();
        if ready.is_empty() && w.auto {
            w.now = w.now.max(deadline);
        }
        Ok(ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic() {
        let a = now();
        let b = now();
        assert!(b >= a);
        assert!(a.as_nanos() > 0);
        let c = Monotonic;
        assert!(c.now() >= b);
        // A deadline in the past returns at once.
        assert!(c.wait(&[], Instant::ZERO).unwrap().is_empty());
    }

    #[test]
    fn warp_clock_moves_only_when_told() {
        let t0 = Instant::from_nanos(1_000);
        let c = WarpClock::stopped(t0);
        let seen = c.clone();
        assert_eq!(c.now(), t0);
        assert!(c
            .wait(&[], t0 + Duration::from_millis(5))
            .unwrap()
            .is_empty());
        assert_eq!(c.now(), t0, "a stopped clock does not move by itself");
        assert_eq!(seen.last_deadline(), Some(t0 + Duration::from_millis(5)));
        assert_eq!(seen.waits(), 1);
        seen.advance(Duration::from_micros(3));
        assert_eq!(c.now(), t0 + Duration::from_micros(3));
        seen.set(t0);
        assert_eq!(c.now(), t0 + Duration::from_micros(3), "never back");

        let a = WarpClock::auto(t0);
        a.wait(&[], t0 + Duration::from_millis(7)).unwrap();
        assert_eq!(a.now(), t0 + Duration::from_millis(7));
        // A readable descriptor ends the wait without moving the time.
        let (x, y) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::io::Write;
        use std::os::fd::AsRawFd;
        (&y).write_all(b"x").unwrap();
        let r = a
            .wait(&[x.as_raw_fd()], t0 + Duration::from_secs(9))
            .unwrap();
        assert!(r.is_ready(0));
        assert_eq!(a.now(), t0 + Duration::from_millis(7));
    }
}

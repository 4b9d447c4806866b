//! The dataplane clock: `CLOCK_MONOTONIC` (clock_gettime(2)), as a [`crate::Instant`] in
//! nanoseconds since an arbitrary epoch (boot). Daemons read it once per loop iteration and
//! hand it to the sans-IO cores.

use crate::Instant;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic() {
        let a = now();
        let b = now();
        assert!(b >= a);
        assert!(a.as_nanos() > 0);
    }
}

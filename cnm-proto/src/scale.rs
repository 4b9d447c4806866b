//! Time scaling: the same experiment at S times slower rates and S times longer times.
//!
//! A network of veth pairs and userspace daemons cannot carry 10 Gb/s with microsecond
//! delays, but it can carry 10 Gb/s ÷ S with delays × S: every rate is divided by S and every
//! time — link delays, reaction-point timers, measurement intervals, time constants — is
//! multiplied by S, so every product rate × time (a bandwidth-delay product, the bytes sent in
//! one timer period, a queue's drain time in octets) is unchanged, and with it the dynamics of
//! QCN (whose byte counters and queue set points are in octets, which are not scaled). The
//! testbed runs a scenario in network namespaces at a time scale S; the simulator runs it at
//! S = 1.
//!
//! [`Scale`] is implemented beside every configuration and patch type that holds a rate or a
//! time, so that a new rate- or time-valued setting is scaled by construction; the tests of
//! those types check that every [`Rate`] and every [`Duration`] in them is.
//!
//! # Arithmetic
//! * a rate r becomes `round(r ÷ S)` bit/s, at least 1 bit/s (a rate never becomes 0, which
//!   the configurations read as "none");
//! * a duration d becomes `round(d × S)` nanoseconds (saturating);
//! * octets and counts are unchanged.

use crate::{Duration, Rate};

/// A value whose rates are divided and whose times are multiplied by a time scale S.
pub trait Scale: Sized {
    /// This value at time scale `s` (S > 0; S = 1 leaves every value as it is).
    #[must_use]
    fn scale(&self, s: f64) -> Self;
}

impl Scale for Rate {
    /// `round(r ÷ S)` bit/s, at least 1.
    fn scale(&self, s: f64) -> Self {
        Rate::from_f64((self.as_f64() / s).max(1.0))
    }
}

impl Scale for Duration {
    /// `round(d × S)` ns, saturating.
    fn scale(&self, s: f64) -> Self {
        Duration::from_secs_f64(self.as_secs_f64() * s)
    }
}

impl<T: Scale> Scale for Option<T> {
    fn scale(&self, s: f64) -> Self {
        self.as_ref().map(|v| v.scale(s))
    }
}

impl<T: Scale> Scale for Vec<T> {
    fn scale(&self, s: f64) -> Self {
        self.iter().map(|v| v.scale(s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_divide_and_times_multiply() {
        assert_eq!(Rate::from_gbps(10).scale(100.0), Rate::from_mbps(100));
        assert_eq!(Rate::from_mbps(5).scale(100.0), Rate::from_kbps(50));
        // Rounded to the nearest bit/s, never below 1.
        assert_eq!(Rate::from_bps(1000).scale(3.0), Rate::from_bps(333));
        assert_eq!(Rate::from_bps(2000).scale(3.0), Rate::from_bps(667));
        assert_eq!(Rate::from_bps(10).scale(100.0), Rate::from_bps(1));
        assert_eq!(Rate::ZERO.scale(2.0), Rate::from_bps(1));
        assert_eq!(
            Duration::from_micros(25).scale(100.0),
            Duration::from_micros(2500)
        );
        assert_eq!(Duration::from_nanos(1).scale(0.4), Duration::ZERO);
        assert_eq!(Duration::from_nanos(3).scale(0.5), Duration::from_nanos(2));
        assert_eq!(Duration::MAX.scale(2.0), Duration::MAX);
        assert_eq!(
            Some(Rate::from_mbps(8)).scale(2.0),
            Some(Rate::from_mbps(4))
        );
        assert_eq!(None::<Duration>.scale(2.0), None);
        assert_eq!(
            vec![Duration::from_millis(1)].scale(3.0),
            vec![Duration::from_millis(3)]
        );
        // S = 1 changes no rate an f64 holds exactly (below 2^53 bit/s).
        for r in [1, 999, 10_000_000_000, 1 << 53] {
            assert_eq!(Rate::from_bps(r).scale(1.0), Rate::from_bps(r));
        }
    }
}

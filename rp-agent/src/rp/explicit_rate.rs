//! Explicit-rate source: the flow is sent at the rate its bottleneck advertises.
//!
//! **Source.** R. Jain, J. Jiang et al., "Explicit Congestion Notification (ECN) / Forward
//! Explicit Congestion Notification with explicit rate" (E-FECN), IEEE 802.1 meeting,
//! 14 Nov 2006, slide "Source Algorithm". Each switch measures its load every interval T and
//! advertises a rate `r_i` together with its congestion point ID; no source parameters exist.
//!
//! **Rule.** The source keeps two variables: `r`, its current rate, and `CP`, the CPID of the
//! bottleneck of the last feedback it followed (initially −1, "no congestion point"). On a
//! message [r_i, CPID]:
//!
//! ```text
//! if r_i < r                     then r ← r_i, CP ← CPID     (a tighter bottleneck takes over)
//! else if CP = CPID or CP = −1   then r ← r_i                (our bottleneck raised its rate)
//! else                                ignored                (a looser switch on the path)
//! ```
//!
//! As in the slide, CP stays unset when the first message does not lower the rate.
//!
//! **Bounds \[choice\].** The advertised rate is first clamped to [`rpg_min_rate`, ceiling] (the
//! ceiling is `rpg_max_rate`, default the line rate), so hostile or broken feedback — rate 0,
//! rates beyond the line — can neither stop the flow nor exceed the line; the rule then compares
//! clamped rates. A limiter starts at the ceiling with CP unset (the source before any
//! feedback); when `r` reaches the line rate the limiter is released, as a QCN limiter is
//! (802.1Q 32.14.2), which is the same as "r = line rate, CP unset".
//!
//! **Expiry \[choice\].** The paper's source never forgets its rate. Here a limiter that has
//! followed no feedback for `rp_er_timeout` (default 1 s) is released: the flow returns to the
//! line rate and forgets CP. Only *applied* feedback refreshes it — feedback ignored by the rule
//! does not — so a source whose bottleneck vanished (route change, switch restarted, CP turned
//! off) is not pinned forever at a stale rate by the looser switches it still hears, and an
//! idle flow starts afresh. A switch advertises to every source active in an interval (every
//! T = 30 µs at 10 Gb/s in the paper), so an active flow behind a live bottleneck never comes
//! near the timeout; after a release the next advertisement restores the rate within one
//! interval.
//!
//! CNMs carry no rate and are ignored in this mode (the agent counts them).

use crate::config::RpParams;
use crate::rp::RpState;
use cnm_proto::wire::CpId;
use cnm_proto::{Duration, Instant, Rate};

/// What one rate-feedback message did to the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErOutcome {
    /// r_i < r: the rate fell and CP ← CPID.
    Lowered,
    /// CP = CPID or CP unset: r ← r_i (rate raised, or unchanged).
    Followed,
    /// From another congestion point and not lower: ignored by the rule.
    Ignored,
}

/// The explicit-rate source state of one flow.
#[derive(Debug, Clone)]
pub struct ErRp {
    min_rate: u64,
    max_rate: u64,
    line_rate: u64,
    timeout: Duration,
    r: u64,
    cp: Option<CpId>,
    deadline: Instant,
    expired: bool,
}

impl ErRp {
    /// A source at the ceiling with no congestion point, its expiry `rp_er_timeout` from `now`.
    pub fn new(p: &RpParams, line_rate: Rate, now: Instant) -> ErRp {
        let max_rate = p.rpg_max_rate.unwrap_or(line_rate).min(line_rate).bps();
        ErRp {
            min_rate: p.rpg_min_rate.bps().min(max_rate),
            max_rate,
            line_rate: line_rate.bps(),
            timeout: p.rp_er_timeout,
            r: max_rate,
            cp: None,
            deadline: now.saturating_add(p.rp_er_timeout),
            expired: false,
        }
    }

    /// New parameters at run time: r is clamped into the new [`rpg_min_rate`, ceiling] and
    /// an expiry further away than the new `rp_er_timeout` is brought forward to it.
    pub fn set_params(&mut self, p: &RpParams, now: Instant) {
        let max_rate = p
            .rpg_max_rate
            .unwrap_or(Rate::from_bps(self.line_rate))
            .bps()
            .min(self.line_rate);
        self.min_rate = p.rpg_min_rate.bps().min(max_rate);
        self.max_rate = max_rate;
        self.timeout = p.rp_er_timeout;
        self.r = self.r.clamp(self.min_rate, self.max_rate);
        self.deadline = self.deadline.min(now.saturating_add(p.rp_er_timeout));
    }

    /// A rate-feedback message [rate, cpid] arrived (the rule in the module docs).
    pub fn on_feedback(&mut self, now: Instant, rate: Rate, cpid: CpId) -> ErOutcome {
        let ri = rate.bps().clamp(self.min_rate, self.max_rate);
        let outcome = if ri < self.r {
            self.cp = Some(cpid);
            ErOutcome::Lowered
        } else if self.cp.is_none() || self.cp == Some(cpid) {
            ErOutcome::Followed
        } else {
            return ErOutcome::Ignored;
        };
        self.r = ri;
        self.expired = false;
        self.deadline = now.saturating_add(self.timeout);
        outcome
    }

    /// Runs the expiry if it is due.
    pub fn on_timer(&mut self, now: Instant) {
        if now >= self.deadline {
            self.expired = true;
        }
    }

    /// When the expiry is due.
    pub fn next_timer(&self) -> Instant {
        self.deadline
    }

    /// The rate r (the line rate once expired).
    pub fn rate(&self) -> Rate {
        Rate::from_bps(if self.expired { self.line_rate } else { self.r })
    }

    /// The congestion point followed, if any.
    pub fn cpid(&self) -> Option<CpId> {
        self.cp
    }

    /// [`RpState::Er`], or [`RpState::Released`].
    pub fn state(&self) -> RpState {
        if self.released() {
            RpState::Released
        } else {
            RpState::Er
        }
    }

    /// Expired, or r at the line rate: the limiter can go.
    pub fn released(&self) -> bool {
        self.expired || self.r >= self.line_rate
    }

    /// True once released by the expiry (rather than by r reaching the line rate).
    pub fn expired(&self) -> bool {
        self.expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnm_proto::wire::EthernetAddress;

    fn cp(n: u8) -> CpId {
        CpId::new(EthernetAddress([2, 0xee, 0, 0, 0, n]), 3)
    }

    /// (r in Gb/s, CP, message [r_i Gb/s, CP], outcome, r', CP').
    type Row = (u64, Option<u8>, (u64, u8), ErOutcome, u64, Option<u8>);

    fn er() -> ErRp {
        ErRp::new(&RpParams::default(), Rate::from_gbps(10), Instant::ZERO)
    }

    #[test]
    fn cpid_rule_table() {
        let t = Instant::from_nanos(1);
        let g = Rate::from_gbps;
        let mut s = er();
        assert_eq!((s.rate(), s.cpid()), (g(10), None));
        let rows: [Row; 7] = [
            // First message, lower than the line: taken, CP set.
            (10, None, (5, 1), ErOutcome::Lowered, 5, Some(1)),
            // Lower rate from another CP takes over.
            (5, Some(1), (2, 2), ErOutcome::Lowered, 2, Some(2)),
            // Higher rate from another CP: ignored.
            (2, Some(2), (3, 1), ErOutcome::Ignored, 2, Some(2)),
            // Higher rate from the same CP raises the rate.
            (2, Some(2), (4, 2), ErOutcome::Followed, 4, Some(2)),
            // Equal rate from another CP: not lower, ignored.
            (4, Some(2), (4, 3), ErOutcome::Ignored, 4, Some(2)),
            // Lower rate from the same CP.
            (4, Some(2), (1, 2), ErOutcome::Lowered, 1, Some(2)),
            // The same CP raises again, even above the previous other CP's rate.
            (1, Some(2), (6, 2), ErOutcome::Followed, 6, Some(2)),
        ];
        for (r, c, (ri, from), out, r2, c2) in rows {
            assert_eq!((s.rate(), s.cpid()), (g(r), c.map(cp)));
            assert_eq!(
                s.on_feedback(t, g(ri), cp(from)),
                out,
                "{r} {c:?} {ri}@{from}"
            );
            assert_eq!((s.rate(), s.cpid()), (g(r2), c2.map(cp)));
            assert_eq!(s.state(), RpState::Er);
        }
    }

    #[test]
    fn unset_cp_follows_a_higher_rate_without_taking_it() {
        let t = Instant::from_nanos(1);
        let mut s = ErRp::new(
            &RpParams {
                rpg_max_rate: Some(Rate::from_gbps(4)),
                ..RpParams::default()
            },
            Rate::from_gbps(10),
            Instant::ZERO,
        );
        // r = 4 G (the ceiling), CP unset; 6 G is clamped to 4 G: followed, CP still unset.
        assert_eq!(
            s.on_feedback(t, Rate::from_gbps(6), cp(1)),
            ErOutcome::Followed
        );
        assert_eq!((s.rate(), s.cpid()), (Rate::from_gbps(4), None));
        assert!(!s.released());
    }

    #[test]
    fn hostile_rates_are_bounded() {
        let t = Instant::from_nanos(1);
        let mut s = er();
        assert_eq!(s.on_feedback(t, Rate::ZERO, cp(1)), ErOutcome::Lowered);
        assert_eq!(s.rate(), Rate::from_mbps(5));
        assert_eq!(
            s.on_feedback(t, Rate::from_bps(u64::MAX), cp(1)),
            ErOutcome::Followed
        );
        assert_eq!(s.rate(), Rate::from_gbps(10));
        assert!(s.released());
    }

    #[test]
    fn expiry_refreshed_only_by_applied_feedback() {
        let ms = Duration::from_millis;
        let mut s = er();
        let t0 = Instant::ZERO + ms(10);
        s.on_feedback(t0, Rate::from_gbps(1), cp(1));
        assert_eq!(s.next_timer(), t0 + ms(1000));
        // A looser CP keeps talking: ignored, no refresh.
        s.on_feedback(t0 + ms(500), Rate::from_gbps(2), cp(2));
        assert_eq!(s.next_timer(), t0 + ms(1000));
        s.on_timer(t0 + ms(999));
        assert!(!s.released());
        s.on_timer(t0 + ms(1000));
        assert!(s.released() && s.expired());
        assert_eq!(s.rate(), Rate::from_gbps(10));
        assert_eq!(s.state(), RpState::Released);
    }
}

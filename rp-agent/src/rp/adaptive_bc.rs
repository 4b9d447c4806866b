//! Adaptive BC_LIMIT: the QCN byte counter made rate-independent.
//!
//! **Source.** Y. Hayashi, H. Itsumi and M. Yamamoto, "Improving Fairness of Quantized
//! Congestion Notification for Data Center Ethernet Networks", DCPerf 2011 (ICDCS workshops),
//! pp. 20-25; restated as eq. (5) and Algorithm 1 of K. Matsushima, Y. Tanisawa and
//! M. Yamamoto, "Fairness Improvement of Multiple-Bottleneck Flow in Data Center Networks".
//!
//! **Why.** In standard QCN the byte counter expires every BC_LIMIT = 150 KB sent (802.1Q
//! 32.13.5 `RPG_BYTE_RESET`), so a fast flow climbs through fast recovery and active increase
//! more often than a slow one, while the slow flow — sampled less often by the CP — is not cut
//! less. Once flows are unequal, QCN tends to keep them so.
//!
//! **Equation.** BC_LIMIT = K · CR (eq. 5), K = 2.4·10⁻⁴ s: with CR in bit/s it gives bits,
//! K·CR/8 octets — 150 000 octets at 5 Gb/s, 300 000 at 10 Gb/s, 150 octets at the 5 Mb/s
//! `rpg_min_rate`. The byte counter then expires every K (≈ 240 µs) of transmission whatever
//! the rate: increases become rate-independent while decreases (CNMs, sent per sampled frame)
//! stay proportional to the rate, which drives flows towards equal shares.
//!
//! **When it is recomputed.** Whenever CR changes: on a byte-counter expiry the counter is
//! reloaded with K·CR at the new rate (Algorithm 1, "Rate Increase Phase"); on a CNM it is
//! reloaded with K·CR at the decreased rate (Algorithm 1's listing computes it just before
//! "CR decreases"; we use the rate the flow will actually send at, so the next expiry comes
//! after K of transmission); on a timer expiry, which raises CR in mid-count, the octets left
//! are rescaled by CR_new/CR_old so that the fraction of the interval already sent is kept and
//! the expiry still comes K after the previous one. Unlike the fixed counter, the limit is not
//! halved once the byte-counter stage exceeds `rpg_threshold` (Algorithm 1 reloads K·CR in
//! every phase); the ±15 % jitter of 802.1Q 32.13 still applies to every reload.
//!
//! **Parameters.** `rpg_adaptive_k` (default 240 µs). It is a time: under the project's time
//! scaling (rates ÷ S, times × S) it is multiplied by S, and BC_LIMIT in octets is unchanged.

use cnm_proto::{Bytes, Duration, Rate};

/// K of eq. (5) as published: 2.4·10⁻⁴ s.
pub const PAPER_K: Duration = Duration::from_micros(240);

/// How a QCN reaction point sizes its byte counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BcLimit {
    /// Standard QCN: `rpg_byte_reset` octets, halved once BC > `rpg_threshold` (802.1Q
    /// 32.14.2).
    Fixed(Bytes),
    /// Adaptive BC_LIMIT = K·CR (eq. 5), never halved.
    Adaptive {
        /// K: the transmission time one BC_LIMIT represents.
        k: Duration,
    },
}

impl BcLimit {
    /// The octets of one byte-counter period (before jitter) at current rate `cr`, with the
    /// byte-counter stage past the threshold (`past_threshold`) or not. At least 2 octets.
    pub fn limit(self, cr: Rate, past_threshold: bool) -> u64 {
        match self {
            BcLimit::Fixed(b) if past_threshold => (b.get() / 2).max(1),
            BcLimit::Fixed(b) => b.get().max(2),
            BcLimit::Adaptive { k } => cr.bytes_in(k).get().max(2),
        }
    }

    /// True for the adaptive counter (its octets left are rescaled when CR changes mid-count).
    pub fn is_adaptive(self) -> bool {
        matches!(self, BcLimit::Adaptive { .. })
    }
}

/// The octets left of an adaptive byte counter after CR moved from `old` to `new` in mid-count:
/// `left · new / old`, rounded up (so it never reaches 0 by rescaling alone), at least 1.
pub fn rescale_left(left: u64, old: Rate, new: Rate) -> u64 {
    if old == Rate::ZERO || old == new {
        return left.max(1);
    }
    let v = (u128::from(left) * u128::from(new.bps())).div_ceil(u128::from(old.bps()));
    u64::try_from(v).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bc_limit_is_k_times_cr() {
        let a = BcLimit::Adaptive { k: PAPER_K };
        // 2.4e-4 s × 5e9 bit/s = 1.2e6 bit = 150 000 octets: the standard's fixed value.
        assert_eq!(a.limit(Rate::from_gbps(5), false), 150_000);
        assert_eq!(a.limit(Rate::from_gbps(10), false), 300_000);
        assert_eq!(a.limit(Rate::from_gbps(1), false), 30_000);
        assert_eq!(a.limit(Rate::from_mbps(100), true), 3_000);
        // rpg_min_rate: 5 Mb/s × 240 µs = 1200 bit.
        assert_eq!(a.limit(Rate::from_mbps(5), false), 150);
        // Never below 2 octets, never halved past the threshold.
        assert_eq!(a.limit(Rate::from_bps(1), false), 2);
        assert_eq!(
            a.limit(Rate::from_gbps(1), true),
            a.limit(Rate::from_gbps(1), false)
        );
        let f = BcLimit::Fixed(Bytes::new(150_000));
        assert_eq!(f.limit(Rate::from_mbps(5), false), 150_000);
        assert_eq!(f.limit(Rate::from_gbps(10), true), 75_000);
    }

    #[test]
    fn rescale_keeps_the_fraction() {
        // Half of a 30 000-octet period left at 1 Gb/s; CR rises to 1.5 Gb/s: half of 45 000.
        assert_eq!(
            rescale_left(15_000, Rate::from_gbps(1), Rate::from_mbps(1500)),
            22_500
        );
        assert_eq!(rescale_left(1, Rate::from_gbps(2), Rate::from_gbps(1)), 1);
        assert_eq!(rescale_left(0, Rate::ZERO, Rate::from_gbps(1)), 1);
        assert_eq!(
            rescale_left(u64::MAX, Rate::from_bps(1), Rate::from_gbps(100)),
            u64::MAX
        );
    }
}

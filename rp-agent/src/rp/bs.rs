//! QCN with Bottleneck Selection (QCN/BS): one QCN limiter per congestion point.
//!
//! **Source.** K. Matsushima, Y. Tanisawa and M. Yamamoto, "Fairness Improvement of
//! Multiple-Bottleneck Flow in Data Center Networks", section II.B and Algorithm 1 ("QCN/BS
//! integrated with Adaptive BC_LIMIT"); QCN/BS itself is from Y. Tanisawa, Y. Hayashi and
//! M. Yamamoto, "Quantized Congestion Notification for Multicast in Data Center Networks",
//! IEEE CloudNet 2012.
//!
//! **Problem.** A flow crossing several congested switches receives CNMs from each, and standard
//! QCN cuts its single rate on every one of them: the multi-hop flow is regulated far below its
//! fair share at any one bottleneck.
//!
//! **Algorithm.** The reaction point keeps a table RL\[SW_i\] of standard QCN limiters — CR, TR,
//! byte-counter and timer stages, byte counter, timer — one per congestion point, identified by
//! the CPID of the CNMs (the paper uses the switch's MAC; the CPID names the congested queue,
//! 802.1Q clause 33.4.3, and contains the MAC):
//! * **CNM from SW_i**: if RL\[SW_i\] exists its stages are reset, its byte counter reloaded and
//!   its CR decreased as in standard QCN (802.1Q 32.14.1); otherwise a new entry is created
//!   with the initial values of a conventional limiter (CR = TR = line rate) and the CNM is
//!   applied to it (section II.B: "a new transmission rate is calculated for the congested
//!   switch"; Algorithm 1's listing shows only the creation).
//! * **Data transmitted**: the octets count against the byte counter of *every* entry; each
//!   entry's expiries run its own fast recovery / active / hyper-active increase.
//! * **Timer**: every entry has its own (802.1Q 32.14.3 per entry).
//! * **Rate**: the flow is sent at Transmission_rate = min over entries of RL\[SW_i\].CR — the
//!   most congested switch is the one selected.
//! * **Release**: an entry that is released as a standard limiter is ([`super::qcn`]: CR at
//!   `rpg_max_rate` by default) is dropped; the flow's limiter is released when no entry
//!   remains.
//!
//! **Adaptive BC_LIMIT per entry** (mode `adaptive-bc+qcn-bs`, Algorithm 1 as published):
//! BC_LIMIT\[SW_i\] = K · RL\[SW_i\].CR, each entry with its own CR ([`crate::rp::adaptive_bc`]).
//!
//! **Bound \[choice\].** The paper's table is unbounded. Here a flow keeps at most
//! `rpg_bs_max_cps` entries (default 8); a CNM from a further congestion point displaces the
//! entry with the highest CR (the least constraining one; the first such on a tie), the new
//! entry takes its place and the displacement is counted (`bs_cp_overflow`). The selected
//! (minimum) rate can only go down by this, never up.
//!
//! **Shown state.** CR, TR and phase of the minimum-CR entry (the first on a tie), plus every
//! entry's CPID, CR and TR.

use crate::config::RpParams;
use crate::rp::adaptive_bc::BcLimit;
use crate::rp::qcn::QcnRp;
use crate::rp::RpState;
use cnm_proto::rng::Rng;
use cnm_proto::wire::CpId;
use cnm_proto::{Instant, Rate};

/// One row of the QCN/BS table: a congestion point and its own QCN limiter.
#[derive(Debug, Clone)]
pub struct BsEntry {
    /// The congestion point the entry follows.
    pub cpid: CpId,
    /// Its standard QCN reaction point.
    pub rp: QcnRp,
}

/// The QCN/BS reaction point of one flow.
#[derive(Debug, Clone)]
pub struct BsRp {
    params: RpParams,
    line_rate: Rate,
    max_rate: Rate,
    bc_limit: BcLimit,
    max_cps: usize,
    entries: Vec<BsEntry>,
    displaced: u64,
}

impl BsRp {
    /// An empty table (released until the first CNM); entries get `bc_limit`'s byte counter.
    pub fn new(p: &RpParams, line_rate: Rate, bc_limit: BcLimit) -> BsRp {
        BsRp {
            params: *p,
            line_rate,
            max_rate: p.rpg_max_rate.unwrap_or(line_rate).min(line_rate),
            bc_limit,
            max_cps: p.rpg_bs_max_cps.max(1),
            entries: Vec::with_capacity(p.rpg_bs_max_cps.clamp(1, 8)),
            displaced: 0,
        }
    }

    /// A CNM from `cpid` (Algorithm 1, rate decrease phase). Returns the CPID of the entry it
    /// displaced when the table was full.
    pub fn on_cnm(&mut self, now: Instant, qntz_fb: u8, cpid: CpId, rng: &mut Rng) -> Option<CpId> {
        let mut displaced = None;
        let i = match self.entries.iter().position(|e| e.cpid == cpid) {
            Some(i) => i,
            None => {
                let rp =
                    QcnRp::with_bc_limit(&self.params, self.line_rate, self.bc_limit, now, rng);
                let entry = BsEntry { cpid, rp };
                if self.entries.len() < self.max_cps {
                    self.entries.push(entry);
                    self.entries.len() - 1
                } else {
                    // The table is never empty here (max_cps ≥ 1), so there is a maximum.
                    let j = self.max_cr_index().unwrap_or(0);
                    displaced = Some(self.entries[j].cpid);
                    self.displaced += 1;
                    self.entries[j] = entry;
                    j
                }
            }
        };
        self.entries[i].rp.on_cnm(now, qntz_fb, rng);
        self.drop_released();
        displaced
    }

    /// New parameters at run time: every entry keeps its state and takes them
    /// ([`QcnRp::set_params`]); entries made later use them. A smaller `rpg_bs_max_cps`
    /// drops the entries with the highest CR until the table fits (counted as displaced).
    pub fn set_params(&mut self, p: &RpParams, bc_limit: BcLimit, now: Instant) {
        self.params = *p;
        self.max_rate = p.rpg_max_rate.unwrap_or(self.line_rate).min(self.line_rate);
        self.bc_limit = bc_limit;
        self.max_cps = p.rpg_bs_max_cps.max(1);
        for e in &mut self.entries {
            e.rp.set_params(p, bc_limit, now);
        }
        while self.entries.len() > self.max_cps {
            let Some(j) = self.max_cr_index() else { break };
            self.entries.remove(j);
            self.displaced += 1;
        }
        self.drop_released();
    }

    /// The flow sent `n` octets: they count against every entry's byte counter.
    pub fn on_bytes_sent(&mut self, now: Instant, n: u64, rng: &mut Rng) {
        for e in &mut self.entries {
            e.rp.on_bytes_sent(now, n, rng);
        }
        self.drop_released();
    }

    /// Runs every entry's timer that is due.
    pub fn on_timer(&mut self, now: Instant, rng: &mut Rng) {
        for e in &mut self.entries {
            if e.rp.next_timer() <= now {
                e.rp.on_timer(now, rng);
            }
        }
        self.drop_released();
    }

    /// The earliest entry timer ([`Instant::MAX`] with no entry).
    pub fn next_timer(&self) -> Instant {
        self.entries
            .iter()
            .map(|e| e.rp.next_timer())
            .min()
            .unwrap_or(Instant::MAX)
    }

    /// The selected entry: the one with the lowest CR (the first of them on a tie).
    pub fn selected(&self) -> Option<&BsEntry> {
        // `min_by_key` returns the first of equal minima.
        self.entries.iter().min_by_key(|e| e.rp.rate())
    }

    /// Transmission_rate = min CR over the entries (the ceiling when there is none).
    pub fn rate(&self) -> Rate {
        self.selected().map_or(self.max_rate, |e| e.rp.rate())
    }

    /// TR of the selected entry.
    pub fn target(&self) -> Rate {
        self.selected().map_or(self.max_rate, |e| e.rp.target())
    }

    /// Phase of the selected entry.
    pub fn state(&self) -> RpState {
        self.selected().map_or(RpState::Released, |e| e.rp.state())
    }

    /// No entry left: the flow's limiter can go.
    pub fn released(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in the order they were created.
    pub fn entries(&self) -> &[BsEntry] {
        &self.entries
    }

    /// Entries displaced because the table was full, over the limiter's life.
    pub fn displaced(&self) -> u64 {
        self.displaced
    }

    fn max_cr_index(&self) -> Option<usize> {
        // The first of equal maxima: larger CR, then smaller index.
        self.entries
            .iter()
            .enumerate()
            .max_by_key(|(i, e)| (e.rp.rate(), std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
    }

    fn drop_released(&mut self) {
        self.entries.retain(|e| !e.rp.released());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rp::adaptive_bc::PAPER_K;
    use cnm_proto::wire::EthernetAddress;
    use cnm_proto::{Bytes, Duration};

    fn params() -> RpParams {
        RpParams {
            rp_jitter: 0.0,
            ..RpParams::default()
        }
    }

    fn cp(n: u8) -> CpId {
        CpId::new(EthernetAddress([2, 0xee, 0, 0, 0, n]), 3)
    }

    fn crs(bs: &BsRp) -> Vec<(CpId, u64)> {
        bs.entries()
            .iter()
            .map(|e| (e.cpid, e.rp.rate().bps()))
            .collect()
    }

    #[test]
    fn one_entry_per_cp_and_min_rate() {
        let mut rng = Rng::new(1);
        let now = Instant::from_nanos(1);
        let p = params();
        let mut bs = BsRp::new(&p, Rate::from_gbps(1), BcLimit::Fixed(p.rpg_byte_reset));
        assert!(bs.released());
        assert_eq!(bs.rate(), Rate::from_gbps(1));
        assert_eq!(bs.next_timer(), Instant::MAX);
        // Gd = 1/128: QntzFb 32 → ×0.75, QntzFb 16 → ×0.875.
        assert_eq!(bs.on_cnm(now, 32, cp(1), &mut rng), None);
        assert_eq!(bs.on_cnm(now, 16, cp(2), &mut rng), None);
        assert_eq!(crs(&bs), [(cp(1), 750_000_000), (cp(2), 875_000_000)]);
        assert_eq!(bs.rate().bps(), 750_000_000);
        assert_eq!(bs.selected().unwrap().cpid, cp(1));
        // A second CNM from CP 2 pushes it below CP 1: CP 2 is selected now.
        bs.on_cnm(now, 32, cp(2), &mut rng);
        assert_eq!(bs.rate().bps(), 656_250_000);
        assert_eq!(bs.selected().unwrap().cpid, cp(2));
        assert_eq!(bs.target().bps(), 1_000_000_000);
        assert_eq!(bs.state(), RpState::Fr);
        assert!(!bs.released());
    }

    #[test]
    fn bytes_count_against_every_entry_and_release() {
        let mut rng = Rng::new(1);
        let mut now = Instant::from_nanos(1);
        let p = RpParams {
            rpg_byte_reset: Bytes::new(10_000),
            rpg_time_reset: Duration::from_secs(100),
            ..params()
        };
        let mut bs = BsRp::new(&p, Rate::from_gbps(1), BcLimit::Fixed(p.rpg_byte_reset));
        bs.on_cnm(now, 32, cp(1), &mut rng); // 750 M
        bs.on_cnm(now, 16, cp(2), &mut rng); // 875 M
        bs.on_bytes_sent(now, 9_999, &mut rng);
        assert_eq!(
            bs.entries()
                .iter()
                .map(|e| e.rp.bytes_left())
                .collect::<Vec<_>>(),
            [1, 1]
        );
        // One more octet expires both byte counters: both move halfway to TR = 1 G.
        bs.on_bytes_sent(now, 1, &mut rng);
        assert_eq!(crs(&bs), [(cp(1), 875_000_000), (cp(2), 937_500_000)]);
        assert_eq!(bs.rate().bps(), 875_000_000);
        // Recovery: CP 2 (closer to the line) is dropped first, then CP 1, then the flow is
        // released.
        let mut seen_one = false;
        for _ in 0..100 {
            // One expiry at a time (both counters were loaded together).
            let n = bs
                .entries()
                .iter()
                .map(|e| e.rp.bytes_left())
                .min()
                .unwrap();
            bs.on_bytes_sent(now, n, &mut rng);
            now += Duration::from_micros(80);
            if bs.entries().len() == 1 {
                assert_eq!(bs.entries()[0].cpid, cp(1));
                seen_one = true;
            }
            if bs.released() {
                break;
            }
        }
        assert!(seen_one);
        assert!(bs.released());
        assert_eq!(bs.rate(), Rate::from_gbps(1));
        assert_eq!(bs.state(), RpState::Released);
    }

    #[test]
    fn every_entry_has_its_own_timer() {
        let mut rng = Rng::new(1);
        let t0 = Instant::from_nanos(0);
        let p = params();
        let mut bs = BsRp::new(&p, Rate::from_gbps(1), BcLimit::Fixed(p.rpg_byte_reset));
        bs.on_cnm(t0, 32, cp(1), &mut rng);
        let t1 = t0 + Duration::from_millis(5);
        bs.on_cnm(t1, 32, cp(2), &mut rng);
        assert_eq!(bs.next_timer(), t0 + Duration::from_millis(15));
        bs.on_timer(bs.next_timer(), &mut rng);
        // Only CP 1's timer fired.
        assert_eq!(crs(&bs), [(cp(1), 875_000_000), (cp(2), 750_000_000)]);
        assert_eq!(bs.next_timer(), t1 + Duration::from_millis(15));
        bs.on_timer(bs.next_timer(), &mut rng);
        assert_eq!(crs(&bs), [(cp(1), 875_000_000), (cp(2), 875_000_000)]);
    }

    #[test]
    fn full_table_displaces_the_highest_cr() {
        let mut rng = Rng::new(1);
        let now = Instant::from_nanos(1);
        let p = RpParams {
            rpg_bs_max_cps: 2,
            ..params()
        };
        let mut bs = BsRp::new(&p, Rate::from_gbps(1), BcLimit::Fixed(p.rpg_byte_reset));
        bs.on_cnm(now, 32, cp(1), &mut rng); // 750 M
        bs.on_cnm(now, 8, cp(2), &mut rng); // 937.5 M
        assert_eq!(bs.on_cnm(now, 16, cp(3), &mut rng), Some(cp(2)));
        assert_eq!(crs(&bs), [(cp(1), 750_000_000), (cp(3), 875_000_000)]);
        assert_eq!(bs.displaced(), 1);
        assert_eq!(bs.rate().bps(), 750_000_000);
    }

    #[test]
    fn adaptive_bc_per_entry() {
        let mut rng = Rng::new(1);
        let now = Instant::from_nanos(1);
        let p = params();
        let mut bs = BsRp::new(&p, Rate::from_gbps(10), BcLimit::Adaptive { k: PAPER_K });
        // QntzFb 64 is taken as 63: ×(1 − 63/128) = 5.078125 G; QntzFb 32: 7.5 G.
        bs.on_cnm(now, 64, cp(1), &mut rng);
        bs.on_cnm(now, 32, cp(2), &mut rng);
        // BC_LIMIT[SW_i] = K · RL[SW_i].CR: 240 µs of each entry's own rate.
        let limits: Vec<u64> = bs.entries().iter().map(|e| e.rp.bytes_left()).collect();
        assert_eq!(limits, [152_343, 225_000]);
    }
}

//! Fair QCN (FQCN) congestion point.
//!
//! # Source
//! Y. Zhang and N. Ansari, "Fair Quantized Congestion Notification in Data Center Networks"
//! (IEEE Trans. Commun. 2013; the FQCN seed), section III, equations 1, 2 and 7-9
//! (QCN-REFERENCE §4).
//!
//! # Equations
//! Sampling and the feedback value are QCN's ([`super::qcn`]): eq. 1 is
//! `Fb = −(Qover + w·Qδ)`; eq. 2 is the sampling probability `p = (1 + 9·Ψ(Fb)/64) %` when
//! `Fb < 0` and `1 %` otherwise. Eq. 2 is **not** the standard's schedule
//! `base / (1 + ⌊QntzFb/8⌋)`: it is linear in Ψ rather than stepped by bands of eight, and
//! samples more — 1.98 % at Ψ = 7 where the standard samples 1 %, 3.11 % at Ψ = 15 (2 %),
//! 9.86 % at Ψ = 63 (8 %). The CP samples with the table `cp_sample_table` selects, in every
//! mode: `standard` by default, `fqcn-paper` for eq. 2 (the FQCN paper's reproduction
//! scenarios use it for both their QCN and FQCN runs, as the paper's simulations do).
//! `Ψ(Fb)` is the 6-bit quantized `|Fb|` (the QCN `QntzFb`, "Fb(t) is quantized to 6 bits").
//!
//! Between two sampling events the CP counts the octets `B_i` received from each flow `i`
//! (the set `S_l` of flows that sent something in the interval). On a sample with `Fb < 0`:
//!
//! ```text
//! (7)  M_i   = W_i / Σ_{S_l} W · Σ_{S_l} B            fair share
//!      S_H   = { i ∈ S_l : B_i ≥ M_i }                high-rate flows
//! (8)  M^F_i = W_i / Σ_{S_H} W · Σ_{S_H} B            fine-grained share among S_H
//!      S_R   = { i ∈ S_H : B_i ≥ M^F_i }              overrated flows = culprits
//! (9)  Ψ_i   = (B_i / W_i) / Σ_{k∈S_R} (B_k / W_k) · Ψ(Fb)
//! ```
//!
//! and every culprit gets its own CNM carrying `Ψ_i` ("fed back ... through multi-casting": one
//! CNM per culprit). `Ψ_i` is "also quantized to 6 bits": here `round(·)` (half away from
//! zero) clamped to 1..=63 — a culprit always gets a CNM that decreases its rate. The sums
//! `Σ Ψ_i ≈ Ψ(Fb)` up to that rounding. After every sample (congested or not) the counts are
//! reset: `B_i` is per sampling interval.
//!
//! The comparisons of eq. 7-8 are done exactly in integers: `B_i ≥ M_i ⇔ B_i·ΣW ≥ W_i·ΣB`.
//!
//! # Weights
//! `W_i` are positive integers from the configuration (`fqcn_weights`, matched by source MAC,
//! VID and priority; default 1), fixed when the flow enters the CP's flow table.
//!
//! # Parameters
//! Those of standard QCN (`cp_queue_set_point`, `cp_feedback_weight`, `cp_min_sample_base`,
//! `cp_sample_table`), the weights, and the flow-table bound (`max_flows`, default 1024).
//!
//! # Deviations
//! A flow beyond the table bound is not counted (the overflow is reported); if no tracked flow
//! sent anything in the interval the CNM goes to the source of the sampled frame, as in QCN.

use super::flows::FlowEntry;
use super::qcn::QNTZ_FB_MAX;

/// One culprit of a sample: the flow-table index and its `Ψ_i` (eq. 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FqcnCulprit {
    /// Flow-table index.
    pub flow: u16,
    /// `Ψ_i`, 1..=63.
    pub psi: u8,
}

/// What one congested sample found (sizes of the sets of eq. 7-8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Identification {
    /// |S_l|: flows that sent something in the interval.
    pub flows: u32,
    /// |S_H|.
    pub high: u32,
    /// |S_R|.
    pub culprits: u32,
}

/// Eq. 7-9 over the flows that sent octets since the last sample: pushes one [`FqcnCulprit`]
/// per member of `S_R` onto `out` (cleared first; reserve its capacity up front to avoid
/// allocation), with `psi` = Ψ(Fb).
pub fn identify(flows: &[FlowEntry], psi: u8, out: &mut Vec<FqcnCulprit>) -> Identification {
    out.clear();
    let active = || {
        flows
            .iter()
            .enumerate()
            .filter(|(_, e)| e.live && e.bytes > 0)
    };
    let (mut sum_b, mut sum_w, mut n) = (0u128, 0u128, 0u32);
    for (_, e) in active() {
        sum_b += u128::from(e.bytes);
        sum_w += u128::from(e.weight);
        n += 1;
    }
    if n == 0 {
        return Identification::default();
    }
    // Eq. 7: B_i ≥ M_i ⇔ B_i·ΣW ≥ W_i·ΣB.
    let high = |e: &FlowEntry| u128::from(e.bytes) * sum_w >= u128::from(e.weight) * sum_b;
    let (mut hb, mut hw, mut nh) = (0u128, 0u128, 0u32);
    for (_, e) in active().filter(|(_, e)| high(e)) {
        hb += u128::from(e.bytes);
        hw += u128::from(e.weight);
        nh += 1;
    }
    // Eq. 8: B_i ≥ M^F_i ⇔ B_i·Σ_H W ≥ W_i·Σ_H B.
    let culprit = |e: &FlowEntry| high(e) && u128::from(e.bytes) * hw >= u128::from(e.weight) * hb;
    let mut norm = 0f64;
    for (_, e) in active().filter(|(_, e)| culprit(e)) {
        norm += e.bytes as f64 / f64::from(e.weight);
    }
    // Eq. 9.
    for (i, e) in active().filter(|(_, e)| culprit(e)) {
        let share = (e.bytes as f64 / f64::from(e.weight)) / norm;
        let p = (share * f64::from(psi))
            .round()
            .clamp(1.0, f64::from(QNTZ_FB_MAX));
        out.push(FqcnCulprit {
            // Indices are below MAX_FLOWS (table bound).
            flow: i as u16,
            psi: p as u8,
        });
    }
    Identification {
        flows: n,
        high: nh,
        culprits: out.len() as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::super::flows::{FlowId, FlowTable};
    use super::*;
    use crate::PortId;
    use cnm_proto::wire::EthernetAddress;

    /// A table with flows of (B_i, W_i).
    fn table(bw: &[(u64, u32)]) -> FlowTable {
        let mut t = FlowTable::new(16, 9);
        for (k, &(b, w)) in bw.iter().enumerate() {
            let id = FlowId {
                src: EthernetAddress([2, 0, 0, 0, 0, k as u8 + 1]),
                dst: EthernetAddress([2, 0, 0, 0, 0, 0xee]),
                vid: 0,
                priority: 3,
            };
            let i = t.get_or_insert(&id, PortId(0), |_| w).unwrap();
            if b > 0 {
                t.arrived(i, &vec![0; b as usize], PortId(0));
            }
        }
        t
    }

    #[test]
    fn worked_example_equal_weights() {
        // B = (10, 9, 7, 1) kB, W = 1: ΣB = 27 kB, M = 6.75 kB → S_H = {0, 1, 2};
        // Σ_H B = 26 kB, M^F = 8.667 kB → S_R = {0, 1};
        // Ψ(Fb) = 38: Ψ_0 = 10/19·38 = 20, Ψ_1 = 9/19·38 = 18.
        let t = table(&[(10_000, 1), (9_000, 1), (7_000, 1), (1_000, 1)]);
        let mut out = Vec::with_capacity(16);
        let id = identify(t.entries(), 38, &mut out);
        assert_eq!(
            id,
            Identification {
                flows: 4,
                high: 3,
                culprits: 2
            }
        );
        assert_eq!(
            out,
            vec![
                FqcnCulprit { flow: 0, psi: 20 },
                FqcnCulprit { flow: 1, psi: 18 }
            ]
        );
        // Ψ(Fb) = 63: 10/19·63 = 33.16 → 33, 9/19·63 = 29.84 → 30.
        identify(t.entries(), 63, &mut out);
        assert_eq!((out[0].psi, out[1].psi), (33, 30));
        // Ψ(Fb) = 1: each culprit still gets at least 1.
        identify(t.entries(), 1, &mut out);
        assert_eq!((out[0].psi, out[1].psi), (1, 1));
    }

    #[test]
    fn weights_are_honoured() {
        // B = (8, 6, 4, 2) kB. With W = 1: M = 5 → S_H = {0, 1}, M^F = 7 → S_R = {0}.
        let mut out = Vec::new();
        let t = table(&[(8_000, 1), (6_000, 1), (4_000, 1), (2_000, 1)]);
        identify(t.entries(), 40, &mut out);
        assert_eq!(out, vec![FqcnCulprit { flow: 0, psi: 40 }]);
        // With W = (2, 1, 1, 1): ΣW = 5, M = (8, 4, 4, 4) kB → S_H = {0, 1, 2};
        // Σ_H B = 18 kB, Σ_H W = 4, M^F = (9, 4.5, 4.5) kB → S_R = {1}: flow 0 is within its
        // doubled share, flow 1 is the culprit.
        let t = table(&[(8_000, 2), (6_000, 1), (4_000, 1), (2_000, 1)]);
        let id = identify(t.entries(), 40, &mut out);
        assert_eq!((id.high, id.culprits), (3, 1));
        assert_eq!(out, vec![FqcnCulprit { flow: 1, psi: 40 }]);
        // Weighted Ψ split: B = (12, 6) kB, W = (2, 1): B/W = (6, 6): M = (12, 6) → both in
        // S_H and S_R, Ψ_i = 6/12·50 = 25 each.
        let t = table(&[(12_000, 2), (6_000, 1)]);
        identify(t.entries(), 50, &mut out);
        assert_eq!(
            out,
            vec![
                FqcnCulprit { flow: 0, psi: 25 },
                FqcnCulprit { flow: 1, psi: 25 }
            ]
        );
    }

    #[test]
    fn idle_flows_are_not_in_the_link_set() {
        // A tracked flow that sent nothing this interval does not dilute the fair share.
        let mut out = Vec::new();
        let t = table(&[(5_000, 1), (0, 1), (5_000, 1)]);
        let id = identify(t.entries(), 20, &mut out);
        assert_eq!(id.flows, 2);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].psi, out[1].psi), (10, 10));
        let t = table(&[(0, 1)]);
        assert_eq!(identify(t.entries(), 20, &mut out).culprits, 0);
        assert!(out.is_empty());
    }
}

//! Culprit selection: which source a congestion point's CNM goes to.
//!
//! # Source
//! "QCN with input-buffer congestion points and occupancy sampling" (the input-CP seed,
//! section IV.B; QCN-REFERENCE §4). Standard QCN (802.1Q-2011 32.8) sends the CNM to the source
//! of the frame whose arrival triggered the sample (**arrival sampling**). At an input buffer
//! shared by the VOQs of several outputs this punishes a flow that merely arrives often — the
//! "innocent" flow heading to an idle output — because it is sampled in proportion to its
//! arrival rate λ_n, not its contribution to the backlog. The paper's remedy uses each flow's
//! occupancy of the buffer, `q_n(t) = q_n(0) + ∫(λ_n − µ_n)dτ`, the integral of its rate
//! mismatch, as the cost:
//!
//! * **deterministic occupancy sampling** — the CNM goes to the flow holding the most octets in
//!   the buffer the CP watches;
//! * **random occupancy sampling** — pick one occupied buffer unit uniformly at random and send
//!   the CNM to the source of the frame stored there, so flow n is chosen with probability
//!   `P_n = q_n / q`, `q = Σ q_n`.
//!
//! The sampling instants and the feedback value are standard QCN's (every `Is` octets of
//! arrivals, CNM only when Fb < 0); only the addressee changes.
//!
//! # Implementation
//! The CP keeps `q_n` per flow in its bounded flow table ([`super::flows`]): `+len` when a frame
//! enters the watched queue, `−len` when it leaves (each queued frame carries its flow index),
//! O(1) per frame. At a congested sample:
//! * deterministic: one pass over the table for the largest `q_n` (ties: the lowest index);
//! * random: draw `u` uniform in `[0, q)` with `q = Σ q_n` over the tracked flows and walk the
//!   table summing `q_n` until the sum exceeds `u`. Laying the buffer's octets out flow by flow
//!   instead of in arrival order does not change the law: each octet is equally likely, so
//!   `P_n = q_n / q` exactly, as in the paper's "random occupied buffer unit" — at a cost of
//!   one pass over the flows on a sample instead of a per-unit culprit array.
//!
//! Both cost O(flows tracked) per *sample* (never per frame). The CNM is built from the stored
//! header of a recent frame of the chosen flow and leaves through the port that flow arrives on.

use super::flows::FlowEntry;
use cnm_proto::rng::Rng;
use serde::{Deserialize, Serialize};

/// Who gets a congestion point's CNM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Culprit {
    /// The source of the frame that triggered the sample (standard QCN, 802.1Q-2011 32.8).
    #[default]
    Arrival,
    /// The flow holding the most octets in the CP's queue (input-CP seed, IV.B).
    OccupancyDeterministic,
    /// The source of a uniformly random occupied octet of the CP's queue: `P_n = q_n/q`
    /// (input-CP seed, IV.B).
    OccupancyRandom,
}

impl Culprit {
    /// Needs per-flow occupancy accounting.
    pub fn uses_occupancy(self) -> bool {
        self != Culprit::Arrival
    }
}

impl std::fmt::Display for Culprit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Culprit::Arrival => "arrival",
            Culprit::OccupancyDeterministic => "occupancy-deterministic",
            Culprit::OccupancyRandom => "occupancy-random",
        })
    }
}

impl std::str::FromStr for Culprit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "arrival" => Ok(Culprit::Arrival),
            "occupancy-deterministic" => Ok(Culprit::OccupancyDeterministic),
            "occupancy-random" => Ok(Culprit::OccupancyRandom),
            _ => Err(format!(
                "{s:?}: expected arrival, occupancy-deterministic or occupancy-random"
            )),
        }
    }
}

/// The live flow with the largest occupancy (> 0), ties to the lowest index.
pub fn deterministic(flows: &[FlowEntry]) -> Option<u16> {
    let mut best: Option<(u16, u64)> = None;
    for (i, e) in flows.iter().enumerate() {
        if e.live && e.occupancy > 0 && best.map_or(true, |(_, b)| e.occupancy > b) {
            // Indices are below MAX_FLOWS (table bound).
            best = Some((i as u16, e.occupancy));
        }
    }
    best.map(|b| b.0)
}

/// A live flow drawn with probability `q_n / Σq` (occupancy-weighted), `None` when nothing
/// tracked is queued.
pub fn random(flows: &[FlowEntry], rng: &mut Rng) -> Option<u16> {
    let total: u64 = flows.iter().filter(|e| e.live).map(|e| e.occupancy).sum();
    if total == 0 {
        return None;
    }
    let u = rng.below(total);
    let mut acc = 0u64;
    for (i, e) in flows.iter().enumerate() {
        if !e.live {
            continue;
        }
        acc += e.occupancy;
        if u < acc {
            return Some(i as u16);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::flows::{FlowId, FlowTable};
    use super::*;
    use crate::PortId;
    use cnm_proto::wire::EthernetAddress;

    fn table(occ: &[u64]) -> FlowTable {
        let mut t = FlowTable::new(16, 3);
        for (k, &o) in occ.iter().enumerate() {
            let id = FlowId {
                src: EthernetAddress([2, 0, 0, 0, 0, k as u8 + 1]),
                vid: 0,
                priority: 3,
            };
            let i = t.get_or_insert(&id, PortId(0), |_| 1).unwrap();
            t.occupy(i, o as usize);
        }
        t
    }

    #[test]
    fn deterministic_picks_the_largest_backlog() {
        let t = table(&[3000, 9000, 1500, 9000]);
        assert_eq!(deterministic(t.entries()), Some(1));
        assert_eq!(deterministic(table(&[0, 0]).entries()), None);
    }

    #[test]
    fn random_follows_occupancy_shares() {
        // q = (6000, 3000, 1000, 0): P = 0.6, 0.3, 0.1, 0.
        let t = table(&[6000, 3000, 1000, 0]);
        let mut rng = Rng::new(42);
        let mut hits = [0u32; 4];
        let n = 100_000;
        for _ in 0..n {
            hits[usize::from(random(t.entries(), &mut rng).unwrap())] += 1;
        }
        let p: Vec<f64> = hits.iter().map(|&h| f64::from(h) / f64::from(n)).collect();
        assert!((p[0] - 0.6).abs() < 0.01, "{p:?}");
        assert!((p[1] - 0.3).abs() < 0.01, "{p:?}");
        assert!((p[2] - 0.1).abs() < 0.01, "{p:?}");
        assert_eq!(hits[3], 0);
        assert_eq!(random(table(&[0]).entries(), &mut rng), None);
    }

    #[test]
    fn names() {
        for c in [
            Culprit::Arrival,
            Culprit::OccupancyDeterministic,
            Culprit::OccupancyRandom,
        ] {
            assert_eq!(c.to_string().parse::<Culprit>(), Ok(c));
        }
        assert!("sideways".parse::<Culprit>().is_err());
    }
}

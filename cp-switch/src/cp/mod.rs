//! Congestion points (IEEE 802.1Q-2011 clauses 30-32, formerly 802.1Qau).
//!
//! # What a congestion point is
//! A congestion point (CP, 802.1Q-2011 clause 32.8) watches one queue that carries a
//! congestion-notification priority value (CNPV, clause 32.4: the priorities whose traffic is
//! congestion controlled). It samples arriving frames and, when the queue is above its set
//! point or growing, sends a Congestion Notification Message (CNM, clause 33.4) back to the
//! source of the sampled frame, whose reaction point slows down.
//!
//! # Placement
//! * [`Placement::Output`] — the standard place: the output queue of (output port, CNPV
//!   priority). CPID index `port × 8 + priority`.
//! * [`Placement::Input`] — the shared input buffer of (input port, CNPV priority) that holds
//!   that input's virtual output queues (QCN-REFERENCE §4, after "QCN with input-buffer CP and
//!   occupancy sampling": in a CIOQ switch with backpressure the congestion shows up in the input
//!   buffers). CPID index as above with the top bit set (the project's CPID layout).
//! * [`Placement::Off`] — no CPs.
//!
//! Either way the CNM leaves through the port the sampled frame **arrived** on, through the
//! port's control queue (ahead of data, never paused), at the CNM transmit priority
//! (`cnm_priority`, IEEE8021-CN-MIB `ieee8021CnGlobalCnmTransmitPriority`, default 6) when the
//! sampled frame was VLAN tagged. Frames that are themselves CNMs, MAC control (PAUSE/PFC) or
//! rate feedback are never sampled, and neither are frames with a group source address (a CNM
//! cannot be addressed to them).
//!
//! # Modes
//! [`CpMode::Qcn`] is standard QCN ([`qcn`]). Variant algorithms sit beside it in this
//! directory, each as a [`CpAlgo`] variant with its own params/vars, sharing the placement,
//! CNPV set, CNM priority and the per-CP counters here.
//!
//! # Cost
//! The bridge finds the CP of a queue through one table lookup (only queues whose priority is a
//! CNPV have one), then [`CongestionPoint::arrival`] is a subtraction and a compare unless the
//! frame is sampled. Nothing is allocated per frame: the per-destination CNM counters are a
//! table reserved up front ([`MAX_DST_ENTRIES`]).

pub mod qcn;

use crate::config::NUM_PRIORITIES;
use crate::PortId;
use cnm_proto::rng::Rng;
use cnm_proto::wire::{CpId, EthernetAddress};
use cnm_proto::{Bytes, Instant};
use serde::{Deserialize, Serialize};

/// Destinations whose CNMs are counted one by one per CP; CNMs to further destinations are
/// counted together in `cnm_other_dst` (bounded memory, ARCHITECTURE.md rule 6).
pub const MAX_DST_ENTRIES: usize = 256;

/// Default CNM transmit priority: 6 (IEEE8021-CN-MIB `ieee8021CnGlobalCnmTransmitPriority` /
/// QCN-REFERENCE §1 \[choice\]).
pub const DEFAULT_CNM_PRIORITY: u8 = cnm_proto::wire::cnm::DEFAULT_CNM_PRIORITY;

/// Default encapsulated MSDU length: 64 octets, the most a CNM carries (802.1Q-2011 33.4;
/// IEEE8021-CN-MIB `ieee8021CnCpMinHeaderOctets` allows 0..64).
pub const DEFAULT_MIN_HEADER_OCTETS: usize = cnm_proto::wire::cnm::MAX_MSDU_LEN;

/// Where the CPs sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// On the output queue of (output port, CNPV priority) — the standard placement.
    #[default]
    Output,
    /// On the shared input buffer of (input port, CNPV priority) (QCN-REFERENCE §4).
    Input,
    /// No congestion points.
    Off,
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Placement::Output => "output",
            Placement::Input => "input",
            Placement::Off => "off",
        })
    }
}

impl std::str::FromStr for Placement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "output" => Ok(Placement::Output),
            "input" => Ok(Placement::Input),
            "off" => Ok(Placement::Off),
            _ => Err(format!("{s:?}: expected output, input or off")),
        }
    }
}

/// The CP algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CpMode {
    /// Standard QCN (802.1Q-2011 clause 32.8, [`qcn`]).
    #[default]
    Qcn,
}

/// Congestion-point settings of the bridge (`[cp]` in the bridge configuration). Parameter
/// names follow the IEEE8021-CN-MIB.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpConfig {
    /// Where the CPs sit. Default `output`.
    pub placement: Placement,
    /// Algorithm. Default `qcn`.
    pub mode: CpMode,
    /// The CNPVs (802.1Q-2011 32.4.1, `ieee8021CnComPriTable`): priorities whose queues get a
    /// CP. Default `[3]`.
    pub cnpv: Vec<u8>,
    /// Qeq (`ieee8021CnCpQueueSizeSetPoint`). Default 26000 octets.
    pub cp_queue_set_point: Bytes,
    /// w (`ieee8021CnCpFeedbackWeight`, here the weight itself, a power of two). Default 2.
    pub cp_feedback_weight: u32,
    /// Sampling base (`ieee8021CnCpMinSampleBase`). Default 150000 octets.
    pub cp_min_sample_base: Bytes,
    /// PCP of the CNMs' VLAN tag (`ieee8021CnGlobalCnmTransmitPriority`). Default 6.
    pub cnm_priority: u8,
    /// Octets of the sampled frame's MSDU encapsulated in the CNM
    /// (`ieee8021CnCpMinHeaderOctets`, 0..=64). Default 64.
    pub cp_min_header_octets: usize,
}

impl Default for CpConfig {
    fn default() -> Self {
        let q = qcn::QcnParams::default();
        CpConfig {
            placement: Placement::Output,
            mode: CpMode::Qcn,
            cnpv: vec![3],
            cp_queue_set_point: q.cp_queue_set_point,
            cp_feedback_weight: q.cp_feedback_weight,
            cp_min_sample_base: q.cp_min_sample_base,
            cnm_priority: DEFAULT_CNM_PRIORITY,
            cp_min_header_octets: DEFAULT_MIN_HEADER_OCTETS,
        }
    }
}

impl CpConfig {
    /// The CNPV set as a bit mask (bit p = priority p).
    pub fn cnpv_mask(&self) -> u8 {
        self.cnpv
            .iter()
            .filter(|&&p| usize::from(p) < NUM_PRIORITIES)
            .fold(0, |m, &p| m | 1 << p)
    }

    /// The standard QCN parameters.
    pub fn qcn_params(&self) -> qcn::QcnParams {
        qcn::QcnParams {
            cp_queue_set_point: self.cp_queue_set_point,
            cp_feedback_weight: self.cp_feedback_weight,
            cp_min_sample_base: self.cp_min_sample_base,
        }
    }

    /// Checks every value; the error is `(field, reason)` with the field relative to `[cp]`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (i, &p) in self.cnpv.iter().enumerate() {
            if usize::from(p) >= NUM_PRIORITIES {
                return Err((
                    format!("cnpv[{i}]"),
                    format!("priority {p} is not in 0..=7"),
                ));
            }
        }
        if usize::from(self.cnm_priority) >= NUM_PRIORITIES {
            return Err((
                "cnm_priority".into(),
                format!("priority {} is not in 0..=7", self.cnm_priority),
            ));
        }
        if self.cp_min_header_octets > DEFAULT_MIN_HEADER_OCTETS {
            return Err((
                "cp_min_header_octets".into(),
                format!("{} is above 64", self.cp_min_header_octets),
            ));
        }
        self.qcn_params()
            .validate()
            .map_err(|(f, r)| (f.to_string(), r))
    }
}

/// The algorithm state of one CP.
#[derive(Debug, Clone)]
pub enum CpAlgo {
    /// Standard QCN.
    Qcn(qcn::Qcn),
}

/// One frame arriving at a CP's queue (after the enqueue decision).
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    /// When (the instant the frame entered the queue).
    pub now: Instant,
    /// The frame as queued (destination address first).
    pub frame: &'a [u8],
    /// The queue's occupancy with this frame, octets.
    pub qlen: u64,
    /// The port the frame was received on (where a CNM about it goes).
    pub ingress: PortId,
}

/// Feedback a CP asks the bridge to send about the frame that just arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feedback {
    /// Fb before clamping (negative).
    pub fb: i64,
    /// QntzFb, 1..=63.
    pub qntz_fb: u8,
    /// Qoff = Q − Qeq, octets.
    pub q_offset: i64,
    /// Qδ = Q − Qold, octets.
    pub q_delta: i64,
}

/// Running counters of one CP (read through [`CpStats`]).
#[derive(Debug, Clone, Default)]
pub struct CpCounters {
    /// Frames sampled.
    pub samples: u64,
    /// CNMs queued for transmission.
    pub cnm_tx: u64,
    /// CNMs lost because the egress port's control queue was full (or the port was down).
    pub cnm_dropped: u64,
    /// Fb of the last sample.
    pub last_fb: i64,
    /// QntzFb of the last sample (0 = no CNM).
    pub last_qntz_fb: u8,
    /// CNMs per destination, for the first [`MAX_DST_ENTRIES`] destinations seen.
    pub per_dst: Vec<(EthernetAddress, u64)>,
    /// CNMs to destinations beyond the table.
    pub other_dst: u64,
}

impl CpCounters {
    /// Counts a CNM to `dst` (no allocation: the table is reserved up front).
    fn count_dst(&mut self, dst: EthernetAddress) {
        if let Some(e) = self.per_dst.iter_mut().find(|e| e.0 == dst) {
            e.1 += 1;
        } else if self.per_dst.len() < MAX_DST_ENTRIES {
            self.per_dst.push((dst, 1));
        } else {
            self.other_dst += 1;
        }
    }
}

/// One congestion point: its identity, algorithm and counters.
#[derive(Debug, Clone)]
pub struct CongestionPoint {
    id: CpId,
    port: PortId,
    priority: u8,
    placement: Placement,
    algo: CpAlgo,
    counters: CpCounters,
}

impl CongestionPoint {
    /// The CP of the queue (`port`, `priority`) at `placement`, with the CPID built from the
    /// bridge MAC `mac` (`CpId::output` or `CpId::input`). `rng` draws the first sampling
    /// interval.
    pub fn new(
        cfg: &CpConfig,
        mac: EthernetAddress,
        port: PortId,
        priority: u8,
        placement: Placement,
        rng: &mut Rng,
    ) -> CongestionPoint {
        let id = match placement {
            Placement::Input => CpId::input(mac, port.0, priority),
            _ => CpId::output(mac, port.0, priority),
        };
        let algo = match cfg.mode {
            CpMode::Qcn => CpAlgo::Qcn(qcn::Qcn::new(cfg.qcn_params(), rng)),
        };
        CongestionPoint {
            id,
            port,
            priority,
            placement,
            algo,
            counters: CpCounters {
                per_dst: Vec::with_capacity(MAX_DST_ENTRIES),
                ..CpCounters::default()
            },
        }
    }

    /// The CPID.
    pub fn id(&self) -> CpId {
        self.id
    }

    /// The port of the CP's queue.
    pub fn port(&self) -> PortId {
        self.port
    }

    /// The priority of the CP's queue.
    pub fn priority(&self) -> u8 {
        self.priority
    }

    /// The counters.
    pub fn counters(&self) -> &CpCounters {
        &self.counters
    }

    /// The algorithm state.
    pub fn algo(&self) -> &CpAlgo {
        &self.algo
    }

    /// A frame arrived at the CP's queue. Returns the feedback to send to the frame's source,
    /// if any. (Variants that keep per-flow state read `a.frame`; standard QCN only needs its
    /// length and the queue length.)
    #[inline]
    pub fn arrival(&mut self, a: &Arrival<'_>, rng: &mut Rng) -> Option<Feedback> {
        match &mut self.algo {
            CpAlgo::Qcn(q) => {
                let s = q.arrival(a.frame.len(), a.qlen, rng)?;
                self.counters.samples += 1;
                self.counters.last_fb = s.fb;
                self.counters.last_qntz_fb = s.qntz_fb;
                s.congested().then_some(Feedback {
                    fb: s.fb,
                    qntz_fb: s.qntz_fb,
                    q_offset: s.q_offset,
                    q_delta: s.q_delta,
                })
            }
        }
    }

    /// A CNM to `dst` was queued.
    pub fn cnm_sent(&mut self, dst: EthernetAddress) {
        self.counters.cnm_tx += 1;
        self.counters.count_dst(dst);
    }

    /// A CNM could not be queued.
    pub fn cnm_dropped(&mut self) {
        self.counters.cnm_dropped += 1;
    }

    /// Snapshot, with the port's name and the queue's occupancy now.
    pub fn stats(&self, port_name: &str, qlen: u64) -> CpStats {
        let (qeq, w, base, countdown) = match &self.algo {
            CpAlgo::Qcn(q) => (
                q.params().cp_queue_set_point.get(),
                q.params().cp_feedback_weight,
                q.params().cp_min_sample_base.get(),
                q.vars().bytes_to_sample,
            ),
        };
        let c = &self.counters;
        CpStats {
            id: self.id,
            port: port_name.to_string(),
            port_index: self.port.0,
            priority: self.priority,
            placement: self.placement,
            mode: match self.algo {
                CpAlgo::Qcn(_) => CpMode::Qcn,
            },
            samples: c.samples,
            cnm_tx: c.cnm_tx,
            cnm_dropped: c.cnm_dropped,
            qlen,
            qeq,
            weight: w,
            sample_base: base,
            next_sample_in: countdown.max(0) as u64,
            last_fb: c.last_fb,
            last_qntz_fb: c.last_qntz_fb,
            cnm_other_dst: c.other_dst,
            cnm_per_dst: c
                .per_dst
                .iter()
                .map(|&(mac, cnms)| DstCount { mac, cnms })
                .collect(),
        }
    }
}

/// CNMs sent to one destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DstCount {
    /// Destination MAC (the source of the sampled frames).
    pub mac: EthernetAddress,
    /// CNMs sent to it.
    pub cnms: u64,
}

/// Snapshot of one CP (`stats --json` → `cps[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpStats {
    /// CPID, 16 hex digits.
    pub id: CpId,
    /// Name of the port of the CP's queue.
    pub port: String,
    /// Index of that port.
    pub port_index: u16,
    /// Priority of the CP's queue (a CNPV).
    pub priority: u8,
    /// `output` or `input`.
    pub placement: Placement,
    /// Algorithm.
    pub mode: CpMode,
    /// Frames sampled.
    pub samples: u64,
    /// CNMs sent.
    pub cnm_tx: u64,
    /// CNMs lost (control queue full, port down).
    pub cnm_dropped: u64,
    /// Queue occupancy now (octets).
    pub qlen: u64,
    /// Set point Qeq (octets).
    pub qeq: u64,
    /// Feedback weight w.
    pub weight: u32,
    /// Sampling base (octets).
    pub sample_base: u64,
    /// Octets until the next sample.
    pub next_sample_in: u64,
    /// Fb of the last sample.
    pub last_fb: i64,
    /// QntzFb of the last sample (0 = no CNM).
    pub last_qntz_fb: u8,
    /// CNMs to destinations beyond the per-destination table.
    pub cnm_other_dst: u64,
    /// CNMs per destination (first 256 destinations).
    pub cnm_per_dst: Vec<DstCount>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_checks() {
        let c = CpConfig::default();
        assert_eq!(c.cnpv_mask(), 0b1000);
        assert_eq!(c.placement, Placement::Output);
        assert_eq!(c.cnm_priority, 6);
        assert_eq!(c.cp_min_header_octets, 64);
        assert!(c.validate().is_ok());
        let c = CpConfig {
            cnpv: vec![3, 8],
            ..CpConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "cnpv[1]");
        let c = CpConfig {
            cp_min_header_octets: 65,
            ..CpConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "cp_min_header_octets");
        let c = CpConfig {
            cp_feedback_weight: 5,
            ..CpConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().0, "cp_feedback_weight");
        let c: CpConfig = toml::from_str(
            "placement = \"input\"\ncnpv = [3, 5]\ncp_queue_set_point = \"33KB\"\ncnm_priority = 7\n",
        )
        .unwrap();
        assert_eq!(c.placement, Placement::Input);
        assert_eq!(c.cnpv_mask(), 0b10_1000);
        assert_eq!(c.cp_queue_set_point, Bytes::new(33_000));
        assert!(toml::from_str::<CpConfig>("bogus = 1").is_err());
        assert_eq!("input".parse::<Placement>(), Ok(Placement::Input));
        assert!("middle".parse::<Placement>().is_err());
    }

    #[test]
    fn cpid_by_placement() {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 0x10]);
        let mut rng = Rng::new(1);
        let c = CpConfig::default();
        let o = CongestionPoint::new(&c, mac, PortId(2), 3, Placement::Output, &mut rng);
        let i = CongestionPoint::new(&c, mac, PortId(2), 3, Placement::Input, &mut rng);
        assert_eq!(o.id().index(), 2 * 8 + 3);
        assert_eq!(i.id().index(), 0x8000 | (2 * 8 + 3));
        assert!(i.id().is_input() && !o.id().is_input());
        assert_eq!(o.id().to_string(), "0200000000100013");
        assert_eq!(i.id().to_string(), "0200000000108013");
    }

    #[test]
    fn destination_table_is_bounded() {
        let mut rng = Rng::new(1);
        let mut cp = CongestionPoint::new(
            &CpConfig::default(),
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            PortId(0),
            3,
            Placement::Output,
            &mut rng,
        );
        let cap = cp.counters().per_dst.capacity();
        for n in 0..300u16 {
            let [a, b] = n.to_be_bytes();
            cp.cnm_sent(EthernetAddress([2, 0, 0, 0, a, b]));
        }
        cp.cnm_sent(EthernetAddress([2, 0, 0, 0, 0, 0]));
        let c = cp.counters();
        assert_eq!(c.per_dst.len(), MAX_DST_ENTRIES);
        assert_eq!(c.per_dst.capacity(), cap);
        assert_eq!(c.per_dst[0].1, 2);
        assert_eq!(c.other_dst, 44);
        assert_eq!(c.cnm_tx, 301);
    }
}

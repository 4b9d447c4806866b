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
//! * [`CpMode::Qcn`] — standard QCN ([`qcn`]).
//! * [`CpMode::Fqcn`] — fair QCN ([`fqcn`], Zhang & Ansari eq. 7-9): per-flow byte counts
//!   between samples, one CNM per culprit flow with its own Ψ_i, weights from `fqcn_weights`.
//! * [`CpMode::ExplicitRate`] — the explicit-rate switch of Jain, Jiang et al. 2006
//!   ([`explicit_rate`]): measures the arrival rate every interval T and advertises a rate in
//!   rate-feedback messages (EtherType 0x88B5) to the sources active in the interval; driven
//!   by a timer through `Bridge::poll_timeout` / `Bridge::poll_transmit`.
//!
//! With QCN the addressee of the CNM is chosen by [`Culprit`] ([`culprit`]): the source of the
//! sampled frame (`arrival`, standard), or by occupancy of the CP's queue
//! (`occupancy-deterministic`, `occupancy-random`; made for input CPs, allowed anywhere).
//!
//! Combinations: `fqcn` and `explicit-rate` require `culprit = "arrival"` — FQCN picks its
//! culprits itself (eq. 7-8 over the byte counts) and the explicit-rate CP advertises one rate
//! to every active source, so an occupancy culprit has no meaning there and is rejected by
//! [`CpConfig::validate`] naming `culprit`. `fqcn_weights` and the `er_*` settings are ignored
//! by the modes that do not use them (so one scenario file can be run in every mode).
//!
//! The variants that address flows other than the sampled frame's source keep a bounded flow
//! table per CP ([`flows`]: source MAC + VID + priority, `max_flows` entries, the first 96
//! octets of a recent frame of each flow to build its CNM or rate-feedback message from). The
//! message leaves through the port that flow's frames arrive on.
//!
//! # Cost
//! The bridge finds the CP of a queue through one table lookup (only queues whose priority is a
//! CNPV have one), then [`CongestionPoint::arrival`] is a subtraction and a compare unless the
//! frame is sampled. Nothing is allocated per frame: the per-destination CNM counters are a
//! table reserved up front ([`MAX_DST_ENTRIES`]).

pub mod culprit;
pub mod explicit_rate;
pub mod flows;
pub mod fqcn;
pub mod qcn;

pub use culprit::Culprit;
pub use flows::NO_FLOW;

use crate::error::{ConfigError, NUM_PRIORITIES};
use crate::PortId;
use cnm_proto::rng::Rng;
use cnm_proto::wire::{CpId, EthernetAddress};
use cnm_proto::{Bytes, Duration, Instant, Rate, Scale};
use flows::{FlowId, FlowTable};
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
#[serde(rename_all = "kebab-case")]
pub enum CpMode {
    /// Standard QCN (802.1Q-2011 clause 32.8, [`qcn`]).
    #[default]
    Qcn,
    /// Fair QCN (Zhang & Ansari, eq. 7-9, [`fqcn`]).
    Fqcn,
    /// Explicit-rate feedback (Jain, Jiang et al. 2006, [`explicit_rate`]).
    ExplicitRate,
}

impl std::fmt::Display for CpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CpMode::Qcn => "qcn",
            CpMode::Fqcn => "fqcn",
            CpMode::ExplicitRate => "explicit-rate",
        })
    }
}

impl std::str::FromStr for CpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "qcn" => Ok(CpMode::Qcn),
            "fqcn" => Ok(CpMode::Fqcn),
            "explicit-rate" => Ok(CpMode::ExplicitRate),
            _ => Err(format!("{s:?}: expected qcn, fqcn or explicit-rate")),
        }
    }
}

/// An FQCN weight `W_i` (Zhang & Ansari eq. 7-9: "determined by traffic class, source
/// address, destination address, etc."): applies to the flows matching every field given
/// (source MAC, VID — 0 for untagged —, priority). The first matching entry wins; flows
/// matching none have weight 1.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowWeight {
    /// Source MAC of the flow.
    #[serde(default)]
    pub mac: Option<EthernetAddress>,
    /// VID (0 = untagged).
    #[serde(default)]
    pub vid: Option<u16>,
    /// Priority.
    #[serde(default)]
    pub priority: Option<u8>,
    /// W_i, a positive integer.
    pub weight: u32,
}

impl FlowWeight {
    fn matches(&self, id: &FlowId) -> bool {
        self.mac.map_or(true, |m| m == id.src)
            && self.vid.map_or(true, |v| v == id.vid)
            && self.priority.map_or(true, |p| p == id.priority)
    }
}

/// W_i of `id` under `weights` (first match, default 1).
pub fn weight_of(weights: &[FlowWeight], id: &FlowId) -> u32 {
    weights
        .iter()
        .find(|w| w.matches(id))
        .map_or(1, |w| w.weight.max(1))
}

/// Congestion-point settings of the bridge (`[cp]` in the bridge configuration). Parameter
/// names follow the IEEE8021-CN-MIB.
///
/// # Changes at run time
/// [`crate::Bridge::set_cp_config`] (and the daemon's `ctl set cp KEY=VALUE`) replace these
/// settings while the bridge runs; a [`CpPatch`] (built from `KEY = VALUE` pairs with the names
/// below) is applied by [`CpConfig::patched`] with the validation of a configuration file. Parameters that only scale
/// the algorithm — `cp_queue_set_point`, `cp_feedback_weight`, `cp_min_sample_base`,
/// `cp_sample_table`, `cnm_priority`, `cp_min_header_octets` and the `er_*` settings — change in place: a QCN CP
/// keeps Qold and its sampling countdown (shortened to a smaller base), so the next sample
/// already uses the new Qeq and w (802.1Q-2011 32.8.6 computes Fb from the current
/// parameters at each sample). An explicit-rate CP whose `er_*` settings or Qeq change starts
/// a new measurement from r = C/2. The structural settings — `placement`, `mode`, `culprit`,
/// `cnpv`, `max_flows`, `fqcn_weights` — rebuild the CPs: sampling state and flow tables
/// start afresh (counters of a CP that keeps its CPID are carried over).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
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
    /// How the sampling interval follows QntzFb, in the modes that sample (`qcn`, `fqcn`;
    /// `explicit-rate` measures by time and ignores it): `standard` (default,
    /// `base / (1 + ⌊QntzFb/8⌋)`), `pseudo-code` (the QCN pseudo-code v2.2 table) or
    /// `fqcn-paper` (the FQCN paper's eq. 2, `(1 + 9·Ψ/64) %`). See [`qcn::SampleTable`].
    pub cp_sample_table: qcn::SampleTable,
    /// PCP of the CNMs' VLAN tag (`ieee8021CnGlobalCnmTransmitPriority`). Default 6.
    pub cnm_priority: u8,
    /// Octets of the sampled frame's MSDU encapsulated in the CNM
    /// (`ieee8021CnCpMinHeaderOctets`, 0..=64). Default 64.
    pub cp_min_header_octets: usize,
    /// Who gets the CNM (QCN mode). Default `arrival`.
    pub culprit: Culprit,
    /// Flows tracked per CP by the modes that need them (fqcn, explicit-rate, occupancy
    /// culprits), 1..=16384. Default 1024.
    pub max_flows: usize,
    /// FQCN weights (mode `fqcn`). Default: every flow 1.
    pub fqcn_weights: Vec<FlowWeight>,
    /// Explicit-rate measurement interval T. Default: 0.03 ms at 10 Gb/s, scaled by
    /// 10 Gb/s ÷ C of the CP's port (3 ms at 100 Mb/s).
    pub er_interval: Option<Duration>,
    /// Explicit-rate hyperbolic queue control a. Default 1.05.
    pub er_a: f64,
    /// Explicit-rate hyperbolic queue control b. Default 1.2.
    pub er_b: f64,
    /// Explicit-rate hyperbolic queue control floor c. Default 0.5.
    pub er_c: f64,
    /// Floor of the advertised rate. Default C/1000.
    pub er_min_rate: Option<Rate>,
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
            cp_sample_table: q.cp_sample_table,
            cnm_priority: DEFAULT_CNM_PRIORITY,
            cp_min_header_octets: DEFAULT_MIN_HEADER_OCTETS,
            culprit: Culprit::Arrival,
            max_flows: flows::DEFAULT_MAX_FLOWS,
            fqcn_weights: Vec::new(),
            er_interval: None,
            er_a: explicit_rate::DEFAULT_A,
            er_b: explicit_rate::DEFAULT_B,
            er_c: explicit_rate::DEFAULT_C,
            er_min_rate: None,
        }
    }
}

/// A run-time change of [`CpConfig`]: one `Option` per setting, `None` = unchanged. Every
/// setting of `[cp]` can change while the bridge runs ([`crate::Bridge::apply_cp_patch`]; which
/// ones change in place and which rebuild the CPs is told at [`CpConfig`]).
///
/// Built at the edge — `ctl set cp KEY=VALUE...`, a scenario's timed event — from the `[cp]`
/// names and the configuration file's spellings of the values (`cp_queue_set_point = "20KB"`,
/// `cp_feedback_weight = 4`, `mode = "fqcn"`); an unknown name is refused
/// (`deny_unknown_fields`). It serialises with the unset fields left out.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpPatch {
    /// [`CpConfig::placement`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// [`CpConfig::mode`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<CpMode>,
    /// [`CpConfig::cnpv`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cnpv: Option<Vec<u8>>,
    /// [`CpConfig::cp_queue_set_point`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cp_queue_set_point: Option<Bytes>,
    /// [`CpConfig::cp_feedback_weight`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cp_feedback_weight: Option<u32>,
    /// [`CpConfig::cp_min_sample_base`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cp_min_sample_base: Option<Bytes>,
    /// [`CpConfig::cp_sample_table`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cp_sample_table: Option<qcn::SampleTable>,
    /// [`CpConfig::cnm_priority`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cnm_priority: Option<u8>,
    /// [`CpConfig::cp_min_header_octets`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cp_min_header_octets: Option<usize>,
    /// [`CpConfig::culprit`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub culprit: Option<Culprit>,
    /// [`CpConfig::max_flows`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_flows: Option<usize>,
    /// [`CpConfig::fqcn_weights`] (the whole list is replaced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fqcn_weights: Option<Vec<FlowWeight>>,
    /// [`CpConfig::er_interval`] (a patch can set it, not return it to the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub er_interval: Option<Duration>,
    /// [`CpConfig::er_a`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub er_a: Option<f64>,
    /// [`CpConfig::er_b`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub er_b: Option<f64>,
    /// [`CpConfig::er_c`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub er_c: Option<f64>,
    /// [`CpConfig::er_min_rate`] (set, not returned to the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub er_min_rate: Option<Rate>,
}

/// Time scaling ([`cnm_proto::scale`]): the explicit-rate interval and floor. Set points,
/// sampling bases and weights are in octets or pure numbers and stay as they are.
impl Scale for CpConfig {
    fn scale(&self, s: f64) -> Self {
        CpConfig {
            er_interval: self.er_interval.scale(s),
            er_min_rate: self.er_min_rate.scale(s),
            ..self.clone()
        }
    }
}

/// As [`CpConfig`]'s.
impl Scale for CpPatch {
    fn scale(&self, s: f64) -> Self {
        CpPatch {
            er_interval: self.er_interval.scale(s),
            er_min_rate: self.er_min_rate.scale(s),
            ..self.clone()
        }
    }
}

impl CpPatch {
    /// The error about key `key` of a patch (as the edge parser reports it) as a bridge
    /// configuration error: the field is `cp.KEY`.
    pub fn key_error(key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(format!("cp.{key}"), reason)
    }

    /// True when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self == &CpPatch::default()
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
            cp_sample_table: self.cp_sample_table,
        }
    }

    /// The explicit-rate parameters (qeq = `cp_queue_set_point`).
    pub fn er_params(&self) -> explicit_rate::ErParams {
        explicit_rate::ErParams {
            interval: self.er_interval,
            a: self.er_a,
            b: self.er_b,
            c: self.er_c,
            qeq: self.cp_queue_set_point.get(),
            min_rate: self.er_min_rate,
        }
    }

    /// Applies `patch`: every field it sets replaces this configuration's (no check; see
    /// [`CpConfig::patched`]).
    pub fn apply(&mut self, patch: &CpPatch) {
        let CpPatch {
            placement,
            mode,
            cnpv,
            cp_queue_set_point,
            cp_feedback_weight,
            cp_min_sample_base,
            cp_sample_table,
            cnm_priority,
            cp_min_header_octets,
            culprit,
            max_flows,
            fqcn_weights,
            er_interval,
            er_a,
            er_b,
            er_c,
            er_min_rate,
        } = patch;
        fn set<T: Clone>(to: &mut T, from: &Option<T>) {
            if let Some(v) = from {
                *to = v.clone();
            }
        }
        set(&mut self.placement, placement);
        set(&mut self.mode, mode);
        set(&mut self.cnpv, cnpv);
        set(&mut self.cp_queue_set_point, cp_queue_set_point);
        set(&mut self.cp_feedback_weight, cp_feedback_weight);
        set(&mut self.cp_min_sample_base, cp_min_sample_base);
        set(&mut self.cp_sample_table, cp_sample_table);
        set(&mut self.cnm_priority, cnm_priority);
        set(&mut self.cp_min_header_octets, cp_min_header_octets);
        set(&mut self.culprit, culprit);
        set(&mut self.max_flows, max_flows);
        set(&mut self.fqcn_weights, fqcn_weights);
        if er_interval.is_some() {
            self.er_interval = *er_interval;
        }
        set(&mut self.er_a, er_a);
        set(&mut self.er_b, er_b);
        set(&mut self.er_c, er_c);
        if er_min_rate.is_some() {
            self.er_min_rate = *er_min_rate;
        }
    }

    /// This configuration with `patch` applied, checked as a whole ([`CpConfig::validate`]; the
    /// field of an error is relative to `[cp]`).
    pub fn patched(&self, patch: &CpPatch) -> Result<CpConfig, ConfigError> {
        let mut cfg = self.clone();
        cfg.apply(patch);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Whether going from `self` to `new` changes which CPs exist or how they pick culprits
    /// (the CPs are then rebuilt rather than updated in place).
    pub fn needs_rebuild(&self, new: &CpConfig) -> bool {
        self.placement != new.placement
            || self.mode != new.mode
            || self.culprit != new.culprit
            || self.cnpv_mask() != new.cnpv_mask()
            || self.max_flows != new.max_flows
            || self.fqcn_weights != new.fqcn_weights
    }

    /// Whether CPs of this configuration keep a flow table.
    pub fn tracks_flows(&self) -> bool {
        self.mode != CpMode::Qcn || self.culprit.uses_occupancy()
    }

    /// Checks every value; the error names the field relative to `[cp]`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.mode != CpMode::Qcn && self.culprit != Culprit::Arrival {
            let why = match self.mode {
                CpMode::Fqcn => {
                    "fqcn identifies its culprits itself from the per-flow byte counts (eq. 7-8)"
                }
                _ => "explicit-rate advertises one rate to every active source and has no culprit",
            };
            return Err(ConfigError::new(
                "culprit",
                format!(
                    "{} cannot be combined with mode {}: {why}; use culprit = \"arrival\" (or mode = \"qcn\")",
                    self.culprit, self.mode
                ),
            ));
        }
        if self.max_flows == 0 || self.max_flows > flows::MAX_FLOWS {
            return Err(ConfigError::new(
                "max_flows",
                format!("{} is not in 1..={}", self.max_flows, flows::MAX_FLOWS),
            ));
        }
        for (i, w) in self.fqcn_weights.iter().enumerate() {
            if w.weight == 0 || w.weight > 1_000_000 {
                return Err(ConfigError::new(
                    format!("fqcn_weights[{i}].weight"),
                    format!("{} is not in 1..=1000000", w.weight),
                ));
            }
            if w.priority.is_some_and(|p| usize::from(p) >= NUM_PRIORITIES) {
                return Err(ConfigError::new(
                    format!("fqcn_weights[{i}].priority"),
                    "not in 0..=7",
                ));
            }
            if w.vid.is_some_and(|v| v > 4095) {
                return Err(ConfigError::new(
                    format!("fqcn_weights[{i}].vid"),
                    "not in 0..=4095",
                ));
            }
        }
        if self.mode == CpMode::ExplicitRate {
            self.er_params()
                .validate()
                .map_err(|(f, r)| ConfigError::new(f, r))?;
        }
        for (i, &p) in self.cnpv.iter().enumerate() {
            if usize::from(p) >= NUM_PRIORITIES {
                return Err(ConfigError::new(
                    format!("cnpv[{i}]"),
                    format!("priority {p} is not in 0..=7"),
                ));
            }
        }
        if usize::from(self.cnm_priority) >= NUM_PRIORITIES {
            return Err(ConfigError::new(
                "cnm_priority",
                format!("priority {} is not in 0..=7", self.cnm_priority),
            ));
        }
        if self.cp_min_header_octets > DEFAULT_MIN_HEADER_OCTETS {
            return Err(ConfigError::new(
                "cp_min_header_octets",
                format!("{} is above 64", self.cp_min_header_octets),
            ));
        }
        self.qcn_params()
            .validate()
            .map_err(|(f, r)| ConfigError::new(f, r))
    }
}

/// The algorithm state of one CP.
#[derive(Debug, Clone)]
pub enum CpAlgo {
    /// Standard QCN.
    Qcn(qcn::Qcn),
    /// FQCN: QCN's sampling and Fb, culprits by eq. 7-9.
    Fqcn(qcn::Qcn),
    /// Explicit-rate feedback.
    ExplicitRate(explicit_rate::ExplicitRate),
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

/// Feedback a CP asks the bridge to send after a congested sample: the sample's values; the
/// addressees and their QntzFb are in [`CongestionPoint::targets`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feedback {
    /// Fb before clamping (negative).
    pub fb: i64,
    /// QntzFb, 1..=63 (Ψ(Fb) of the sample; a target may carry its own share).
    pub qntz_fb: u8,
    /// Qoff = Q − Qeq, octets.
    pub q_offset: i64,
    /// Qδ = Q − Qold, octets.
    pub q_delta: i64,
}

/// One addressee of a CNM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Flow-table index of the culprit; [`NO_FLOW`] = the source of the frame that just
    /// arrived (build the CNM from that frame).
    pub flow: u16,
    /// QntzFb for this CNM (Ψ_i for FQCN).
    pub qntz_fb: u8,
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
    /// Culprits chosen (one per CNM addressee: |S_R| per congested FQCN sample, one per
    /// congested QCN sample).
    pub culprits: u64,
    /// Culprits of the last congested sample.
    pub last_culprits: u32,
    /// Congested samples whose culprit had to fall back to the sampled frame's source (no
    /// tracked flow with octets queued / counted).
    pub culprit_fallbacks: u64,
    /// Rate-feedback messages queued (explicit-rate).
    pub rate_fb_tx: u64,
    /// Rate-feedback messages lost (control queue full, port down).
    pub rate_fb_dropped: u64,
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
    culprit: Culprit,
    algo: CpAlgo,
    /// Per-flow state (modes other than QCN with arrival culprits).
    flows: Option<FlowTable>,
    weights: Vec<FlowWeight>,
    /// Addressees of the last congested sample (capacity reserved up front).
    targets: Vec<Target>,
    scratch: Vec<fqcn::FqcnCulprit>,
    /// Flow index of the frame that just arrived when occupancy is accounted.
    last_flow: u16,
    counters: CpCounters,
}

impl CongestionPoint {
    /// The CP of the queue (`port`, `priority`) at `placement`, with the CPID built from the
    /// bridge MAC `mac` (`CpId::output` or `CpId::input`). `capacity` is the rate of the link
    /// the CP's port runs at (the explicit-rate C). `rng` draws the first sampling interval
    /// and the flow-table hash key.
    pub fn new(
        cfg: &CpConfig,
        mac: EthernetAddress,
        port: PortId,
        priority: u8,
        placement: Placement,
        capacity: Rate,
        rng: &mut Rng,
    ) -> CongestionPoint {
        let id = match placement {
            Placement::Input => CpId::input(mac, port.0, priority),
            _ => CpId::output(mac, port.0, priority),
        };
        let algo = match cfg.mode {
            CpMode::Qcn => CpAlgo::Qcn(qcn::Qcn::new(cfg.qcn_params(), rng)),
            CpMode::Fqcn => CpAlgo::Fqcn(qcn::Qcn::new(cfg.qcn_params(), rng)),
            CpMode::ExplicitRate => {
                CpAlgo::ExplicitRate(explicit_rate::ExplicitRate::new(cfg.er_params(), capacity))
            }
        };
        let flows = cfg
            .tracks_flows()
            .then(|| FlowTable::new(cfg.max_flows, rng.next_u64()));
        let n = if cfg.mode == CpMode::Fqcn {
            cfg.max_flows.clamp(1, flows::MAX_FLOWS)
        } else {
            1
        };
        CongestionPoint {
            id,
            port,
            priority,
            placement,
            culprit: cfg.culprit,
            algo,
            flows,
            weights: if cfg.mode == CpMode::Fqcn {
                cfg.fqcn_weights.clone()
            } else {
                Vec::new()
            },
            targets: Vec::with_capacity(n),
            scratch: Vec::with_capacity(if cfg.mode == CpMode::Fqcn { n } else { 0 }),
            last_flow: NO_FLOW,
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

    /// The mode.
    pub fn mode(&self) -> CpMode {
        match self.algo {
            CpAlgo::Qcn(_) => CpMode::Qcn,
            CpAlgo::Fqcn(_) => CpMode::Fqcn,
            CpAlgo::ExplicitRate(_) => CpMode::ExplicitRate,
        }
    }

    /// The culprit selection.
    pub fn culprit(&self) -> Culprit {
        self.culprit
    }

    /// The flow table, if this CP keeps one.
    pub fn flows(&self) -> Option<&FlowTable> {
        self.flows.as_ref()
    }

    /// Whether queued frames must report their departure ([`CongestionPoint::departure`]).
    #[inline]
    pub fn tracks_occupancy(&self) -> bool {
        self.culprit.uses_occupancy()
    }

    /// The flow-table index of the frame [`CongestionPoint::arrival`] just saw, when occupancy
    /// is accounted ([`NO_FLOW`] otherwise): the bridge stores it in the queued frame and hands
    /// it back to [`CongestionPoint::departure`].
    #[inline]
    pub fn last_flow(&self) -> u16 {
        self.last_flow
    }

    /// A frame of flow `flow` and `len` octets left the CP's queue (occupancy accounting).
    #[inline]
    pub fn departure(&mut self, flow: u16, len: usize) {
        if let Some(t) = &mut self.flows {
            t.release(flow, len);
        }
    }

    /// The addressees of the last congested sample.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// A frame arrived at the CP's queue. Returns the feedback of a congested sample, if any;
    /// the CNMs to send are then in [`CongestionPoint::targets`]. (Standard QCN with arrival
    /// culprits only needs the frame's length and the queue length; the variants read the
    /// frame's source, VLAN and first octets.)
    #[inline]
    pub fn arrival(&mut self, a: &Arrival<'_>, rng: &mut Rng) -> Option<Feedback> {
        let len = a.frame.len();
        self.last_flow = NO_FLOW;
        if let Some(t) = &mut self.flows {
            if let Some(id) = FlowId::of(a.frame, self.priority) {
                let w = &self.weights;
                if let Some(i) = t.get_or_insert(&id, a.ingress, |id| weight_of(w, id)) {
                    t.arrived(i, a.frame, a.ingress);
                    if self.culprit.uses_occupancy() {
                        t.occupy(i, len);
                        self.last_flow = i;
                    }
                }
            }
        }
        let q = match &mut self.algo {
            CpAlgo::Qcn(q) | CpAlgo::Fqcn(q) => q,
            CpAlgo::ExplicitRate(e) => {
                e.arrival(a.now, len);
                return None;
            }
        };
        let s = q.arrival(len, a.qlen, rng)?;
        self.counters.samples += 1;
        self.counters.last_fb = s.fb;
        self.counters.last_qntz_fb = s.qntz_fb;
        let fb = s.congested().then_some(Feedback {
            fb: s.fb,
            qntz_fb: s.qntz_fb,
            q_offset: s.q_offset,
            q_delta: s.q_delta,
        });
        if fb.is_some() {
            self.choose_targets(s.qntz_fb, rng);
        }
        if let Some(t) = &mut self.flows {
            // B_i are per sampling interval (FQCN section III.A).
            t.reset_bytes();
        }
        fb
    }

    /// Fills `targets` for a congested sample with Ψ(Fb) = `qntz_fb`.
    #[cold]
    fn choose_targets(&mut self, qntz_fb: u8, rng: &mut Rng) {
        self.targets.clear();
        let entries = self.flows.as_ref().map_or(&[][..], FlowTable::entries);
        let chosen = match (&self.algo, self.culprit) {
            (CpAlgo::Fqcn(_), _) => {
                fqcn::identify(entries, qntz_fb, &mut self.scratch);
                for c in &self.scratch {
                    self.targets.push(Target {
                        flow: c.flow,
                        qntz_fb: c.psi,
                    });
                }
                !self.scratch.is_empty()
            }
            (_, Culprit::Arrival) => {
                self.targets.push(Target {
                    flow: NO_FLOW,
                    qntz_fb,
                });
                true
            }
            (_, c) => {
                let pick = if c == Culprit::OccupancyDeterministic {
                    culprit::deterministic(entries)
                } else {
                    culprit::random(entries, rng)
                };
                if let Some(flow) = pick {
                    self.targets.push(Target { flow, qntz_fb });
                }
                pick.is_some()
            }
        };
        if !chosen {
            self.counters.culprit_fallbacks += 1;
            self.targets.push(Target {
                flow: NO_FLOW,
                qntz_fb,
            });
        }
        self.counters.culprits += self.targets.len() as u64;
        self.counters.last_culprits = self.targets.len() as u32;
    }

    /// Applies the parameters of `cfg` that change in place (see [`CpConfig`]): QCN's Qeq, w
    /// and sampling base keep Qold and the countdown; an explicit-rate CP whose parameters
    /// differ restarts its measurement at r = C/2 with the same C. `cfg` must be valid and
    /// must not need a rebuild ([`CpConfig::needs_rebuild`]): mode, culprit and flow table are
    /// left as they are.
    pub fn set_params(&mut self, cfg: &CpConfig) {
        match &mut self.algo {
            CpAlgo::Qcn(q) | CpAlgo::Fqcn(q) => q.set_params(cfg.qcn_params()),
            CpAlgo::ExplicitRate(e) => {
                let p = cfg.er_params();
                if *e.params() != p {
                    let cost = e.line_cost();
                    *e = explicit_rate::ExplicitRate::new(p, e.capacity());
                    e.set_line_cost(cost);
                }
            }
        }
    }

    /// Carries the counters of `old` (the CP this one replaces, same CPID) over.
    pub fn inherit_counters(&mut self, old: &CongestionPoint) {
        self.counters = old.counters.clone();
    }

    /// How an explicit-rate CP counts frames against its capacity: what the port's line
    /// emulation charges per frame ([`explicit_rate::LineCost`]). Other modes ignore it.
    pub fn set_line_cost(&mut self, cost: explicit_rate::LineCost) {
        if let CpAlgo::ExplicitRate(e) = &mut self.algo {
            e.set_line_cost(cost);
        }
    }

    /// The explicit-rate link capacity changed (the port's emulated rate).
    pub fn set_capacity(&mut self, c: Rate) {
        if let CpAlgo::ExplicitRate(e) = &mut self.algo {
            e.set_capacity(c);
        }
    }

    /// When the CP's timer is due (explicit-rate measurement interval), if it runs.
    #[inline]
    pub fn timer_due(&self) -> Option<Instant> {
        match &self.algo {
            CpAlgo::ExplicitRate(e) => e.next_due(),
            _ => None,
        }
    }

    /// Runs the CP's timer at `now` with the queue holding `qlen` octets. Returns the rate to
    /// advertise when a measurement interval ended with arrivals: the bridge then sends it to
    /// every live flow of [`CongestionPoint::flows`] with octets counted in the interval and
    /// calls [`CongestionPoint::end_interval`].
    pub fn timer(&mut self, now: Instant, qlen: u64) -> Option<Rate> {
        match &mut self.algo {
            CpAlgo::ExplicitRate(e) => e.tick(now, qlen).map(|m| m.rate),
            _ => None,
        }
    }

    /// The sources of the interval have been told: starts counting the next interval.
    pub fn end_interval(&mut self) {
        if let Some(t) = &mut self.flows {
            t.reset_bytes();
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

    /// A rate-feedback message to `dst` was queued.
    pub fn rate_fb_sent(&mut self, dst: EthernetAddress) {
        self.counters.rate_fb_tx += 1;
        self.counters.count_dst(dst);
    }

    /// A rate-feedback message could not be queued.
    pub fn rate_fb_dropped(&mut self) {
        self.counters.rate_fb_dropped += 1;
    }

    /// Snapshot, with the port's name and the queue's occupancy now.
    pub fn stats(&self, port_name: &str, qlen: u64) -> CpStats {
        let (qeq, w, base, countdown) = match &self.algo {
            CpAlgo::Qcn(q) | CpAlgo::Fqcn(q) => (
                q.params().cp_queue_set_point.get(),
                q.params().cp_feedback_weight,
                q.params().cp_min_sample_base.get(),
                q.vars().bytes_to_sample,
            ),
            CpAlgo::ExplicitRate(e) => (e.params().qeq, 0, 0, 0),
        };
        let er = match &self.algo {
            CpAlgo::ExplicitRate(e) => Some(ErStats {
                advertised_rate: e.rate(),
                capacity: e.capacity(),
                interval: e.params().interval_for(e.capacity()),
                intervals: e.intervals(),
                last_arrival_rate: e
                    .last()
                    .map_or(Rate::ZERO, |m| Rate::from_f64(m.arrival_rate)),
                last_rho_milli: e.last().map_or(0, |m| (m.rho * 1000.0).round() as u64),
            }),
            _ => None,
        };
        let c = &self.counters;
        CpStats {
            id: self.id,
            port: port_name.to_string(),
            port_index: self.port.0,
            priority: self.priority,
            placement: self.placement,
            mode: self.mode(),
            culprit: self.culprit,
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
            culprits: c.culprits,
            last_culprits: c.last_culprits,
            culprit_fallbacks: c.culprit_fallbacks,
            flows_tracked: self.flows.as_ref().map_or(0, |t| t.len() as u64),
            flow_overflow: self.flows.as_ref().map_or(0, |t| t.overflow),
            flow_occupancy: self.flows.as_ref().map_or(0, |t| {
                t.entries()
                    .iter()
                    .filter(|e| e.live)
                    .map(|e| e.occupancy)
                    .sum()
            }),
            rate_fb_tx: c.rate_fb_tx,
            rate_fb_dropped: c.rate_fb_dropped,
            advertised_rate_bps: er.as_ref().map_or(0, |e| e.advertised_rate.bps()),
            explicit_rate: er,
            cnm_other_dst: c.other_dst,
            cnm_per_dst: c
                .per_dst
                .iter()
                .map(|&(mac, cnms)| DstCount { mac, cnms })
                .collect(),
        }
    }
}

/// CNMs (or rate-feedback messages) sent to one destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DstCount {
    /// Destination MAC (the source of the sampled frames, or the culprit).
    pub mac: EthernetAddress,
    /// Messages sent to it.
    pub cnms: u64,
}

/// Explicit-rate state of a CP (`cps[].explicit_rate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErStats {
    /// The advertised rate r.
    pub advertised_rate: Rate,
    /// C, the link capacity the CP divides.
    pub capacity: Rate,
    /// The measurement interval T in use.
    pub interval: Duration,
    /// Intervals measured.
    pub intervals: u64,
    /// A of the last interval.
    pub last_arrival_rate: Rate,
    /// ρ of the last interval × 1000.
    pub last_rho_milli: u64,
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
    /// Culprit selection.
    pub culprit: Culprit,
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
    /// Feedback weight w (0 for explicit-rate).
    pub weight: u32,
    /// Sampling base (octets; 0 for explicit-rate).
    pub sample_base: u64,
    /// Octets until the next sample.
    pub next_sample_in: u64,
    /// Fb of the last sample.
    pub last_fb: i64,
    /// QntzFb of the last sample (0 = no CNM).
    pub last_qntz_fb: u8,
    /// Culprits chosen (CNM addressees of congested samples).
    pub culprits: u64,
    /// Culprits of the last congested sample (FQCN: |S_R|).
    pub last_culprits: u32,
    /// Congested samples that fell back to the sampled frame's source.
    pub culprit_fallbacks: u64,
    /// Flows in the CP's flow table.
    pub flows_tracked: u64,
    /// Frames of flows not tracked because the table was full.
    pub flow_overflow: u64,
    /// Octets of tracked flows in the CP's queue, Σ q_n (occupancy culprits; 0 otherwise).
    pub flow_occupancy: u64,
    /// Rate-feedback messages sent (explicit-rate).
    pub rate_fb_tx: u64,
    /// Rate-feedback messages lost.
    pub rate_fb_dropped: u64,
    /// The advertised rate in bit/s (explicit-rate; 0 otherwise), for the metrics.
    pub advertised_rate_bps: u64,
    /// Explicit-rate state (mode `explicit-rate` only).
    pub explicit_rate: Option<ErStats>,
    /// CNMs to destinations beyond the per-destination table.
    pub cnm_other_dst: u64,
    /// CNMs (rate-feedback messages for explicit-rate) per destination (first 256).
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
        assert_eq!(c.validate().unwrap_err().field, "cnpv[1]");
        let c = CpConfig {
            cp_min_header_octets: 65,
            ..CpConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "cp_min_header_octets");
        let c = CpConfig {
            cp_feedback_weight: 5,
            ..CpConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "cp_feedback_weight");
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
    fn variant_config_and_combinations() {
        let c: CpConfig = toml::from_str(
            "mode = \"fqcn\"\nmax_flows = 64\n[[fqcn_weights]]\nmac = \"02:00:00:00:00:01\"\nweight = 4\n[[fqcn_weights]]\nvid = 10\nweight = 2\n",
        )
        .unwrap();
        assert_eq!(c.mode, CpMode::Fqcn);
        assert_eq!(c.max_flows, 64);
        assert!(c.validate().is_ok());
        let id = |m: u8, vid| FlowId {
            src: EthernetAddress([2, 0, 0, 0, 0, m]),
            dst: EthernetAddress([2, 0, 0, 0, 0, 0xee]),
            vid,
            priority: 3,
        };
        assert_eq!(weight_of(&c.fqcn_weights, &id(1, 10)), 4);
        assert_eq!(weight_of(&c.fqcn_weights, &id(2, 10)), 2);
        assert_eq!(weight_of(&c.fqcn_weights, &id(2, 0)), 1);
        let c: CpConfig = toml::from_str(
            "mode = \"explicit-rate\"\ner_interval = \"3ms\"\ner_a = 1.1\ner_min_rate = \"1mbit\"\n",
        )
        .unwrap();
        assert_eq!(c.er_params().interval, Some(Duration::from_millis(3)));
        assert_eq!(c.er_params().a, 1.1);
        assert_eq!(c.er_params().qeq, 26_000);
        assert!(c.validate().is_ok());
        let c: CpConfig = toml::from_str("culprit = \"occupancy-random\"").unwrap();
        assert_eq!(c.culprit, Culprit::OccupancyRandom);
        assert!(c.validate().is_ok() && c.tracks_flows());
        assert!(!CpConfig::default().tracks_flows());
        assert!(toml::from_str::<CpConfig>("mode = \"fast\"").is_err());
        assert!(toml::from_str::<CpConfig>("culprit = \"nobody\"").is_err());
        // Combinations that make no sense name the field.
        for mode in [CpMode::Fqcn, CpMode::ExplicitRate] {
            for culprit in [Culprit::OccupancyDeterministic, Culprit::OccupancyRandom] {
                let e = CpConfig {
                    mode,
                    culprit,
                    ..CpConfig::default()
                }
                .validate()
                .unwrap_err();
                assert_eq!(e.field, "culprit");
                assert!(e.reason.contains(&mode.to_string()), "{}", e.reason);
            }
        }
        let bad = |c: CpConfig| c.validate().unwrap_err().field;
        let w = |weight, priority, vid| FlowWeight {
            mac: None,
            vid,
            priority,
            weight,
        };
        let fq = CpConfig {
            mode: CpMode::Fqcn,
            ..CpConfig::default()
        };
        assert_eq!(
            bad(CpConfig {
                fqcn_weights: vec![w(1, None, None), w(0, None, None)],
                ..fq.clone()
            }),
            "fqcn_weights[1].weight"
        );
        assert_eq!(
            bad(CpConfig {
                fqcn_weights: vec![w(1, Some(8), None)],
                ..fq.clone()
            }),
            "fqcn_weights[0].priority"
        );
        assert_eq!(
            bad(CpConfig {
                fqcn_weights: vec![w(1, None, Some(4096))],
                ..fq.clone()
            }),
            "fqcn_weights[0].vid"
        );
        assert_eq!(
            bad(CpConfig {
                max_flows: 0,
                ..fq.clone()
            }),
            "max_flows"
        );
        let er = CpConfig {
            mode: CpMode::ExplicitRate,
            ..CpConfig::default()
        };
        assert_eq!(
            bad(CpConfig {
                er_c: 1.5,
                ..er.clone()
            }),
            "er_c"
        );
        assert_eq!(
            bad(CpConfig {
                er_interval: Some(Duration::ZERO),
                ..er
            }),
            "er_interval"
        );
        for m in [CpMode::Qcn, CpMode::Fqcn, CpMode::ExplicitRate] {
            assert_eq!(m.to_string().parse::<CpMode>(), Ok(m));
        }
    }

    /// FQCN at the CP level: a congested sample after a known byte mix gives one target per
    /// culprit with its own Ψ_i.
    #[test]
    fn fqcn_targets_from_byte_counts() {
        let mut rng = Rng::new(5);
        let cfg = CpConfig {
            mode: CpMode::Fqcn,
            cp_queue_set_point: Bytes::new(1_000),
            // Large enough that the 27 frames below never reach it (≥ 85 % of 100 kB).
            cp_min_sample_base: Bytes::new(100_000),
            ..CpConfig::default()
        };
        let mut cp = CongestionPoint::new(
            &cfg,
            EthernetAddress([2, 0, 0, 0, 0, 0x10]),
            PortId(3),
            3,
            Placement::Output,
            Rate::from_gbps(10),
            &mut rng,
        );
        let frame = |k: u8| {
            let mut f = vec![0u8; 1000];
            f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x99]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, k]);
            f[12..14].copy_from_slice(&[0x88, 0xB6]);
            f
        };
        // B = (10, 9, 7, 1) kB from sources 1..4 arriving on ports 0..3.
        let mut q = 0;
        for (k, n) in [(1u8, 10), (2, 9), (3, 7), (4, 1)] {
            for _ in 0..n {
                q += 1000;
                let f = frame(k);
                let a = Arrival {
                    now: Instant::ZERO,
                    frame: &f,
                    qlen: q,
                    ingress: PortId(u16::from(k) - 1),
                };
                assert!(cp.arrival(&a, &mut rng).is_none());
            }
        }
        assert_eq!(cp.flows().unwrap().len(), 4);
        // A 100 kB frame of source 2 ends the sampling interval.
        let big = {
            let mut f = frame(2);
            f.resize(100_000, 0);
            f
        };
        let a = Arrival {
            now: Instant::ZERO,
            frame: &big,
            qlen: 200_000,
            ingress: PortId(1),
        };
        let fb = cp.arrival(&a, &mut rng).unwrap();
        assert_eq!(fb.qntz_fb, 63);
        // B = (10, 109, 7, 1) kB: M = 31.75 → S_H = {2}; S_R = {2}: one CNM with Ψ = 63.
        assert_eq!(
            cp.targets(),
            &[Target {
                flow: 1,
                qntz_fb: 63
            }]
        );
        assert_eq!(cp.counters().culprits, 1);
        // The counts restart after the sample.
        assert!(cp.flows().unwrap().entries().iter().all(|e| e.bytes == 0));
        let e = cp.flows().unwrap().get(1).unwrap();
        assert_eq!(e.ingress, PortId(1));
        assert_eq!(&e.header()[6..12], &[2, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn cpid_by_placement() {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 0x10]);
        let mut rng = Rng::new(1);
        let c = CpConfig::default();
        let o = CongestionPoint::new(
            &c,
            mac,
            PortId(2),
            3,
            Placement::Output,
            Rate::from_gbps(10),
            &mut rng,
        );
        let i = CongestionPoint::new(
            &c,
            mac,
            PortId(2),
            3,
            Placement::Input,
            Rate::from_gbps(10),
            &mut rng,
        );
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
            Rate::from_gbps(10),
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

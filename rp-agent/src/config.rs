//! Agent configuration: the settings of the [`crate::Agent`] core with documented defaults,
//! serde `Deserialize` (the daemon's TOML file maps onto these types field for field) and one
//! validation pass that names the offending field.
//!
//! The reaction-point parameters carry the names of Linux `struct ieee_qcn`
//! (`include/uapi/linux/dcbnl.h`), which mirror the IEEE8021-CN-MIB RP objects of
//! 802.1Q-2011 clause 32.13 (`rpg_*`). Defaults are the standard's, as listed in the project's QCN
//! reference (§3), except `rpg_max_rate`, which defaults to the configured line rate.
//!
//! ```toml
//! line_rate = "100mbit"
//! priority = 3                 # PCP of the tag on every frame sent up
//! vid = 0                      # 0 = priority-tagged
//! flow_key = "dst-priority"    # or "five-tuple"
//! queue_limit = "256KB"        # per flow; a full queue stops reading the host
//! rp_mode = "qcn"
//!
//! [rp]
//! rpg_byte_reset = "150KB"
//! rpg_time_reset = "15ms"
//! rpg_threshold = 5
//! rpg_ai_rate = "5mbit"
//! rpg_hai_rate = "50mbit"
//! rpg_gd = 7                   # Gd = 1/128
//! rpg_min_dec_fac = 50         # percent
//! rpg_min_rate = "5mbit"
//! rp_clamp_tgt_rate = "byte-stage"  # or "after-time-inc", "always"
//! rp_release = "max-rate"            # or "line-rate"
//! ```

use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Bytes, Duration, Rate, Scale};
use serde::Deserialize;
use std::str::FromStr;

/// Priorities (802.1Q clause 6.9.3: the 3-bit PCP).
pub const NUM_PRIORITIES: usize = 8;
/// Largest number of flows the agent may be configured to track: RPIDs are `index + 1` and must
/// fit the 16-bit CN-TAG Flow ID field (802.1Q clause 33.3) without reaching 0.
pub const MAX_FLOWS_LIMIT: usize = 4096;
/// Largest frame the agent queues (octets, without FCS): a 9000-octet jumbo payload plus
/// headers. Longer frames are refused with [`crate::HostError::TooLong`].
pub const MAX_FRAME: usize = 9216;
/// Largest rate anywhere in the configuration (`line_rate`, the `rpg_*` rates): 10 Tb/s, above
/// every Ethernet rate (802.3 defines up to 800 Gb/s), and low enough that rate × time
/// products in nanoseconds stay far from overflow.
pub const MAX_RATE: Rate = Rate::from_bps(10_000_000_000_000);
/// Largest queue (`queue_limit` per flow, `host_queue_limit`): 1 GiB.
/// Flows × `queue_limit` is bounded too ([`MAX_QUEUED_TOTAL`]).
pub const MAX_QUEUE: Bytes = Bytes::new(1 << 30);
/// Largest total of the flow queues when every one is full, `max_flows` × `queue_limit`:
/// 16 GiB, what a 24 GiB machine can hold beside the rest of the process.
pub const MAX_QUEUED_TOTAL: Bytes = Bytes::new(16 << 30);
/// Largest `event_capacity`: 2^20 events.
pub const MAX_EVENT_CAPACITY: usize = 1 << 20;
/// Largest `rpg_bs_max_cps`: QCN/BS entries of one flow (a path through more congestion points
/// than this is not a data centre path).
pub const MAX_BS_CPS: usize = 64;

/// What identifies a flow (the unit that gets its own limiter and RPID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FlowKeyMode {
    /// (destination MAC, priority): the flow of 802.1Q clause 30.3 (a "CN flow" is identified
    /// by its destination and priority at the reaction point). Default.
    #[default]
    DstPriority,
    /// (destination MAC, priority, IP 5-tuple): one limiter per transport connection. Frames
    /// without an IP header fall back to (destination, priority).
    FiveTuple,
}

/// Which reaction-point algorithm drives the limiters ([`crate::rp`]). Serde and
/// [`FromStr`] names: `qcn`, `adaptive-bc`, `qcn-bs`, `adaptive-bc+qcn-bs`, `explicit-rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize, Default)]
pub enum RpMode {
    /// Standard QCN (802.1Q-2011 clause 32.13-32.14), [`crate::rp::qcn`].
    #[default]
    #[serde(rename = "qcn")]
    Qcn,
    /// Standard QCN with the adaptive byte counter BC_LIMIT = K·CR (Hayashi, Itsumi and
    /// Yamamoto, DCPerf 2011), [`crate::rp::adaptive_bc`].
    #[serde(rename = "adaptive-bc")]
    AdaptiveBc,
    /// QCN with Bottleneck Selection: one QCN limiter per congestion point, the flow sent at
    /// their minimum (Matsushima, Tanisawa and Yamamoto, Algorithm 1), [`crate::rp::bs`].
    #[serde(rename = "qcn-bs")]
    QcnBs,
    /// QCN/BS with the adaptive BC_LIMIT in every entry: Algorithm 1 as published.
    #[serde(rename = "adaptive-bc+qcn-bs")]
    AdaptiveBcQcnBs,
    /// Explicit-rate source (Jain, Jiang et al., IEEE 802.1 2006): the flow is sent at the rate
    /// advertised in rate-feedback messages, CNMs are ignored, [`crate::rp::explicit_rate`].
    #[serde(rename = "explicit-rate")]
    ExplicitRate,
}

impl RpMode {
    /// Every mode, in the order of the documentation.
    pub const ALL: [RpMode; 5] = [
        RpMode::Qcn,
        RpMode::AdaptiveBc,
        RpMode::QcnBs,
        RpMode::AdaptiveBcQcnBs,
        RpMode::ExplicitRate,
    ];

    /// The mode's name, as in TOML and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            RpMode::Qcn => "qcn",
            RpMode::AdaptiveBc => "adaptive-bc",
            RpMode::QcnBs => "qcn-bs",
            RpMode::AdaptiveBcQcnBs => "adaptive-bc+qcn-bs",
            RpMode::ExplicitRate => "explicit-rate",
        }
    }

    /// True when the byte counter's limit is BC_LIMIT = K·CR rather than `rpg_byte_reset`.
    pub const fn adaptive_bc(self) -> bool {
        matches!(self, RpMode::AdaptiveBc | RpMode::AdaptiveBcQcnBs)
    }

    /// True when the reaction point keeps one limiter per CPID (QCN/BS).
    pub const fn per_cp(self) -> bool {
        matches!(self, RpMode::QcnBs | RpMode::AdaptiveBcQcnBs)
    }

    /// True when the flows follow explicit-rate feedback instead of CNMs.
    pub const fn explicit_rate(self) -> bool {
        matches!(self, RpMode::ExplicitRate)
    }
}

impl std::fmt::Display for RpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown reaction-point mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown rp mode {0:?}: expected qcn, adaptive-bc, qcn-bs, adaptive-bc+qcn-bs or explicit-rate"
)]
pub struct RpModeError(pub String);

impl FromStr for RpMode {
    type Err = RpModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RpMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| RpModeError(s.to_string()))
    }
}

/// What a CNM does to the target rate TR and to the byte counter (`rp_clamp_tgt_rate`). The
/// rate decrease itself and the reset of both stages and of the timer are the same in every
/// reading; see the essay of [`crate::rp::qcn`] for the sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClampTgtRate {
    /// TR ← CR and the byte counter reloaded only when the byte counter has expired since the
    /// last CNM (BC > 0) or the limiter is still at its ceiling: the QCN pseudo-code v2.2, the
    /// ns-3 QCN model, the 802.1Qau state machine of ns3-rdma, mlx5 with both clamp bits off.
    #[default]
    ByteStage,
    /// As `byte-stage`, but a timer expiry counts too (BC > 0 or T > 0): mlx5
    /// `rp_clamp_tgt_rate_ati` ("the target rate should be updated if the transmission rate
    /// was increased due to the timer, and not only due to the byte counter").
    AfterTimeInc,
    /// TR ← CR and the byte counter reloaded on every CNM: the FQCN paper's eq. 3, the DCQCN
    /// reaction point, mlx5 `rp_clamp_tgt_rate`.
    Always,
}

impl std::fmt::Display for ClampTgtRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClampTgtRate::ByteStage => "byte-stage",
            ClampTgtRate::AfterTimeInc => "after-time-inc",
            ClampTgtRate::Always => "always",
        })
    }
}

/// When a QCN limiter is released (`rp_release`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Release {
    /// TR grows without a cap, CR is capped at `rpg_max_rate`, and the limiter is released
    /// (the flow is sent at the line rate, untagged) as soon as CR reaches `rpg_max_rate`:
    /// the ns-3 QCN model and ns3-rdma (TR uncapped), Mellanox's description of
    /// `RPG_MAX_RATE` ("once this limit is reached, the RP rate limiter is released").
    #[default]
    MaxRate,
    /// TR and CR are both capped at `rpg_max_rate` and the limiter is released only when CR
    /// reaches the line rate (with `rpg_max_rate` below the line rate it is never released).
    /// CR halves its way up to a capped TR, so an idle flow takes ~28 timer expiries to be
    /// released at 1 Gb/s instead of 7.
    LineRate,
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Release::MaxRate => "max-rate",
            Release::LineRate => "line-rate",
        })
    }
}

/// Reaction-point parameters under the dcbnl `ieee_qcn` names (one set for every flow).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RpParams {
    /// BC_LIMIT: bytes transmitted between two byte-counter expiries (802.1Q 32.13.5
    /// `RPG_BYTE_RESET`; halved once the byte-counter stage exceeds the threshold). Default 150000 B.
    pub rpg_byte_reset: Bytes,
    /// Period of the RP timer (802.1Q 32.13.6 `RPG_TIME_RESET`; halved once the timer stage
    /// exceeds the threshold). Default 15 ms.
    pub rpg_time_reset: Duration,
    /// Number of byte-counter or timer expiries of fast recovery (802.1Q 32.13.7
    /// `RPG_THRESHOLD`). Default 5.
    pub rpg_threshold: u32,
    /// R_AI, the target-rate step of active increase (802.1Q 32.13.8 `RPG_AI_RATE`).
    /// Default 5 Mb/s.
    pub rpg_ai_rate: Rate,
    /// R_HAI, the step of hyper-active increase (802.1Q 32.13.9 `RPG_HAI_RATE`).
    /// Default 50 Mb/s.
    pub rpg_hai_rate: Rate,
    /// Gd as a power of two: Gd = 2^-rpg_gd (802.1Q 32.13.10 `RPG_GD`; dcbnl stores the
    /// exponent). Default 7, i.e. Gd = 1/128, so that QntzFb = 63 gives a decrease of 49 %.
    pub rpg_gd: u8,
    /// Smallest multiplicative factor one CNM may apply, in percent (802.1Q 32.13.11
    /// `RPG_MIN_DEC_FAC`). Default 50: one CNM at most halves the rate.
    pub rpg_min_dec_fac: u8,
    /// Floor of the current rate (802.1Q 32.13.12 `RPG_MIN_RATE`): no CNM pushes CR below it.
    /// Default 5 Mb/s.
    pub rpg_min_rate: Rate,
    /// Ceiling of CR (802.1Q 32.13 `RPG_MAX_RATE`, IEEE8021-CN-MIB `ieee8021CnRpgMaxRate`);
    /// `None` = the line rate. What happens when CR reaches it is `rp_release`.
    pub rpg_max_rate: Option<Rate>,
    /// What a CNM does to TR and to the byte counter ([`ClampTgtRate`], named after the mlx5
    /// driver's `rp_clamp_tgt_rate` / `rp_clamp_tgt_rate_ati`). Default `byte-stage`: only
    /// when the byte counter has expired since the last CNM (the QCN pseudo-code v2.2 and the
    /// 802.1Qau state machine as the deployed implementations read it).
    pub rp_clamp_tgt_rate: ClampTgtRate,
    /// When the limiter is released and whether TR is capped ([`Release`]). Default
    /// `max-rate`: TR is not capped, CR is, and the limiter is released when CR reaches
    /// `rpg_max_rate` (the deployed implementations' reading).
    pub rp_release: Release,
    /// Spread of the uniform jitter applied to every byte-counter and timer reload: the reload
    /// is multiplied by U(1 − j, 1 + j) (802.1Q 32.13: "randomized by ±15 %"). Default 0.15;
    /// 0 makes the firings deterministic (tests).
    pub rp_jitter: f64,
    /// K of the adaptive byte counter, BC_LIMIT = K·CR (Hayashi et al. 2011, "BC_LIMIT =
    /// CR * 24e-5"; QCN/BS paper eq. 5, K = 2.4·10⁻⁴ s): the time the flow takes to send one
    /// BC_LIMIT at its current rate. Used by the `adaptive-bc` modes only. Default 240 µs
    /// (150 KB at 5 Gb/s). A time: under the project's time scaling it is multiplied by S.
    pub rpg_adaptive_k: Duration,
    /// Most QCN/BS entries (one per CPID) one flow keeps; a CNM from a further congestion point
    /// replaces the entry with the highest CR, and is counted (`bs_cp_overflow`). Used by the
    /// `qcn-bs` modes only. Default 8.
    pub rpg_bs_max_cps: usize,
    /// Explicit-rate mode: a limiter that hears no applicable rate feedback for this long is
    /// released (the flow returns to line rate and forgets its congestion point). Default 1 s;
    /// must be positive.
    pub rp_er_timeout: Duration,
}

impl Default for RpParams {
    fn default() -> Self {
        RpParams {
            rpg_byte_reset: Bytes::new(150_000),
            rpg_time_reset: Duration::from_millis(15),
            rpg_threshold: 5,
            rpg_ai_rate: Rate::from_mbps(5),
            rpg_hai_rate: Rate::from_mbps(50),
            rpg_gd: 7,
            rpg_min_dec_fac: 50,
            rpg_min_rate: Rate::from_mbps(5),
            rpg_max_rate: None,
            rp_clamp_tgt_rate: ClampTgtRate::ByteStage,
            rp_release: Release::MaxRate,
            rp_jitter: 0.15,
            rpg_adaptive_k: Duration::from_micros(240),
            rpg_bs_max_cps: 8,
            rp_er_timeout: Duration::from_secs(1),
        }
    }
}

/// The whole configuration of one agent.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Rate of the uplink: the round-robin across flows never exceeds it, unlimited flows are
    /// sent at it, and a limiter is released when its rate reaches it. Default 1 Gb/s.
    pub line_rate: Rate,
    /// PCP of the 802.1Q tag put on every frame sent up (802.1Q clause 6.9.3); also the
    /// priority of untagged host frames. Default 3, the usual CNPV.
    pub priority: u8,
    /// VID of that tag; 0 = priority-tagged frame (802.1Q clause 9.6). Default 0.
    pub vid: u16,
    /// What identifies a flow. Default `dst-priority`.
    pub flow_key: FlowKeyMode,
    /// The host's MAC address: CNMs are accepted only when addressed to it (their DA is the SA
    /// of the sampled frame, 802.1Q clause 32.10). `None` accepts CNMs addressed to anyone.
    #[serde(deserialize_with = "de_opt_mac")]
    pub mac: Option<EthernetAddress>,
    /// Bytes one flow may hold queued; a host frame that does not fit is refused with
    /// backpressure. Default 256 KB.
    pub queue_limit: Bytes,
    /// Bytes of frames waiting for the host (network → host). Frames beyond it are counted
    /// drops (`host_queue_full`). Default 1 MB.
    pub host_queue_limit: Bytes,
    /// Put a CN-TAG with the flow's RPID on frames of rate-limited flows (802.1Q clause 33.3).
    /// Default true. A CN-TAG must not leave the congestion-notification domain; turn this off
    /// when the receivers are not CN-aware and no edge port strips the tag (CNMs are then
    /// matched by destination and priority alone).
    pub cn_tag: bool,
    /// Most flows tracked at once. Default 256; at most 4096.
    pub max_flows: usize,
    /// A released flow with an empty queue is forgotten after this idle time, freeing its slot.
    /// Default 10 s.
    pub flow_idle_timeout: Duration,
    /// Largest back-dating of a late poll (octets of line time are sent in a burst to catch
    /// up, as the switch's shaper does). Default 200 µs.
    pub catch_up: Duration,
    /// Pace by the octets a frame occupies on a real Ethernet: padded to 60 octets, plus FCS (4)
    /// and preamble, SFD and inter-packet gap (20) (802.3 clauses 3.1.1, 4.2.3.3, 4.4.2).
    /// Default true, matching the switch's line emulation.
    pub wire_overhead: bool,
    /// Reaction-point algorithm: `qcn` (default), `adaptive-bc`, `qcn-bs`,
    /// `adaptive-bc+qcn-bs` or `explicit-rate` ([`RpMode`]).
    pub rp_mode: RpMode,
    /// Reaction-point parameters.
    pub rp: RpParams,
    /// Events kept for [`crate::Agent::drain_events`]; beyond it they are counted lost.
    /// Default 4096.
    pub event_capacity: usize,
    /// Bridges whose congestion points this host believes: when not empty, a CNM is acted on
    /// only if the MAC part of its CPID (the bridge's address, 802.1Q clause 33.4.5) is one of
    /// these; others are counted `cnm_unknown_cp` and ignored. QCN has no authentication: by
    /// default (empty) a CNM from any source MAC and CPID is acted on, and a forged one can
    /// slow a flow down to `rpg_min_rate`. An operator who knows the bridges on the flows'
    /// paths lists them here (e.g. `["02:00:00:00:00:00"]`, the switches' `mac`). At most 256.
    #[serde(deserialize_with = "de_macs")]
    pub cnm_bridges: Vec<EthernetAddress>,
    /// Write into every generated frame sent up (the project's generators' measurement
    /// header, [`cnm_proto::wire::generated`]) the instant its line, pacers and PAUSE let it
    /// start: the departure stamp an emulation's switch uses to place the frame where a
    /// physical link would have, however late this process's loop sent it. Other frames are
    /// left as they are. Default false; the testbed turns it on for its namespace hosts.
    pub departure_stamps: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            line_rate: Rate::from_gbps(1),
            priority: 3,
            vid: 0,
            flow_key: FlowKeyMode::DstPriority,
            mac: None,
            queue_limit: Bytes::new(256_000),
            host_queue_limit: Bytes::new(1_000_000),
            cn_tag: true,
            max_flows: 256,
            flow_idle_timeout: Duration::from_secs(10),
            catch_up: Duration::from_micros(200),
            wire_overhead: true,
            rp_mode: RpMode::Qcn,
            rp: RpParams::default(),
            event_capacity: 4096,
            cnm_bridges: Vec::new(),
            departure_stamps: false,
        }
    }
}

/// A configuration value that is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    /// The field, as a TOML path (`rp.rpg_gd`).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl AgentConfig {
    /// The ceiling of CR and TR: `rpg_max_rate`, or the line rate.
    pub fn max_rate(&self) -> Rate {
        self.rp.rpg_max_rate.unwrap_or(self.line_rate)
    }

    /// Checks every value; the first problem found is returned, naming its field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cnm_bridges.len() > 256 {
            return Err(ConfigError::new("cnm_bridges", "at most 256 bridges"));
        }
        if self.line_rate == Rate::ZERO {
            return Err(ConfigError::new("line_rate", "must be positive"));
        }
        if usize::from(self.priority) >= NUM_PRIORITIES {
            return Err(ConfigError::new("priority", "must be in 0..=7"));
        }
        if self.vid >= 4095 {
            return Err(ConfigError::new("vid", "must be in 0..=4094"));
        }
        if (self.queue_limit.get() as usize) < MAX_FRAME {
            return Err(ConfigError::new(
                "queue_limit",
                format!("must hold at least one largest frame ({MAX_FRAME} octets)"),
            ));
        }
        if (self.host_queue_limit.get() as usize) < MAX_FRAME {
            return Err(ConfigError::new(
                "host_queue_limit",
                format!("must hold at least one largest frame ({MAX_FRAME} octets)"),
            ));
        }
        if self.max_flows == 0 || self.max_flows > MAX_FLOWS_LIMIT {
            return Err(ConfigError::new(
                "max_flows",
                format!("must be in 1..={MAX_FLOWS_LIMIT}"),
            ));
        }
        if self.event_capacity == 0 || self.event_capacity > MAX_EVENT_CAPACITY {
            return Err(ConfigError::new(
                "event_capacity",
                format!("must be in 1..={MAX_EVENT_CAPACITY}"),
            ));
        }
        self.validate_bounds()?;
        let rp = &self.rp;
        if rp.rpg_byte_reset.get() < 2 {
            return Err(ConfigError::new(
                "rp.rpg_byte_reset",
                "must be at least 2 octets",
            ));
        }
        if rp.rpg_time_reset < Duration::from_micros(2) {
            return Err(ConfigError::new(
                "rp.rpg_time_reset",
                "must be at least 2 µs",
            ));
        }
        if rp.rpg_gd > 16 {
            return Err(ConfigError::new(
                "rp.rpg_gd",
                "is log2(1/Gd) and must be in 0..=16",
            ));
        }
        if rp.rpg_min_dec_fac == 0 || rp.rpg_min_dec_fac > 100 {
            return Err(ConfigError::new(
                "rp.rpg_min_dec_fac",
                "must be a percentage in 1..=100",
            ));
        }
        if rp.rpg_min_rate == Rate::ZERO {
            return Err(ConfigError::new("rp.rpg_min_rate", "must be positive"));
        }
        let max = self.max_rate();
        if max > self.line_rate {
            return Err(ConfigError::new(
                "rp.rpg_max_rate",
                format!("must not exceed line_rate ({})", self.line_rate),
            ));
        }
        if rp.rpg_min_rate > max {
            return Err(ConfigError::new(
                "rp.rpg_min_rate",
                format!("must not exceed rpg_max_rate ({max})"),
            ));
        }
        if !(0.0..1.0).contains(&rp.rp_jitter) {
            return Err(ConfigError::new("rp.rp_jitter", "must be in [0, 1)"));
        }
        if rp.rpg_adaptive_k == Duration::ZERO || rp.rpg_adaptive_k > Duration::from_secs(10) {
            return Err(ConfigError::new(
                "rp.rpg_adaptive_k",
                "must be positive and at most 10 s",
            ));
        }
        if rp.rpg_bs_max_cps == 0 || rp.rpg_bs_max_cps > MAX_BS_CPS {
            return Err(ConfigError::new(
                "rp.rpg_bs_max_cps",
                format!("must be in 1..={MAX_BS_CPS}"),
            ));
        }
        if rp.rp_er_timeout == Duration::ZERO {
            return Err(ConfigError::new("rp.rp_er_timeout", "must be positive"));
        }
        Ok(())
    }
}

impl AgentConfig {
    /// The size and rate bounds (what one machine can hold).
    fn validate_bounds(&self) -> Result<(), ConfigError> {
        let rp = &self.rp;
        for (field, r) in [
            ("line_rate", Some(self.line_rate)),
            ("rp.rpg_ai_rate", Some(rp.rpg_ai_rate)),
            ("rp.rpg_hai_rate", Some(rp.rpg_hai_rate)),
            ("rp.rpg_min_rate", Some(rp.rpg_min_rate)),
            ("rp.rpg_max_rate", rp.rpg_max_rate),
        ] {
            if r.is_some_and(|r| r > MAX_RATE) {
                return Err(ConfigError::new(field, format!("above {MAX_RATE}")));
            }
        }
        for (field, b) in [
            ("queue_limit", self.queue_limit),
            ("host_queue_limit", self.host_queue_limit),
        ] {
            if b > MAX_QUEUE {
                return Err(ConfigError::new(
                    field,
                    format!("{b} is above {MAX_QUEUE} (1 GiB)"),
                ));
            }
        }
        // Both bounded above: no overflow.
        let total = self.queue_limit.get() * self.max_flows as u64;
        if total > MAX_QUEUED_TOTAL.get() {
            return Err(ConfigError::new(
                "queue_limit",
                format!(
                    "max_flows ({}) × queue_limit = {} is above {MAX_QUEUED_TOTAL} (16 GiB)",
                    self.max_flows,
                    Bytes::new(total)
                ),
            ));
        }
        Ok(())
    }
}

/// The key of a run-time reaction-point change that is not an `[rp]` parameter.
pub const RP_MODE_KEY: &str = "rp_mode";

/// The top-level settings of [`AgentConfig`] other than `rp_mode` and `[rp]`: fixed at
/// construction, refused by a run-time change with "cannot change at run time".
pub const FIXED_KEYS: [&str; 13] = [
    "line_rate",
    "priority",
    "vid",
    "flow_key",
    "mac",
    "queue_limit",
    "host_queue_limit",
    "cn_tag",
    "max_flows",
    "flow_idle_timeout",
    "catch_up",
    "wire_overhead",
    "event_capacity",
];

/// A run-time change of the reaction points: `rp_mode` and every `[rp]` parameter
/// ([`RpParams`]), one `Option` each, `None` = unchanged; applied by
/// [`crate::Agent::apply_rp_patch`] (what happens to live limiters is told there).
///
/// Built at the edge — `ctl set rp KEY=VALUE...`, a scenario's timed event — with the
/// parameters under their own names or with an `rp.` prefix (`rpg_ai_rate = "10mbit"`,
/// `rp.rpg_ai_rate = "10mbit"`) and the configuration file's spellings of the values; an
/// unknown name is refused (`deny_unknown_fields`). It serialises with the unset fields left
/// out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RpPatch {
    /// [`AgentConfig::rp_mode`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rp_mode: Option<RpMode>,
    /// [`RpParams::rpg_byte_reset`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_byte_reset")]
    pub rpg_byte_reset: Option<Bytes>,
    /// [`RpParams::rpg_time_reset`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_time_reset")]
    pub rpg_time_reset: Option<Duration>,
    /// [`RpParams::rpg_threshold`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_threshold")]
    pub rpg_threshold: Option<u32>,
    /// [`RpParams::rpg_ai_rate`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_ai_rate")]
    pub rpg_ai_rate: Option<Rate>,
    /// [`RpParams::rpg_hai_rate`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_hai_rate")]
    pub rpg_hai_rate: Option<Rate>,
    /// [`RpParams::rpg_gd`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_gd")]
    pub rpg_gd: Option<u8>,
    /// [`RpParams::rpg_min_dec_fac`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_min_dec_fac")]
    pub rpg_min_dec_fac: Option<u8>,
    /// [`RpParams::rpg_min_rate`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_min_rate")]
    pub rpg_min_rate: Option<Rate>,
    /// [`RpParams::rpg_max_rate`] (a patch can set it, not return it to the line rate).
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_max_rate")]
    pub rpg_max_rate: Option<Rate>,
    /// [`RpParams::rp_jitter`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rp_jitter")]
    pub rp_jitter: Option<f64>,
    /// [`RpParams::rpg_adaptive_k`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_adaptive_k")]
    pub rpg_adaptive_k: Option<Duration>,
    /// [`RpParams::rpg_bs_max_cps`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rpg_bs_max_cps")]
    pub rpg_bs_max_cps: Option<usize>,
    /// [`RpParams::rp_er_timeout`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rp_er_timeout")]
    pub rp_er_timeout: Option<Duration>,
    /// [`RpParams::rp_clamp_tgt_rate`].
    #[serde(
        skip_serializing_if = "Option::is_none",
        alias = "rp.rp_clamp_tgt_rate"
    )]
    pub rp_clamp_tgt_rate: Option<ClampTgtRate>,
    /// [`RpParams::rp_release`].
    #[serde(skip_serializing_if = "Option::is_none", alias = "rp.rp_release")]
    pub rp_release: Option<Release>,
}

impl RpPatch {
    /// The error about key `key` of a patch (as the edge parser reports it) as a configuration
    /// error named as in the file: `rp_mode`, `rp.KEY` for the parameters (with or without the
    /// prefix as typed), and a fixed top-level setting such as `line_rate` refused by name.
    pub fn key_error(key: &str, reason: impl Into<String>) -> ConfigError {
        let bare = key.strip_prefix("rp.").unwrap_or(key);
        if bare == RP_MODE_KEY {
            ConfigError::new(RP_MODE_KEY, reason)
        } else if bare == key && FIXED_KEYS.contains(&key) {
            ConfigError::new(
                key,
                "cannot change at run time (only rp_mode and the [rp] parameters can)",
            )
        } else {
            ConfigError::new(format!("rp.{bare}"), reason)
        }
    }

    /// True when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self == &RpPatch::default()
    }
}

/// Time scaling ([`cnm_proto::scale`]): the line rate, the idle timeout, the catch-up and the
/// reaction points' rates and times. Octets and counts are unchanged.
impl Scale for AgentConfig {
    fn scale(&self, s: f64) -> Self {
        AgentConfig {
            line_rate: self.line_rate.scale(s),
            flow_idle_timeout: self.flow_idle_timeout.scale(s),
            catch_up: self.catch_up.scale(s),
            rp: self.rp.scale(s),
            ..self.clone()
        }
    }
}

/// Time scaling: R_AI, R_HAI, the floor and ceiling of the rate are divided by S; the RP timer
/// period, the adaptive byte counter's K (a time: BC_LIMIT = K·CR keeps its octets) and the
/// explicit-rate timeout are multiplied by S. Octets, stage counts, Gd and the jitter are
/// unchanged.
impl Scale for RpParams {
    fn scale(&self, s: f64) -> Self {
        RpParams {
            rpg_time_reset: self.rpg_time_reset.scale(s),
            rpg_ai_rate: self.rpg_ai_rate.scale(s),
            rpg_hai_rate: self.rpg_hai_rate.scale(s),
            rpg_min_rate: self.rpg_min_rate.scale(s),
            rpg_max_rate: self.rpg_max_rate.scale(s),
            rpg_adaptive_k: self.rpg_adaptive_k.scale(s),
            rp_er_timeout: self.rp_er_timeout.scale(s),
            ..*self
        }
    }
}

/// As [`RpParams`]'s.
impl Scale for RpPatch {
    fn scale(&self, s: f64) -> Self {
        RpPatch {
            rpg_time_reset: self.rpg_time_reset.scale(s),
            rpg_ai_rate: self.rpg_ai_rate.scale(s),
            rpg_hai_rate: self.rpg_hai_rate.scale(s),
            rpg_min_rate: self.rpg_min_rate.scale(s),
            rpg_max_rate: self.rpg_max_rate.scale(s),
            rpg_adaptive_k: self.rpg_adaptive_k.scale(s),
            rp_er_timeout: self.rp_er_timeout.scale(s),
            ..*self
        }
    }
}

impl RpParams {
    /// Applies the `[rp]` fields of `patch` (no check; see [`AgentConfig::with_rp_patch`]).
    pub fn apply(&mut self, patch: &RpPatch) {
        let RpPatch {
            rp_mode: _,
            rpg_byte_reset,
            rpg_time_reset,
            rpg_threshold,
            rpg_ai_rate,
            rpg_hai_rate,
            rpg_gd,
            rpg_min_dec_fac,
            rpg_min_rate,
            rpg_max_rate,
            rp_jitter,
            rpg_adaptive_k,
            rpg_bs_max_cps,
            rp_er_timeout,
            rp_clamp_tgt_rate,
            rp_release,
        } = *patch;
        fn set<T>(to: &mut T, from: Option<T>) {
            if let Some(v) = from {
                *to = v;
            }
        }
        set(&mut self.rpg_byte_reset, rpg_byte_reset);
        set(&mut self.rpg_time_reset, rpg_time_reset);
        set(&mut self.rpg_threshold, rpg_threshold);
        set(&mut self.rpg_ai_rate, rpg_ai_rate);
        set(&mut self.rpg_hai_rate, rpg_hai_rate);
        set(&mut self.rpg_gd, rpg_gd);
        set(&mut self.rpg_min_dec_fac, rpg_min_dec_fac);
        set(&mut self.rpg_min_rate, rpg_min_rate);
        if rpg_max_rate.is_some() {
            self.rpg_max_rate = rpg_max_rate;
        }
        set(&mut self.rp_jitter, rp_jitter);
        set(&mut self.rpg_adaptive_k, rpg_adaptive_k);
        set(&mut self.rpg_bs_max_cps, rpg_bs_max_cps);
        set(&mut self.rp_er_timeout, rp_er_timeout);
        set(&mut self.rp_clamp_tgt_rate, rp_clamp_tgt_rate);
        set(&mut self.rp_release, rp_release);
    }
}

impl AgentConfig {
    /// Applies `patch`: `rp_mode` and the `[rp]` parameters it sets (no check).
    pub fn apply(&mut self, patch: &RpPatch) {
        if let Some(m) = patch.rp_mode {
            self.rp_mode = m;
        }
        self.rp.apply(patch);
    }

    /// This configuration with `patch` applied, checked as a whole
    /// ([`AgentConfig::validate`]; fields named as in the file: `rp_mode`, `rp.rpg_ai_rate`).
    pub fn with_rp_patch(&self, patch: &RpPatch) -> Result<AgentConfig, ConfigError> {
        let mut cfg = self.clone();
        cfg.apply(patch);
        cfg.validate()?;
        Ok(cfg)
    }
}

fn de_macs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<EthernetAddress>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|s| EthernetAddress::from_str(s).map_err(serde::de::Error::custom))
        .collect()
}

fn de_opt_mac<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<EthernetAddress>, D::Error> {
    let s = Option::<String>::deserialize(d)?;
    s.map(|s| EthernetAddress::from_str(&s).map_err(serde::de::Error::custom))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        AgentConfig::default().validate().unwrap();
    }

    #[test]
    fn run_time_overrides_check_each_key() {
        let base = AgentConfig::default();
        // `KEY=VALUE` operands as a daemon reads them (the edge parser), then the patch.
        let set = |ops: &[&str]| {
            daemon_kit::patch::parse_pairs::<RpPatch, _>(ops)
                .map_err(|e| RpPatch::key_error(&e.key, e.reason))
                .and_then(|p| base.with_rp_patch(&p))
        };
        let c = set(&["rp_mode=adaptive-bc", "rpg_ai_rate=10mbit", "rpg_gd=6"]).unwrap();
        assert_eq!(c.rp_mode, RpMode::AdaptiveBc);
        assert_eq!(c.rp.rpg_ai_rate, Rate::from_mbps(10));
        assert_eq!(c.rp.rpg_gd, 6);
        assert_eq!(c.rp.rpg_time_reset, base.rp.rpg_time_reset);
        let c = set(&["rp.rpg_time_reset=3ms"]).unwrap();
        assert_eq!(c.rp.rpg_time_reset, Duration::from_millis(3));
        for (text, field, words) in [
            ("rp_mode=fast", "rp_mode", "fast"),
            ("rpg_gd=99", "rp.rpg_gd", "0..=16"),
            ("rpg_ai_rate=quick", "rp.rpg_ai_rate", "quick"),
            ("r_ai=1mbit", "rp.r_ai", "unknown field"),
            ("rp.r_ai=1mbit", "rp.r_ai", "unknown field"),
            ("line_rate=1mbit", "line_rate", "run time"),
            ("rpg_min_rate=2gbit", "rp.rpg_min_rate", "rpg_max_rate"),
        ] {
            let e = set(&[text]).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.to_string().contains(words), "{text}: {e}");
        }
    }

    #[test]
    fn module_example_parses() {
        let doc = include_str!("config.rs");
        let start = doc.find("//! ```toml").unwrap();
        let end = start + doc[start..].find("//! ```\n").unwrap();
        let text: String = doc[start..end]
            .lines()
            .skip(1)
            .map(|l| l.trim_start_matches("//!").trim_start())
            .collect::<Vec<_>>()
            .join("\n");
        let c: AgentConfig = toml::from_str(&text).unwrap();
        c.validate().unwrap();
        assert_eq!(c.rp.rpg_byte_reset, Bytes::new(150_000));
    }

    #[test]
    fn toml_maps_and_errors_name_the_field() {
        let c: AgentConfig = toml::from_str(
            r#"
            line_rate = "100mbit"
            priority = 5
            flow_key = "five-tuple"
            mac = "02:00:00:00:00:01"
            [rp]
            rpg_gd = 6
            rpg_time_reset = "10ms"
            rpg_ai_rate = "1mbit"
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.line_rate, Rate::from_mbps(100));
        assert_eq!(c.flow_key, FlowKeyMode::FiveTuple);
        assert_eq!(c.rp.rpg_gd, 6);
        assert_eq!(c.rp.rpg_threshold, 5);
        assert_eq!(c.max_rate(), Rate::from_mbps(100));
        let bad = AgentConfig {
            rp: RpParams {
                rpg_gd: 40,
                ..RpParams::default()
            },
            ..AgentConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "rp.rpg_gd");
        let bad = AgentConfig {
            priority: 9,
            ..AgentConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "priority");
        assert!(toml::from_str::<AgentConfig>("nonsense = 1").is_err());
    }

    #[test]
    fn rp_modes_by_name() {
        for m in RpMode::ALL {
            let c: AgentConfig = toml::from_str(&format!("rp_mode = \"{m}\"")).unwrap();
            assert_eq!(c.rp_mode, m);
            assert_eq!(m.name().parse::<RpMode>().unwrap(), m);
        }
        assert_eq!(
            "adaptive-bc+qcn-bs".parse::<RpMode>().unwrap(),
            RpMode::AdaptiveBcQcnBs
        );
        assert!(RpMode::AdaptiveBcQcnBs.adaptive_bc() && RpMode::AdaptiveBcQcnBs.per_cp());
        assert!(RpMode::AdaptiveBc.adaptive_bc() && !RpMode::AdaptiveBc.per_cp());
        assert!(RpMode::QcnBs.per_cp() && !RpMode::QcnBs.adaptive_bc());
        assert!(RpMode::ExplicitRate.explicit_rate() && !RpMode::Qcn.explicit_rate());
        let e = "fqcn".parse::<RpMode>().unwrap_err();
        assert!(e.to_string().contains("adaptive-bc+qcn-bs"), "{e}");
        assert!(toml::from_str::<AgentConfig>("rp_mode = \"adaptive-bc-qcn-bs\"").is_err());
        let c: AgentConfig = toml::from_str(
            r#"
            rp_mode = "adaptive-bc+qcn-bs"
            [rp]
            rpg_adaptive_k = "2400us"
            rpg_bs_max_cps = 4
            rp_er_timeout = "50ms"
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.rp.rpg_adaptive_k, Duration::from_micros(2400));
        assert_eq!(c.rp.rpg_bs_max_cps, 4);
        assert_eq!(c.rp.rp_er_timeout, Duration::from_millis(50));
        let d = RpParams::default();
        assert_eq!(d.rpg_adaptive_k, Duration::from_micros(240));
        for (rp, field) in [
            (
                RpParams {
                    rpg_adaptive_k: Duration::ZERO,
                    ..d
                },
                "rp.rpg_adaptive_k",
            ),
            (
                RpParams {
                    rpg_bs_max_cps: 0,
                    ..d
                },
                "rp.rpg_bs_max_cps",
            ),
            (
                RpParams {
                    rpg_bs_max_cps: MAX_BS_CPS + 1,
                    ..d
                },
                "rp.rpg_bs_max_cps",
            ),
            (
                RpParams {
                    rp_er_timeout: Duration::ZERO,
                    ..d
                },
                "rp.rp_er_timeout",
            ),
        ] {
            let c = AgentConfig {
                rp,
                ..AgentConfig::default()
            };
            assert_eq!(c.validate().unwrap_err().field, field);
        }
    }
}

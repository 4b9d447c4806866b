//! Bridge configuration: the settings of the [`crate::Bridge`] core, with documented defaults,
//! serde `Deserialize` (the daemon's TOML file maps onto these types field for field) and one
//! validation pass that names the offending field.
//!
//! Defaults follow the QCN papers' baseline switch (Alizadeh et al., "Data Center Transport
//! Mechanisms: Congestion Control Theory and IEEE Standardization", Allerton 2008): 150 KB of
//! buffer per queue, PAUSE thresholds 110 KB / 44 KB; and 802.1Q for the rest (clause 8.8.3
//! ageing time 300 s, 8 priorities).

pub use crate::cnd::{alternate_priority, CndDefense, LLDP_TTL_SECS, LLDP_TX_INTERVAL};
use crate::cp::CpConfig;
pub use crate::error::{ConfigError, NUM_PRIORITIES};
use cnm_proto::wire::EthernetAddress;
use cnm_proto::Scale;
use cnm_proto::{Bytes, Duration, Rate};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// Largest number of ports one bridge may have. The CPID index `port * 8 + priority` must stay
/// below the input-CP flag bit 0x8000 (the project's CPID layout choice), and the VOQ count grows as
/// `ports² × 8`, so the bound is kept well below that limit.
pub const MAX_PORTS: usize = 256;

/// Largest `fdb.max_entries`: 2^24 entries. The table is reserved up front (about 58 octets an
/// entry: its slot, and its hash table bucket with the table's slack), so this bound keeps it
/// under 1 GiB, within what a 24 GiB machine holds beside the rest of the bridge.
pub const MAX_FDB_ENTRIES: usize = 1 << 24;

/// Largest `event_capacity`: 2^20 events (the log is reserved up front, tens of MB at most).
pub const MAX_EVENT_CAPACITY: usize = 1 << 20;

/// Largest `buffers.control_frames` per port: 2^16 (a port's control queue is reserved up
/// front; PAUSE/PFC and CNMs are small and leave ahead of data, so a deep queue buys nothing).
pub const MAX_CONTROL_FRAMES: usize = 1 << 16;

/// Largest single buffer (`buffers.input`, `buffers.output`, `buffers.delay_line`): 1 GiB.
pub const MAX_BUFFER: Bytes = Bytes::new(1 << 30);

/// Largest total the buffers of one bridge may hold when every queue is full:
/// ports × 8 × (input + output) + ports × delay_line ≤ 16 GiB, what a 24 GiB machine can hold
/// beside the rest of the process.
pub const MAX_BUFFER_TOTAL: Bytes = Bytes::new(16 << 30);

/// Largest rate of a port, of `lossless.nominal_rate` and of the explicit-rate floor:
/// 10 Tb/s, above every Ethernet rate (802.3 defines up to 800 Gb/s), and low enough that
/// rate × time products in nanoseconds stay far from overflow.
pub const MAX_RATE: Rate = Rate::from_bps(10_000_000_000_000);

/// The whole configuration of one bridge.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgeConfig {
    /// The ports, in order: port `i` of the configuration is `PortId(i)`.
    pub ports: Vec<PortConfig>,
    /// Priority given to untagged frames (802.1Q-2018 clause 6.9.3, the port's default
    /// priority); a port may override it. Default 0.
    pub default_priority: u8,
    /// VLAN of untagged and priority-tagged (VID 0) frames: the Port VLAN Identifier
    /// (802.1Q-2018 clause 6.9, PVID). Default 1.
    pub pvid: u16,
    /// Base MAC address of the bridge: port `i` sources its PAUSE/PFC frames and CNMs from
    /// this address with `i` added to the last two octets, unless the port names its own `mac`.
    /// It is also the MAC part of every CPID, so bridges in one network need distinct
    /// addresses. Default `02:00:00:00:00:00` (locally administered).
    #[serde(deserialize_with = "de_mac")]
    pub mac: EthernetAddress,
    /// Filtering database settings.
    pub fdb: FdbConfig,
    /// Buffer sizes.
    pub buffers: BufferConfig,
    /// Drop-tail or lossless operation, and the PAUSE/PFC parameters.
    pub lossless: LosslessConfig,
    /// Transmission selection across the priorities of one output port.
    pub scheduler: SchedulerConfig,
    /// Line-rate emulation settings shared by all ports.
    pub shaper: ShaperConfig,
    /// Largest frame accepted (octets, without FCS). Longer frames are counted drops.
    /// Default 9216 (a common jumbo limit); at most 16384.
    pub max_frame: Bytes,
    /// Capacity of the event log read by [`crate::Bridge::drain_events`]; events beyond it
    /// are counted as lost. Default 4096.
    pub event_capacity: usize,
    /// Congestion points (802.1Q-2011 clause 32.8): placement, CNPVs and the QCN parameters.
    /// Default: standard QCN on the output queues of priority 3.
    pub cp: CpConfig,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            ports: Vec::new(),
            default_priority: 0,
            pvid: 1,
            mac: EthernetAddress([0x02, 0, 0, 0, 0, 0]),
            fdb: FdbConfig::default(),
            buffers: BufferConfig::default(),
            lossless: LosslessConfig::default(),
            scheduler: SchedulerConfig::default(),
            shaper: ShaperConfig::default(),
            max_frame: Bytes::new(9216),
            event_capacity: 4096,
            cp: CpConfig::default(),
        }
    }
}

/// One port.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Name (the interface name in the daemon).
    pub name: String,
    /// Emulated line rate; `None` = not shaped (frames leave as fast as the caller takes them).
    #[serde(default)]
    pub rate: Option<Rate>,
    /// One-way propagation delay added after the shaper. Default 0.
    #[serde(default)]
    pub delay: Duration,
    /// Default priority for untagged frames received on this port (overrides the bridge's).
    #[serde(default)]
    pub default_priority: Option<u8>,
    /// Source MAC of the PAUSE/PFC frames and CNMs sent from this port.
    #[serde(default, deserialize_with = "de_opt_mac")]
    pub mac: Option<EthernetAddress>,
    /// Congestion-notification-domain defence of this port for every CNPV ([`CndDefense`]).
    /// Default `auto`: chosen from the neighbour's LLDP CN TLV. ([`PortConfig::new`] builds
    /// `interior-ready` ports, for programs that wire a bridge to stations known to be CN-aware.)
    #[serde(default)]
    pub cnd_defense: CndDefense,
    /// `edge` ports: the priority that frames received with a CNPV priority are remapped to.
    /// Default: the next lower priority that is not a CNPV, else the next higher one
    /// (802.1Q clause 32.4, `ieee8021CnPortPriAlternatePriority`).
    #[serde(default)]
    pub alternate_priority: Option<u8>,
    /// Write into every generated frame leaving the port (`cnm_proto::wire::generated`) its
    /// departure instant: when the shaper starts it on the emulated line (after the port's
    /// `delay`, if any). A port towards another switch whose port places frames by their
    /// departure stamps (the daemon's ingress stage) thereby hands on the line's timing
    /// rather than its own process's: the sender's stamp is replaced, never forwarded.
    /// Default false.
    #[serde(default)]
    pub stamp_departures: bool,
    /// This port's line catch-up, in place of the bridge's `shaper.catch_up`: how far its
    /// shaper back-dates a late poll. A port that stamps departures for a switch placing
    /// frames by them wants no more than that switch's lookahead (its ingress delay): a frame
    /// back-dated further is placed on arrival, with the whole burst of the late poll.
    /// Default: the bridge's.
    #[serde(default)]
    pub catch_up: Option<Duration>,
}

impl PortConfig {
    /// A port with this name, unshaped, no delay, facing a CN-aware neighbour
    /// (`interior-ready`: the simulator's topologies and the core tests wire bridges to
    /// reaction points and bridges only), as configuration files and `--port` default to.
    pub fn new(name: impl Into<String>) -> Self {
        PortConfig {
            name: name.into(),
            rate: None,
            delay: Duration::ZERO,
            default_priority: None,
            mac: None,
            cnd_defense: CndDefense::InteriorReady,
            alternate_priority: None,
            stamp_departures: false,
            catch_up: None,
        }
    }
    /// Builder: emulated line rate.
    pub fn with_rate(mut self, rate: Rate) -> Self {
        self.rate = Some(rate);
        self
    }
    /// Builder: propagation delay.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// Filtering database (802.1Q-2018 clause 8.8).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FdbConfig {
    /// Ageing time of learned entries (802.1Q-2018 clause 8.8.3, default 300 s).
    pub ageing: Duration,
    /// Most dynamic entries held; learning beyond it is refused and counted. Default 8192.
    pub max_entries: usize,
    /// Static entries (802.1Q-2018 clause 8.8.1): never aged, never moved by learning.
    pub static_entries: Vec<StaticEntry>,
}

impl Default for FdbConfig {
    fn default() -> Self {
        FdbConfig {
            ageing: Duration::from_secs(300),
            max_entries: 8192,
            static_entries: Vec::new(),
        }
    }
}

/// A static FDB entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StaticEntry {
    /// Station address.
    #[serde(deserialize_with = "de_mac")]
    pub mac: EthernetAddress,
    /// VLAN; default: the bridge's PVID.
    #[serde(default)]
    pub vid: Option<u16>,
    /// Port name.
    pub port: String,
}

/// Buffer sizes.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BufferConfig {
    /// Shared input buffer per (input port, priority), holding that input's VOQs.
    /// Default 150 KB (the QCN baseline switch).
    pub input: Bytes,
    /// Output queue per (output port, priority). Default 150 KB.
    pub output: Bytes,
    /// Bytes that may be "on the wire" in a port's propagation-delay line (frames that left the
    /// shaper but are not yet delivered). Shaped ports hold at most rate × delay; this bounds
    /// unshaped ports. Default 4 MB.
    pub delay_line: Bytes,
    /// Control frames (PAUSE/PFC, CNMs) waiting to leave one port. Default 64.
    pub control_frames: usize,
    /// What the fabric does with a frame whose output queue is full. Default backpressure.
    pub on_output_full: OutputFullPolicy,
    /// Dynamic-threshold factor α bounding each VOQ's share of its input buffer: a VOQ grows
    /// only while it holds less than `α × (free octets of the buffer)` (Choudhury and Hahne,
    /// IEEE/ACM Trans. Networking 1998; [`crate::voq`]). Default 2: one stalled output holds at
    /// most two thirds of an input buffer. 0 turns the bound off. Not applied in lossless mode.
    /// At most 1024.
    pub voq_alpha: f64,
}

/// What happens to a frame whose output queue has no room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OutputFullPolicy {
    /// The frame waits in its VOQ until the output queue has room (CIOQ with backpressure:
    /// the input buffers fill, and in lossless mode send PAUSE/PFC).
    #[default]
    Backpressure,
    /// The frame is dropped and counted `output_full` (an output-queued drop-tail switch, as in
    /// the QCN papers' simulations). Not allowed with lossless mode, whose PAUSE watches the
    /// input buffers.
    Drop,
}

impl Default for BufferConfig {
    fn default() -> Self {
        BufferConfig {
            input: Bytes::new(150_000),
            output: Bytes::new(150_000),
            delay_line: Bytes::new(4_000_000),
            control_frames: 64,
            on_output_full: OutputFullPolicy::Backpressure,
            voq_alpha: 2.0,
        }
    }
}

/// Loss behaviour when an input buffer fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LosslessMode {
    /// Drop-tail: a frame that does not fit the input buffer is dropped (and counted).
    #[default]
    None,
    /// IEEE 802.3 Annex 31B PAUSE: one XOFF for the whole link.
    Pause,
    /// IEEE 802.1Qbb Priority-based Flow Control: per priority.
    Pfc,
}

/// PAUSE / PFC generation and reception.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LosslessConfig {
    /// Mode. Default drop-tail.
    pub mode: LosslessMode,
    /// Input-buffer occupancy at which XOFF is sent. Default 110 KB.
    pub qhigh: Bytes,
    /// Occupancy at or below which XON (quanta 0) is sent. Default 44 KB.
    pub qlow: Bytes,
    /// pause_time of the XOFF frames, in quanta of 512 bit times (802.3-2018 clause 31B.2).
    /// Default 0xFFFF.
    pub quanta: u16,
    /// Rate used to convert quanta to time on an unshaped port (a real port would use its PHY
    /// rate; an unshaped emulated port has none). Default 10 Gb/s.
    pub nominal_rate: Rate,
    /// Detection time of the PAUSE/PFC storm watchdog: an output priority its peer keeps
    /// paused (re-asserting) for this long is shut — what waits for it and what arrives for it
    /// is dropped, counted `pause_storm` — until the pause lapses ([`crate::pause`]). Applies
    /// in every mode (received PAUSE is always honoured). Default 100 ms, a deployment default
    /// of the order shipping DCB switches use, not a standard value; 0 turns it off.
    pub watchdog: Duration,
}

impl Default for LosslessConfig {
    fn default() -> Self {
        LosslessConfig {
            mode: LosslessMode::None,
            qhigh: Bytes::new(110_000),
            qlow: Bytes::new(44_000),
            quanta: 0xFFFF,
            nominal_rate: Rate::from_gbps(10),
            watchdog: Duration::from_millis(100),
        }
    }
}

/// Transmission selection among the 8 priority queues of one output port
/// (802.1Q-2018 clause 8.6.8).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// Algorithm.
    pub policy: PriorityPolicy,
    /// DWRR weights per priority (index = priority). Each round gives priority `p` a quantum of
    /// `weights[p] × max_frame` octets. Default all 1.
    pub weights: [u32; NUM_PRIORITIES],
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            policy: PriorityPolicy::Strict,
            weights: [1; NUM_PRIORITIES],
        }
    }
}

/// Selection algorithm across priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PriorityPolicy {
    /// Strict priority (802.1Q-2018 clause 8.6.8.1), highest traffic class first.
    #[default]
    Strict,
    /// Deficit weighted round robin (Shreedhar and Varghese, SIGCOMM 1995), the usual
    /// realisation of ETS (802.1Q-2018 clause 8.6.8.3).
    Dwrr,
}

/// Line-rate emulation.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShaperConfig {
    /// Count 20 octets per frame for preamble, SFD and inter-frame gap
    /// (802.3-2018 clauses 3.1.1 and 4.4.2: 7 + 1 + 12 octets). Default true.
    pub wire_overhead: bool,
    /// Add the 4-octet FCS, which frames handed to the bridge do not carry. Default true.
    pub fcs: bool,
    /// Frames shorter than the 60-octet minimum (without FCS) are counted as 60, as the MAC
    /// pads them (802.3-2018 clause 4.2.3.3). Default true.
    pub pad: bool,
    /// How far a busy transmitter may lag behind "now" and still catch up (send back-dated
    /// frames in a burst) when the caller polls late. Default 1 ms.
    pub catch_up: Duration,
}

impl ShaperConfig {
    /// The line emulation of port `port`: the bridge's, with the port's own catch-up if it
    /// gives one.
    pub fn for_port(&self, port: &PortConfig) -> ShaperConfig {
        ShaperConfig {
            catch_up: port.catch_up.unwrap_or(self.catch_up),
            ..self.clone()
        }
    }
}

impl Default for ShaperConfig {
    fn default() -> Self {
        ShaperConfig {
            wire_overhead: true,
            fcs: true,
            pad: true,
            catch_up: Duration::from_millis(1),
        }
    }
}

/// Time scaling ([`cnm_proto::scale`]): the ports' rates and delays, the ageing time, the
/// nominal rate that converts PAUSE quanta to time (so a quantum of 512 bit times lasts S times
/// longer) and the PAUSE storm watchdog, the shaper's catch-up and the congestion points' rates and times. Octets, counts,
/// priorities and the scheduler's weights are unchanged.
impl Scale for BridgeConfig {
    fn scale(&self, s: f64) -> Self {
        let BridgeConfig {
            ports,
            default_priority,
            pvid,
            mac,
            fdb,
            buffers,
            lossless,
            scheduler,
            shaper,
            max_frame,
            event_capacity,
            cp,
        } = self;
        BridgeConfig {
            ports: ports.scale(s),
            default_priority: *default_priority,
            pvid: *pvid,
            mac: *mac,
            fdb: fdb.scale(s),
            buffers: buffers.clone(),
            lossless: lossless.scale(s),
            scheduler: scheduler.clone(),
            shaper: shaper.scale(s),
            max_frame: *max_frame,
            event_capacity: *event_capacity,
            cp: cp.scale(s),
        }
    }
}

impl Scale for PortConfig {
    fn scale(&self, s: f64) -> Self {
        PortConfig {
            rate: self.rate.scale(s),
            delay: self.delay.scale(s),
            catch_up: self.catch_up.scale(s),
            ..self.clone()
        }
    }
}

impl Scale for FdbConfig {
    fn scale(&self, s: f64) -> Self {
        FdbConfig {
            ageing: self.ageing.scale(s),
            ..self.clone()
        }
    }
}

impl Scale for LosslessConfig {
    fn scale(&self, s: f64) -> Self {
        LosslessConfig {
            nominal_rate: self.nominal_rate.scale(s),
            watchdog: self.watchdog.scale(s),
            ..self.clone()
        }
    }
}

impl Scale for ShaperConfig {
    fn scale(&self, s: f64) -> Self {
        ShaperConfig {
            catch_up: self.catch_up.scale(s),
            ..self.clone()
        }
    }
}

impl BridgeConfig {
    /// A configuration with these ports and every other setting at its default.
    pub fn with_ports(ports: Vec<PortConfig>) -> Self {
        BridgeConfig {
            ports,
            ..BridgeConfig::default()
        }
    }

    /// Checks every value; the first problem found is returned, naming its field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ports.is_empty() {
            return Err(ConfigError::new("ports", "at least one port is needed"));
        }
        if self.ports.len() > MAX_PORTS {
            return Err(ConfigError::new(
                "ports",
                format!("at most {MAX_PORTS} ports are supported"),
            ));
        }
        check_priority("default_priority", self.default_priority)?;
        check_vid("pvid", self.pvid)?;
        self.validate_ports()?;
        self.validate_fdb()?;
        self.validate_buffers()?;
        self.validate_lossless()?;
        if self.lossless.nominal_rate == Rate::ZERO {
            return Err(ConfigError::new(
                "lossless.nominal_rate",
                "must be positive",
            ));
        }
        if self.scheduler.weights.contains(&0) {
            return Err(ConfigError::new(
                "scheduler.weights",
                "every weight must be at least 1",
            ));
        }
        if self.event_capacity == 0 || self.event_capacity > MAX_EVENT_CAPACITY {
            return Err(ConfigError::new(
                "event_capacity",
                format!("{} is not in 1..={MAX_EVENT_CAPACITY}", self.event_capacity),
            ));
        }
        self.validate_bounds()?;
        self.cp.validate().map_err(|e| e.within("cp"))?;
        Ok(())
    }

    /// The ports: names, rates, priorities and CND defence.
    fn validate_ports(&self) -> Result<(), ConfigError> {
        for (i, p) in self.ports.iter().enumerate() {
            if p.name.is_empty() {
                return Err(ConfigError::new(format!("ports[{i}].name"), "empty name"));
            }
            if self.ports[..i].iter().any(|q| q.name == p.name) {
                return Err(ConfigError::new(
                    format!("ports[{i}].name"),
                    format!("duplicate port name {:?}", p.name),
                ));
            }
            if p.rate == Some(Rate::ZERO) {
                return Err(ConfigError::new(
                    format!("ports[{i}].rate"),
                    "must be positive (omit it for an unshaped port)",
                ));
            }
            if let Some(dp) = p.default_priority {
                check_priority(&format!("ports[{i}].default_priority"), dp)?;
            }
            if let Some(ap) = p.alternate_priority {
                let f = format!("ports[{i}].alternate_priority");
                check_priority(&f, ap)?;
                if self.cp.cnpv_mask() & (1 << ap) != 0 {
                    return Err(ConfigError::new(
                        f,
                        format!("{ap} is a CNPV; the alternate priority must not be one"),
                    ));
                }
            }
            if p.cnd_defense == CndDefense::Edge
                && p.alternate_priority.is_none()
                && alternate_priority(self.cp.cnpv_mask(), 0).is_none()
            {
                return Err(ConfigError::new(
                    format!("ports[{i}].cnd_defense"),
                    "an edge port needs a priority that is not a CNPV to remap to; all eight are CNPVs",
                ));
            }
        }
        Ok(())
    }

    /// The static FDB entries.
    fn validate_fdb(&self) -> Result<(), ConfigError> {
        for (i, s) in self.fdb.static_entries.iter().enumerate() {
            if !self.ports.iter().any(|p| p.name == s.port) {
                return Err(ConfigError::new(
                    format!("fdb.static_entries[{i}].port"),
                    format!("no port named {:?}", s.port),
                ));
            }
            if let Some(v) = s.vid {
                check_vid(&format!("fdb.static_entries[{i}].vid"), v)?;
            }
            if !s.mac.is_unicast() {
                return Err(ConfigError::new(
                    format!("fdb.static_entries[{i}].mac"),
                    "only unicast addresses can be static entries here",
                ));
            }
        }
        Ok(())
    }

    /// The ageing time, the frame size and the buffers that must hold one.
    fn validate_buffers(&self) -> Result<(), ConfigError> {
        if self.fdb.ageing == Duration::ZERO {
            return Err(ConfigError::new("fdb.ageing", "must be positive"));
        }
        let mf = self.max_frame.get();
        if !(60..=16384).contains(&mf) {
            return Err(ConfigError::new(
                "max_frame",
                "must be between 60 and 16384 octets",
            ));
        }
        if self.buffers.input.get() < mf {
            return Err(ConfigError::new(
                "buffers.input",
                format!("must hold at least one max_frame ({mf} octets)"),
            ));
        }
        if self.buffers.output.get() < mf {
            return Err(ConfigError::new(
                "buffers.output",
                format!("must hold at least one max_frame ({mf} octets)"),
            ));
        }
        if self.buffers.delay_line.get() < mf {
            return Err(ConfigError::new(
                "buffers.delay_line",
                format!("must hold at least one max_frame ({mf} octets)"),
            ));
        }
        let a = self.buffers.voq_alpha;
        if !(a.is_finite() && (0.0..=1024.0).contains(&a)) {
            return Err(ConfigError::new(
                "buffers.voq_alpha",
                "must be a number from 0 (off) to 1024",
            ));
        }
        if self.buffers.control_frames == 0 {
            return Err(ConfigError::new(
                "buffers.control_frames",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// The PAUSE/PFC thresholds (only when lossless).
    fn validate_lossless(&self) -> Result<(), ConfigError> {
        if self.lossless.mode != LosslessMode::None {
            let l = &self.lossless;
            if l.qlow >= l.qhigh {
                return Err(ConfigError::new(
                    "lossless.qlow",
                    format!("must be below lossless.qhigh ({})", l.qhigh),
                ));
            }
            if l.qhigh > self.buffers.input {
                return Err(ConfigError::new(
                    "lossless.qhigh",
                    format!("must not exceed buffers.input ({})", self.buffers.input),
                ));
            }
            if l.quanta == 0 {
                return Err(ConfigError::new("lossless.quanta", "must be positive"));
            }
            if self.buffers.on_output_full == OutputFullPolicy::Drop {
                return Err(ConfigError::new(
                    "buffers.on_output_full",
                    "\"drop\" cannot be lossless: use \"backpressure\" with lossless.mode",
                ));
            }
        }
        Ok(())
    }
}

impl BridgeConfig {
    /// The size and rate bounds (what one machine can hold): the FDB, the control queues, each
    /// buffer and their total, every rate.
    fn validate_bounds(&self) -> Result<(), ConfigError> {
        if self.fdb.max_entries > MAX_FDB_ENTRIES {
            return Err(ConfigError::new(
                "fdb.max_entries",
                format!("{} is above {MAX_FDB_ENTRIES}", self.fdb.max_entries),
            ));
        }
        if self.buffers.control_frames > MAX_CONTROL_FRAMES {
            return Err(ConfigError::new(
                "buffers.control_frames",
                format!(
                    "{} is above {MAX_CONTROL_FRAMES}",
                    self.buffers.control_frames
                ),
            ));
        }
        let b = &self.buffers;
        for (field, v) in [
            ("buffers.input", b.input),
            ("buffers.output", b.output),
            ("buffers.delay_line", b.delay_line),
        ] {
            if v > MAX_BUFFER {
                return Err(ConfigError::new(
                    field,
                    format!("{v} is above {MAX_BUFFER} (1 GiB)"),
                ));
            }
        }
        let n = self.ports.len() as u64;
        let total =
            n * NUM_PRIORITIES as u64 * (b.input.get() + b.output.get()) + n * b.delay_line.get();
        if total > MAX_BUFFER_TOTAL.get() {
            return Err(ConfigError::new(
                "buffers",
                format!(
                    "{n} ports × 8 priorities × (input + output) + {n} × delay_line = {} is \
                     above {MAX_BUFFER_TOTAL} (16 GiB)",
                    Bytes::new(total)
                ),
            ));
        }
        for (i, p) in self.ports.iter().enumerate() {
            if p.rate.is_some_and(|r| r > MAX_RATE) {
                return Err(ConfigError::new(
                    format!("ports[{i}].rate"),
                    format!("above {MAX_RATE}"),
                ));
            }
        }
        if self.lossless.nominal_rate > MAX_RATE {
            return Err(ConfigError::new(
                "lossless.nominal_rate",
                format!("above {MAX_RATE}"),
            ));
        }
        if self.cp.er_min_rate.is_some_and(|r| r > MAX_RATE) {
            return Err(ConfigError::new(
                "cp.er_min_rate",
                format!("above {MAX_RATE}"),
            ));
        }
        Ok(())
    }
}

fn check_priority(field: &str, p: u8) -> Result<(), ConfigError> {
    if usize::from(p) < NUM_PRIORITIES {
        Ok(())
    } else {
        Err(ConfigError::new(
            field,
            format!("priority {p} is not in 0..=7"),
        ))
    }
}

fn check_vid(field: &str, v: u16) -> Result<(), ConfigError> {
    // 802.1Q-2018 Table 9-2: 0 and 0xFFF are reserved.
    if (1..=4094).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError::new(
            field,
            format!("VID {v} is not in 1..=4094"),
        ))
    }
}

fn de_mac<'de, D: serde::Deserializer<'de>>(d: D) -> Result<EthernetAddress, D::Error> {
    let s = String::deserialize(d)?;
    EthernetAddress::from_str(&s).map_err(serde::de::Error::custom)
}

fn de_opt_mac<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<EthernetAddress>, D::Error> {
    let s = Option::<String>::deserialize(d)?;
    s.map(|s| EthernetAddress::from_str(&s).map_err(serde::de::Error::custom))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_ports() -> BridgeConfig {
        BridgeConfig::with_ports(vec![PortConfig::new("a"), PortConfig::new("b")])
    }

    #[test]
    fn defaults_are_valid() {
        two_ports().validate().unwrap();
        let c = BridgeConfig::default();
        assert_eq!(c.buffers.input, Bytes::new(150_000));
        assert_eq!(c.lossless.qhigh, Bytes::new(110_000));
        assert_eq!(c.lossless.qlow, Bytes::new(44_000));
        assert_eq!(c.fdb.ageing, Duration::from_secs(300));
    }

    #[test]
    fn errors_name_the_field() {
        let mut c = two_ports();
        c.ports[1].name = "a".into();
        assert_eq!(c.validate().unwrap_err().field, "ports[1].name");
        let mut c = two_ports();
        c.lossless.mode = LosslessMode::Pfc;
        c.lossless.qlow = Bytes::new(120_000);
        assert_eq!(c.validate().unwrap_err().field, "lossless.qlow");
        let mut c = two_ports();
        c.default_priority = 8;
        assert_eq!(c.validate().unwrap_err().field, "default_priority");
        let mut c = two_ports();
        c.ports[0].rate = Some(Rate::ZERO);
        assert_eq!(c.validate().unwrap_err().field, "ports[0].rate");
        assert!(BridgeConfig::default().validate().is_err());
    }

    #[test]
    fn deserialises_from_json_shape() {
        let c: BridgeConfig = serde_json::from_str(
            r#"{"ports":[{"name":"eth0","rate":"1gbit","delay":"25us"},{"name":"eth1"}],
                "lossless":{"mode":"pfc"},
                "scheduler":{"policy":"dwrr","weights":[1,2,3,4,5,6,7,8]},
                "fdb":{"static_entries":[{"mac":"02:00:00:00:00:09","port":"eth1"}]}}"#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.ports[0].rate, Some(Rate::from_gbps(1)));
        assert_eq!(c.ports[0].delay, Duration::from_micros(25));
        assert_eq!(c.lossless.mode, LosslessMode::Pfc);
        assert_eq!(c.scheduler.policy, PriorityPolicy::Dwrr);
        assert!(serde_json::from_str::<BridgeConfig>(r#"{"bogus":1}"#).is_err());
    }

    #[test]
    fn deserialises_from_toml() {
        let c: BridgeConfig = toml::from_str(
            r#"
            default_priority = 1
            [[ports]]
            name = "veth0"
            rate = "100mbit"
            delay = "25us"
            [[ports]]
            name = "veth1"
            mac = "02-00-00-00-00-aa"
            [buffers]
            input = "200KB"
            on_output_full = "backpressure"
            [lossless]
            mode = "pause"
            qhigh = "150KB"
            qlow = "60KB"
            nominal_rate = "1gbit"
            [fdb]
            ageing = "30s"
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.buffers.input, Bytes::new(200_000));
        assert_eq!(c.buffers.output, Bytes::new(150_000));
        assert_eq!(c.ports[1].mac, Some(EthernetAddress([2, 0, 0, 0, 0, 0xaa])));
        assert_eq!(c.fdb.ageing, Duration::from_secs(30));
        let e = toml::from_str::<BridgeConfig>("[lossless]\nmode = \"sometimes\"\n").unwrap_err();
        assert!(e.to_string().contains("sometimes"), "{e}");
    }
}

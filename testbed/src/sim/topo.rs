//! Topology files of `testbed sim` (TOML).
//!
//! ```toml
//! seed = 1                       # run seed (every node's generator derives from it)
//! duration = "100ms"             # virtual time simulated
//!
//! [output]                       # every key optional
//! trace = "trace.jsonl"          # JSON lines, the daemons' record shapes + "node"
//! trace_interval = "100us"       # queue-occupancy records
//! sample_interval = "10us"       # queue samples behind the summary's mean/std/p99
//! warmup = "50ms"                # left out of the summary's queue and utilisation figures
//! summary = "summary.json"
//! bottleneck = "sw0-r0"          # link whose a→b utilisation is the summary's headline
//! pcap = [{ link = "sw0-r0", file = "bottleneck.pcap" }]
//!
//! [switch.sw0]
//! static_fdb = true              # default: every host's MAC pinned on the shortest path
//! [switch.sw0.bridge]            # cp_switch::BridgeConfig fields except `ports`
//! buffers = { output = "150KB", on_output_full = "drop" }
//! cp = { cp_queue_set_point = "33KB" }
//!
//! [host.h0]
//! mac = "02:00:00:00:01:00"      # default 02:00:00:00:01:NN (declaration index)
//! poll_grid = "5us"              # default none: polled when due (see HostNode::with_poll_grid)
//! [host.h0.agent]                # rp_agent::AgentConfig fields; line_rate defaults to the
//! rp = { rpg_ai_rate = "5mbit" } # host's link rate, mac to the host's MAC
//!
//! [[link]]                       # full duplex; a switch port is named after its peer
//! a = "h0"
//! b = "sw0"
//! rate = "10gbit"
//! delay = "12.5us"               # one way
//! name = "h0-sw0"                # default "A-B"
//!
//! [[flow]]
//! src = "h0"
//! dst = "r0"
//! pattern = "greedy"             # greedy | cbr:R | onoff:R,on=B | poisson:R,pareto-mean=B,shape=S
//!                                # | tcp | udp:R  (see FlowKind)
//! frame_len = 1500               # default 1500
//! start = "0s"                   # default 0
//! stop = "100ms"                 # default: the duration
//!
//! [[event]]
//! at = "20ms"
//! link = "sw0-r0"
//! dir = "both"                   # a-to-b | b-to-a | both (default)
//! rate = "1gbit"
//!
//! [[event]]                      # every congestion point of a switch ([cp] names)
//! at = "30ms"
//! switch = "sw0"
//! set = { cp_queue_set_point = "20KB", cp_feedback_weight = 4 }
//!
//! [[event]]                      # a host's reaction points (rp_mode, [rp] names)
//! at = "40ms"
//! host = "h0"
//! set = { rp_mode = "adaptive-bc", rpg_ai_rate = "10mbit" }
//!
//! [[incast]]                     # TCP-like synchronized reads (see super::tcp)
//! client = "r0"
//! servers = ["h0", "h1"]
//! sru = "256KB"
//! rounds = 5
//! ```
//!
//! An event is exactly one of `link` + `rate`, `switch` + `set`, `host` + `set`; the parser
//! types it ([`EventKind`]: a `set` becomes the core's patch), a flow's `pattern` (a
//! [`FlowKind`]) and each `[switch.X.bridge]` / `[host.X.agent]` table (a
//! [`BridgeSpec`] / [`AgentSpec`]: the core's configuration and which of the keys whose
//! defaults are the world's the file gives), so nothing after [`Topology::parse`] reads any of
//! them as text. Parameter changes follow the cores' run-time rules
//! (`cp_switch::Bridge::set_cp_config`, `rp_agent::Agent::set_rp_config`): scaling parameters
//! change in place, structural ones (CP placement, mode, culprit, CNPVs; a reaction-point mode
//! of another kind) reset the state concerned. A parameter event is also a `{"type": "cp_config" | "rp_config"}` record
//! in the trace.
//!
//! Every error names the file and the field (`dumbbell.toml: link[2].b: no node "sw9"`);
//! errors inside `[switch.X.bridge]` and `[host.X.agent]` are the cores' own messages (their
//! parsing when the file is read, their validation when the ports and the line rate are known
//! at build) with the table's path prepended.

use super::engine::{Action, Direction, LinkId, LinkSpec, NodeId, Sim, SimBuilder, TraceOptions};
use super::host::{FlowSpec, HostNode};
use super::tcp::{IncastSpec, TcpHost};
use crate::scenario::graph::{Graph, LinkDecl};
use crate::scenario::settings::{AgentGiven, AgentSpec, BridgeSpec, SettingsError};
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Instant, Rate};
use cp_switch::config::{ShaperConfig, StaticEntry};
use cp_switch::BridgeConfig;
use rp_agent::gen::Pattern;
use rp_agent::AgentConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A topology file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {field}: {msg}")]
pub struct TopoError {
    /// The file (or a label for text that came from elsewhere).
    pub file: String,
    /// The field, as a TOML path.
    pub field: String,
    /// What is wrong.
    pub msg: String,
}

/// A parsed topology file: typed from the parser on (the flows' kinds parsed; `[scenario]`
/// is [`crate::scenario`]'s).
#[derive(Debug, Clone)]
pub struct Topology {
    /// Run seed.
    pub seed: u64,
    /// Virtual time to simulate.
    pub duration: Duration,
    /// Outputs.
    pub output: OutputSpec,
    /// Switches by name.
    pub switch: BTreeMap<String, SwitchSpec>,
    /// Hosts by name.
    pub host: BTreeMap<String, HostSpec>,
    /// Links.
    pub link: Vec<LinkEntry>,
    /// Generated flows.
    pub flow: Vec<FlowEntry>,
    /// Scheduled changes.
    pub event: Vec<EventEntry>,
    /// TCP-like incast experiments.
    pub incast: Vec<IncastSpec>,
    /// Where the file was read from (relative output paths are relative to the working
    /// directory, not to it).
    pub file: String,
}

/// A topology file as serde reads it; [`Topology::parse`] turns it into a [`Topology`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    /// Run seed.
    #[serde(default = "default_seed")]
    seed: u64,
    /// Virtual time to simulate.
    duration: Duration,
    /// Outputs.
    #[serde(default)]
    output: OutputSpec,
    /// Switches by name.
    #[serde(default)]
    switch: BTreeMap<String, SwitchFile>,
    /// Hosts by name.
    #[serde(default)]
    host: BTreeMap<String, HostFile>,
    /// Links.
    #[serde(default)]
    link: Vec<LinkEntry>,
    /// Generated flows.
    #[serde(default)]
    flow: Vec<FlowFile>,
    /// Scheduled changes.
    #[serde(default)]
    event: Vec<EventFile>,
    /// TCP-like incast experiments.
    #[serde(default)]
    incast: Vec<IncastSpec>,
    /// `[scenario]`: how `testbed run` runs and judges the file (see [`crate::scenario`]);
    /// the simulator itself ignores it, so one file serves `testbed sim` and `testbed run`.
    #[serde(default, rename = "scenario")]
    _scenario: serde::de::IgnoredAny,
}

fn default_seed() -> u64 {
    1
}

/// `[output]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Trace file (JSON lines).
    pub trace: Option<PathBuf>,
    /// Queue-record interval of the trace. Default 100 µs.
    pub trace_interval: Option<Duration>,
    /// Queue sampling interval of the summary. Default 10 µs.
    pub sample_interval: Option<Duration>,
    /// Warm-up left out of the summary. Default 0.
    pub warmup: Option<Duration>,
    /// Summary file (JSON).
    pub summary: Option<PathBuf>,
    /// The bottleneck link (its a→b direction).
    pub bottleneck: Option<String>,
    /// Captures.
    #[serde(default)]
    pub pcap: Vec<PcapSpec>,
}

/// One capture.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapSpec {
    /// Link name.
    pub link: String,
    /// Output file.
    pub file: PathBuf,
}

/// `[switch.NAME]`.
#[derive(Debug, Clone)]
pub struct SwitchSpec {
    /// Pin every host's MAC in the FDB on the port towards it (shortest path). Default true:
    /// otherwise frames to a silent receiver are flooded to every host.
    pub static_fdb: bool,
    /// Namespace runs: the switch daemon's ingress link-rate stage (frames reach the bridge no
    /// faster than their link could have delivered them). Default true; the simulator's links
    /// are exact and have no use for it.
    pub ingress_stage: bool,
    /// Namespace runs: the switch places its hosts' generated frames by their departure
    /// stamps, with each host link's delay emulated in its ingress stage as the lookahead
    /// (`cp_switch` daemon module `stage`). Default true; needs `ingress_stage`; the
    /// simulator's hosts send on time and have no use for it.
    pub departure_stamps: bool,
    /// Namespace runs: the switch daemon's loop runs at most once per this time
    /// (`cp-switch --wake-quantum`), when every port of the switch holds a link delay of at
    /// least twice it in its ingress stage; zero wakes it for every frame. Default 25 µs.
    pub wake_quantum: Duration,
    /// `[switch.NAME.bridge]`, typed by the parser; `None` when the file has no such table.
    pub bridge: Option<BridgeSpec>,
}

impl SwitchSpec {
    /// The bridge settings (the defaults when the file gives none).
    pub fn bridge_spec(&self) -> BridgeSpec {
        self.bridge.clone().unwrap_or_default()
    }
}

/// `[switch.NAME]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchFile {
    #[serde(default = "yes")]
    static_fdb: bool,
    #[serde(default = "yes")]
    ingress_stage: bool,
    #[serde(default = "yes")]
    departure_stamps: bool,
    #[serde(default = "default_wake_quantum")]
    wake_quantum: Duration,
    #[serde(default)]
    bridge: Option<toml::Table>,
}

/// `[switch.NAME] wake_quantum` when the file gives none.
pub const DEFAULT_WAKE_QUANTUM: Duration = Duration::from_micros(25);

fn default_wake_quantum() -> Duration {
    DEFAULT_WAKE_QUANTUM
}

fn yes() -> bool {
    true
}

/// `(field, reason)` of a settings table's error, the field relative to the node.
fn settings_err(table: &str, e: SettingsError) -> (String, String) {
    let field = if e.key.is_empty() {
        table.to_string()
    } else {
        format!("{table}.{}", e.key)
    };
    (field, e.reason)
}

impl SwitchFile {
    /// The typed switch, or `(field, reason)` (the field relative to the switch).
    fn resolve(self) -> Result<SwitchSpec, (String, String)> {
        let bridge = self
            .bridge
            .as_ref()
            .map(BridgeSpec::from_table)
            .transpose()
            .map_err(|e| settings_err("bridge", e))?;
        Ok(SwitchSpec {
            static_fdb: self.static_fdb,
            ingress_stage: self.ingress_stage,
            departure_stamps: self.departure_stamps,
            wake_quantum: self.wake_quantum,
            bridge,
        })
    }
}

impl HostFile {
    /// The typed host, or `(field, reason)` (the field relative to the host).
    fn resolve(self) -> Result<HostSpec, (String, String)> {
        let agent = self
            .agent
            .as_ref()
            .map(AgentSpec::from_table)
            .transpose()
            .map_err(|e| settings_err("agent", e))?;
        if self.poll_grid == Some(Duration::ZERO) {
            return Err((
                "poll_grid".into(),
                "must be positive (leave it out for none)".into(),
            ));
        }
        Ok(HostSpec {
            mac: self.mac,
            agent,
            poll_grid: self.poll_grid,
        })
    }
}

/// `[host.NAME]`.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// MAC address.
    pub mac: Option<EthernetAddress>,
    /// `[host.NAME.agent]`, typed by the parser; `None` when the file has no such table.
    pub agent: Option<AgentSpec>,
    /// The host is polled on this grid only ([`HostNode::with_poll_grid`]); `None`: when due.
    pub poll_grid: Option<Duration>,
}

impl HostSpec {
    /// The agent settings (the defaults when the file gives none).
    pub fn agent_spec(&self) -> AgentSpec {
        self.agent.clone().unwrap_or_default()
    }
}

/// `[host.NAME]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostFile {
    mac: Option<EthernetAddress>,
    #[serde(default)]
    agent: Option<toml::Table>,
    #[serde(default)]
    poll_grid: Option<Duration>,
}

/// `[[link]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkEntry {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// Line rate.
    pub rate: Rate,
    /// One-way propagation delay. Default 0.
    #[serde(default)]
    pub delay: Duration,
    /// Name. Default `"A-B"`.
    pub name: Option<String>,
}

/// `[[flow]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowEntry {
    /// Name. Default `"fN"`.
    pub name: Option<String>,
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// Traffic model (the file's `pattern`).
    pub kind: FlowKind,
    /// Frame length (octets, no FCS). Default 1500.
    pub frame_len: usize,
    /// Start. Default 0.
    pub start: Duration,
    /// Stop. Default: the run's duration.
    pub stop: Option<Duration>,
}

/// `[[flow]]` as written: `pattern` is text until [`Topology::parse`] reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowFile {
    name: Option<String>,
    src: String,
    dst: String,
    pattern: String,
    #[serde(default = "default_frame_len")]
    frame_len: usize,
    #[serde(default)]
    start: Duration,
    stop: Option<Duration>,
}

impl FlowFile {
    /// The typed flow; an error is `(field, reason)`.
    fn resolve(self) -> Result<FlowEntry, (&'static str, String)> {
        Ok(FlowEntry {
            kind: self.pattern.parse().map_err(|e| ("pattern", e))?,
            name: self.name,
            src: self.src,
            dst: self.dst,
            frame_len: self.frame_len,
            start: self.start,
            stop: self.stop,
        })
    }
}

fn default_frame_len() -> usize {
    1500
}

/// What a `[[flow]]`'s `pattern` asks for.
///
/// * a generator model ([`Pattern`]: `greedy`, `cbr:R`, `onoff:..`, `poisson:..`): raw
///   Ethernet frames from the agent's generator; rates are wire rates (whole frames);
/// * `tcp`: one bulk TCP transfer (netns: `iperf3` through the hosts' agent TAPs; sim: the
///   simulator's TCP-like sender of [`super::tcp`] without an end);
/// * `udp:R`: constant-rate UDP at wire rate `R` (netns: `iperf3 -u`, its application rate set
///   so that the frames on the wire make `R`; sim: a `cbr:R` generator).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlowKind {
    /// A generator model.
    Gen(Pattern),
    /// Bulk TCP.
    Tcp,
    /// Constant-rate UDP at this wire rate.
    Udp(Rate),
}

impl FlowKind {
    /// Whether the flow needs the hosts' IP stacks (TCP or UDP).
    pub fn is_ip(&self) -> bool {
        !matches!(self, FlowKind::Gen(_))
    }
}

impl std::str::FromStr for FlowKind {
    type Err = String;

    fn from_str(s: &str) -> Result<FlowKind, String> {
        let t = s.trim();
        if t == "tcp" {
            return Ok(FlowKind::Tcp);
        }
        if let Some(r) = t.strip_prefix("udp") {
            let Some(r) = r.strip_prefix(':') else {
                return Err(format!("{s:?}: expected udp:RATE (e.g. udp:50mbit)"));
            };
            let rate: Rate = r
                .trim()
                .parse()
                .map_err(|e| format!("{s:?}: udp rate: {e}"))?;
            if rate == Rate::ZERO {
                return Err(format!("{s:?}: the udp rate must be above zero"));
            }
            return Ok(FlowKind::Udp(rate));
        }
        t.parse::<Pattern>()
            .map(FlowKind::Gen)
            .map_err(|e| format!("{e} (or tcp, udp:RATE)"))
    }
}

/// An event's `set` as a congestion-point patch; an error names `cp.KEY`.
pub fn cp_patch(set: &toml::Table) -> Result<cp_switch::CpPatch, cp_switch::ConfigError> {
    daemon_kit::patch::from_table(set).map_err(|e| cp_switch::CpPatch::key_error(&e.key, e.reason))
}

/// An event's `set` as a reaction-point patch; an error names the field as in the file.
pub fn rp_patch(set: &toml::Table) -> Result<rp_agent::RpPatch, rp_agent::ConfigError> {
    daemon_kit::patch::from_table(set).map_err(|e| rp_agent::RpPatch::key_error(&e.key, e.reason))
}

/// `[[event]]`: a change at time `at`, exactly one of
/// * `link` + `rate` (+ `dir`): the link's line rate;
/// * `switch` + `set`: congestion-point settings of every CP of that switch, `[cp]` names
///   (`cp_switch::CpPatch`, applied by `cp_switch::Bridge::apply_cp_patch`);
/// * `host` + `set`: that host's reaction points, `rp_mode` and the `[rp]` names
///   (`rp_agent::RpPatch`, applied by `rp_agent::Agent::apply_rp_patch`).
///
/// Typed by [`Topology::parse`]: the `set` is a patch from then on, with the operands as
/// written beside it (`KEY=VALUE`, what a `ctl set` command carries). Changes accumulate: a
/// later event on the same node starts from the settings the earlier ones left; every patch
/// is checked against the node's settings when the topology is built, in time order, with the
/// cores' own validation.
#[derive(Debug, Clone, PartialEq)]
pub struct EventEntry {
    /// When.
    pub at: Duration,
    /// What changes.
    pub kind: EventKind,
    /// `sw0-r0 → 1gbit`, `sw0 cp_queue_set_point=20KB`, ... (see [`EventEntry::label`]).
    label: String,
}

/// What an [`EventEntry`] changes.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// A link's line rate.
    Link {
        /// Link name.
        link: String,
        /// Direction(s).
        dir: DirSpec,
        /// New rate.
        rate: Rate,
    },
    /// Every congestion point of a switch.
    Switch {
        /// Switch name.
        switch: String,
        /// `[cp]` settings.
        set: ParamSet<cp_switch::CpPatch>,
    },
    /// A host's reaction points.
    Host {
        /// Host name.
        host: String,
        /// `rp_mode` and `[rp]` settings.
        set: ParamSet<rp_agent::RpPatch>,
    },
}

/// A parameter change: the typed patch the core applies, and the same change as `KEY=VALUE`
/// operands in the file's order and spelling (keys as written; values one word each, see
/// [`word`]), which is what a daemon's `ctl set` command takes.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSet<P> {
    /// The patch.
    pub patch: P,
    /// `(KEY, VALUE)` as written.
    pub operands: Vec<(String, String)>,
}

/// A TOML value as one command word (no spaces: arrays and inline tables written compactly,
/// strings bare at the top level, quoted inside). `daemon_kit::patch::value` reads it back.
pub fn word(v: &toml::Value) -> String {
    fn inner(v: &toml::Value) -> String {
        match v {
            toml::Value::String(s) => toml::Value::String(s.clone()).to_string(),
            toml::Value::Array(a) => {
                format!("[{}]", a.iter().map(inner).collect::<Vec<_>>().join(","))
            }
            toml::Value::Table(t) => format!(
                "{{{}}}",
                t.iter()
                    .map(|(k, v)| format!("{k}={}", inner(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            other => other.to_string(),
        }
    }
    match v {
        toml::Value::String(s) => s.clone(),
        other => inner(other),
    }
}

/// `[[event]]` as written; [`EventFile::resolve`] types it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventFile {
    at: Duration,
    #[serde(default)]
    link: Option<String>,
    #[serde(default)]
    dir: Option<DirSpec>,
    #[serde(default)]
    rate: Option<Rate>,
    #[serde(default)]
    switch: Option<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    set: Option<toml::Table>,
}

/// The field of a core's patch error as a path under the event's `set`.
fn under_set(field: &str) -> String {
    let key = field
        .strip_prefix("cp.")
        .or_else(|| field.strip_prefix("rp."))
        .unwrap_or(field);
    format!("set.{key}")
}

impl EventFile {
    /// The typed event, or `(field, reason)` when its fields do not make exactly one of the
    /// three kinds or its `set` is not a patch of its kind (the field relative to the event).
    fn resolve(self) -> Result<EventEntry, (String, String)> {
        const KINDS: &str = "an event has exactly one of link + rate, switch + set, host + set";
        let targets = [
            ("link", self.link.is_some()),
            ("switch", self.switch.is_some()),
            ("host", self.host.is_some()),
        ];
        let named: Vec<&str> = targets.iter().filter(|t| t.1).map(|t| t.0).collect();
        match named.as_slice() {
            [] => Err(("link".into(), format!("missing: {KINDS}"))),
            [_, second, ..] => Err((
                second.to_string(),
                format!("{KINDS} ({})", named.join(" and ")),
            )),
            _ => Ok(()),
        }?;
        if let Some(link) = self.link {
            if self.set.is_some() {
                return Err((
                    "set".into(),
                    format!("a link event changes rate only; {KINDS}"),
                ));
            }
            let rate = self
                .rate
                .ok_or_else(|| ("rate".to_string(), format!("missing: {KINDS}")))?;
            return Ok(EventEntry {
                at: self.at,
                label: format!("{link} → {rate}"),
                kind: EventKind::Link {
                    link,
                    dir: self.dir.unwrap_or_default(),
                    rate,
                },
            });
        }
        if self.rate.is_some() {
            return Err((
                "rate".into(),
                format!("only a link event has a rate; {KINDS}"),
            ));
        }
        if self.dir.is_some() {
            return Err(("dir".into(), "only a link event has a direction".into()));
        }
        let set = self
            .set
            .ok_or_else(|| ("set".to_string(), format!("missing: {KINDS}")))?;
        if set.is_empty() {
            return Err(("set".into(), "nothing to change".into()));
        }
        let node = self.switch.clone().or_else(|| self.host.clone());
        let label = label_of(node.as_deref().unwrap_or(""), &set);
        let operands = set.iter().map(|(k, v)| (k.clone(), word(v))).collect();
        let kind = match (self.switch, self.host) {
            (Some(switch), _) => EventKind::Switch {
                switch,
                set: ParamSet {
                    patch: cp_patch(&set).map_err(|e| (under_set(&e.field), e.reason))?,
                    operands,
                },
            },
            (_, Some(host)) => EventKind::Host {
                host,
                set: ParamSet {
                    patch: rp_patch(&set).map_err(|e| (under_set(&e.field), e.reason))?,
                    operands,
                },
            },
            // `named` holds exactly one target, and it is not the link.
            (None, None) => return Err(("link".into(), format!("missing: {KINDS}"))),
        };
        Ok(EventEntry {
            at: self.at,
            kind,
            label,
        })
    }
}

/// `sw0 cp_queue_set_point=20KB`, `h0 rp_mode=adaptive-bc rpg_ai_rate=10mbit`.
fn label_of(node: &str, set: &toml::Table) -> String {
    let mut s = node.to_string();
    for (k, v) in set {
        let v = match v {
            toml::Value::String(x) => x.clone(),
            other => other.to_string(),
        };
        s.push_str(&format!(" {k}={v}"));
    }
    s
}

impl EventEntry {
    /// What the event changes.
    pub fn kind(&self) -> &EventKind {
        &self.kind
    }

    /// A short description for plots and logs: `sw0-r0 → 1gbit`,
    /// `sw0 cp_queue_set_point=20KB`, `h0 rp_mode=adaptive-bc rpg_ai_rate=10mbit`.
    pub fn label(&self) -> String {
        self.label.clone()
    }
}

/// Direction in a topology file.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DirSpec {
    /// a → b.
    AToB,
    /// b → a.
    BToA,
    /// Both.
    #[default]
    Both,
}

/// What [`Topology::build`] returns besides the simulation.
#[derive(Debug, Clone)]
pub struct Built {
    /// Hosts: (name, node).
    pub hosts: Vec<(String, NodeId)>,
    /// Switches: (name, node).
    pub switches: Vec<(String, NodeId)>,
    /// Flows: (name, id, src host, dst host, start, stop).
    pub flows: Vec<(String, u32, String, String, Instant, Instant)>,
    /// The bottleneck link, if named.
    pub bottleneck: Option<LinkId>,
}

/// The flows of a topology as [`Topology::build_parts`] sorts them out.
#[derive(Default)]
struct FlowPlan {
    /// Generator (and UDP) flows by sending host.
    by_host: BTreeMap<String, Vec<FlowSpec>>,
    /// Bulk TCP transfers (the hosts' TCP endpoints carry them).
    bulk: Vec<BulkFlow>,
    /// Every flow, as [`Built::flows`] lists it.
    list: Vec<(String, u32, String, String, Instant, Instant)>,
}

/// One bulk TCP `[[flow]]`, both ends resolved.
struct BulkFlow {
    /// Flow id (its index in the file).
    id: u32,
    /// Sending host and its MAC.
    src: String,
    smac: EthernetAddress,
    /// Receiving host and its MAC.
    dst: String,
    dmac: EthernetAddress,
    /// Frame length (octets, no FCS).
    frame_len: usize,
    /// First and last instant of sending.
    start: Instant,
    stop: Instant,
}

impl Topology {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Topology, TopoError> {
        let label = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| TopoError {
            file: label.clone(),
            field: "(file)".into(),
            msg: e.to_string(),
        })?;
        Topology::parse(&text, &label)
    }

    /// Parses TOML text; `label` names it in errors. This is the edge: what the file writes as
    /// text (a flow's `pattern`) is typed here, errors naming the field.
    pub fn parse(text: &str, label: &str) -> Result<Topology, TopoError> {
        let f: TopologyFile = toml::from_str(text).map_err(|e| TopoError {
            file: label.into(),
            field: e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].lines().count().max(1);
                    format!("line {line}")
                })
                .unwrap_or_else(|| "(syntax)".into()),
            msg: e.message().to_string(),
        })?;
        let mut flow = Vec::with_capacity(f.flow.len());
        for (i, ff) in f.flow.into_iter().enumerate() {
            flow.push(ff.resolve().map_err(|(field, msg)| TopoError {
                file: label.into(),
                field: format!("flow[{i}].{field}"),
                msg,
            })?);
        }
        let mut event = Vec::with_capacity(f.event.len());
        for (i, ev) in f.event.into_iter().enumerate() {
            event.push(ev.resolve().map_err(|(field, msg)| TopoError {
                file: label.into(),
                field: format!("event[{i}].{field}"),
                msg,
            })?);
        }
        let mut switch = BTreeMap::new();
        for (name, sw) in f.switch {
            let spec = sw.resolve().map_err(|(field, msg)| TopoError {
                file: label.into(),
                field: format!("switch.{name}.{field}"),
                msg,
            })?;
            switch.insert(name, spec);
        }
        let mut host = BTreeMap::new();
        for (name, h) in f.host {
            let spec = h.resolve().map_err(|(field, msg)| TopoError {
                file: label.into(),
                field: format!("host.{name}.{field}"),
                msg,
            })?;
            host.insert(name, spec);
        }
        Ok(Topology {
            seed: f.seed,
            duration: f.duration,
            output: f.output,
            switch,
            host,
            link: f.link,
            flow,
            event,
            incast: f.incast,
            file: label.into(),
        })
    }

    fn err(&self, field: impl Into<String>, msg: impl Into<String>) -> TopoError {
        TopoError {
            file: self.file.clone(),
            field: field.into(),
            msg: msg.into(),
        }
    }

    /// Checks every switch and host event's patch against the node's settings as the earlier
    /// events (in time order) leave them, with the cores' own rules: invalid combinations are
    /// reported as `event[i].set.KEY`.
    fn check_param_events(
        &self,
        switches: &BTreeMap<String, cp_switch::CpConfig>,
        hosts: &BTreeMap<String, AgentConfig>,
    ) -> Result<(), TopoError> {
        let mut sw = switches.clone();
        let mut hs = hosts.clone();
        let mut order: Vec<usize> = (0..self.event.len()).collect();
        order.sort_by_key(|&i| self.event[i].at);
        for i in order {
            match &self.event[i].kind {
                EventKind::Link { .. } => {}
                EventKind::Switch { switch, set } => {
                    let Some(cp) = sw.get_mut(switch) else {
                        return Err(self.err(
                            format!("event[{i}].switch"),
                            format!("no switch {switch:?}"),
                        ));
                    };
                    *cp = cp.patched(&set.patch).map_err(|e| {
                        self.err(format!("event[{i}].{}", under_set(&e.field)), e.reason)
                    })?;
                }
                EventKind::Host { host, set } => {
                    let Some(cfg) = hs.get_mut(host) else {
                        return Err(
                            self.err(format!("event[{i}].host"), format!("no host {host:?}"))
                        );
                    };
                    *cfg = cfg.with_rp_patch(&set.patch).map_err(|e| {
                        self.err(format!("event[{i}].{}", under_set(&e.field)), e.reason)
                    })?;
                }
            }
        }
        Ok(())
    }

    /// The MAC of every host, by name.
    pub fn host_macs(&self) -> BTreeMap<String, EthernetAddress> {
        self.host
            .iter()
            .enumerate()
            .map(|(i, (name, h))| {
                let i = i as u16;
                let mac = h.mac.unwrap_or(EthernetAddress([
                    0x02,
                    0,
                    0,
                    0,
                    0x01 + (i >> 8) as u8,
                    i as u8,
                ]));
                (name.clone(), mac)
            })
            .collect()
    }

    /// The graph of the links (port names, shortest paths, static FDB entries), as both
    /// worlds build it. Links naming unknown nodes are kept; [`Topology::build`] reports them.
    pub fn graph(&self) -> Graph {
        let decls: Vec<LinkDecl<'_>> = self
            .link
            .iter()
            .map(|l| LinkDecl {
                a: &l.a,
                b: &l.b,
                name: l.name.as_deref(),
            })
            .collect();
        Graph::new(self.switch.keys(), self.host.keys(), &decls)
    }

    /// Creates the simulation: switches (sorted by name) then hosts (sorted by name), links
    /// in file order, flows, incast endpoints, scheduled events.
    pub fn build(&self) -> Result<(Sim, Built), TopoError> {
        let (mut sim, built, events) = self.build_parts()?;
        for (at, action) in events {
            sim.schedule(at, action);
        }
        Ok((sim, built))
    }

    /// [`Topology::build`] without scheduling the events: the simulation, and every
    /// `[[event]]` as the engine action it becomes, in file order (checked, not yet queued).
    /// The runner queues them itself ([`crate::run::sim`]).
    ///
    /// The steps, each checking its part of the file: node and link names
    /// ([`Topology::check_links`]), the links as the engine takes them
    /// ([`Topology::link_specs`]), the flows ([`Topology::plan_flows`]), the TCP endpoints
    /// ([`Topology::plan_tcp`]), the switches and hosts with their settings
    /// ([`Topology::add_switches`], [`Topology::add_hosts`]), then the events and outputs
    /// against the built simulation.
    #[allow(clippy::type_complexity)]
    pub fn build_parts(&self) -> Result<(Sim, Built, Vec<(Instant, Action)>), TopoError> {
        let names = self.check_links()?;
        let graph = self.graph();
        let specs = self.link_specs(&graph, &names);
        let macs = self.host_macs();
        let mut flows = self.plan_flows(&macs)?;
        let mut tcp = self.plan_tcp(&macs, std::mem::take(&mut flows.bulk))?;

        let mut b = SimBuilder::new(self.seed);
        b.options(self.trace_options());
        let mut built = Built {
            hosts: Vec::new(),
            switches: Vec::new(),
            flows: flows.list,
            bottleneck: None,
        };
        let switch_cfgs = self.add_switches(&mut b, &mut built, &graph, &macs)?;
        let host_cfgs =
            self.add_hosts(&mut b, &mut built, &graph, &macs, flows.by_host, &mut tcp)?;
        for (a, bb, spec) in specs {
            b.link(NodeId(a), NodeId(bb), spec);
        }
        let sim = b
            .build()
            .map_err(|e| self.err("(topology)", e.to_string()))?;
        self.check_param_events(&switch_cfgs, &host_cfgs)?;
        let events = self.event_actions(&sim)?;
        built.bottleneck = self.check_outputs(&sim)?;
        Ok((sim, built, events))
    }

    /// Checks node and link names (no host named like a switch; every link between two
    /// known, distinct nodes, above zero rate, under a name of its own); every node's name in
    /// node-id order (switches, then hosts, each sorted).
    fn check_links(&self) -> Result<Vec<String>, TopoError> {
        let mut names: Vec<String> = self.switch.keys().cloned().collect();
        names.extend(self.host.keys().cloned());
        for n in self.host.keys() {
            if self.switch.contains_key(n) {
                return Err(self.err(format!("host.{n}"), "a switch has the same name"));
            }
        }
        let index = |n: &str| names.iter().position(|x| x == n);
        let mut link_names = Vec::new();
        for (i, l) in self.link.iter().enumerate() {
            let a = index(&l.a)
                .ok_or_else(|| self.err(format!("link[{i}].a"), format!("no node {:?}", l.a)))?;
            let b = index(&l.b)
                .ok_or_else(|| self.err(format!("link[{i}].b"), format!("no node {:?}", l.b)))?;
            if a == b {
                return Err(self.err(format!("link[{i}]"), "both ends on the same node"));
            }
            if l.rate == Rate::ZERO {
                return Err(self.err(format!("link[{i}].rate"), "must be above zero"));
            }
            let name = l.name.clone().unwrap_or_else(|| format!("{}-{}", l.a, l.b));
            if link_names.contains(&name) {
                return Err(self.err(
                    format!("link[{i}].name"),
                    format!("two links are called {name:?}"),
                ));
            }
            link_names.push(name);
        }
        Ok(names)
    }

    /// The links as the engine takes them: (end a's node index, end b's, spec), names and
    /// port names from the graph both worlds share. Links naming unknown nodes are left out
    /// ([`Topology::check_links`] refuses them).
    fn link_specs(&self, graph: &Graph, names: &[String]) -> Vec<(usize, usize, LinkSpec)> {
        let index = |n: &str| names.iter().position(|x| x == n);
        let mut specs = Vec::new();
        for (l, info) in self.link.iter().zip(&graph.links) {
            let (Some(a), Some(b)) = (index(&l.a), index(&l.b)) else {
                continue;
            };
            specs.push((
                a,
                b,
                LinkSpec {
                    rate: l.rate,
                    delay: l.delay,
                    name: Some(info.name.clone()),
                    a_port: Some(info.a.port.clone()),
                    b_port: Some(info.b.port.clone()),
                },
            ));
        }
        specs
    }

    /// The `[[flow]]`s checked and sorted out: generator flows (and UDP, a CBR generator) by
    /// sending host, bulk TCP transfers apart, and the list every flow appears in.
    fn plan_flows(&self, macs: &BTreeMap<String, EthernetAddress>) -> Result<FlowPlan, TopoError> {
        let end = Instant::ZERO + self.duration;
        let mut plan = FlowPlan::default();
        for (i, f) in self.flow.iter().enumerate() {
            if !self.host.contains_key(&f.src) {
                return Err(self.err(format!("flow[{i}].src"), format!("no host {:?}", f.src)));
            }
            let Some(&dst) = macs.get(&f.dst) else {
                return Err(self.err(format!("flow[{i}].dst"), format!("no host {:?}", f.dst)));
            };
            if f.src == f.dst {
                // A station does not send to itself over the network: its frames would only be
                // dropped at the first bridge (802.1Q 8.6.1: never relayed back to the
                // reception port).
                return Err(self.err(
                    format!("flow[{i}].dst"),
                    format!("is the flow's own source {:?}", f.src),
                ));
            }
            if !(60..=9000).contains(&f.frame_len) {
                return Err(self.err(format!("flow[{i}].frame_len"), "must be in 60..=9000"));
            }
            let name = f.name.clone().unwrap_or_else(|| format!("f{i}"));
            let start = Instant::ZERO + f.start;
            let stop = f.stop.map_or(end, |s| Instant::ZERO + s);
            let pattern = match f.kind {
                FlowKind::Gen(p) => p,
                // The simulator's CBR generator sends `rate` of whole frames, as the netns
                // runner's iperf3 does once its application rate is converted.
                FlowKind::Udp(r) => Pattern::Cbr(r),
                FlowKind::Tcp => {
                    let Some(&smac) = macs.get(&f.src) else {
                        return Err(
                            self.err(format!("flow[{i}].src"), format!("no host {:?}", f.src))
                        );
                    };
                    plan.bulk.push(BulkFlow {
                        id: i as u32,
                        src: f.src.clone(),
                        smac,
                        dst: f.dst.clone(),
                        dmac: dst,
                        frame_len: f.frame_len,
                        start,
                        stop,
                    });
                    plan.list
                        .push((name, i as u32, f.src.clone(), f.dst.clone(), start, stop));
                    continue;
                }
            };
            plan.list.push((
                name.clone(),
                i as u32,
                f.src.clone(),
                f.dst.clone(),
                start,
                stop,
            ));
            plan.by_host
                .entry(f.src.clone())
                .or_default()
                .push(FlowSpec {
                    id: i as u32,
                    name,
                    dst,
                    pattern,
                    frame_len: f.frame_len,
                    start,
                    stop,
                });
        }
        Ok(plan)
    }

    /// The TCP endpoints of every host: the `[[incast]]` clients and servers (checked), then
    /// both ends of every bulk TCP flow.
    fn plan_tcp(
        &self,
        macs: &BTreeMap<String, EthernetAddress>,
        bulk: Vec<BulkFlow>,
    ) -> Result<BTreeMap<String, TcpHost>, TopoError> {
        let mut tcp_by_host: BTreeMap<String, TcpHost> = BTreeMap::new();
        for (i, inc) in self.incast.iter().enumerate() {
            inc.validate()
                .map_err(|(field, msg)| self.err(format!("incast[{i}].{field}"), msg))?;
            let Some(&cmac) = macs.get(&inc.client) else {
                return Err(self.err(
                    format!("incast[{i}].client"),
                    format!("no host {:?}", inc.client),
                ));
            };
            let mut servers = Vec::new();
            for (k, s) in inc.servers.iter().enumerate() {
                let Some(&smac) = macs.get(s) else {
                    return Err(self.err(
                        format!("incast[{i}].servers[{k}]"),
                        format!("no host {s:?}"),
                    ));
                };
                servers.push((s.clone(), smac));
            }
            let base = (i as u32 + 1) << 16;
            for (k, (s, smac)) in servers.iter().enumerate() {
                tcp_by_host.entry(s.clone()).or_default().add_server(
                    inc,
                    base + k as u32,
                    *smac,
                    cmac,
                );
            }
            tcp_by_host
                .entry(inc.client.clone())
                .or_default()
                .add_client(
                    inc,
                    base,
                    cmac,
                    &servers.iter().map(|x| x.1).collect::<Vec<_>>(),
                    Instant::ZERO + inc.start,
                );
        }
        for f in bulk {
            tcp_by_host.entry(f.src).or_default().add_bulk_sender(
                f.id,
                f.frame_len,
                f.smac,
                f.dmac,
                f.start,
                f.stop,
            );
            tcp_by_host
                .entry(f.dst)
                .or_default()
                .add_bulk_receiver(f.id, f.dmac, f.smac);
        }
        Ok(tcp_by_host)
    }

    /// `[output]`'s intervals, the engine's defaults where the file has none.
    fn trace_options(&self) -> TraceOptions {
        TraceOptions {
            trace_interval: self
                .output
                .trace_interval
                .unwrap_or(TraceOptions::default().trace_interval),
            sample_interval: self
                .output
                .sample_interval
                .unwrap_or(TraceOptions::default().sample_interval),
            warmup: self.output.warmup.unwrap_or(Duration::ZERO),
        }
    }

    /// Adds every switch (sorted by name) with its bridge settings; the congestion-point
    /// settings of each, which the parameter events start from.
    fn add_switches(
        &self,
        b: &mut SimBuilder,
        built: &mut Built,
        graph: &Graph,
        macs: &BTreeMap<String, EthernetAddress>,
    ) -> Result<BTreeMap<String, cp_switch::CpConfig>, TopoError> {
        let mut cps = BTreeMap::new();
        for (name, sw) in &self.switch {
            let cfg = self.bridge_config(name, sw, graph, macs)?;
            cps.insert(name.clone(), cfg.cp.clone());
            let id = b.switch(name.clone(), cfg);
            built.switches.push((name.clone(), id));
        }
        Ok(cps)
    }

    /// A switch's bridge settings: `[switch.NAME.bridge]` over the defaults, the static FDB
    /// entries of the graph, validated with the ports the links give it (the error names the
    /// table).
    fn bridge_config(
        &self,
        name: &str,
        sw: &SwitchSpec,
        graph: &Graph,
        macs: &BTreeMap<String, EthernetAddress>,
    ) -> Result<BridgeConfig, TopoError> {
        let field = format!("switch.{name}.bridge");
        // The simulator's line is the core's: preamble, FCS and padding counted.
        let mut cfg = sw.bridge_spec().config_on(&ShaperConfig::default());
        if sw.static_fdb {
            for (h, port) in graph.fdb(name) {
                if let Some(mac) = macs.get(&h) {
                    cfg.fdb.static_entries.push(StaticEntry {
                        mac: *mac,
                        vid: None,
                        port,
                    });
                }
            }
        }
        // Validate early so the error names this table (ports are added by the builder).
        let mut probe = cfg.clone();
        probe.ports = graph
            .ports(name)
            .iter()
            .map(|e| cp_switch::PortConfig::new(e.port.clone()))
            .collect();
        if let Err(e) = probe.validate() {
            return Err(self.err(format!("{field}.{}", e.field), e.reason));
        }
        Ok(cfg)
    }

    /// Adds every host (sorted by name) with its agent settings, flows and TCP endpoints; the
    /// agent settings of each, which the parameter events start from.
    fn add_hosts(
        &self,
        b: &mut SimBuilder,
        built: &mut Built,
        graph: &Graph,
        macs: &BTreeMap<String, EthernetAddress>,
        mut flows_by_host: BTreeMap<String, Vec<FlowSpec>>,
        tcp_by_host: &mut BTreeMap<String, TcpHost>,
    ) -> Result<BTreeMap<String, AgentConfig>, TopoError> {
        let mut cfgs = BTreeMap::new();
        for (name, h) in &self.host {
            let Some(&mac) = macs.get(name) else {
                continue; // host_macs names every host
            };
            let cfg = self.agent_config(name, h, graph, mac)?;
            cfgs.insert(name.clone(), cfg.clone());
            if graph.degree(name) > 1 {
                return Err(self.err(
                    format!("host.{name}"),
                    "a host has one uplink (it has several links)",
                ));
            }
            let flows = flows_by_host.remove(name).unwrap_or_default();
            let tcp = tcp_by_host.remove(name);
            let grid = h.poll_grid;
            let id = b.host(name.clone(), move |rng, _| {
                let host = HostNode::new(cfg, mac, rng, flows).map_err(|e| e.to_string())?;
                let host = match grid {
                    Some(g) => host.with_poll_grid(g),
                    None => host,
                };
                Ok(match tcp {
                    Some(t) => host.with_tcp(t),
                    None => host,
                })
            });
            built.hosts.push((name.clone(), id));
        }
        Ok(cfgs)
    }

    /// A host's agent settings: `[host.NAME.agent]` over the defaults, the line rate that of
    /// its uplink and the MAC the host's unless the table sets them; validated (the error
    /// names the table).
    fn agent_config(
        &self,
        name: &str,
        h: &HostSpec,
        graph: &Graph,
        mac: EthernetAddress,
    ) -> Result<AgentConfig, TopoError> {
        let field = format!("host.{name}.agent");
        // The simulator's pacing is the core's; the line rate is the uplink's (the core's
        // default without one).
        let cfg = h.agent_spec().config_in(AgentGiven {
            line_rate: graph.uplink(name).map(|li| self.link[li].rate),
            mac: Some(mac),
            catch_up: None,
            wire_overhead: None,
        });
        if let Err(e) = cfg.validate() {
            return Err(self.err(format!("{field}.{}", e.field), e.reason));
        }
        Ok(cfg)
    }

    /// Every `[[event]]` as the engine action it becomes, in file order, each checked against
    /// the built simulation (links and nodes named, rates above zero, patches typed).
    fn event_actions(&self, sim: &Sim) -> Result<Vec<(Instant, Action)>, TopoError> {
        let mut events = Vec::with_capacity(self.event.len());
        for (i, ev) in self.event.iter().enumerate() {
            let action = match &ev.kind {
                EventKind::Link { link, dir, rate } => {
                    let link = sim.link_id(link).ok_or_else(|| {
                        self.err(format!("event[{i}].link"), format!("no link {link:?}"))
                    })?;
                    if *rate == Rate::ZERO {
                        return Err(self.err(format!("event[{i}].rate"), "must be above zero"));
                    }
                    let dir = match dir {
                        DirSpec::AToB => Direction::AtoB,
                        DirSpec::BToA => Direction::BtoA,
                        DirSpec::Both => Direction::Both,
                    };
                    Action::SetRate {
                        link,
                        dir,
                        rate: *rate,
                    }
                }
                EventKind::Switch { switch, set } => Action::SetCp {
                    node: sim.node_id(switch).ok_or_else(|| {
                        self.err(
                            format!("event[{i}].switch"),
                            format!("no switch {switch:?}"),
                        )
                    })?,
                    set: set.patch.clone(),
                },
                EventKind::Host { host, set } => Action::SetRp {
                    node: sim.node_id(host).ok_or_else(|| {
                        self.err(format!("event[{i}].host"), format!("no host {host:?}"))
                    })?,
                    set: set.patch,
                },
            };
            events.push((Instant::ZERO + ev.at, action));
        }
        Ok(events)
    }

    /// Checks the `[output]` links against the built simulation; the bottleneck's link id.
    fn check_outputs(&self, sim: &Sim) -> Result<Option<LinkId>, TopoError> {
        let mut bottleneck = None;
        if let Some(bn) = &self.output.bottleneck {
            bottleneck = Some(
                sim.link_id(bn)
                    .ok_or_else(|| self.err("output.bottleneck", format!("no link {bn:?}")))?,
            );
        }
        for (i, p) in self.output.pcap.iter().enumerate() {
            if sim.link_id(&p.link).is_none() {
                return Err(self.err(
                    format!("output.pcap[{i}].link"),
                    format!("no link {:?}", p.link),
                ));
            }
        }
        Ok(bottleneck)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"
        seed = 3
        duration = "1ms"
        [switch.sw]
        [host.a]
        [host.b]
        [[link]]
        a = "a"
        b = "sw"
        rate = "10gbit"
        delay = "1us"
        [[link]]
        a = "sw"
        b = "b"
        rate = "10gbit"
        [[flow]]
        src = "a"
        dst = "b"
        pattern = "cbr:1gbit"
    "#;

    #[test]
    fn minimal_topology_builds_and_runs() {
        let t = Topology::parse(MINI, "mini.toml").unwrap();
        let (mut sim, built) = t.build().unwrap();
        assert_eq!(built.hosts.len(), 2);
        sim.run_until(Instant::ZERO + t.duration);
        let b = sim.host(built.hosts[1].1).unwrap();
        let (_, c) = b.sink().flows().next().unwrap();
        // 1 Gb/s of 1500-octet frames for 1 ms: about 83 frames.
        assert!((75..=84).contains(&c.frames), "{}", c.frames);
        assert_eq!(c.lost, 0);
    }

    fn error_of(text: &str) -> String {
        match Topology::parse(text, "t.toml").and_then(|t| t.build().map(|_| ())) {
            Ok(()) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn errors_name_file_and_field() {
        let e = error_of(&MINI.replace("b = \"sw\"", "b = \"sw9\""));
        assert!(e.starts_with("t.toml: link[0].b: no node \"sw9\""), "{e}");
        let e = error_of(&MINI.replace("pattern = \"cbr:1gbit\"", "pattern = \"fast\""));
        assert!(e.starts_with("t.toml: flow[0].pattern"), "{e}");
        let e = error_of(&MINI.replace(
            "[switch.sw]",
            "[switch.sw]\n[switch.sw.bridge]\nbuffers = { output = \"1KB\", bogus = 1 }",
        ));
        assert!(e.contains("switch.sw.bridge"), "{e}");
        assert!(e.contains("bogus"), "{e}");
        let e = error_of(&MINI.replace("[host.a]", "[host.a]\nagent = { rp = { rpg_gd = 99 } }"));
        assert!(e.starts_with("t.toml: host.a.agent"), "{e}");
        let e = error_of(&MINI.replace("duration = \"1ms\"", "duration = \"soon\""));
        assert!(e.starts_with("t.toml: line 3"), "{e}");
    }

    #[test]
    fn flow_kinds_parse_and_bad_ones_name_the_field() {
        assert_eq!("tcp".parse::<FlowKind>(), Ok(FlowKind::Tcp));
        assert_eq!(
            "udp:50mbit".parse::<FlowKind>(),
            Ok(FlowKind::Udp(Rate::from_mbps(50)))
        );
        assert_eq!(
            "greedy".parse::<FlowKind>(),
            Ok(FlowKind::Gen(Pattern::Greedy))
        );
        assert!(FlowKind::Tcp.is_ip() && !FlowKind::Gen(Pattern::Greedy).is_ip());
        for bad in ["udp", "udp:", "udp:fast", "udp:0mbit", "tcp:1gbit", "tcpx"] {
            assert!(bad.parse::<FlowKind>().is_err(), "{bad}");
            let e = error_of(&MINI.replace("cbr:1gbit", bad));
            assert!(e.starts_with("t.toml: flow[0].pattern"), "{bad}: {e}");
        }
        let e = error_of(&MINI.replace("cbr:1gbit", "udp:fast"));
        assert!(e.contains("udp:RATE") || e.contains("udp rate"), "{e}");
    }

    #[test]
    fn tcp_and_udp_flows_run_in_the_simulator() {
        let text = MINI
            .replace("duration = \"1ms\"", "duration = \"5ms\"")
            .replace("pattern = \"cbr:1gbit\"", "pattern = \"tcp\"")
            + "[[flow]]\nsrc = \"b\"\ndst = \"a\"\npattern = \"udp:1gbit\"\n";
        let t = Topology::parse(&text, "t.toml").unwrap();
        let (mut sim, built) = t.build().unwrap();
        sim.run_until(Instant::ZERO + t.duration);
        let b = sim.host(built.hosts[1].1).unwrap();
        // The bulk receiver took in-order data: slow start from 10 segments reaches most of
        // the 10 Gb/s line within 5 ms (at least 1 Gb/s on average here).
        let got = b.tcp().unwrap().received(super::super::tcp::bulk_conn(0));
        assert!(got > 625_000, "{got}");
        // The UDP flow is a 1 Gb/s CBR generator into a's sink.
        let a = sim.host(built.hosts[0].1).unwrap();
        let (_, c) = a.sink().flows().next().unwrap();
        assert!((380..=420).contains(&c.frames), "{}", c.frames);
    }

    #[test]
    fn a_flow_to_its_own_source_is_refused() {
        let text = MINI.replace("dst = \"b\"", "dst = \"a\"");
        let e = Topology::parse(&text, "t.toml")
            .unwrap()
            .build()
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.toml: flow[0].dst: is the flow's own source"),
            "{e}"
        );
    }

    fn with_event(ev: &str) -> String {
        format!("{MINI}\n[[event]]\nat = \"0.5ms\"\n{ev}\n")
    }

    #[test]
    fn parameter_events_build_and_bad_ones_name_the_field() {
        for ok in [
            "switch = \"sw\"\nset = { cp_queue_set_point = \"20KB\", cp_feedback_weight = 4 }",
            "host = \"a\"\nset = { rp_mode = \"adaptive-bc\", rpg_ai_rate = \"10mbit\" }",
            "link = \"a-sw\"\nrate = \"1gbit\"",
        ] {
            let t = Topology::parse(&with_event(ok), "t.toml").unwrap();
            t.build().unwrap();
        }
        for (ev, start) in [
            ("switch = \"sw\"", "t.toml: event[0].set: missing"),
            ("switch = \"sw\"\nset = {}", "t.toml: event[0].set: nothing"),
            (
                "switch = \"sw9\"\nset = { cp_feedback_weight = 4 }",
                "t.toml: event[0].switch: no switch",
            ),
            (
                "host = \"zz\"\nset = { rpg_gd = 4 }",
                "t.toml: event[0].host: no host",
            ),
            (
                "host = \"a\"\nswitch = \"sw\"\nset = { rpg_gd = 4 }",
                "t.toml: event[0].host: an event has exactly one",
            ),
            (
                "link = \"a-sw\"\nset = { rpg_gd = 4 }",
                "t.toml: event[0].set: a link event",
            ),
            ("link = \"a-sw\"", "t.toml: event[0].rate: missing"),
            (
                "switch = \"sw\"\nrate = \"1gbit\"\nset = { cnpv = [3] }",
                "t.toml: event[0].rate",
            ),
            (
                "switch = \"sw\"\ndir = \"both\"\nset = { cnpv = [3] }",
                "t.toml: event[0].dir",
            ),
            ("at2 = 1", "t.toml: line"),
            (
                "switch = \"sw\"\nset = { cp_feedback_weight = 3 }",
                "t.toml: event[0].set.cp_feedback_weight",
            ),
            (
                "switch = \"sw\"\nset = { qeq = \"3KB\" }",
                "t.toml: event[0].set.qeq: unknown field",
            ),
            (
                "switch = \"sw\"\nset = { cp_queue_set_point = \"big\" }",
                "t.toml: event[0].set.cp_queue_set_point",
            ),
            (
                "host = \"a\"\nset = { r_ai = \"1mbit\" }",
                "t.toml: event[0].set.r_ai: unknown field",
            ),
            (
                "host = \"a\"\nset = { rp_mode = \"best\" }",
                "t.toml: event[0].set.rp_mode",
            ),
            (
                "host = \"a\"\nset = { line_rate = \"1mbit\" }",
                "t.toml: event[0].set.line_rate: cannot change",
            ),
            ("", "t.toml: event[0].link: missing"),
        ] {
            let e = error_of(&with_event(ev));
            assert!(e.starts_with(start), "{ev}: {e}");
        }
    }

    #[test]
    fn later_parameter_events_start_from_earlier_ones() {
        // mode fqcn first, then a culprit that fqcn refuses: the second event is the error.
        let text = format!(
            "{MINI}\n[[event]]\nat = \"0.6ms\"\nswitch = \"sw\"\nset = {{ culprit = \"occupancy-random\" }}\n\
             [[event]]\nat = \"0.2ms\"\nswitch = \"sw\"\nset = {{ mode = \"fqcn\" }}\n"
        );
        let e = error_of(&text);
        assert!(e.starts_with("t.toml: event[0].set.culprit"), "{e}");
    }

    #[test]
    fn parameter_events_apply_at_their_time() {
        let text = with_event(
            "switch = \"sw\"\nset = { cp_queue_set_point = \"20KB\" }\n\
             [[event]]\nat = \"0.5ms\"\nhost = \"a\"\nset = { rpg_ai_rate = \"7mbit\" }",
        );
        let t = Topology::parse(&text, "t.toml").unwrap();
        let (mut sim, built) = t.build().unwrap();
        let trace = super::super::engine::SharedBuf::default();
        sim.trace_to(Box::new(trace.clone()));
        let sw = built.switches[0].1;
        let a = built.hosts[0].1;
        sim.run_until(Instant::from_nanos(400_000));
        assert_eq!(
            sim.bridge(sw).unwrap().cp_config().cp_queue_set_point.get(),
            26_000
        );
        sim.run_until(Instant::from_nanos(600_000));
        assert_eq!(
            sim.bridge(sw).unwrap().cp_config().cp_queue_set_point.get(),
            20_000
        );
        let h = sim.host(a).unwrap();
        assert_eq!(h.agent().config().rp.rpg_ai_rate, Rate::from_mbps(7));
        sim.finish().unwrap();
        let text = String::from_utf8(trace.contents()).unwrap();
        let recs: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &serde_json::Value| v["type"] == "cp_config" || v["type"] == "rp_config")
            .collect();
        assert_eq!(recs.len(), 2, "{text}");
        assert_eq!(recs[0]["t"], 500_000);
        assert_eq!(recs[0]["node"], "sw");
        assert_eq!(recs[0]["change"], "in-place");
        assert_eq!(recs[1]["type"], "rp_config");
        assert_eq!(recs[1]["change"]["change"], "updated");
    }
}

//! Command line and TOML configuration of the `cp-switch` daemon.
//!
//! Every flag has a TOML equivalent; the TOML file can say more (static FDB entries, per-port
//! buffer sizes, scheduler weights). Flags override the file. Any invalid value ends the program
//! with one message naming the field and exit code 2.
//!
//! ```toml
//! default_rate = "100mbit"     # ports without their own rate are shaped to this
//! lossless = "pfc"             # or "pause"; absent = drop-tail
//! buffer = "150KB"             # input buffer per port and priority, and output queue limit
//! ctl = "/run/cp-switch.sock"
//! trace = "trace.jsonl"
//! trace_interval = "1ms"
//! metrics = "127.0.0.1:9100"
//!
//! # 802.1Qau congestion points (IEEE8021-CN-MIB names in the [bridge.cp] table)
//! cp = "output"                # --cp: output (standard, default) | input | off
//! cnpv = [3]                   # --cnpv 3[,5]: priorities whose queues get a CP
//! cp_set_point = "26000B"      # --cp-set-point: Qeq, cp_queue_set_point
//! cp_weight = 2                # --cp-weight: w, cp_feedback_weight (a power of two)
//! cp_sample_base = "150KB"     # --cp-sample-base: cp_min_sample_base
//! cnm_priority = 6             # --cnm-priority: PCP of the CNMs (CnmTransmitPriority)
//! cp_mode = "qcn"              # --cp-mode: qcn (default) | fqcn | explicit-rate
//! culprit = "arrival"          # --culprit: arrival | occupancy-deterministic | occupancy-random
//! er_interval = "3ms"          # --er-interval: explicit-rate T (default 30us x 10Gbit/C)
//! sched = "fifo:50"            # --sched: dataplane thread's policy, other (default) | fifo:PRIO
//! cpu = [1]                    # --cpu 1: pin the dataplane thread (daemon_kit::sched)
//! wake_quantum = "25us"        # --wake-quantum: least time between two loop iterations
//!
//! [[port]]
//! name = "sw-p1"
//! rate = "10mbit"
//! delay = "25us"               # the link's delay towards the neighbour (after the shaper)
//! ingress_delay = "25us"       # the link's delay from it, emulated by the ingress stage
//! departure_stamps = true      # place generated frames by their sender's departure stamp
//! stamp_departures = false     # write the departure instant into generated frames sent here
//! catch_up = "1ms"             # this port's line catch-up (default: the bridge's shaper's)
//!
//! [[port]]
//! name = "sw-p2"
//!
//! [[static_fdb]]
//! mac = "02:00:00:00:00:02"
//! vid = 0
//! port = "sw-p2"
//!
//! [bridge.cp]                  # the same settings under their MIB names (flags override)
//! placement = "output"
//! cnpv = [3]
//! cp_queue_set_point = "33KB"
//! cp_feedback_weight = 2
//! cp_min_sample_base = "150KB"
//! cnm_priority = 6
//! cp_min_header_octets = 64    # octets of the sampled MSDU carried in the CNM (0-64)
//! mode = "fqcn"                # qcn | fqcn | explicit-rate
//! culprit = "arrival"
//! max_flows = 1024             # flows tracked per CP (fqcn, explicit-rate, occupancy)
//! er_a = 1.05                  # explicit-rate hyperbolic queue control a, b, c
//! er_b = 1.2
//! er_c = 0.5
//! [[bridge.cp.fqcn_weights]]   # FQCN weights W_i by source MAC / VID / priority (default 1)
//! mac = "02:00:00:00:00:01"
//! weight = 4
//! ```
//!
//! # Congestion points
//! With `--cp output` (the default) every output queue whose priority is in `--cnpv` is an
//! IEEE 802.1Q-2011 clause 32.8 congestion point; with `--cp input` the shared input buffers of
//! those priorities are (the input-CP variant). A CP samples arriving frames every
//! `--cp-sample-base` octets (less when congested, ±15 % jitter) and sends a CNM back out of the
//! port the sampled frame arrived on when `Fb = −(Q − Qeq + w·(Q − Qold)) < 0`. The CPID is the
//! bridge MAC (`[bridge] mac`, by default the first port's interface address) followed by
//! `port × 8 + priority` (top bit set for an input CP). `ctl stats --json` lists the CPs under
//! `cps`, the trace records every CNM as an event `"cnm"`, and the metrics export them as
//! `cpswitch_cp_*`.
//!
//! `--cp-mode fqcn` makes every CP fair QCN (one CNM per culprit flow, Zhang & Ansari eq.
//! 7-9); `--cp-mode explicit-rate` makes it the explicit-rate switch of Jain, Jiang et al.
//! (rate-feedback messages on EtherType 0x88B5 every `--er-interval`, events `"rate_feedback"`).
//! `--culprit occupancy-deterministic|occupancy-random` sends standard QCN's CNMs to the flow
//! holding the most octets / a random occupied octet of the CP's queue (made for `--cp input`).
//! `fqcn` and `explicit-rate` only accept `--culprit arrival`: the program stops naming
//! `cp.culprit` otherwise.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use cnm_proto::{Bytes, Duration, Rate};
use cp_switch::cp::{CpMode, Culprit};
use cp_switch::Placement;
use serde::Deserialize;

/// One `--port IF[,rate=R][,delay=D][,in-delay=D][,stamps=on][,out-stamps=on][,cnd=MODE][,alt=P]` or
/// `[[port]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    /// Interface name.
    pub name: String,
    /// Emulated line rate; absent = `default_rate`, or unshaped.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Propagation delay added after serialisation.
    #[serde(default)]
    pub delay: Option<Duration>,
    /// CND defence (`auto`, `disabled`, `edge`, `interior`, `interior-ready`; default
    /// `auto`), `cp_switch::config::CndDefense`.
    #[serde(default)]
    pub cnd_defense: Option<cp_switch::config::CndDefense>,
    /// Alternate priority of an `edge` port (default: the standard rule).
    #[serde(default)]
    pub alternate_priority: Option<u8>,
    /// Propagation delay of the link *into* the port, emulated by the ingress stage
    /// (`cp_switch` daemon module `stage`): the lookahead that absorbs a sender's lag when
    /// its departure stamps are trusted. Default 0; needs the ingress stage.
    #[serde(default)]
    pub ingress_delay: Option<Duration>,
    /// Place the generated frames received on this port by their sender's departure stamp
    /// (`cnm_proto::wire::generated`). Default false; needs the ingress stage.
    #[serde(default)]
    pub departure_stamps: Option<bool>,
    /// Write each generated frame's departure instant into it on the way out
    /// (`cp_switch::config::PortConfig::stamp_departures`), for a port towards another switch
    /// that places frames by their stamps. Default false.
    #[serde(default)]
    pub stamp_departures: Option<bool>,
    /// This port's line catch-up in place of the bridge's (`[bridge.shaper] catch_up`;
    /// `cp_switch::config::PortConfig::catch_up`).
    #[serde(default)]
    pub catch_up: Option<Duration>,
}

impl PortSpec {
    /// Whether the port asks for what only the ingress stage does.
    pub fn needs_stage(&self) -> bool {
        self.ingress_delay.is_some_and(|d| d > Duration::ZERO)
            || self.departure_stamps == Some(true)
    }
}

impl std::str::FromStr for PortSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(',');
        let name = parts.next().unwrap_or("").trim().to_string();
        if name.is_empty() || name.len() > 15 || name.contains('=') {
            return Err(format!(
                "port: {s:?}: expected IF[,rate=R][,delay=D][,in-delay=D][,stamps=on][,out-stamps=on][,catch-up=D] with an interface name of 1-15 characters"
            ));
        }
        let mut spec = PortSpec {
            name,
            rate: None,
            delay: None,
            cnd_defense: None,
            alternate_priority: None,
            ingress_delay: None,
            departure_stamps: None,
            stamp_departures: None,
            catch_up: None,
        };
        for kv in parts {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("port {}: {kv:?} is not key=value", spec.name))?;
            match k.trim() {
                "rate" => {
                    spec.rate = Some(
                        v.parse()
                            .map_err(|e| format!("port {}: rate: {e}", spec.name))?,
                    )
                }
                "delay" => {
                    spec.delay = Some(
                        v.parse()
                            .map_err(|e| format!("port {}: delay: {e}", spec.name))?,
                    )
                }
                "cnd" => {
                    spec.cnd_defense = Some(
                        toml::Value::String(v.trim().to_string())
                            .try_into()
                            .map_err(|_| {
                                format!(
                                    "port {}: cnd: {v:?}: expected auto, disabled, edge, interior or interior-ready",
                                    spec.name
                                )
                            })?,
                    )
                }
                "alt" => {
                    spec.alternate_priority = Some(
                        v.trim()
                            .parse::<u8>()
                            .ok()
                            .filter(|p| *p < 8)
                            .ok_or_else(|| format!("port {}: alt: {v:?} is not a priority 0-7", spec.name))?,
                    )
                }
                "catch-up" => {
                    spec.catch_up = Some(
                        v.parse()
                            .map_err(|e| format!("port {}: catch-up: {e}", spec.name))?,
                    )
                }
                "in-delay" => {
                    spec.ingress_delay = Some(
                        v.parse()
                            .map_err(|e| format!("port {}: in-delay: {e}", spec.name))?,
                    )
                }
                "stamps" | "out-stamps" => {
                    let on = match v.trim() {
                        "on" | "true" => true,
                        "off" | "false" => false,
                        _ => {
                            return Err(format!(
                                "port {}: {}: {v:?}: expected on or off",
                                spec.name,
                                k.trim()
                            ))
                        }
                    };
                    if k.trim() == "stamps" {
                        spec.departure_stamps = Some(on);
                    } else {
                        spec.stamp_departures = Some(on);
                    }
                }
                other => {
                    return Err(format!(
                        "port {}: unknown option {other:?} (expected rate, delay, in-delay, \
                         stamps, out-stamps, catch-up, cnd or alt)",
                        spec.name
                    ))
                }
            }
        }
        Ok(spec)
    }
}

/// Lossless modes (`--lossless`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LosslessMode {
    /// 802.3x PAUSE: stops the whole upstream port.
    Pause,
    /// 802.1Qbb PFC: stops one priority of the upstream port.
    Pfc,
}

/// A static FDB entry (TOML only).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticFdb {
    /// MAC address (`aa:bb:cc:dd:ee:ff`).
    pub mac: String,
    /// VLAN id (0 = untagged / priority-tagged).
    #[serde(default)]
    pub vid: u16,
    /// Port name.
    pub port: String,
}

/// The daemon's flags (clap) — also the shape of the TOML file (serde).
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// A switch port: interface name with optional `,rate=R` (e.g. 100mbit), `,delay=D` (e.g.
    /// 25us, towards the neighbour), `,in-delay=D` (from it, in the ingress stage) and
    /// `,stamps=on` (place generated frames by their departure stamps; needs `in-delay`) and
    /// `,out-stamps=on` (write the departure instant into generated frames sent, for a next
    /// switch that places by stamps) and `,catch-up=D` (the port's line catch-up). Repeat for
    /// every port.
    #[arg(
        long = "port",
        value_name = "IF[,rate=R][,delay=D][,in-delay=D][,stamps=on][,out-stamps=on][,catch-up=D][,cnd=MODE][,alt=P]"
    )]
    #[serde(default, rename = "port")]
    pub ports: Vec<PortSpec>,
    /// Line rate for ports without `rate=` (unset: such ports are not shaped).
    #[arg(long, value_name = "RATE")]
    #[serde(default)]
    pub default_rate: Option<Rate>,
    /// Lossless operation: send PAUSE or PFC upstream instead of dropping.
    #[arg(long, value_enum)]
    #[serde(default)]
    pub lossless: Option<LosslessMode>,
    /// Input buffer per port and priority, and output queue limit (default 150KB).
    #[arg(long, value_name = "BYTES")]
    #[serde(default)]
    pub buffer: Option<Bytes>,
    /// PAUSE/PFC on threshold (default 110KB).
    #[arg(long, value_name = "BYTES")]
    #[serde(default)]
    pub q_high: Option<Bytes>,
    /// PAUSE/PFC off threshold (default 44KB).
    #[arg(long, value_name = "BYTES")]
    #[serde(default)]
    pub q_low: Option<Bytes>,
    /// Priority of untagged frames (0-7, default 0).
    #[arg(long, value_name = "0-7")]
    #[serde(default)]
    pub default_priority: Option<u8>,
    /// FDB ageing time (default 300s).
    #[arg(long, value_name = "DUR")]
    #[serde(default)]
    pub ageing: Option<Duration>,
    /// Add the 20 B preamble + inter-frame gap to every frame's serialisation time.
    #[arg(long)]
    #[serde(default)]
    pub ifg: bool,
    /// TOML configuration file (flags override it).
    #[arg(long, value_name = "FILE.toml")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Unix control socket path (mode 0600).
    #[arg(long, value_name = "PATH")]
    #[serde(default)]
    pub ctl: Option<PathBuf>,
    /// JSON-lines trace file: queue occupancy every --trace-interval plus events.
    #[arg(long, value_name = "FILE")]
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Trace sampling interval (default 1ms).
    #[arg(long, value_name = "DUR")]
    #[serde(default)]
    pub trace_interval: Option<Duration>,
    /// Serve Prometheus metrics on this address (loopback unless --metrics-allow-remote).
    #[arg(long, value_name = "ADDR")]
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
    /// Allow a non-loopback --metrics address.
    #[arg(long)]
    #[serde(default)]
    pub metrics_allow_remote: bool,
    /// Seed of the switch's random generator (also the congestion points' sampling jitter).
    #[arg(long)]
    #[serde(default)]
    pub seed: Option<u64>,
    /// Shut down (as on SIGTERM) when the parent process dies, e.g. a test runner killed
    /// with SIGKILL.
    #[arg(long)]
    #[serde(default)]
    pub die_with_parent: bool,
    /// Congestion points: `output` (802.1Q-2011 clause 32.8, on the output queues; default),
    /// `input` (on the shared input buffers) or `off`.
    #[arg(long, value_name = "output|input|off")]
    #[serde(default)]
    pub cp: Option<Placement>,
    /// Congestion-notification priority values: priorities whose queues get a CP (default 3).
    #[arg(long, value_name = "P[,P...]", value_delimiter = ',')]
    #[serde(default)]
    pub cnpv: Option<Vec<u8>>,
    /// CP set point Qeq, `cp_queue_set_point` (default 26000 octets).
    #[arg(long, value_name = "BYTES")]
    #[serde(default)]
    pub cp_set_point: Option<Bytes>,
    /// CP feedback weight w, `cp_feedback_weight`: a power of two, 1-64 (default 2).
    #[arg(long, value_name = "W")]
    #[serde(default)]
    pub cp_weight: Option<u32>,
    /// CP sampling base, `cp_min_sample_base` (default 150000 octets).
    #[arg(long, value_name = "BYTES")]
    #[serde(default)]
    pub cp_sample_base: Option<Bytes>,
    /// PCP of the CNMs' VLAN tag, CnmTransmitPriority (0-7, default 6).
    #[arg(long, value_name = "0-7")]
    #[serde(default)]
    pub cnm_priority: Option<u8>,
    /// Congestion-point algorithm: `qcn` (default), `fqcn` or `explicit-rate`.
    #[arg(long, value_name = "qcn|fqcn|explicit-rate")]
    #[serde(default)]
    pub cp_mode: Option<CpMode>,
    /// Who gets a QCN CNM: `arrival` (default), `occupancy-deterministic` or
    /// `occupancy-random`.
    #[arg(long, value_name = "arrival|occupancy-deterministic|occupancy-random")]
    #[serde(default)]
    pub culprit: Option<Culprit>,
    /// Explicit-rate measurement interval T (default 30us scaled by 10Gbit / port rate).
    #[arg(long, value_name = "DUR")]
    #[serde(default)]
    pub er_interval: Option<Duration>,
    /// The ingress link-rate stage (default true): frames of a port with a rate reach the
    /// bridge no faster than the port's link could have delivered them, at the instants the
    /// link would have (kernel receive stamps); `false` hands every frame on as it is read.
    #[arg(long, value_name = "true|false")]
    #[serde(default)]
    pub ingress_stage: Option<bool>,
    /// Scheduling policy of the dataplane thread: `other` (time-shared, default) or
    /// `fifo:PRIO` (real-time SCHED_FIFO, PRIO 1-99; needs root or CAP_SYS_NICE).
    #[arg(long, value_name = "fifo:PRIO|other")]
    #[serde(default)]
    pub sched: Option<daemon_kit::sched::SchedPolicy>,
    /// Pin the dataplane thread to these CPUs (default: any).
    #[arg(long, value_name = "N[,M]")]
    #[serde(default)]
    pub cpu: Option<daemon_kit::sched::CpuList>,
    /// Least time between two iterations of the dataplane loop (e.g. 25us, at most 10ms;
    /// default 0: wake for every departure, delivery and frame). Frames leave up to a quantum
    /// after their instants; only when every port has the ingress stage with an
    /// `ingress_delay` of at least twice the quantum (the lookahead that absorbs that);
    /// otherwise refused.
    #[arg(long, value_name = "DURATION")]
    #[serde(default)]
    pub wake_quantum: Option<Duration>,
    /// Static FDB entries (TOML only).
    #[arg(skip)]
    #[serde(default)]
    pub static_fdb: Vec<StaticFdb>,
    /// Every setting of the bridge core (TOML only, `[bridge]` table: scheduler weights, FDB
    /// size, PAUSE quanta, shaper overheads, ...; see `cp_switch::config`). The flags and the
    /// top-level keys above override the matching fields.
    #[arg(skip)]
    #[serde(default)]
    pub bridge: Option<cp_switch::BridgeConfig>,
}

impl RunArgs {
    /// Reads `--config` if given and overlays the flags on it.
    /// A port named twice (on the command line or in the file) is refused: two rings on one
    /// interface would each see every frame and forward it twice.
    pub fn resolve(self) -> Result<RunArgs, String> {
        let args = match self.config.clone() {
            None => self,
            Some(path) => {
                let text = daemon_kit::config_file::read(&path)
                    .map_err(|e| format!("config {}: {e}", path.display()))?;
                let file: RunArgs =
                    toml::from_str(&text).map_err(|e| format!("config {}: {e}", path.display()))?;
                file.overlay(self)
            }
        };
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = args.ports.iter().find(|p| !seen.insert(p.name.as_str())) {
            return Err(format!("--port: {} is given more than once", dup.name));
        }
        Ok(args)
    }

    /// `self` (from the file) with every flag that was given in `flags` replacing it.
    fn overlay(mut self, flags: RunArgs) -> RunArgs {
        if !flags.ports.is_empty() {
            self.ports = flags.ports;
        }
        macro_rules! take {
            ($($f:ident),*) => { $( if flags.$f.is_some() { self.$f = flags.$f; } )* };
        }
        take!(
            default_rate,
            lossless,
            buffer,
            q_high,
            q_low,
            default_priority,
            ageing,
            ctl,
            trace,
            trace_interval,
            metrics,
            seed,
            cp,
            cnpv,
            cp_set_point,
            cp_weight,
            cp_sample_base,
            cnm_priority,
            cp_mode,
            culprit,
            er_interval,
            ingress_stage,
            sched,
            cpu,
            wake_quantum
        );
        self.ifg |= flags.ifg;
        self.static_fdb.extend(flags.static_fdb);
        self.metrics_allow_remote |= flags.metrics_allow_remote;
        self.die_with_parent |= flags.die_with_parent;
        self.config = flags.config;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_given_twice_is_refused() {
        use clap::Parser;
        let f =
            Flags::try_parse_from(["cp-switch", "--port", "p1", "--port", "p2", "--port", "p1"]);
        let e = f.unwrap().run.resolve().unwrap_err();
        assert!(e.contains("p1 is given more than once"), "{e}");
        let ok = Flags::try_parse_from(["cp-switch", "--port", "p1", "--port", "p2"]);
        assert!(ok.unwrap().run.resolve().is_ok());
    }

    #[test]
    fn port_specs_parse() {
        let p: PortSpec = "veth1,rate=100mbit,delay=25us".parse().unwrap();
        assert_eq!(p.name, "veth1");
        assert_eq!(p.rate, Some(Rate::from_mbps(100)));
        assert_eq!(p.delay, Some(Duration::from_micros(25)));
        let p: PortSpec = "eth0".parse().unwrap();
        assert_eq!(p.rate, None);
        let e = "eth0,rate=fast".parse::<PortSpec>().unwrap_err();
        assert!(e.contains("rate"), "{e}");
        assert!("eth0,speed=1".parse::<PortSpec>().is_err());
        assert!("".parse::<PortSpec>().is_err());
        let p: PortSpec = "h1,cnd=edge,alt=1".parse().unwrap();
        assert_eq!(p.cnd_defense, Some(cp_switch::config::CndDefense::Edge));
        assert_eq!(p.alternate_priority, Some(1));
        let e = "h1,cnd=outside".parse::<PortSpec>().unwrap_err();
        assert!(e.contains("interior-ready"), "{e}");
        assert!("h1,alt=8".parse::<PortSpec>().is_err());
        let p: PortSpec = "h1,delay=125us,in-delay=125us,stamps=on".parse().unwrap();
        assert_eq!(p.ingress_delay, Some(Duration::from_micros(125)));
        assert_eq!(p.departure_stamps, Some(true));
        assert_eq!(p.stamp_departures, None);
        assert!(p.needs_stage());
        // Writing stamps on the way out is the egress's business: no stage needed.
        let p: PortSpec = "sw1,out-stamps=on,catch-up=1ms".parse().unwrap();
        assert_eq!(p.stamp_departures, Some(true));
        assert_eq!(p.catch_up, Some(Duration::from_millis(1)));
        let e = "sw1,catch-up=soon".parse::<PortSpec>().unwrap_err();
        assert!(e.contains("catch-up"), "{e}");
        assert!(!p.needs_stage());
        let e = "sw1,out-stamps=maybe".parse::<PortSpec>().unwrap_err();
        assert!(e.contains("out-stamps"), "{e}");
        let p: PortSpec = "h1,in-delay=0s,stamps=off".parse().unwrap();
        assert!(!p.needs_stage());
        let e = "h1,stamps=yes".parse::<PortSpec>().unwrap_err();
        assert_eq!(e, "port h1: stamps: \"yes\": expected on or off");
        assert!("h1,in-delay=soon".parse::<PortSpec>().is_err());
        assert!("a-name-much-too-long-for-linux"
            .parse::<PortSpec>()
            .is_err());
    }

    #[test]
    fn toml_file_and_flags_overlay() {
        let file: RunArgs = toml::from_str(
            r#"
default_rate = "100mbit"
lossless = "pfc"
buffer = "150KB"
[[port]]
name = "p1"
rate = "10mbit"
[[port]]
name = "p2"
delay = "25us"
[[static_fdb]]
mac = "02:00:00:00:00:02"
port = "p2"
"#,
        )
        .unwrap();
        assert_eq!(file.ports.len(), 2);
        assert_eq!(file.lossless, Some(LosslessMode::Pfc));
        assert_eq!(file.static_fdb.len(), 1);
        let flags = RunArgs {
            default_rate: Some(Rate::from_gbps(1)),
            ..Default::default()
        };
        let merged = file.overlay(flags);
        assert_eq!(merged.default_rate, Some(Rate::from_gbps(1)));
        assert_eq!(merged.ports.len(), 2);
        assert_eq!(merged.buffer, Some(Bytes::new(150_000)));
    }

    #[test]
    fn toml_errors_name_the_field() {
        let e = toml::from_str::<RunArgs>("buffer = \"lots\"").unwrap_err();
        assert!(e.to_string().contains("buffer"), "{e}");
        let e = toml::from_str::<RunArgs>("bogus = 1").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn congestion_point_flags_and_toml() {
        use clap::Parser;
        let f = Flags::try_parse_from([
            "cp-switch",
            "--port",
            "p1",
            "--cp",
            "input",
            "--cnpv",
            "3,5",
            "--cp-set-point",
            "33KB",
            "--cp-weight",
            "4",
            "--cp-sample-base",
            "100KB",
            "--cnm-priority",
            "7",
        ])
        .unwrap()
        .run;
        assert_eq!(f.cp, Some(Placement::Input));
        assert_eq!(f.cnpv, Some(vec![3, 5]));
        assert_eq!(f.cp_set_point, Some(Bytes::new(33_000)));
        assert_eq!(f.cp_weight, Some(4));
        assert_eq!(f.cp_sample_base, Some(Bytes::new(100_000)));
        assert_eq!(f.cnm_priority, Some(7));
        assert!(Flags::try_parse_from(["cp-switch", "--cp", "sideways"]).is_err());
        let g = Flags::try_parse_from([
            "cp-switch",
            "--port",
            "p1",
            "--cp-mode",
            "explicit-rate",
            "--culprit",
            "occupancy-random",
            "--er-interval",
            "3ms",
        ])
        .unwrap()
        .run;
        assert_eq!(g.cp_mode, Some(CpMode::ExplicitRate));
        assert_eq!(g.culprit, Some(Culprit::OccupancyRandom));
        assert_eq!(g.er_interval, Some(Duration::from_millis(3)));
        assert!(Flags::try_parse_from(["cp-switch", "--cp-mode", "fast"]).is_err());
        let s = Flags::try_parse_from(["cp-switch", "--sched", "fifo:40", "--cpu", "1"])
            .unwrap()
            .run;
        assert_eq!(s.sched, Some(daemon_kit::sched::SchedPolicy::Fifo(40)));
        assert_eq!(s.cpu, Some(daemon_kit::sched::CpuList(vec![1])));
        assert!(Flags::try_parse_from(["cp-switch", "--sched", "fifo:0"]).is_err());
        let t: RunArgs = toml::from_str("sched = \"fifo:9\"\ncpu = [0, 1]\n").unwrap();
        let merged = t.overlay(s);
        assert_eq!(merged.sched, Some(daemon_kit::sched::SchedPolicy::Fifo(40)));
        assert_eq!(merged.cpu, Some(daemon_kit::sched::CpuList(vec![1])));
        assert!(Flags::try_parse_from(["cp-switch", "--culprit", "nobody"]).is_err());
        let t: RunArgs =
            toml::from_str("cp_mode = \"fqcn\"\nculprit = \"occupancy-deterministic\"\n").unwrap();
        assert_eq!(t.cp_mode, Some(CpMode::Fqcn));
        assert_eq!(t.culprit, Some(Culprit::OccupancyDeterministic));

        let file: RunArgs = toml::from_str(
            r#"
cp = "off"
cnpv = [2]
cp_weight = 2
[bridge.cp]
placement = "input"
cp_queue_set_point = "60KB"
"#,
        )
        .unwrap();
        assert_eq!(file.cp, Some(Placement::Off));
        let b = file.bridge.clone().unwrap();
        assert_eq!(b.cp.placement, Placement::Input);
        assert_eq!(b.cp.cp_queue_set_point, Bytes::new(60_000));
        let merged = file.overlay(f);
        assert_eq!(merged.cp, Some(Placement::Input));
        assert_eq!(merged.cnpv, Some(vec![3, 5]));
    }
}

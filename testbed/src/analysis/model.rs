//! The in-memory model of one run, the same for both worlds (namespaces and the simulator).
//!
//! Times are seconds since the start of the run (`f64`), rates are bit/s (`f64`), queue
//! occupancies are octets (`u64`). The runner fills a [`RunData`] through the builders below
//! (or [`crate::analysis::trace`] fills the queue and event parts from trace files, through its
//! `RunData::absorb`: the trace reader depends on this model, never the other way round); the
//! metric and report layers only read it.
//!
//! Sample semantics:
//! - a flow's throughput sample `(t, bps)` is the mean rate over the interval that ends at `t`
//!   and starts at the previous sample (the first interval starts at the series' `origin_s`);
//! - a queue sample `(t, bytes)` holds from `t` until the next sample (sample and hold); before
//!   its first sample a queue is empty (the daemons' trace leaves idle queues out);
//! - a link capacity or flow demand change holds from its time until the next change.

use cnm_proto::{Bytes, Duration, Instant, Rate};
use serde::{Deserialize, Serialize};

/// Seconds since the start of the run, from a monotonic [`Instant`] and the run's start.
pub fn secs_since(t: Instant, start: Instant) -> f64 {
    t.saturating_since(start).as_secs_f64()
}

/// A marked moment of the scenario (flow start, capacity step, parameter change): convergence
/// is measured from each marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    /// Seconds since the start of the run.
    pub t_s: f64,
    /// What happened, e.g. `"bottleneck 10→1 Gb/s"`.
    pub label: String,
}

/// What the run was: the header of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// Scenario name.
    pub scenario: String,
    /// `"netns"` or `"sim"`.
    pub mode: String,
    /// Congestion-control variant (`"qcn"`, `"fqcn"`, `"none"`, ...), used by comparisons.
    pub variant: Option<String>,
    /// Run length (seconds).
    pub duration_s: f64,
    /// Seed of the run's random generators.
    pub seed: u64,
    /// Time scale S (QCN-REFERENCE §5): rates divided by S, times multiplied by S. 1 = unscaled.
    pub time_scale: f64,
    /// Steady-state window `[from, to)` (seconds) over which means and queue statistics are
    /// taken; `None` = the whole run.
    pub steady_window: Option<(f64, f64)>,
    /// Equilibrium queue Qeq of the congestion points (octets), drawn on the queue plot
    /// (802.1Qau clause 32.8.1, `cpQSp`).
    pub q_eq_bytes: Option<u64>,
    /// Later values of Qeq, `(seconds, octets)`, set by parameter-change events.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub q_eq_steps: Vec<(f64, u64)>,
    /// Qhigh threshold (octets): time above it is reported, drawn on the queue plot.
    pub q_high_bytes: Option<u64>,
    /// Scenario events to measure convergence from.
    pub markers: Vec<Marker>,
    /// Longest fast recovery of the run's QCN reaction points, in run time (seconds):
    /// `rpg_threshold × rpg_time_reset × 1.15` (the timer's largest jitter) at the run's time
    /// scale; `None` when no flow is limited by a QCN-family reaction point (explicit-rate, or a
    /// run built by hand). The fidelity check requires the steady window to hold several
    /// ([`crate::analysis::fidelity::rp_window_check`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rp_recovery_s: Option<f64>,
    /// Fast recoveries the scenario's own steady window holds in scenario time (the window and
    /// the reaction points unscaled, as the simulator runs them): below the check's minimum the
    /// experiment is a transient by design, in either world
    /// ([`crate::analysis::fidelity::rp_window_check`]). `None` with `rp_recovery_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rp_recoveries_scenario: Option<f64>,
    /// The clock of the run's trace files and how to turn their times into pcap times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_clock: Option<TraceClock>,
}

/// The clock of a run's traces (`--trace` files of the daemons, the simulator's `trace.jsonl`).
///
/// Every trace time is an integer count of **nanoseconds**, under the key `t` in `queues`,
/// `cp_config` and `rp_config` records and `at` in `event` records
/// ([`daemon_kit::trace_record`]). The daemons read `CLOCK_MONOTONIC` (time since boot, not
/// the wall clock); the simulator counts virtual time from 0. Captures (pcap) are stamped with
/// `CLOCK_REALTIME` (seconds since the Unix epoch) by the kernel, or with virtual time from the
/// epoch 0 by the simulator. So:
///
/// ```text
/// pcap time (ns since the epoch) = trace time (ns) + realtime_offset_ns
/// run time (s)                   = (trace time (ns) − t0_ns) / 1e9
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceClock {
    /// `"monotonic"` (`CLOCK_MONOTONIC`, the daemons) or `"virtual"` (the simulator).
    pub clock: TraceClockKind,
    /// Trace time (ns) of the run's t = 0.
    pub t0_ns: u64,
    /// `CLOCK_REALTIME − CLOCK_MONOTONIC` (ns) read at the start of the run (0 in the
    /// simulator, whose captures count virtual time from the epoch): add it to a trace time to
    /// get a pcap time.
    pub realtime_offset_ns: i64,
}

/// Which clock a trace reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceClockKind {
    /// `CLOCK_MONOTONIC` (clock_gettime(2)): the daemons.
    Monotonic,
    /// The simulator's virtual time, from 0.
    Virtual,
}

impl TraceClock {
    /// A monotonic trace clock whose t = 0 is `t0_ns`, with the offset to `CLOCK_REALTIME`
    /// read now ([`realtime_offset_ns`]).
    pub fn monotonic_now(t0_ns: u64) -> TraceClock {
        TraceClock {
            clock: TraceClockKind::Monotonic,
            t0_ns,
            realtime_offset_ns: realtime_offset_ns(),
        }
    }

    /// The simulator's clock: virtual ns from 0, captures stamped with the same numbers.
    pub const VIRTUAL: TraceClock = TraceClock {
        clock: TraceClockKind::Virtual,
        t0_ns: 0,
        realtime_offset_ns: 0,
    };

    /// The pcap time (ns since the Unix epoch) of a trace time (ns).
    pub fn to_pcap_ns(&self, trace_ns: u64) -> i128 {
        i128::from(trace_ns) + i128::from(self.realtime_offset_ns)
    }

    /// The trace time (ns) of a pcap time (ns since the Unix epoch); `None` before the
    /// trace clock's zero.
    pub fn from_pcap_ns(&self, pcap_ns: i128) -> Option<u64> {
        u64::try_from(pcap_ns - i128::from(self.realtime_offset_ns)).ok()
    }

    /// Run time (seconds since the run's start) of a trace time (ns).
    pub fn run_s(&self, trace_ns: u64) -> f64 {
        (i128::from(trace_ns) - i128::from(self.t0_ns)) as f64 / 1e9
    }
}

/// `CLOCK_REALTIME − CLOCK_MONOTONIC` in ns, now: the realtime clock read between two
/// monotonic readings, against their midpoint (the error is at most half the gap between them,
/// well under a microsecond).
pub fn realtime_offset_ns() -> i64 {
    let m0 = cnm_proto::phy::clock::now().as_nanos();
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let m1 = cnm_proto::phy::clock::now().as_nanos();
    let mono = u128::from(m0) + u128::from(m1.saturating_sub(m0)) / 2;
    // Both fit in i64 for centuries (2^63 ns is 292 years).
    (real as i128 - mono as i128).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

impl RunMeta {
    /// A header with the given names, S = 1, no window, no thresholds, no markers.
    pub fn new(scenario: &str, mode: &str, duration_s: f64, seed: u64) -> Self {
        Self {
            scenario: scenario.to_string(),
            mode: mode.to_string(),
            variant: None,
            duration_s,
            seed,
            time_scale: 1.0,
            steady_window: None,
            q_eq_bytes: None,
            q_eq_steps: Vec::new(),
            q_high_bytes: None,
            markers: Vec::new(),
            rp_recovery_s: None,
            rp_recoveries_scenario: None,
            trace_clock: None,
        }
    }

    /// The steady-state window, clamped to `[0, duration]`; the whole run when unset.
    pub fn window(&self) -> (f64, f64) {
        let d = self.duration_s.max(0.0);
        match self.steady_window {
            Some((a, b)) => {
                let a = a.clamp(0.0, d);
                let b = b.clamp(a, d);
                (a, b)
            }
            None => (0.0, d),
        }
    }
}

/// A link of the topology, for max-min fair shares and utilization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// Name that flows' paths refer to.
    pub name: String,
    /// Capacity at the start of the run (bit/s).
    pub capacity_bps: f64,
    /// Capacity changes `(t_s, bps)`, in time order.
    pub changes: Vec<(f64, f64)>,
}

impl LinkSpec {
    /// A link of constant capacity.
    pub fn new(name: &str, capacity: Rate) -> Self {
        Self {
            name: name.to_string(),
            capacity_bps: capacity.as_f64(),
            changes: Vec::new(),
        }
    }

    /// Adds a capacity step at `t_s`.
    pub fn step(mut self, t_s: f64, capacity: Rate) -> Self {
        self.changes.push((t_s, capacity.as_f64()));
        self
    }

    /// Capacity in force at `t_s`.
    pub fn capacity_at(&self, t_s: f64) -> f64 {
        let mut c = self.capacity_bps;
        for &(t, v) in &self.changes {
            if t <= t_s {
                c = v;
            }
        }
        c
    }
}

/// One flow: its path and demand (for fair shares) and what was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSeries {
    /// Flow name (`"f1"`).
    pub name: String,
    /// Names of the links ([`LinkSpec::name`]) the flow crosses.
    pub path: Vec<String>,
    /// Weight for weighted max-min (1 = unweighted).
    pub weight: f64,
    /// When the flow starts sending (seconds).
    pub start_s: f64,
    /// When it stops (seconds); `None` = runs to the end.
    pub stop_s: Option<f64>,
    /// Demand cap at start (bit/s); `None` = greedy.
    pub demand_bps: Option<f64>,
    /// Demand changes `(t_s, cap)`, in time order.
    pub demand_changes: Vec<(f64, Option<f64>)>,
    /// Fair share given by the scenario (bit/s); overrides the computed max-min share.
    pub fair_share_bps: Option<f64>,
    /// Where the first throughput interval starts (seconds).
    pub origin_s: f64,
    /// Throughput samples `(t_s, bps)`: mean rate over the interval ending at `t_s`.
    pub samples: Vec<(f64, f64)>,
    /// CNMs received by the flow's reaction point: `(t_s, count)` increments.
    pub cnm: Vec<(f64, u64)>,
    /// Source MAC address of the flow's frames: CNM trace events of congestion points
    /// (`"event":"cnm"` with `"dst"` = the sampled frame's source) are attributed to the flow
    /// with this address when exactly one flow has it.
    pub src_mac: Option<String>,
    /// Node (host) whose reaction point limits the flow: its `cnm` events count for the flow.
    pub host: Option<String>,
    /// The flow's number at its host's reaction point (the `"flow"` field of its events);
    /// `None` = every RP event of the host.
    pub rp_flow: Option<u64>,
    /// Rate the flow's generator meant to send (bit/s), for the fidelity check.
    pub intended_bps: Option<f64>,
    /// Rate the generator actually offered (bit/s), for the fidelity check.
    pub offered_bps: Option<f64>,
}

impl FlowSeries {
    /// A greedy flow of weight 1 over `path`, active for the whole run.
    pub fn new(name: &str, path: &[&str]) -> Self {
        Self {
            name: name.to_string(),
            path: path.iter().map(|s| s.to_string()).collect(),
            weight: 1.0,
            start_s: 0.0,
            stop_s: None,
            demand_bps: None,
            demand_changes: Vec::new(),
            fair_share_bps: None,
            origin_s: 0.0,
            samples: Vec::new(),
            cnm: Vec::new(),
            src_mac: None,
            host: None,
            rp_flow: None,
            intended_bps: None,
            offered_bps: None,
        }
    }

    /// Sets the weight (weighted max-min).
    pub fn weight(mut self, w: f64) -> Self {
        self.weight = w;
        self
    }

    /// Sets the active period; throughput intervals start at `start_s` too.
    pub fn active(mut self, start_s: f64, stop_s: Option<f64>) -> Self {
        self.start_s = start_s;
        self.stop_s = stop_s;
        self.origin_s = start_s;
        self
    }

    /// Caps the demand from the start.
    pub fn demand(mut self, cap: Rate) -> Self {
        self.demand_bps = Some(cap.as_f64());
        self
    }

    /// Changes the demand cap at `t_s` (`None` = greedy from then on).
    pub fn demand_step(mut self, t_s: f64, cap: Option<Rate>) -> Self {
        self.demand_changes.push((t_s, cap.map(Rate::as_f64)));
        self
    }

    /// Sets the source MAC address (for attributing CP-side CNM events).
    pub fn source_mac(mut self, mac: &str) -> Self {
        self.src_mac = Some(normalize_mac(mac));
        self
    }

    /// Sets the host whose reaction point limits the flow (and the flow's number there).
    pub fn at_host(mut self, host: &str, rp_flow: Option<u64>) -> Self {
        self.host = Some(host.to_string());
        self.rp_flow = rp_flow;
        self
    }

    /// Gives the fair share instead of computing it.
    pub fn fair_share(mut self, share: Rate) -> Self {
        self.fair_share_bps = Some(share.as_f64());
        self
    }

    /// Whether the flow is sending at `t_s`.
    pub fn is_active_at(&self, t_s: f64) -> bool {
        t_s >= self.start_s && !matches!(self.stop_s, Some(e) if t_s >= e)
    }

    /// Demand cap in force at `t_s`.
    pub fn demand_at(&self, t_s: f64) -> Option<f64> {
        let mut d = self.demand_bps;
        for &(t, v) in &self.demand_changes {
            if t <= t_s {
                d = v;
            }
        }
        d
    }

    /// Records a rate sample: mean rate over the interval ending at `t_s`.
    pub fn push_bps(&mut self, t_s: f64, bps: f64) {
        if t_s.is_finite() && bps.is_finite() {
            self.samples.push((t_s, bps.max(0.0)));
        }
    }

    /// Records a rate sample from typed values.
    pub fn push_rate(&mut self, t_s: f64, rate: Rate) {
        self.push_bps(t_s, rate.as_f64());
    }

    /// Records `bytes` received during `[t0_s, t1_s)` (a sink's interval report). A gap
    /// before `t0_s` is recorded as zero throughput.
    pub fn push_interval(&mut self, t0_s: f64, t1_s: f64, bytes: Bytes) {
        let dt = t1_s - t0_s;
        if dt.is_nan() || dt <= 0.0 {
            return;
        }
        let last = self.samples.last().map_or(self.origin_s, |s| s.0);
        if self.samples.is_empty() {
            self.origin_s = t0_s;
        } else if t0_s > last + 1e-9 {
            self.samples.push((t0_s, 0.0));
        }
        self.push_bps(t1_s, bytes.get() as f64 * 8.0 / dt);
    }

    /// Records a cumulative byte counter read at `t_s`; the rate of each interval comes from
    /// the difference with the previous reading (the first reading only sets the origin).
    pub fn push_cumulative(&mut self, t_s: f64, total: Bytes, prev: &mut Option<(f64, u64)>) {
        if let Some((t0, b0)) = *prev {
            let dt = t_s - t0;
            if dt > 0.0 {
                if self.samples.is_empty() {
                    self.origin_s = t0;
                }
                let db = total.get().saturating_sub(b0);
                self.push_bps(t_s, db as f64 * 8.0 / dt);
            }
        }
        *prev = Some((t_s, total.get()));
    }

    /// Records one CNM received at `t_s`.
    pub fn push_cnm(&mut self, t_s: f64) {
        self.cnm.push((t_s, 1));
    }

    /// Records `n` CNMs received around `t_s` (from a polled counter's increment).
    pub fn push_cnm_count(&mut self, t_s: f64, n: u64) {
        if n > 0 {
            self.cnm.push((t_s, n));
        }
    }

    /// Total CNMs recorded with [`FlowSeries::push_cnm`] (trace events not included).
    pub fn cnm_total(&self) -> u64 {
        self.cnm.iter().map(|c| c.1).sum()
    }

    /// Fills the throughput samples from rate events of the flow's reaction point (e.g.
    /// `rate_change` with `cr_bps`, the current rate of 802.1Q-2011 clause 32.13): each event's
    /// rate holds until the next one, the last until `end_s`. For a greedy flow limited by its
    /// RP this is the sending rate; a sink's measurements are preferred when available.
    /// Returns how many events were used.
    pub fn fill_from_rate_events(
        &mut self,
        events: &[Event],
        kind: &str,
        field: &str,
        end_s: f64,
    ) -> usize {
        let Some(host) = self.host.clone() else {
            return 0;
        };
        let mut steps: Vec<(f64, f64)> = events
            .iter()
            .filter(|e| e.kind == kind && e.node.as_deref() == Some(host.as_str()))
            .filter(|e| {
                let id = e.fields.get("flow").and_then(|v| v.as_u64());
                self.rp_flow.is_none() || id.is_none() || self.rp_flow == id
            })
            .filter_map(|e| Some((e.t_s, e.fields.get(field)?.as_f64()?)))
            .collect();
        steps.sort_by(|a, b| a.0.total_cmp(&b.0));
        let Some(&(t0, _)) = steps.first() else {
            return 0;
        };
        self.samples.clear();
        self.origin_s = t0;
        for w in steps.windows(2) {
            self.push_bps(w[1].0, w[0].1);
        }
        if let Some(&(t, v)) = steps.last() {
            if end_s > t {
                self.push_bps(end_s, v);
            }
        }
        steps.len()
    }

    /// The throughput samples as intervals `(from, to, bps)`.
    pub fn intervals(&self) -> impl Iterator<Item = (f64, f64, f64)> + '_ {
        let mut prev = self.origin_s;
        self.samples.iter().filter_map(move |&(t, v)| {
            let from = prev;
            prev = t;
            (t > from).then_some((from, t, v))
        })
    }
}

/// Occupancy of one queue over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSeries {
    /// Key `node/port/pP/kind` (see [`QueueSeries::key`]).
    pub name: String,
    /// Node (switch) name, when known.
    pub node: Option<String>,
    /// Port name.
    pub port: String,
    /// Priority 0..=7.
    pub priority: u8,
    /// `"input"` or `"output"`.
    pub kind: String,
    /// `(t_s, bytes)` samples, in time order; each holds until the next.
    pub samples: Vec<(f64, u64)>,
}

impl QueueSeries {
    /// The canonical key of a queue: `sw0/eth1/p3/output` (`eth1/p3/output` without a node).
    pub fn key(node: Option<&str>, port: &str, priority: u8, kind: &str) -> String {
        match node {
            Some(n) => format!("{n}/{port}/p{priority}/{kind}"),
            None => format!("{port}/p{priority}/{kind}"),
        }
    }

    /// An empty series.
    pub fn new(node: Option<&str>, port: &str, priority: u8, kind: &str) -> Self {
        Self {
            name: Self::key(node, port, priority, kind),
            node: node.map(str::to_string),
            port: port.to_string(),
            priority,
            kind: kind.to_string(),
            samples: Vec::new(),
        }
    }

    /// Records the occupancy at `t_s`.
    pub fn push(&mut self, t_s: f64, bytes: u64) {
        if t_s.is_finite() {
            self.samples.push((t_s, bytes));
        }
    }

    /// Occupancy in force at `t_s` (0 before the first sample).
    pub fn value_at(&self, t_s: f64) -> u64 {
        let i = self.samples.partition_point(|s| s.0 <= t_s);
        if i == 0 {
            0
        } else {
            self.samples[i - 1].1
        }
    }
}

/// Something that happened in a daemon (a trace `event` line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the start of the run.
    pub t_s: f64,
    /// Node that wrote it, when known.
    pub node: Option<String>,
    /// Event name: `drop`, `pause_tx`, `pause_rx`, `cnm`, `rate_change`, ...
    pub kind: String,
    /// Port (name or number as text), when present.
    pub port: Option<String>,
    /// Priority, when present.
    pub priority: Option<u8>,
    /// Flow name, when present (reaction-point events).
    pub flow: Option<String>,
    /// The whole line, for fields the model does not name (`reason`, `on`, `rate`, ...).
    pub fields: serde_json::Value,
}

impl Event {
    /// A string field of the original line.
    pub fn str_field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(|v| v.as_str())
    }

    /// A boolean field of the original line.
    pub fn bool_field(&self, key: &str) -> Option<bool> {
        self.fields.get(key).and_then(|v| v.as_bool())
    }
}

/// A bottleneck to report on: a link (capacity, flows crossing it) and the queue that feeds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// Name in the summary.
    pub name: String,
    /// The [`LinkSpec`] it is (capacity, and the flows whose path holds it).
    pub link: String,
    /// The [`QueueSeries::name`] feeding it.
    pub queue: Option<String>,
    /// Node whose events are attributed to it (`None` = any node).
    pub node: Option<String>,
    /// Port names or numbers its events carry (`"1"`, `"eth1"`).
    pub ports: Vec<String>,
    /// Drop counter from the daemon's statistics, preferred to counting trace events.
    pub drops: Option<u64>,
    /// PAUSE/PFC frames sent, from the daemon's statistics.
    pub pause_tx: Option<u64>,
    /// Measured throughput of the link `(t_s, bps)` (interval means like flow samples);
    /// when empty, utilization is the sum of the crossing flows' throughput.
    pub tx_samples: Vec<(f64, f64)>,
}

impl Bottleneck {
    /// A bottleneck on `link` fed by queue `queue`.
    pub fn new(name: &str, link: &str, queue: Option<&str>) -> Self {
        Self {
            name: name.to_string(),
            link: link.to_string(),
            queue: queue.map(str::to_string),
            node: None,
            ports: Vec::new(),
            drops: None,
            pause_tx: None,
            tx_samples: Vec::new(),
        }
    }

    /// Attributes events of `node` on these ports to this bottleneck.
    pub fn events_from(mut self, node: Option<&str>, ports: &[&str]) -> Self {
        self.node = node.map(str::to_string);
        self.ports = ports.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Whether `ev` concerns this bottleneck.
    pub fn matches(&self, ev: &Event) -> bool {
        let node_ok = match (&self.node, &ev.node) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        let port_ok = match &ev.port {
            Some(p) => self.ports.iter().any(|q| q == p),
            None => false,
        };
        node_ok && port_ok
    }
}

/// Fidelity inputs measured by the runner (netns runs), see [`crate::analysis::fidelity`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FidelityInputs {
    /// CPU busy fraction samples `(process or core, t_s, busy 0..=1)`.
    pub cpu: Vec<(String, f64, f64)>,
    /// Drops outside the congestion points' queues (kernel rings, generators, delay lines):
    /// `(where, count)`.
    pub unexpected_drops: Vec<(String, u64)>,
    /// Pacing error of generators: `(flow, relative error of inter-frame gaps, mean |err|/gap)`.
    pub pacing_error: Vec<(String, f64)>,
    /// Ingress burstiness of each switch port that measured any frame.
    #[serde(default)]
    pub ingress: Vec<IngressBurst>,
    /// Generators held back by their reaction point in some interval (the agent's queue
    /// pushed back): `(flow, intended rate (bit/s) when those intervals owe the limiter's or
    /// the line's rate)`. Held back counts as "not short" only when the CNMs behind it are
    /// explained ([`crate::analysis::fidelity`]).
    #[serde(default)]
    pub held_back: Vec<(String, f64)>,
    /// How late each generator's agent sent its frames after their pacers' instants (the
    /// hosts process's timing, `rp_agent::stats::TxLateness`).
    #[serde(default)]
    pub sender_lateness: Vec<SenderLateness>,
}

/// One generator's send timing (`rp-agent gen` report → `end.tx_late`), in wall-clock time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SenderLateness {
    /// The flow.
    pub flow: String,
    /// Frames sent after their instant.
    pub late_frames: u64,
    /// Median lateness over every frame sent (ns).
    pub p50_ns: u64,
    /// 99th percentile of the lateness over every frame sent (ns).
    pub p99_ns: u64,
    /// Largest lateness (ns).
    pub max_ns: u64,
    /// One of the flow's frames on its sender's line at the emulated (scaled) rate (ns):
    /// the yardstick of the lateness.
    pub frame_time_ns: u64,
    /// The switch port the sender's link enters (`"SWITCH PORT"`, as [`IngressBurst::port`]):
    /// where its frames were placed, by their departure stamps or not.
    #[serde(default)]
    pub ingress_port: Option<String>,
}

/// One switch port's ingress burst measure (cp-switch `stats` → `ports[].ingress`): frames
/// that reached it faster than its link could have delivered them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngressBurst {
    /// `switch port`.
    pub port: String,
    /// Frames compared with their predecessor's kernel receive time.
    pub measured: u64,
    /// Of those, frames that arrived faster than the link's rate allows.
    pub early: u64,
    /// Longest run of consecutive early frames.
    pub longest_run: u64,
    /// What the switch's ingress link-rate stage did on this port (`None`: the stage is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<IngressStage>,
}

/// One switch port's ingress link-rate stage (cp-switch `stats` → `ports[].ingress.stage`):
/// the frames it held until their link would have delivered them, and for how long.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngressStage {
    /// Frames through the stage.
    pub staged: u64,
    /// Of those, frames held back.
    pub held: u64,
    /// Sum of the delays the stage added to the frames' arrivals (ns).
    pub delay_total_ns: u64,
    /// Largest such delay (ns).
    pub delay_max_ns: u64,
    /// Frames the stage dropped (full, or its port went down).
    pub drops: u64,
    /// Frames handed to the bridge after their delivery instant, the bridge's time having
    /// passed it (cp-switch `late`): their arrival was moved later.
    #[serde(default)]
    pub late: u64,
    /// Largest such shift (ns).
    #[serde(default)]
    pub late_max_ns: u64,
    /// Frames placed by their sender's departure stamp (cp-switch `stamped`).
    #[serde(default)]
    pub stamped: u64,
    /// Of those, frames whose sender lagged by more than the link's delay, the stage's
    /// lookahead (cp-switch `behind`).
    #[serde(default)]
    pub behind: u64,
    /// Largest such lag beyond the lookahead (ns).
    #[serde(default)]
    pub behind_max_ns: u64,
}

/// Everything known about one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunData {
    /// Header.
    pub meta: RunMeta,
    /// Topology links (for fair shares and utilization).
    pub links: Vec<LinkSpec>,
    /// Flows.
    pub flows: Vec<FlowSeries>,
    /// Queues.
    pub queues: Vec<QueueSeries>,
    /// Daemon events.
    pub events: Vec<Event>,
    /// Bottlenecks to report.
    pub bottlenecks: Vec<Bottleneck>,
    /// Fidelity measurements.
    pub fidelity: FidelityInputs,
    /// Warnings gathered while filling the model (bad trace lines, ...).
    pub warnings: Vec<String>,
    /// Whether CNM trace events count as CNMs received by flows, in addition to
    /// [`FlowSeries::cnm`] (turn off when the runner records per-flow CNM counts itself, to
    /// avoid counting twice).
    pub cnm_from_trace: bool,
    /// Each switch's port names by port number: a congestion point's `cp_port` in a CNM trace
    /// event names its output port, and a port is named after the node at its far end, in
    /// both worlds ([`crate::analysis::metrics::cnms_by_cp`]).
    #[serde(default)]
    pub switch_ports: std::collections::BTreeMap<String, Vec<String>>,
}

impl RunData {
    /// An empty run.
    pub fn new(meta: RunMeta) -> Self {
        Self {
            meta,
            links: Vec::new(),
            flows: Vec::new(),
            queues: Vec::new(),
            events: Vec::new(),
            bottlenecks: Vec::new(),
            fidelity: FidelityInputs::default(),
            warnings: Vec::new(),
            cnm_from_trace: true,
            switch_ports: std::collections::BTreeMap::new(),
        }
    }

    /// Adds a link.
    pub fn add_link(&mut self, link: LinkSpec) -> &mut Self {
        self.links.push(link);
        self
    }

    /// Adds a flow.
    pub fn add_flow(&mut self, flow: FlowSeries) -> &mut Self {
        self.flows.push(flow);
        self
    }

    /// Adds a bottleneck.
    pub fn add_bottleneck(&mut self, b: Bottleneck) -> &mut Self {
        self.bottlenecks.push(b);
        self
    }

    /// Adds a marker.
    pub fn mark(&mut self, t_s: f64, label: &str) -> &mut Self {
        self.meta.markers.push(Marker {
            t_s,
            label: label.to_string(),
        });
        self
    }

    /// The flow called `name`.
    pub fn flow_mut(&mut self, name: &str) -> Option<&mut FlowSeries> {
        self.flows.iter_mut().find(|f| f.name == name)
    }

    /// The queue series called `name`, created empty if missing.
    pub fn queue_mut(
        &mut self,
        node: Option<&str>,
        port: &str,
        priority: u8,
        kind: &str,
    ) -> &mut QueueSeries {
        let key = QueueSeries::key(node, port, priority, kind);
        let i = match self.queues.iter().position(|q| q.name == key) {
            Some(i) => i,
            None => {
                self.queues
                    .push(QueueSeries::new(node, port, priority, kind));
                self.queues.len() - 1
            }
        };
        &mut self.queues[i]
    }

    /// The queue series called `name`.
    pub fn queue(&self, name: &str) -> Option<&QueueSeries> {
        self.queues.iter().find(|q| q.name == name)
    }

    /// The link called `name`.
    pub fn link(&self, name: &str) -> Option<&LinkSpec> {
        self.links.iter().find(|l| l.name == name)
    }
}

/// Lower-case, colon-separated form of a MAC address text (`AA-BB-..` → `aa:bb:..`).
pub fn normalize_mac(mac: &str) -> String {
    mac.trim().to_ascii_lowercase().replace('-', ":")
}

/// `Duration` in seconds (helper for callers holding typed durations).
pub fn dur_s(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_times_convert_to_pcap_times() {
        let c = TraceClock {
            clock: TraceClockKind::Monotonic,
            t0_ns: 5_000_000_000,
            realtime_offset_ns: 1_700_000_000_000_000_000,
        };
        // 7.25 s of CLOCK_MONOTONIC is 2.25 s into the run and 1.7e9 + 7.25 s of epoch time.
        assert_eq!(c.to_pcap_ns(7_250_000_000), 1_700_000_007_250_000_000);
        assert_eq!(
            c.from_pcap_ns(1_700_000_007_250_000_000),
            Some(7_250_000_000)
        );
        assert_eq!(c.from_pcap_ns(0), None);
        assert!((c.run_s(7_250_000_000) - 2.25).abs() < 1e-12);
        assert!((c.run_s(4_000_000_000) + 1.0).abs() < 1e-12);
        // The simulator: pcap time = trace time.
        assert_eq!(TraceClock::VIRTUAL.to_pcap_ns(42), 42);
        // Now: the offset is the epoch time of boot, positive and below the epoch time now.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        let live = TraceClock::monotonic_now(0);
        assert!(live.realtime_offset_ns > 0 && live.realtime_offset_ns < now);
        let json = serde_json::to_value(live).unwrap();
        assert_eq!(json["clock"], "monotonic");
    }
}

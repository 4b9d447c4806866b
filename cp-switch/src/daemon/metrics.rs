//! `--metrics ADDR`: the switch's counters as Prometheus metrics at `GET /metrics`.
//!
//! Each scrape asks the dataplane for the `stats` snapshot through the control channel (the same
//! answer `cp-switch ctl stats --json` prints) and turns it into metric families with
//! [`daemon_kit::exposition`]; the HTTP side (bounded request head and connections, a deadline
//! per connection, `404` for other paths) is [`daemon_kit::metrics_http`]. Off by default;
//! loopback only unless `--metrics-allow-remote`.
//!
//! Every numeric field of the snapshot has an entry in one of the tables below ([`PORT`],
//! [`QUEUE`], [`CP`], [`FDB`], [`BRIDGE`]) or is listed in the test's `NOT_EXPORTED` with the
//! reason; a test walks a real snapshot and fails on a field that is neither, so a counter added
//! to the stats cannot be forgotten here. The families:
//!
//! | family | type | labels |
//! |---|---|---|
//! | `cpswitch_port_{rx,tx}_{frames,bytes}_total`, `_flooded_frames_total`, `_pause_{tx,rx}_frames_total`, `_cnms_sent_total`, ... | counter | `port` |
//! | `cpswitch_port_drops_total` | counter | `port`, `reason` (the `drop_reasons` keys) |
//! | `cpswitch_port_ingress_{measured,early}_frames_total` (the daemon's ingress burst measure) | counter | `port` |
//! | `cpswitch_port_ingress_longest_burst_frames` | gauge | `port` |
//! | `cpswitch_port_ingress_stage_{staged,held}_frames_total`, `_drops_total` (the ingress link-rate stage, when on) | counter | `port` (`_drops_total` also `reason`: `overflow`, `down`) |
//! | `cpswitch_port_ingress_stage_{late,stamped,behind}_frames_total` (frames handed over after their instant; placed by a departure stamp; stamped beyond the link's delay) | counter | `port` |
//! | `cpswitch_port_ingress_stage_delay_{mean,max}_seconds`, `_late_max_seconds`, `_behind_max_seconds`, `_queued_bytes` | gauge | `port` |
//! | `cpswitch_port_up`, `_rate_bytes_per_second`, `_delay_seconds`, `_in_flight_bytes` | gauge | `port` |
//! | `cpswitch_port_pause_asserted`, `_paused_by_peer`, `_pause_storm`, `_neighbour_cn_ready` | gauge (0/1) | `port`, `priority` |
//! | `cpswitch_queue_bytes`, `_capacity_bytes`, `_frames`, `_peak_bytes` | gauge | `port`, `priority`, `kind` |
//! | `cpswitch_queue_{enqueued,dequeued}_frames_total`, `_enqueued_bytes_total`, `_drops_total` | counter | same |
//! | `cpswitch_cp_samples_total`, `_cnms_sent_total`, `_culprits_total`, ... | counter | `cp`, `port`, `priority`, `placement` |
//! | `cpswitch_cp_qlen_bytes`, `_qeq_bytes`, `_sample_base_bytes`, `_last_fb`, ... | gauge | same |
//! | `cpswitch_cp_cnms_per_destination_total` | counter | same + `destination` |
//! | `cpswitch_fdb_entries` | gauge | `kind` (`dynamic`, `static`) |
//! | `cpswitch_fdb_{learned,moved,refused_full,aged,flushed}_total` | counter | none |
//!
//! Label cardinality is bounded: ports and priorities by the configuration, destinations by
//! the CP's per-destination table (its first 256 destinations; CNMs to later ones are counted in
//! `cpswitch_cp_cnms_other_destinations_total`). The PAUSE bitmasks of `stats` become one 0/1
//! series per priority, so that a query can select a priority.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use cnm_proto::{Duration, Rate};
use daemon_kit::exposition::Exposition;
use daemon_kit::metrics_http::{Limits, MetricsHttp, Render};
use serde_json::{Map, Value};

use super::ctl::{ask, Command, Request};

/// The metrics listener; dropping it stops serving.
#[derive(Debug)]
pub struct MetricsServer {
    http: MetricsHttp,
}

impl MetricsServer {
    /// Binds `addr` and starts serving. A non-loopback address is refused unless
    /// `allow_remote`.
    pub fn start(
        addr: SocketAddr,
        allow_remote: bool,
        tx: SyncSender<Request>,
    ) -> std::io::Result<MetricsServer> {
        let render: Render = Arc::new(move |stop: &AtomicBool| {
            let stats = ask(&tx, Command::Stats, stop)?;
            render(&stats)
        });
        let http = MetricsHttp::start(addr, allow_remote, Limits::default(), render)?;
        Ok(MetricsServer { http })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }
}

/// Counter or gauge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only ever increases (reset by a restart); the name ends in `_total`.
    Counter,
    /// A level.
    Gauge,
}

/// One numeric field of a `stats` row and the family it feeds.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The key in the `stats --json` row.
    pub key: &'static str,
    /// The family name, without the `cpswitch_<group>_` prefix.
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// HELP text.
    pub help: &'static str,
}

const fn c(key: &'static str, name: &'static str, help: &'static str) -> Field {
    Field {
        key,
        name,
        kind: Kind::Counter,
        help,
    }
}

const fn g(key: &'static str, name: &'static str, help: &'static str) -> Field {
    Field {
        key,
        name,
        kind: Kind::Gauge,
        help,
    }
}

/// `ports[]` fields that map one to one (labels: `port`).
pub const PORT: &[Field] = &[
    c("rx_frames", "rx_frames_total", "Frames received, including dropped and MAC-control frames."),
    c("tx_frames", "tx_frames_total", "Frames transmitted (data and control)."),
    c("rx_bytes", "rx_bytes_total", "Octets received."),
    c("tx_bytes", "tx_bytes_total", "Octets transmitted."),
    c("pause_tx", "pause_tx_frames_total", "PAUSE/PFC frames sent."),
    c("pause_rx", "pause_rx_frames_total", "PAUSE/PFC frames received."),
    c("cnm_tx", "cnms_sent_total", "CNMs sent by the congestion points whose sampled frames arrived on this port."),
    c("rate_fb_tx", "rate_feedback_sent_total", "Explicit-rate feedback messages sent to sources reached through this port."),
    c("flooded", "flooded_frames_total", "Frames received whose destination was flooded."),
    c("cn_remapped", "cn_remapped_frames_total", "Frames received with a CNPV priority on an edge port and queued at the alternate priority (CND defence)."),
    c("cn_tag_stripped", "cn_tag_stripped_frames_total", "Frames sent without the CN-TAG they were received with."),
    c("lldp_rx", "lldp_rx_frames_total", "LLDP frames received (consumed, never relayed)."),
    c("lldp_tx", "lldp_tx_frames_total", "LLDP frames sent (CND defence auto)."),
    c("pause_storms", "pause_storms_total", "PAUSE/PFC storms the watchdog detected on this output (per priority)."),
    g("in_flight_bytes", "in_flight_bytes", "Octets on the emulated propagation delay line."),
];

/// `queues[]` fields (labels: `port`, `priority`, `kind`).
pub const QUEUE: &[Field] = &[
    g("bytes", "bytes", "Queue occupancy in octets."),
    g("max_bytes", "capacity_bytes", "Queue capacity in octets."),
    g("frames", "frames", "Frames in the queue."),
    g(
        "peak_bytes",
        "peak_bytes",
        "Highest occupancy seen, in octets.",
    ),
    c(
        "drops",
        "drops_total",
        "Frames dropped at or in this queue.",
    ),
    c("enqueued", "enqueued_frames_total", "Frames enqueued."),
    c("enqueued_bytes", "enqueued_bytes_total", "Octets enqueued."),
    c(
        "dequeued",
        "dequeued_frames_total",
        "Frames dequeued (moved on or transmitted).",
    ),
];

/// `cps[]` fields (labels: `cp`, `port`, `priority`, `placement`).
pub const CP: &[Field] = &[
    c(
        "samples",
        "samples_total",
        "Frames sampled (802.1Qau 32.9.4).",
    ),
    c("cnm_tx", "cnms_sent_total", "CNMs sent."),
    c(
        "cnm_dropped",
        "cnms_dropped_total",
        "CNMs lost (control queue full, port down).",
    ),
    g(
        "qlen",
        "qlen_bytes",
        "Queue occupancy seen by the CP (qlen, 802.1Qau 32.8.4), octets.",
    ),
    g(
        "qeq",
        "qeq_bytes",
        "Set point Qeq (cpQSp, 802.1Qau 32.8.3), octets.",
    ),
    g(
        "weight",
        "weight",
        "Feedback weight w (cpW, 802.1Qau 32.8.6); 0 for explicit-rate.",
    ),
    g(
        "sample_base",
        "sample_base_bytes",
        "Sampling base (cpSampleBase, 802.1Qau 32.8.9), octets; 0 for explicit-rate.",
    ),
    g(
        "next_sample_in",
        "next_sample_in_bytes",
        "Octets until the next sample.",
    ),
    g(
        "last_fb",
        "last_fb",
        "Fb of the last sample (802.1Qau 32.8.8).",
    ),
    g(
        "last_qntz_fb",
        "last_qntz_fb",
        "Quantized Fb of the last sample; 0 = no CNM.",
    ),
    c(
        "culprits",
        "culprits_total",
        "Culprits chosen (addressees of CNMs for congested samples).",
    ),
    g(
        "last_culprits",
        "last_culprits",
        "Culprits of the last congested sample.",
    ),
    c(
        "culprit_fallbacks",
        "culprit_fallbacks_total",
        "Congested samples that fell back to the sampled frame's source.",
    ),
    g(
        "flows_tracked",
        "flows_tracked",
        "Flows in the CP's flow table.",
    ),
    c(
        "flow_overflow",
        "flow_overflow_frames_total",
        "Frames of flows not tracked because the flow table was full.",
    ),
    g(
        "flow_occupancy",
        "flow_occupancy_bytes",
        "Octets of tracked flows in the CP's queue.",
    ),
    c(
        "rate_fb_tx",
        "rate_feedback_sent_total",
        "Explicit-rate feedback messages sent.",
    ),
    c(
        "rate_fb_dropped",
        "rate_feedback_dropped_total",
        "Explicit-rate feedback messages lost.",
    ),
    c(
        "cnm_other_dst",
        "cnms_other_destinations_total",
        "CNMs to destinations beyond the per-destination table.",
    ),
];

/// `fdb` fields (no labels; the entry counts are one family with a `kind` label).
pub const FDB: &[Field] = &[
    c("learned", "learned_total", "New stations learned."),
    c(
        "moved",
        "moved_total",
        "Stations seen on another port than their entry's.",
    ),
    c(
        "refused_full",
        "refused_full_total",
        "New stations not learned because the table was full.",
    ),
    c("aged", "aged_total", "Entries removed by ageing."),
    c(
        "flushed",
        "flushed_total",
        "Entries removed because their port went down.",
    ),
];

/// Top-level fields (no labels).
pub const BRIDGE: &[Field] = &[
    c(
        "buffers_allocated",
        "buffers_allocated_total",
        "Frame buffers allocated (stops growing in steady state).",
    ),
    c(
        "events_lost",
        "events_lost_total",
        "Trace events lost because the event log was full.",
    ),
];

/// Numeric fields that are not exported as their own family, and why.
#[cfg(test)]
const NOT_EXPORTED: &[(&str, &str)] = &[
    ("ports.index", "the port label identifies the port"),
    (
        "ports.drops",
        "the sum of cpswitch_port_drops_total over reason",
    ),
    ("cps.port_index", "the port label identifies the port"),
    ("at", "the scrape's own timestamp"),
];

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn add(e: &mut Exposition, group: &str, f: &Field, labels: &[(&str, &str)], v: f64) {
    let name = format!("cpswitch_{group}_{}", f.name);
    match f.kind {
        // Counters are u64 in the snapshot; the f64 holds them exactly up to 2^53.
        Kind::Counter => e.counter(&name, f.help, labels, v.max(0.0) as u64),
        Kind::Gauge => e.gauge(&name, f.help, labels, v),
    }
}

fn fields(e: &mut Exposition, group: &str, table: &[Field], row: &Value, labels: &[(&str, &str)]) {
    for f in table {
        if let Some(v) = row.get(f.key).and_then(num) {
            add(e, group, f, labels, v);
        }
    }
}

/// One 0/1 series per priority of an 8-bit mask.
fn bitmask(e: &mut Exposition, name: &str, help: &str, port: &str, mask: u64) {
    for p in 0..8u8 {
        let prio = p.to_string();
        let bit = (mask >> p) & 1;
        e.gauge(
            name,
            help,
            &[("port", port), ("priority", &prio)],
            bit as f64,
        );
    }
}

/// Renders a `stats --json` snapshot as Prometheus text.
pub fn render(stats: &Value) -> Result<String, String> {
    let mut e = Exposition::new();
    for row in stats["ports"].as_array().into_iter().flatten() {
        port(&mut e, row);
    }
    for row in stats["queues"].as_array().into_iter().flatten() {
        queue(&mut e, row);
    }
    for row in stats["cps"].as_array().into_iter().flatten() {
        congestion_point(&mut e, row);
    }
    fdb(&mut e, &stats["fdb"]);
    bridge(&mut e, stats);
    e.render()
}

/// One `ports[]` row: the [`PORT`] table, the link gauges, the ingress burst measure, the
/// drops by reason and the per-priority PAUSE/CN bitmasks.
fn port(e: &mut Exposition, row: &Value) {
    let port = text(&row["name"]);
    let l = [("port", port.as_str())];
    fields(e, "port", PORT, row, &l);
    port_link(e, row, &l);
    if let Some(ing) = row["ingress"].as_object() {
        port_ingress(e, ing, &l);
    }
    if let Some(reasons) = row["drop_reasons"].as_object() {
        for (reason, v) in reasons {
            e.counter(
                "cpswitch_port_drops_total",
                "Frames dropped, by port and reason.",
                &[("port", &port), ("reason", reason)],
                v.as_u64().unwrap_or(0),
            );
        }
    }
    port_priorities(e, row, &port);
}

/// Link state, emulated line rate and propagation delay of a port.
fn port_link(e: &mut Exposition, row: &Value, l: &[(&str, &str)]) {
    e.gauge(
        "cpswitch_port_up",
        "1 when the link is up.",
        l,
        num(&row["up"]).unwrap_or(0.0),
    );
    // `null` = unshaped: no sample rather than a made-up number.
    if let Ok(r) = Rate::from_str(&text(&row["rate"])) {
        e.gauge(
            "cpswitch_port_rate_bytes_per_second",
            "Emulated line rate of the port in octets per second (absent when unshaped).",
            l,
            r.bps() as f64 / 8.0,
        );
    }
    if let Ok(d) = Duration::from_str(&text(&row["delay"])) {
        e.gauge(
            "cpswitch_port_delay_seconds",
            "Emulated propagation delay of the port.",
            l,
            d.as_nanos() as f64 / 1e9,
        );
    }
}

/// The daemon's ingress burst measure of a port (`ports[].ingress`).
fn port_ingress(e: &mut Exposition, ing: &Map<String, Value>, l: &[(&str, &str)]) {
    let count = |k: &str| ing.get(k).and_then(Value::as_u64).unwrap_or(0);
    e.counter(
        "cpswitch_port_ingress_measured_frames_total",
        "Received frames compared with their predecessor's kernel receive time.",
        l,
        count("measured"),
    );
    e.counter(
        "cpswitch_port_ingress_early_frames_total",
        "Received frames that arrived faster than the port's link could have delivered them.",
        l,
        count("early"),
    );
    e.gauge(
        "cpswitch_port_ingress_longest_burst_frames",
        "Longest run of consecutive early frames received.",
        l,
        count("longest_run") as f64,
    );
    if let Some(st) = ing.get("stage").and_then(Value::as_object) {
        port_stage(e, st, l);
    }
}

/// The ingress link-rate stage of a port (`ports[].ingress.stage`, absent when it is off).
fn port_stage(e: &mut Exposition, st: &Map<String, Value>, l: &[(&str, &str)]) {
    let count = |k: &str| st.get(k).and_then(Value::as_u64).unwrap_or(0);
    e.counter(
        "cpswitch_port_ingress_stage_staged_frames_total",
        "Received frames that went through the ingress link-rate stage.",
        l,
        count("staged"),
    );
    e.counter(
        "cpswitch_port_ingress_stage_held_frames_total",
        "Frames the ingress link-rate stage held back until their link would have delivered them.",
        l,
        count("held"),
    );
    e.gauge(
        "cpswitch_port_ingress_stage_delay_mean_seconds",
        "Mean delay the ingress link-rate stage added to a frame's arrival.",
        l,
        count("delay_total_ns") as f64 / count("staged").max(1) as f64 / 1e9,
    );
    e.gauge(
        "cpswitch_port_ingress_stage_delay_max_seconds",
        "Largest delay the ingress link-rate stage added to a frame's arrival.",
        l,
        count("delay_max_ns") as f64 / 1e9,
    );
    for (reason, key) in [("overflow", "overflow_drops"), ("down", "down_drops")] {
        let mut labels = l.to_vec();
        labels.push(("reason", reason));
        e.counter(
            "cpswitch_port_ingress_stage_drops_total",
            "Frames the ingress link-rate stage dropped: full (overflow) or port down (down).",
            &labels,
            count(key),
        );
    }
    e.counter(
        "cpswitch_port_ingress_stage_late_frames_total",
        "Frames handed to the bridge after their delivery instant (the bridge had run past it).",
        l,
        count("late"),
    );
    e.gauge(
        "cpswitch_port_ingress_stage_late_max_seconds",
        "Largest shift of a late frame's arrival onto the bridge's time.",
        l,
        count("late_max_ns") as f64 / 1e9,
    );
    e.counter(
        "cpswitch_port_ingress_stage_stamped_frames_total",
        "Frames the ingress stage placed by their sender's departure stamp.",
        l,
        count("stamped"),
    );
    e.counter(
        "cpswitch_port_ingress_stage_behind_frames_total",
        "Stamped frames whose sender lagged by more than the link's delay (the lookahead).",
        l,
        count("behind"),
    );
    e.gauge(
        "cpswitch_port_ingress_stage_behind_max_seconds",
        "Largest lag of a stamped frame beyond the lookahead.",
        l,
        count("behind_max_ns") as f64 / 1e9,
    );
    e.gauge(
        "cpswitch_port_ingress_stage_queued_bytes",
        "Octets the ingress link-rate stage holds.",
        l,
        count("queued_bytes") as f64,
    );
}

/// The per-priority bitmasks of a port, one 0/1 series per priority each.
fn port_priorities(e: &mut Exposition, row: &Value, port: &str) {
    bitmask(
        e,
        "cpswitch_port_pause_asserted",
        "1 when the port's input buffer of this priority has XOFF asserted upstream (PAUSE/PFC sent).",
        port,
        row["pause_asserted"].as_u64().unwrap_or(0),
    );
    bitmask(
        e,
        "cpswitch_port_pause_storm",
        "1 when the storm watchdog has shut this priority of the port's output.",
        port,
        row["storm_priorities"].as_u64().unwrap_or(0),
    );
    bitmask(
        e,
        "cpswitch_port_cn_tag_kept",
        "1 when frames of this priority leave the port with their CN-TAG (CND defence and the neighbour's CN TLV allow it).",
        port,
        row["cn_tag_kept"].as_u64().unwrap_or(0),
    );
    if let Some(n) = row["neighbour_cn"].as_object() {
        bitmask(
            e,
            "cpswitch_port_neighbour_cn_ready",
            "1 when the neighbour's last LLDP CN TLV declares this priority a ready CNPV.",
            port,
            n.get("cnpv").and_then(Value::as_u64).unwrap_or(0)
                & n.get("ready").and_then(Value::as_u64).unwrap_or(0),
        );
    }
    bitmask(
        e,
        "cpswitch_port_paused_by_peer",
        "1 when this priority of the port's output is stopped by a received PAUSE/PFC.",
        port,
        row["paused_by_peer"].as_u64().unwrap_or(0),
    );
}

/// One `queues[]` row: the [`QUEUE`] table.
fn queue(e: &mut Exposition, row: &Value) {
    let (port, prio, kind) = (
        text(&row["port"]),
        text(&row["priority"]),
        text(&row["kind"]),
    );
    let l = [
        ("port", port.as_str()),
        ("priority", &prio),
        ("kind", &kind),
    ];
    fields(e, "queue", QUEUE, row, &l);
}

/// One `cps[]` row: the [`CP`] table, the explicit-rate figures and the CNMs per destination.
fn congestion_point(e: &mut Exposition, row: &Value) {
    let (cp, port) = (text(&row["id"]), text(&row["port"]));
    let (prio, placement) = (text(&row["priority"]), text(&row["placement"]));
    let l = [
        ("cp", cp.as_str()),
        ("port", &port),
        ("priority", &prio),
        ("placement", &placement),
    ];
    fields(e, "cp", CP, row, &l);
    if let Some(bps) = row["advertised_rate_bps"].as_f64() {
        e.gauge(
            "cpswitch_cp_advertised_rate_bytes_per_second",
            "Advertised rate of an explicit-rate CP in octets per second; 0 otherwise.",
            &l,
            bps / 8.0,
        );
    }
    if let Some(er) = row.get("explicit_rate").filter(|v| v.is_object()) {
        explicit_rate(e, er, &l);
    }
    for d in row["cnm_per_dst"].as_array().into_iter().flatten() {
        let dst = text(&d["mac"]);
        let mut ld = l.to_vec();
        ld.push(("destination", &dst));
        e.counter(
            "cpswitch_cp_cnms_per_destination_total",
            "CNMs (rate-feedback messages for explicit-rate) per destination, for the CP's first 256 destinations.",
            &ld,
            d["cnms"].as_u64().unwrap_or(0),
        );
    }
}

/// The last measurement interval of an explicit-rate CP (`cps[].explicit_rate`).
fn explicit_rate(e: &mut Exposition, er: &Value, l: &[(&str, &str)]) {
    e.counter(
        "cpswitch_cp_er_intervals_total",
        "Measurement intervals of an explicit-rate CP.",
        l,
        er["intervals"].as_u64().unwrap_or(0),
    );
    e.gauge(
        "cpswitch_cp_er_load_ratio",
        "Offered load over capacity (rho) of the last explicit-rate interval.",
        l,
        er["last_rho_milli"].as_f64().unwrap_or(0.0) / 1000.0,
    );
    if let Ok(r) = Rate::from_str(&text(&er["last_arrival_rate"])) {
        e.gauge(
            "cpswitch_cp_er_arrival_rate_bytes_per_second",
            "Arrival rate A of the last explicit-rate interval, octets per second.",
            l,
            r.bps() as f64 / 8.0,
        );
    }
}

/// The `fdb` object: the entry counts by kind and the [`FDB`] table.
fn fdb(e: &mut Exposition, fdb: &Value) {
    for (key, kind) in [("dynamic_entries", "dynamic"), ("static_entries", "static")] {
        if let Some(n) = num(&fdb[key]) {
            e.gauge(
                "cpswitch_fdb_entries",
                "Filtering database entries.",
                &[("kind", kind)],
                n,
            );
        }
    }
    fields(e, "fdb", FDB, fdb, &[]);
}

/// The top-level [`BRIDGE`] counters (`cpswitch_<name>`, no group, no labels).
fn bridge(e: &mut Exposition, stats: &Value) {
    for f in BRIDGE {
        if let Some(v) = num(&stats[f.key]) {
            e.counter(
                &format!("cpswitch_{}", f.name),
                f.help,
                &[],
                v.max(0.0) as u64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_ports_and_queues() {
        let text = render(&json!({
            "ports": [{"name": "p1", "rx_frames": 3, "tx_bytes": 100, "up": true, "rate": "1gbit",
                       "delay": "25us", "pause_asserted": 8, "in_flight_bytes": 1500,
                       "drop_reasons": {"input_full": 2, "no_route": 0},
                       "ingress": {"measured": 9, "early": 4, "longest_run": 3, "unstamped": 0,
                                   "early_share": 0.44,
                                   "stage": {"staged": 9, "held": 4, "delay_total_ns": 22500000,
                                             "delay_max_ns": 250000, "overflow_drops": 2,
                                             "down_drops": 0, "queued_bytes": 3000,
                                             "queued_max_bytes": 9000, "late": 2,
                                             "late_max_ns": 1500, "stamped": 7,
                                             "behind": 1, "behind_max_ns": 2500}}}],
            "queues": [{"port": "p1", "priority": 3, "kind": "output", "bytes": 10,
                        "max_bytes": 150000, "drops": 2, "frames": 1, "peak_bytes": 9000,
                        "enqueued": 7}]
        }))
        .unwrap();
        assert!(text.contains("# TYPE cpswitch_port_rx_frames_total counter\n"));
        assert!(text.contains("cpswitch_port_rx_frames_total{port=\"p1\"} 3\n"));
        assert!(text.contains("cpswitch_port_tx_bytes_total{port=\"p1\"} 100\n"));
        assert!(text.contains("cpswitch_port_up{port=\"p1\"} 1\n"));
        assert!(text.contains("cpswitch_port_rate_bytes_per_second{port=\"p1\"} 125000000\n"));
        assert!(
            text.contains("cpswitch_port_delay_seconds{port=\"p1\"} 0.000025\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE cpswitch_port_in_flight_bytes gauge\n"));
        assert!(text.contains("cpswitch_port_ingress_measured_frames_total{port=\"p1\"} 9\n"));
        assert!(text.contains("cpswitch_port_ingress_early_frames_total{port=\"p1\"} 4\n"));
        assert!(text.contains("cpswitch_port_ingress_longest_burst_frames{port=\"p1\"} 3\n"));
        assert!(text.contains("cpswitch_port_ingress_stage_held_frames_total{port=\"p1\"} 4\n"));
        assert!(
            text.contains("cpswitch_port_ingress_stage_delay_mean_seconds{port=\"p1\"} 0.0025\n"),
            "{text}"
        );
        assert!(
            text.contains("cpswitch_port_ingress_stage_delay_max_seconds{port=\"p1\"} 0.00025\n")
        );
        assert!(text.contains(
            "cpswitch_port_ingress_stage_drops_total{port=\"p1\",reason=\"overflow\"} 2\n"
        ));
        assert!(text.contains("cpswitch_port_ingress_stage_queued_bytes{port=\"p1\"} 3000\n"));
        assert!(text.contains("cpswitch_port_ingress_stage_late_frames_total{port=\"p1\"} 2\n"));
        assert!(
            text.contains("cpswitch_port_ingress_stage_late_max_seconds{port=\"p1\"} 0.0000015\n")
        );
        assert!(text.contains("cpswitch_port_ingress_stage_stamped_frames_total{port=\"p1\"} 7\n"));
        assert!(text.contains("cpswitch_port_ingress_stage_behind_frames_total{port=\"p1\"} 1\n"));
        assert!(text
            .contains("cpswitch_port_ingress_stage_behind_max_seconds{port=\"p1\"} 0.0000025\n"));
        assert!(text.contains("cpswitch_port_drops_total{port=\"p1\",reason=\"input_full\"} 2\n"));
        assert!(text.contains("# TYPE cpswitch_port_pause_asserted gauge\n"));
        assert!(text.contains("cpswitch_port_pause_asserted{port=\"p1\",priority=\"3\"} 1\n"));
        assert!(text.contains("cpswitch_port_pause_asserted{port=\"p1\",priority=\"2\"} 0\n"));
        let q = "{kind=\"output\",port=\"p1\",priority=\"3\"}";
        assert!(
            text.contains(&format!("cpswitch_queue_bytes{q} 10\n")),
            "{text}"
        );
        assert!(text.contains(&format!("cpswitch_queue_capacity_bytes{q} 150000\n")));
        assert!(text.contains("# TYPE cpswitch_queue_frames gauge\n"));
        assert!(text.contains("# TYPE cpswitch_queue_peak_bytes gauge\n"));
        assert!(text.contains(&format!("cpswitch_queue_drops_total{q} 2\n")));
        assert!(text.contains(&format!("cpswitch_queue_enqueued_frames_total{q} 7\n")));
        assert!(!text.contains("_total_total"));
        match daemon_kit::exposition::promtool_check(&text) {
            None => eprintln!("promtool check skipped: promtool not installed"),
            Some(r) => r.unwrap(),
        }
        for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
            let help = line.replace("# TYPE", "# HELP");
            let name = help.rsplit_once(' ').unwrap().0;
            assert!(text.contains(&format!("{name} ")), "no HELP for {line}");
        }
    }

    #[test]
    fn renders_congestion_points() {
        let text = render(&json!({
            "cps": [{"id": "0200000000100013", "port": "p2", "priority": 3,
                     "placement": "output", "samples": 7, "cnm_tx": 5, "qlen": 30000,
                     "qeq": 26000, "sample_base": 150000, "advertised_rate_bps": 10000000, "last_fb": -1200, "cnm_other_dst": 1,
                     "cnm_per_dst": [{"mac": "02:00:00:00:00:01", "cnms": 5}],
                     "explicit_rate": {"intervals": 4, "last_rho_milli": 950,
                                       "last_arrival_rate": "950mbit"}}]
        }))
        .unwrap();
        let labels = "{cp=\"0200000000100013\",placement=\"output\",port=\"p2\",priority=\"3\"}";
        assert!(
            text.contains(&format!("cpswitch_cp_samples_total{labels} 7\n")),
            "{text}"
        );
        assert!(text.contains(&format!("cpswitch_cp_cnms_sent_total{labels} 5\n")));
        assert!(text.contains(&format!("cpswitch_cp_qlen_bytes{labels} 30000\n")));
        assert!(text.contains(&format!("cpswitch_cp_qeq_bytes{labels} 26000\n")));
        assert!(text.contains(&format!("cpswitch_cp_sample_base_bytes{labels} 150000\n")));
        assert!(text.contains(&format!("cpswitch_cp_last_fb{labels} -1200\n")));
        assert!(text.contains(&format!(
            "cpswitch_cp_advertised_rate_bytes_per_second{labels} 1250000\n"
        )));
        assert!(text.contains("# TYPE cpswitch_cp_qeq_bytes gauge"));
        assert!(text.contains(
            "cpswitch_cp_cnms_per_destination_total{cp=\"0200000000100013\",destination=\"02:00:00:00:00:01\",placement=\"output\",port=\"p2\",priority=\"3\"} 5\n"
        ), "{text}");
        assert!(text.contains(&format!(
            "cpswitch_cp_cnms_other_destinations_total{labels} 1\n"
        )));
    }

    #[test]
    fn renders_the_fdb() {
        let text = render(&json!({
            "fdb": {"dynamic_entries": 4, "static_entries": 1, "learned": 9, "aged": 5},
            "buffers_allocated": 64
        }))
        .unwrap();
        assert!(text.contains("cpswitch_fdb_entries{kind=\"dynamic\"} 4\n"));
        assert!(text.contains("cpswitch_fdb_entries{kind=\"static\"} 1\n"));
        assert!(text.contains("cpswitch_fdb_learned_total 9\n"));
        assert!(text.contains("cpswitch_fdb_aged_total 5\n"));
        assert!(text.contains("cpswitch_buffers_allocated_total 64\n"));
    }

    /// Walks a real snapshot: every numeric field is exported or listed in [`NOT_EXPORTED`].
    #[test]
    fn every_stats_field_is_exported() {
        let cfg = cp_switch::BridgeConfig {
            ports: vec![
                cp_switch::PortConfig::new("p1"),
                cp_switch::PortConfig::new("p2"),
            ],
            ..Default::default()
        };
        let bridge = cp_switch::Bridge::new(cfg, cnm_proto::rng::Rng::new(1)).unwrap();
        let stats = serde_json::to_value(bridge.stats()).unwrap();
        let handled = |group: &str, key: &str| {
            let table: &[Field] = match group {
                "ports" => PORT,
                "queues" => QUEUE,
                "cps" => CP,
                "fdb" => FDB,
                _ => BRIDGE,
            };
            table.iter().any(|f| f.key == key)
                || NOT_EXPORTED
                    .iter()
                    .any(|(k, _)| *k == key || *k == format!("{group}.{key}"))
                || matches!(
                    (group, key),
                    (
                        "ports",
                        "up" | "rate"
                            | "delay"
                            | "drop_reasons"
                            | "pause_asserted"
                            | "paused_by_peer"
                            | "storm_priorities"
                            | "cn_tag_kept"
                            | "neighbour_cn"
                            | "name"
                    ) | ("queues", "port" | "priority" | "kind")
                        | (
                            "cps",
                            "id" | "port"
                                | "priority"
                                | "placement"
                                | "mode"
                                | "culprit"
                                | "explicit_rate"
                                | "cnm_per_dst"
                                | "advertised_rate_bps"
                        )
                        | ("fdb", "dynamic_entries" | "static_entries")
                )
        };
        let mut missing = Vec::new();
        let obj = stats.as_object().unwrap();
        for (k, v) in obj {
            match v {
                Value::Array(rows) => {
                    for row in rows {
                        for (rk, rv) in row.as_object().unwrap() {
                            if (rv.is_number() || rv.is_boolean() || rv.is_object())
                                && !handled(k, rk)
                            {
                                missing.push(format!("{k}.{rk}"));
                            }
                        }
                    }
                }
                Value::Object(o) => {
                    for (ok, ov) in o {
                        if ov.is_number() && !handled(k, ok) {
                            missing.push(format!("{k}.{ok}"));
                        }
                    }
                }
                _ if v.is_number() && !handled("", k) => missing.push(k.clone()),
                _ => {}
            }
        }
        assert!(
            missing.is_empty(),
            "stats fields without a metric: {missing:?}"
        );
        assert!(!stats["ports"].as_array().unwrap().is_empty());
        assert!(!stats["queues"].as_array().unwrap().is_empty());
        render(&stats).unwrap();
    }

    #[test]
    fn refuses_remote_without_flag() {
        let (tx, _rx) = super::super::ctl::channel();
        let e = MetricsServer::start("0.0.0.0:0".parse().unwrap(), false, tx).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    }
}

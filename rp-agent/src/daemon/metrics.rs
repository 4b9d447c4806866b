//! `run --metrics ADDR`: the agent's counters and its flows' rates as Prometheus metrics at
//! `GET /metrics`.
//!
//! Each scrape asks the dataplane for `stats` and `show flows` through the control channel (the
//! answers `rp-agent ctl` prints) and turns them into metric families with
//! [`daemon_kit::exposition`]; the HTTP side (bounded request head and connections, a deadline
//! per connection, `404` for other paths) is [`daemon_kit::metrics_http`]. Off by default;
//! loopback only unless `--metrics-allow-remote`.
//!
//! Agent-wide: every `stats` field is in [`AGENT`] (a test walks a real snapshot), refusals and
//! ignored feedback as one counter family each with a `reason` label
//! (`rpagent_host_refused_frames_total`, `rpagent_uplink_dropped_frames_total`,
//! `rpagent_cnms_ignored_total`, `rpagent_rate_feedback_ignored_total`).
//!
//! Per flow (labels `flow`, `destination`, `priority`): `rpagent_flow_current_rate_bytes_per_second`
//! (CR), `rpagent_flow_target_rate_bytes_per_second` (TR; rates in octets per second, the
//! Prometheus base unit, so CR × 8 is the bit rate), `rpagent_flow_cnms_applied_total`,
//! `rpagent_flow_rate_feedback_applied_total`, `rpagent_flow_tx_{frames,bytes}_total`,
//! `rpagent_flow_queued_{bytes,frames}`, `rpagent_flow_backpressure_frames_total`. A host may
//! open thousands of flows (`five-tuple` classification), and every label set is a series that
//! Prometheus keeps for hours, so only the [`MAX_FLOWS`] flows with the most octets sent are
//! exported; `rpagent_flows` and `rpagent_limited_flows` count them all, and
//! `rpagent_flows_exported` says how many were shown.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use daemon_kit::ctl::{ask, Request};
use daemon_kit::exposition::Exposition;
use daemon_kit::metrics_http::{Limits, MetricsHttp, Render};
use serde_json::Value;

use super::ctl::Command;

/// Flows exported per scrape: the ones with the most octets sent.
pub const MAX_FLOWS: usize = 32;

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
        tx: SyncSender<Request<Command>>,
    ) -> std::io::Result<MetricsServer> {
        let render: Render = Arc::new(move |stop: &AtomicBool| {
            let stats = ask(&tx, Command::Stats, stop)?;
            let flows = ask(&tx, Command::ShowFlows, stop)?;
            render(&stats, &flows)
        });
        let http = MetricsHttp::start(addr, allow_remote, Limits::default(), render)?;
        Ok(MetricsServer { http })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }
}

/// One `stats` field: key, family, `reason` label (if any), counter (else gauge), HELP.
type Field = (
    &'static str,
    &'static str,
    Option<&'static str>,
    bool,
    &'static str,
);

const HOST_REFUSED: &str = "Host frames refused by the agent, by reason.";
const UPLINK_DROPPED: &str = "Frames from the network not delivered to the host, by reason.";
const CNM_IGNORED: &str = "CNMs received but not applied, by reason (802.1Qau 32.14).";
const RF_IGNORED: &str = "Explicit-rate feedback messages not applied, by reason.";

/// Every field of `stats`.
pub const AGENT: &[Field] = &[
    ("host_rx_frames", "rpagent_host_rx_frames_total", None, true, "Host frames accepted into a flow queue."),
    ("host_rx_bytes", "rpagent_host_rx_bytes_total", None, true, "Octets of host frames accepted."),
    ("host_backpressure", "rpagent_host_refused_frames_total", Some("backpressure"), true, HOST_REFUSED),
    ("host_malformed", "rpagent_host_refused_frames_total", Some("malformed"), true, HOST_REFUSED),
    ("host_too_long", "rpagent_host_refused_frames_total", Some("too_long"), true, HOST_REFUSED),
    ("host_flow_table_full", "rpagent_host_refused_frames_total", Some("flow_table_full"), true, HOST_REFUSED),
    ("host_dropped", "rpagent_host_dropped_frames_total", None, true, "Host frames the daemon dropped after the agent refused them for a reason other than backpressure."),
    ("uplink_tx_frames", "rpagent_uplink_tx_frames_total", None, true, "Frames sent on the uplink."),
    ("uplink_tx_bytes", "rpagent_uplink_tx_bytes_total", None, true, "Octets sent on the uplink (with tags)."),
    ("uplink_rx_frames", "rpagent_uplink_rx_frames_total", None, true, "Frames received from the network."),
    ("uplink_malformed", "rpagent_uplink_dropped_frames_total", Some("malformed"), true, UPLINK_DROPPED),
    ("uplink_not_for_host", "rpagent_uplink_dropped_frames_total", Some("not_for_host"), true, UPLINK_DROPPED),
    ("host_queue_full", "rpagent_uplink_dropped_frames_total", Some("host_queue_full"), true, UPLINK_DROPPED),
    ("host_tx_frames", "rpagent_host_tx_frames_total", None, true, "Frames delivered to the host."),
    ("cnm_rx", "rpagent_cnms_applied_total", None, true, "CNMs received and applied to at least one flow."),
    ("cnm_not_for_us", "rpagent_cnms_ignored_total", Some("not_for_us"), true, CNM_IGNORED),
    ("cnm_bad_version", "rpagent_cnms_ignored_total", Some("bad_version"), true, CNM_IGNORED),
    ("cnm_malformed", "rpagent_cnms_ignored_total", Some("malformed"), true, CNM_IGNORED),
    ("cnm_unmatched", "rpagent_cnms_ignored_total", Some("unmatched"), true, CNM_IGNORED),
    ("cnm_mode_ignored", "rpagent_cnms_ignored_total", Some("mode"), true, CNM_IGNORED),
    ("cnm_unknown_cp", "rpagent_cnms_ignored_total", Some("unknown_cp"), true, CNM_IGNORED),
    ("bs_cp_overflow", "rpagent_bs_cp_overflow_total", None, true, "QCN/BS entries displaced because a flow already held rpg_bs_max_cps entries."),
    ("pause_rx", "rpagent_pause_rx_frames_total", None, true, "PAUSE/PFC frames received."),
    ("mac_control_unknown", "rpagent_mac_control_unknown_frames_total", None, true, "MAC Control frames with an unknown opcode."),
    ("rate_feedback_rx", "rpagent_rate_feedback_received_total", None, true, "Explicit-rate feedback messages received."),
    ("rate_feedback_matched", "rpagent_rate_feedback_applied_total", None, true, "Rate-feedback messages that matched at least one flow in explicit-rate mode."),
    ("rate_feedback_not_for_us", "rpagent_rate_feedback_ignored_total", Some("not_for_us"), true, RF_IGNORED),
    ("rate_feedback_bad_version", "rpagent_rate_feedback_ignored_total", Some("bad_version"), true, RF_IGNORED),
    ("rate_feedback_malformed", "rpagent_rate_feedback_ignored_total", Some("malformed"), true, RF_IGNORED),
    ("rate_feedback_unmatched", "rpagent_rate_feedback_ignored_total", Some("unmatched"), true, RF_IGNORED),
    ("rate_feedback_mode_ignored", "rpagent_rate_feedback_ignored_total", Some("mode"), true, RF_IGNORED),
    ("rate_feedback_overridden", "rpagent_rate_feedback_ignored_total", Some("overridden"), true, RF_IGNORED),
    ("er_timeouts", "rpagent_er_timeouts_total", None, true, "Explicit-rate limiters released by rp_er_timeout."),
    ("limiters_created", "rpagent_limiters_created_total", None, true, "Rate limiters created by a CNM or rate feedback."),
    ("limiters_released", "rpagent_limiters_released_total", None, true, "Rate limiters released at line rate."),
    ("flows", "rpagent_flows", None, false, "Flows tracked."),
    ("limited_flows", "rpagent_limited_flows", None, false, "Flows rate limited now."),
    ("events_lost", "rpagent_events_lost_total", None, true, "Trace events lost because the event log was full."),
    ("buffers_allocated", "rpagent_buffers_allocated_total", None, true, "Frame buffers allocated (constant in steady state)."),
    ("tx_late_frames", "rpagent_tx_late_frames_total", None, true, "Frames sent up after their pacers and PAUSE let them start."),
    ("tx_late_p50_ns", "rpagent_tx_late_p50_seconds", None, false, "Median lateness of the frames sent up (on time ones included)."),
    ("tx_late_p99_ns", "rpagent_tx_late_p99_seconds", None, false, "99th percentile of the lateness of the frames sent up."),
    ("tx_late_max_ns", "rpagent_tx_late_max_seconds", None, false, "Largest lateness of a frame sent up."),
];

/// Per-flow fields: key, family, counter (else gauge), HELP.
pub const FLOW: &[(&str, &str, bool, &str)] = &[
    (
        "cr_bps",
        "rpagent_flow_current_rate_bytes_per_second",
        false,
        "Current rate CR of the flow's limiter in octets per second (the line rate when released).",
    ),
    (
        "tr_bps",
        "rpagent_flow_target_rate_bytes_per_second",
        false,
        "Target rate TR of the flow's limiter in octets per second (the line rate when released).",
    ),
    (
        "cnm_rx",
        "rpagent_flow_cnms_applied_total",
        true,
        "CNMs applied to the flow.",
    ),
    (
        "rate_feedback_rx",
        "rpagent_flow_rate_feedback_applied_total",
        true,
        "Rate-feedback messages applied to the flow.",
    ),
    (
        "tx_frames",
        "rpagent_flow_tx_frames_total",
        true,
        "Frames of the flow sent on the uplink.",
    ),
    (
        "tx_bytes",
        "rpagent_flow_tx_bytes_total",
        true,
        "Octets of the flow sent on the uplink.",
    ),
    (
        "queued_bytes",
        "rpagent_flow_queued_bytes",
        false,
        "Octets of the flow queued in the agent.",
    ),
    (
        "queued_frames",
        "rpagent_flow_queued_frames",
        false,
        "Frames of the flow queued in the agent.",
    ),
    (
        "backpressure",
        "rpagent_flow_backpressure_frames_total",
        true,
        "Host frames of the flow refused with backpressure.",
    ),
];

/// Flow fields that are not exported, and why.
#[cfg(test)]
const FLOW_NOT_EXPORTED: &[(&str, &str)] = &[
    ("flow", "the flow label"),
    ("priority", "the priority label"),
    ("rpid", "an identifier, not a measurement"),
];

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Renders `stats` and `show flows` answers as Prometheus text.
pub fn render(stats: &Value, flows: &Value) -> Result<String, String> {
    let mut e = Exposition::new();
    for (key, name, reason, counter, help) in AGENT {
        let Some(v) = stats.get(*key).and_then(Value::as_u64) else {
            continue;
        };
        let l: Vec<(&str, &str)> = reason.iter().map(|r| ("reason", *r)).collect();
        if *counter {
            e.counter(name, help, &l, v);
        } else if key.ends_with("_ns") {
            // Nanoseconds in `stats`, seconds in the exposition (its base unit).
            e.gauge(name, help, &l, v as f64 / 1e9);
        } else {
            e.gauge(name, help, &l, v as f64);
        }
    }
    let mut rows: Vec<&Value> = flows.as_array().into_iter().flatten().collect();
    rows.sort_by_key(|f| std::cmp::Reverse(f["tx_bytes"].as_u64().unwrap_or(0)));
    rows.truncate(MAX_FLOWS);
    e.gauge(
        "rpagent_flows_exported",
        "Flows with per-flow series in this exposition (the ones with the most octets sent).",
        &[],
        rows.len() as f64,
    );
    for f in rows {
        let (id, dst, prio) = (text(&f["flow"]), text(&f["dst"]), text(&f["priority"]));
        let l = [
            ("flow", id.as_str()),
            ("destination", &dst),
            ("priority", &prio),
        ];
        for (key, name, counter, help) in FLOW {
            let Some(v) = f.get(*key).and_then(Value::as_u64) else {
                continue;
            };
            if *counter {
                e.counter(name, help, &l, v);
            } else if key.ends_with("_bps") {
                // Prometheus' base unit is the byte: bit/s / 8.
                e.gauge(name, help, &l, v as f64 / 8.0);
            } else {
                e.gauge(name, help, &l, v as f64);
            }
        }
    }
    e.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnm_proto::rng::Rng;
    use cnm_proto::wire::EthernetAddress;
    use cnm_proto::{Instant, Rate};
    use rp_agent::{Agent, AgentConfig};

    fn agent_with_flows(n: u8) -> Agent {
        let cfg = AgentConfig {
            line_rate: Rate::from_gbps(1),
            mac: Some(EthernetAddress([2, 0, 0, 0, 0, 1])),
            ..AgentConfig::default()
        };
        let mut a = Agent::new(cfg, Rng::new(1)).unwrap();
        for d in 0..n {
            let mut f = vec![0u8; 100 + usize::from(d)];
            f[..6].copy_from_slice(&[2, 0, 0, 0, 1, d]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&[0x88, 0xb6]);
            a.handle_host(Instant::from_nanos(1), &f).unwrap();
        }
        a
    }

    fn snapshot(a: &mut Agent) -> (Value, Value) {
        let now = Instant::from_nanos(2);
        let stats = super::super::run::answer(a, now, Command::Stats, 0).unwrap();
        let flows = super::super::run::answer(a, now, Command::ShowFlows, 0).unwrap();
        (stats, flows)
    }

    #[test]
    fn every_stats_and_flow_field_is_exported() {
        let mut a = agent_with_flows(2);
        let (stats, flows) = snapshot(&mut a);
        let mut missing = Vec::new();
        for (k, v) in stats.as_object().unwrap() {
            if v.is_number() && !AGENT.iter().any(|f| f.0 == k) {
                missing.push(k.clone());
            }
        }
        let flow = &flows.as_array().unwrap()[0];
        for (k, v) in flow.as_object().unwrap() {
            if v.is_number()
                && !FLOW.iter().any(|f| f.0 == k)
                && !FLOW_NOT_EXPORTED.iter().any(|f| f.0 == k)
            {
                missing.push(format!("flows.{k}"));
            }
        }
        assert!(missing.is_empty(), "fields without a metric: {missing:?}");
        let text = render(&stats, &flows).unwrap();
        assert!(text.contains("rpagent_host_rx_frames_total 2\n"), "{text}");
        assert!(text.contains("rpagent_flows 2\n"));
        assert!(text.contains("rpagent_cnms_ignored_total{reason=\"unmatched\"} 0\n"));
        assert!(text.contains("# TYPE rpagent_flow_current_rate_bytes_per_second gauge\n"));
        assert!(text.contains(
            "rpagent_flow_current_rate_bytes_per_second{destination=\"02:00:00:00:01:00\",flow=\"0\",priority=\"3\"} 125000000\n"
        ), "{text}");
        match daemon_kit::exposition::promtool_check(&text) {
            None => eprintln!("promtool check skipped: promtool not installed"),
            Some(r) => r.unwrap(),
        }
    }

    /// Only the `MAX_FLOWS` flows with the most octets get series.
    #[test]
    fn flow_series_are_capped() {
        let n = MAX_FLOWS as u8 + 8;
        let mut a = agent_with_flows(n);
        let (stats, flows) = snapshot(&mut a);
        assert_eq!(flows.as_array().unwrap().len(), usize::from(n));
        let text = render(&stats, &flows).unwrap();
        let series = text
            .lines()
            .filter(|l| l.starts_with("rpagent_flow_target_rate_bytes_per_second{"))
            .count();
        assert_eq!(series, MAX_FLOWS);
        assert!(text.contains(&format!("rpagent_flows_exported {MAX_FLOWS}\n")));
        assert!(text.contains(&format!("rpagent_flows {n}\n")));
    }
}

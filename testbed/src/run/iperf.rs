//! iperf3 flows of the netns runner (`pattern = "tcp"` and `"udp:RATE"`).
//!
//! The source host's kernel sends through its `rp-agent` TAP (`qcn0`), so the agent's reaction
//! point shapes the flow as it shapes generated frames; the destination runs `iperf3 -s -1 -J`
//! on one port per flow, the source `iperf3 -c DST -J --get-server-output -t SECS -i INTERVAL`
//! (plus `-u -b RATE -l LEN` for UDP), started at the flow's scaled start time.
//!
//! # Rates: goodput
//! The throughput series of an iperf3 flow is the *receiver's* interval report (the server's
//! JSON, carried back by `--get-server-output`): octets of application payload delivered, i.e.
//! goodput. Generator flows report wire rates (whole frames counted by `rp-agent sink`). A TCP
//! segment in a 1514-octet frame carries at most 1448 octets of payload (1428 with timestamps
//! and the agent's MTU of 1492), so the same link shows ~94 % of its rate as TCP goodput.
//!
//! `udp:RATE` names a wire rate (as `cbr:RATE` does; the simulator runs it as `cbr`): the
//! runner asks iperf3 for the application rate `RATE ÷ S × payload ÷ frame` with
//! `payload = frame_len − 14 (Ethernet) − 20 (IPv4) − 8 (UDP)`, capped by the TAP's MTU.

use serde_json::Value;

/// Octets between the start of a frame and a UDP payload: Ethernet (14), IPv4 (20), UDP (8).
pub const UDP_HEADERS: usize = 14 + 20 + 8;
/// Largest UDP payload through an agent's TAP (MTU 1500 − 8 octets of tags − IPv4 − UDP).
pub const UDP_MAX_PAYLOAD: usize = 1492 - 20 - 8;
/// First TCP/UDP port of the iperf3 servers (one port per flow: `BASE_PORT + flow index`).
pub const BASE_PORT: u16 = 5201;

/// What an iperf3 `-J` report says about one flow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IperfReport {
    /// `"TCP"` or `"UDP"`.
    pub protocol: String,
    /// Receiver intervals `(start_s, end_s, payload octets)` relative to the test's start.
    pub intervals: Vec<(f64, f64, u64)>,
    /// Payload octets the client sent.
    pub sent_bytes: u64,
    /// Payload octets the server received.
    pub received_bytes: u64,
    /// Seconds of the receiver's total.
    pub seconds: f64,
    /// TCP retransmissions (client side).
    pub retransmits: Option<u64>,
    /// UDP datagrams lost (receiver side).
    pub lost_packets: Option<u64>,
    /// UDP datagrams sent.
    pub packets: Option<u64>,
    /// Whether the intervals came from the server (goodput) rather than the client.
    pub from_server: bool,
}

impl IperfReport {
    /// Mean goodput (bit/s) over the receiver's total.
    pub fn goodput_bps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.received_bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }

    /// Mean sending rate of the client (bit/s) over the same span.
    pub fn sent_bps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.sent_bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }
}

/// An iperf3 report that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IperfError {
    /// Not JSON at all (iperf3 died before writing its report).
    #[error("not an iperf3 JSON report: {0}")]
    NotJson(String),
    /// iperf3 wrote its `"error"` field.
    #[error("iperf3: {0}")]
    Failed(String),
    /// A field the report must have.
    #[error("iperf3 report without {0}")]
    Missing(&'static str),
}

fn intervals_of(v: &Value) -> Vec<(f64, f64, u64)> {
    v["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|i| i["sum"]["omitted"] != Value::Bool(true))
                .filter_map(|i| {
                    let s = &i["sum"];
                    Some((
                        s["start"].as_f64()?,
                        s["end"].as_f64()?,
                        s["bytes"].as_u64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Parses the client's `iperf3 -J [--get-server-output]` report. The interval series is the
/// server's (received octets) when the report carries `server_output_json`, else the client's
/// (sent octets).
pub fn parse_report(text: &str) -> Result<IperfReport, IperfError> {
    let v: Value = serde_json::from_str(text.trim()).map_err(|e| {
        let head: String = text.chars().take(120).collect();
        IperfError::NotJson(format!("{e}: {head:?}"))
    })?;
    if let Some(e) = v["error"].as_str() {
        return Err(IperfError::Failed(e.to_string()));
    }
    let end = &v["end"];
    if !end.is_object() {
        return Err(IperfError::Missing("end"));
    }
    let protocol = v["start"]["test_start"]["protocol"]
        .as_str()
        .unwrap_or(if end["sum_sent"]["retransmits"].is_u64() {
            "TCP"
        } else {
            "UDP"
        })
        .to_string();
    let server = &v["server_output_json"];
    let server_iv = intervals_of(server);
    let from_server = !server_iv.is_empty();
    let intervals = if from_server {
        server_iv
    } else {
        intervals_of(&v)
    };
    let sent = &end["sum_sent"];
    let sent_bytes = sent["bytes"]
        .as_u64()
        .or_else(|| end["sum"]["bytes"].as_u64())
        .ok_or(IperfError::Missing("end.sum_sent.bytes"))?;
    // The receiver's total: the server's own when present (the client's copy of a UDP receive
    // total is the same numbers, as is its TCP `sum_received`).
    let recv = if server["end"]["sum_received"].is_object() {
        &server["end"]["sum_received"]
    } else if end["sum_received"].is_object() {
        &end["sum_received"]
    } else {
        &end["sum"]
    };
    let received_bytes = recv["bytes"]
        .as_u64()
        .ok_or(IperfError::Missing("end.sum_received.bytes"))?;
    let seconds = recv["seconds"]
        .as_f64()
        .or_else(|| sent["seconds"].as_f64())
        .unwrap_or(0.0);
    let (lost_packets, packets) = if protocol == "UDP" {
        let packets = sent["packets"]
            .as_u64()
            .or_else(|| end["sum"]["packets"].as_u64());
        // The receiver's own loss count starts from the first datagram's sequence number,
        // which iperf3 sometimes takes from its 4-octet UDP "connect" datagram (a count in
        // the billions); datagrams sent less datagrams received is the count that holds.
        let blksize = v["start"]["test_start"]["blksize"]
            .as_u64()
            .filter(|&b| b > 0);
        let lost = match (packets, blksize) {
            (Some(p), Some(b)) => Some(p.saturating_sub(received_bytes / b)),
            _ => {
                let plausible = |l: &u64| packets.map_or(true, |p| *l <= p);
                recv["lost_packets"]
                    .as_u64()
                    .filter(plausible)
                    .or_else(|| end["sum"]["lost_packets"].as_u64().filter(plausible))
            }
        };
        (lost, packets)
    } else {
        (None, None)
    };
    Ok(IperfReport {
        retransmits: if protocol == "TCP" {
            sent["retransmits"].as_u64()
        } else {
            None
        },
        protocol,
        intervals,
        sent_bytes,
        received_bytes,
        seconds,
        lost_packets,
        packets,
        from_server,
    })
}

/// The iperf3 application rate (bit/s of UDP payload) that makes `wire_bps` of `frame_len`
/// frames, and the payload length (`-l`).
pub fn udp_app_rate(wire_bps: f64, frame_len: usize) -> (f64, usize) {
    let payload = frame_len
        .saturating_sub(UDP_HEADERS)
        .clamp(16, UDP_MAX_PAYLOAD);
    let frame = payload + UDP_HEADERS;
    (wire_bps * payload as f64 / frame as f64, payload)
}

/// Whether `iperf3` runs here (a clear error otherwise).
pub fn check_installed() -> anyhow::Result<()> {
    match std::process::Command::new("iperf3")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
    {
        Ok(_) => Ok(()),
        Err(e) => anyhow::bail!(
            "the scenario has tcp/udp flows, which run iperf3, but iperf3 cannot be started \
             ({e}); install it (e.g. apt-get install iperf3)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP client report with the server's output, written by hand in iperf3 3.x's shape.
    const TCP: &str = r#"{
      "start": {"test_start": {"protocol": "TCP", "num_streams": 1, "duration": 2}},
      "intervals": [
        {"streams": [], "sum": {"start": 0, "end": 1.0, "seconds": 1.0, "bytes": 1250000,
                                "bits_per_second": 1e7, "retransmits": 3, "omitted": false, "sender": true}},
        {"streams": [], "sum": {"start": 1.0, "end": 2.0, "seconds": 1.0, "bytes": 1250000,
                                "bits_per_second": 1e7, "retransmits": 1, "omitted": false, "sender": true}}
      ],
      "end": {
        "sum_sent": {"start": 0, "end": 2.0, "seconds": 2.0, "bytes": 2500000, "retransmits": 4, "sender": true},
        "sum_received": {"start": 0, "end": 2.01, "seconds": 2.01, "bytes": 2400000, "sender": true}
      },
      "server_output_json": {
        "intervals": [
          {"sum": {"start": 0, "end": 0.5, "seconds": 0.5, "bytes": 500000, "omitted": false, "sender": false}},
          {"sum": {"start": 0.5, "end": 1.0, "seconds": 0.5, "bytes": 600000, "omitted": false, "sender": false}},
          {"sum": {"start": 1.0, "end": 2.0, "seconds": 1.0, "bytes": 1300000, "omitted": false, "sender": false}}
        ],
        "end": {"sum_received": {"start": 0, "end": 2.0, "seconds": 2.0, "bytes": 2400000, "sender": false}}
      }
    }"#;

    /// A UDP client report without the server's output.
    const UDP: &str = r#"{
      "start": {"test_start": {"protocol": "UDP", "blksize": 1458}},
      "intervals": [
        {"sum": {"start": 0, "end": 1.0, "seconds": 1.0, "bytes": 729000, "packets": 500, "omitted": false}},
        {"sum": {"start": 1.0, "end": 2.0, "seconds": 1.0, "bytes": 729000, "packets": 500, "omitted": false}}
      ],
      "end": {
        "sum": {"start": 0, "end": 2.0, "seconds": 2.0, "bytes": 1458000, "lost_packets": 10,
                "packets": 1000, "lost_percent": 1.0},
        "sum_sent": {"start": 0, "end": 2.0, "seconds": 2.0, "bytes": 1458000, "packets": 1000, "lost_packets": 0},
        "sum_received": {"start": 0, "end": 2.0, "seconds": 2.0, "bytes": 1443420, "packets": 1000, "lost_packets": 10}
      }
    }"#;

    #[test]
    fn tcp_report_uses_the_servers_intervals() {
        let r = parse_report(TCP).unwrap();
        assert_eq!(r.protocol, "TCP");
        assert!(r.from_server);
        assert_eq!(
            r.intervals,
            vec![
                (0.0, 0.5, 500_000),
                (0.5, 1.0, 600_000),
                (1.0, 2.0, 1_300_000)
            ]
        );
        assert_eq!(r.sent_bytes, 2_500_000);
        assert_eq!(r.received_bytes, 2_400_000);
        assert_eq!(r.retransmits, Some(4));
        assert_eq!(r.lost_packets, None);
        assert!((r.goodput_bps() - 9.6e6).abs() < 1.0);
    }

    #[test]
    fn udp_report_without_server_output_falls_back_to_the_client() {
        let r = parse_report(UDP).unwrap();
        assert_eq!(r.protocol, "UDP");
        assert!(!r.from_server);
        assert_eq!(r.intervals.len(), 2);
        assert_eq!(r.received_bytes, 1_443_420);
        // 1000 sent, 1 443 420 / 1458 = 990 received.
        assert_eq!(r.lost_packets, Some(10));
        assert_eq!(r.packets, Some(1000));
        assert_eq!(r.retransmits, None);
    }

    #[test]
    fn errors_are_typed() {
        assert!(matches!(
            parse_report(r#"{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server"}"#),
            Err(IperfError::Failed(m)) if m.contains("connect")
        ));
        assert!(matches!(parse_report(""), Err(IperfError::NotJson(_))));
        assert!(matches!(
            parse_report(r#"{"start": {}}"#),
            Err(IperfError::Missing("end"))
        ));
        assert!(matches!(
            parse_report(r#"{"end": {"sum_sent": {}}}"#),
            Err(IperfError::Missing(_))
        ));
    }

    #[test]
    fn implausible_udp_loss_counts_are_replaced() {
        // The receiver's count taken from a bogus first sequence number; no blksize to
        // recompute it from: dropped rather than reported.
        let t = UDP
            .replace(r#""lost_packets": 10}"#, r#""lost_packets": 1218778257}"#)
            .replace(r#", "blksize": 1458"#, "");
        let r = parse_report(&t).unwrap();
        assert_eq!(r.lost_packets, Some(10), "{r:?}");
        let t = t.replace(r#""lost_packets": 10,"#, r#""lost_packets": 1218778257,"#);
        assert_eq!(parse_report(&t).unwrap().lost_packets, None);
    }

    #[test]
    fn omitted_intervals_are_left_out() {
        let t = TCP.replacen(
            r#""omitted": false, "sender": false"#,
            r#""omitted": true"#,
            1,
        );
        let r = parse_report(&t).unwrap();
        assert_eq!(r.intervals.len(), 2);
        assert_eq!(r.intervals[0].0, 0.5);
    }

    #[test]
    fn udp_rate_is_converted_from_wire_to_payload() {
        let (app, len) = udp_app_rate(1e8, 1500);
        assert_eq!(len, 1458);
        assert!((app - 1e8 * 1458.0 / 1500.0).abs() < 1.0);
        // Larger frames than the TAP carries: the payload is capped.
        let (_, len) = udp_app_rate(1e8, 9000);
        assert_eq!(len, UDP_MAX_PAYLOAD);
    }
}

//! `--metrics ADDR`: Prometheus text exposition over plain HTTP.
//!
//! A listener thread answers every `GET` with the current statistics, asked from the dataplane
//! through the same request channel as the control socket. Metric names are derived from the
//! `stats --json` keys, so every counter added to the stats appears here too:
//! `cpswitch_port_<key>{port="p1"}`, `cpswitch_queue_<key>{port,priority,kind}` and
//! `cpswitch_cp_<key>{id,port,priority,placement}` (congestion points: samples, CNMs, qlen,
//! culprits, flows tracked, rate-feedback messages, advertised rate, ...). Counters (`*_frames`, `*_bytes`,
//! `drops`, `pause_*`, ...) get the `_total` suffix and `# TYPE counter`; levels are gauges.
//! Off by default; loopback only unless `--metrics-allow-remote`.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread::JoinHandle;

use serde_json::Value;

use super::ctl::{ask, Command, Request};

/// The metrics listener thread; dropping it stops the thread.
#[derive(Debug)]
pub struct MetricsServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` and starts serving. A non-loopback address is refused unless
    /// `allow_remote`.
    pub fn start(
        addr: SocketAddr,
        allow_remote: bool,
        tx: SyncSender<Request>,
    ) -> std::io::Result<MetricsServer> {
        if !addr.ip().is_loopback() && !allow_remote {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("metrics address {addr} is not loopback (add --metrics-allow-remote)"),
            ));
        }
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            let _ = serve_one(s, &tx, &stop2);
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                    }
                }
            })?;
        Ok(MetricsServer {
            stop,
            thread: Some(thread),
            addr,
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_one(s: TcpStream, tx: &SyncSender<Request>, stop: &AtomicBool) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
    let mut reader = BufReader::new(s.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Skip the headers (bounded).
    for _ in 0..100 {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    let mut w = s;
    if !request_line.starts_with("GET ") {
        w.write_all(b"HTTP/1.0 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")?;
        return Ok(());
    }
    let (status, body) = match ask(tx, Command::Stats, stop) {
        Ok(stats) => ("200 OK", render(&stats)),
        Err(e) => ("503 Service Unavailable", format!("# {e}\n")),
    };
    write!(
        w,
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn is_counter(key: &str) -> bool {
    key.ends_with("frames")
        || key.ends_with("bytes") && !key.contains("max") && key != "bytes"
        || key.contains("drops")
        || key.starts_with("pause_")
        || key.starts_with("cnm_")
        || key == "samples"
        || key.starts_with("rate_fb_")
        || key == "culprits"
        || key == "culprit_fallbacks"
        || key == "flow_overflow"
}

/// Renders a `stats --json` object as Prometheus text.
pub fn render(stats: &Value) -> String {
    let mut out = String::new();
    let groups = [
        ("ports", "port", &["name"][..]),
        ("queues", "queue", &["port", "priority", "kind"][..]),
        ("cps", "cp", &["id", "port", "priority", "placement"][..]),
    ];
    for (key, prefix, label_keys) in groups {
        let Some(rows) = stats[key].as_array() else {
            continue;
        };
        let mut metrics: Vec<(String, Vec<String>)> = Vec::new();
        for row in rows {
            let Some(obj) = row.as_object() else { continue };
            let labels: Vec<String> = label_keys
                .iter()
                .filter_map(|k| {
                    let v = obj.get(*k)?;
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let name = if *k == "name" { "port" } else { k };
                    Some(format!("{name}=\"{}\"", escape(&text)))
                })
                .collect();
            for (k, v) in obj {
                if label_keys.contains(&k.as_str()) {
                    continue;
                }
                let Some(n) = v.as_f64() else { continue };
                let counter = is_counter(k);
                let name = format!(
                    "cpswitch_{prefix}_{}{}",
                    sanitize(k),
                    if counter { "_total" } else { "" }
                );
                let line = format!("{name}{{{}}} {n}", labels.join(","));
                match metrics.iter_mut().find(|(m, _)| *m == name) {
                    Some((_, lines)) => lines.push(line),
                    None => metrics.push((name, vec![line])),
                }
            }
        }
        for (name, lines) in metrics {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            for l in lines {
                out.push_str(&l);
                out.push('\n');
            }
        }
    }
    out
}

fn sanitize(k: &str) -> String {
    k.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_ports_and_queues() {
        let text = render(&json!({
            "ports": [{"name": "p1", "rx_frames": 3, "tx_bytes": 100, "up": true}],
            "queues": [{"port": "p1", "priority": 3, "kind": "output", "bytes": 10, "max_bytes": 150000, "drops": 2}]
        }));
        assert!(text.contains("# TYPE cpswitch_port_rx_frames_total counter\n"));
        assert!(text.contains("cpswitch_port_rx_frames_total{port=\"p1\"} 3\n"));
        assert!(
            text.contains("cpswitch_queue_bytes{port=\"p1\",priority=\"3\",kind=\"output\"} 10\n")
        );
        assert!(text.contains("# TYPE cpswitch_queue_max_bytes gauge"));
        assert!(text.contains("cpswitch_queue_drops_total{"));
    }

    #[test]
    fn renders_congestion_points() {
        let text = render(&json!({
            "cps": [{"id": "0200000000100013", "port": "p2", "priority": 3,
                     "placement": "output", "samples": 7, "cnm_tx": 5, "qlen": 30000,
                     "qeq": 26000, "last_fb": -1200, "cnm_per_dst": [{"mac": "02:00:00:00:00:01", "cnms": 5}]}]
        }));
        let labels = "{id=\"0200000000100013\",port=\"p2\",priority=\"3\",placement=\"output\"}";
        assert!(
            text.contains(&format!("cpswitch_cp_samples_total{labels} 7\n")),
            "{text}"
        );
        assert!(text.contains(&format!("cpswitch_cp_cnm_tx_total{labels} 5\n")));
        assert!(text.contains(&format!("cpswitch_cp_qlen{labels} 30000\n")));
        assert!(text.contains(&format!("cpswitch_cp_last_fb{labels} -1200\n")));
        assert!(text.contains("# TYPE cpswitch_cp_qeq gauge"));
        assert!(!text.contains("cnm_per_dst"));
    }

    #[test]
    fn refuses_remote_without_flag() {
        let (tx, _rx) = super::super::ctl::channel();
        let e = MetricsServer::start("0.0.0.0:0".parse().unwrap(), false, tx).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    }
}

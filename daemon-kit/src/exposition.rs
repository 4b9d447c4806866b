//! Building one Prometheus exposition from a statistics snapshot.
//!
//! Both daemons keep their counters inside the dataplane thread and hand out snapshots (the
//! `stats` answer of the control socket). A scrape therefore does not update long-lived metric
//! objects: it takes one snapshot and turns it into metric families, in the way Prometheus calls
//! "const metrics" for exporters. [`Exposition`] is that step: every call adds one sample to a
//! family (created with its HELP text and type on first use) and [`Exposition::render`] encodes
//! them with the `prometheus` crate's text encoder in the classic text format
//! (`text/plain; version=0.0.4`), which every Prometheus server, `promtool check metrics` and
//! `curl` read.
//!
//! Naming follows the Prometheus conventions, which `promtool check metrics` enforces: counters
//! end in `_total`, values carry their base unit as a suffix (`_bytes`, `_seconds`) and every
//! family has HELP text. The callers pass full names; a family used once as a counter and once as
//! a gauge, or with two label sets, is a programming error reported by `render`.

use std::collections::HashMap;

use prometheus::{GaugeVec, IntCounterVec, Opts, Registry, TextEncoder};

/// The content type of [`Exposition::render`]'s text.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// The metric families of one scrape.
#[derive(Default)]
pub struct Exposition {
    registry: Registry,
    counters: HashMap<String, IntCounterVec>,
    gauges: HashMap<String, GaugeVec>,
    errors: Vec<String>,
}

impl std::fmt::Debug for Exposition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exposition")
            .field("counters", &self.counters.len())
            .field("gauges", &self.gauges.len())
            .field("errors", &self.errors)
            .finish()
    }
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Adds a counter sample: `name` must end in `_total`.
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        if !name.ends_with("_total") {
            self.errors
                .push(format!("counter {name} does not end in _total"));
            return;
        }
        let fam = match self.counters.get(name) {
            Some(f) => f.clone(),
            None => {
                let names: Vec<&str> = labels.iter().map(|(k, _)| *k).collect();
                let made = IntCounterVec::new(Opts::new(name, help), &names)
                    .and_then(|f| self.registry.register(Box::new(f.clone())).map(|()| f));
                match made {
                    Ok(f) => {
                        self.counters.insert(name.to_string(), f.clone());
                        f
                    }
                    Err(e) => {
                        self.errors.push(format!("{name}: {e}"));
                        return;
                    }
                }
            }
        };
        let values: Vec<&str> = labels.iter().map(|(_, v)| *v).collect();
        match fam.get_metric_with_label_values(&values) {
            Ok(c) => c.inc_by(value),
            Err(e) => self.errors.push(format!("{name}: {e}")),
        }
    }

    /// Adds a gauge sample.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        let fam = match self.gauges.get(name) {
            Some(f) => f.clone(),
            None => {
                let names: Vec<&str> = labels.iter().map(|(k, _)| *k).collect();
                let made = GaugeVec::new(Opts::new(name, help), &names)
                    .and_then(|f| self.registry.register(Box::new(f.clone())).map(|()| f));
                match made {
                    Ok(f) => {
                        self.gauges.insert(name.to_string(), f.clone());
                        f
                    }
                    Err(e) => {
                        self.errors.push(format!("{name}: {e}"));
                        return;
                    }
                }
            }
        };
        let values: Vec<&str> = labels.iter().map(|(_, v)| *v).collect();
        match fam.get_metric_with_label_values(&values) {
            Ok(g) => g.set(value),
            Err(e) => self.errors.push(format!("{name}: {e}")),
        }
    }

    /// The text exposition, or the first misuse of a family.
    pub fn render(&self) -> Result<String, String> {
        if let Some(e) = self.errors.first() {
            return Err(format!("metrics: {e}"));
        }
        let mut out = String::new();
        TextEncoder::new()
            .encode_utf8(&self.registry.gather(), &mut out)
            .map_err(|e| format!("metrics: {e}"))?;
        Ok(out)
    }
}

/// Lints `text` with `promtool check metrics` (the linter of the Prometheus project): `None` when
/// promtool is not installed, `Some(Ok(()))` when it finds nothing, `Some(Err(problems))`
/// otherwise. For the daemons' tests.
pub fn promtool_check(text: &str) -> Option<Result<(), String>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let written = child.stdin.take().map(|mut i| i.write_all(text.as_bytes()));
    let out = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => return Some(Err(format!("promtool: {e}"))),
    };
    if let Some(Err(e)) = written {
        return Some(Err(format!("promtool stdin: {e}")));
    }
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && said.trim().is_empty() {
        Some(Ok(()))
    } else {
        Some(Err(format!(
            "promtool check metrics ({}): {said}",
            out.status
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_gauges_with_help_and_type() {
        let mut e = Exposition::new();
        e.counter("x_frames_total", "Frames.", &[("port", "p1")], 3);
        e.counter("x_frames_total", "Frames.", &[("port", "p2")], 4);
        e.gauge("x_queue_bytes", "Queued octets.", &[], 1500.0);
        let text = e.render().unwrap();
        assert!(text.contains("# HELP x_frames_total Frames.\n# TYPE x_frames_total counter\n"));
        assert!(text.contains("x_frames_total{port=\"p1\"} 3\n"));
        assert!(text.contains("x_frames_total{port=\"p2\"} 4\n"));
        assert!(text.contains("# TYPE x_queue_bytes gauge\nx_queue_bytes 1500\n"));
    }

    #[test]
    fn promtool_accepts_the_encoding() {
        let mut e = Exposition::new();
        e.counter("x_frames_total", "Frames.", &[("port", "p1")], 3);
        e.gauge("x_queue_bytes", "Queued octets.", &[("port", "p1")], 1500.0);
        match promtool_check(&e.render().unwrap()) {
            None => eprintln!("skipped: promtool not installed (scripts/install-deps.sh)"),
            Some(r) => r.unwrap(),
        }
        // The linter does find problems: no HELP text.
        if let Some(r) = promtool_check("# TYPE y gauge\ny 1\n") {
            assert!(r.unwrap_err().contains("no help text"));
        }
    }

    #[test]
    fn misuse_is_an_error_not_a_panic() {
        let mut e = Exposition::new();
        e.counter("x_frames", "no suffix", &[], 1);
        assert!(e.render().unwrap_err().contains("_total"));
        let mut e = Exposition::new();
        e.gauge("x", "a", &[("port", "p1")], 1.0);
        e.gauge("x", "a", &[("port", "p1"), ("priority", "3")], 1.0);
        assert!(e.render().is_err());
        let mut e = Exposition::new();
        e.gauge("x y", "bad name", &[], 1.0);
        assert!(e.render().is_err());
    }

    #[test]
    fn label_values_are_escaped() {
        let mut e = Exposition::new();
        e.gauge("x", "a", &[("port", "a\"b\\c\nd")], 1.0);
        let text = e.render().unwrap();
        assert!(text.contains(r#"x{port="a\"b\\c\nd"} 1"#), "{text}");
    }
}

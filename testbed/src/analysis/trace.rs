//! Tolerant reader of the daemons' and the simulator's JSON-lines traces.
//!
//! Each line is one JSON object, a [`daemon_kit::trace_record::TraceRecord`] (the type every
//! writer uses). Two types feed the run data:
//! - `{"type":"queues","t":<ns>,"node":"sw0"?,"queues":[{"port","priority","kind","bytes"}]}`:
//!   occupancy of the queues that are non-empty or just emptied (idle queues are left out, so a
//!   queue missing from a line keeps its last value);
//! - `{"type":"event","event":"drop"|"pause_tx"|"cnm"|...,"at":<ns>,"port"?,"priority"?,...}`.
//!
//! Times are nanoseconds on the writer's clock (`CLOCK_MONOTONIC` for the daemons, virtual
//! time for the simulator), turned into seconds since [`TraceOptions::t0_ns`];
//! [`super::model::TraceClock`] relates them to the captures' clock.
//!
//! Anything else is tolerated: unknown types and fields are ignored, lines that are not JSON
//! objects or lack a time are counted as bad, a truncated last line (a daemon killed while
//! writing) is just one bad line. The reader never panics on input.

use std::io::BufRead;

use daemon_kit::trace_record::{EventFields, TraceRecord};
use serde::Deserialize;
use serde_json::Value;

use super::model::{Event, QueueSeries, RunData};

/// Counters of what the reader saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Lines read (blank lines included).
    pub lines: u64,
    /// Lines turned into samples or events.
    pub used: u64,
    /// Valid JSON objects of a type the reader does not know.
    pub ignored: u64,
    /// Lines that could not be read.
    pub bad_lines: u64,
    /// First bad line: number (from 1) and why.
    pub first_bad: Option<(u64, String)>,
}

impl ReadStats {
    fn bad(&mut self, line: u64, why: impl Into<String>) {
        self.bad_lines += 1;
        if self.first_bad.is_none() {
            self.first_bad = Some((line, why.into()));
        }
    }
}

/// What one trace file held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceData {
    /// Name of the source (file name), for warnings.
    pub source: String,
    /// Queue series found.
    pub queues: Vec<QueueSeries>,
    /// Events found, in file order.
    pub events: Vec<Event>,
    /// Counters.
    pub stats: ReadStats,
}

/// How to read a trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// Node name for lines that carry none (a daemon's trace of its own queues).
    pub node: Option<String>,
    /// Timestamp (ns, same clock as the trace) of the start of the run; times before it are
    /// clamped to 0.
    pub t0_ns: u64,
}

/// Reads a whole trace. I/O errors end the reading and are reported as one bad line.
pub fn read_trace<R: BufRead>(reader: R, source: &str, opts: &TraceOptions) -> TraceData {
    let mut out = TraceData {
        source: source.to_string(),
        ..TraceData::default()
    };
    let secs = |ns: u64| ns.saturating_sub(opts.t0_ns) as f64 / 1e9;
    for (i, line) in reader.lines().enumerate() {
        let n = i as u64 + 1;
        out.stats.lines += 1;
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                out.stats.bad(n, format!("read error: {e}"));
                break;
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                out.stats.bad(n, format!("not JSON: {e}"));
                continue;
            }
        };
        let Some(obj) = v.as_object() else {
            out.stats.bad(n, "not a JSON object");
            continue;
        };
        // The records the run data is made of; parameter changes (`cp_config`, `rp_config`)
        // are in the run's own records, and unknown types are tolerated.
        let known = obj
            .get("type")
            .and_then(|t| t.as_str())
            .is_some_and(|t| t == "queues" || t == "event");
        if !known {
            out.stats.ignored += 1;
            continue;
        }
        let rec = match TraceRecord::<EventFields>::deserialize(&v) {
            Ok(r) => r,
            Err(e) => {
                out.stats.bad(n, format!("{e}"));
                continue;
            }
        };
        match rec {
            TraceRecord::Queues(q) => {
                let node = q.node.or_else(|| opts.node.clone());
                let t_s = secs(q.t);
                for e in q.queues {
                    let key = QueueSeries::key(node.as_deref(), &e.port, e.priority, &e.kind);
                    let idx = match out.queues.iter().position(|s| s.name == key) {
                        Some(i) => i,
                        None => {
                            out.queues.push(QueueSeries::new(
                                node.as_deref(),
                                &e.port,
                                e.priority,
                                &e.kind,
                            ));
                            out.queues.len() - 1
                        }
                    };
                    out.queues[idx].push(t_s, e.bytes);
                }
                out.stats.used += 1;
            }
            TraceRecord::Event(ev) => {
                let Some(t) = ev.event.time() else {
                    out.stats.bad(n, "event line without a time `at`");
                    continue;
                };
                out.events.push(Event {
                    t_s: secs(t),
                    node: ev.node.or_else(|| opts.node.clone()),
                    kind: ev.event.event,
                    port: ev.event.port,
                    priority: ev.event.priority,
                    flow: ev.event.flow,
                    fields: v,
                });
                out.stats.used += 1;
            }
            TraceRecord::CpConfig(_) | TraceRecord::RpConfig(_) => out.stats.ignored += 1,
        }
    }
    for q in &mut out.queues {
        q.samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Reads a trace file; a missing or unreadable file gives an empty trace with one bad line.
pub fn read_trace_file(path: &std::path::Path, opts: &TraceOptions) -> TraceData {
    let source = path.display().to_string();
    match std::fs::File::open(path) {
        Ok(f) => read_trace(std::io::BufReader::new(f), &source, opts),
        Err(e) => {
            let mut d = TraceData {
                source,
                ..TraceData::default()
            };
            d.stats.bad(0, format!("cannot open: {e}"));
            d
        }
    }
}

impl RunData {
    /// Merges what a trace reader produced: queues are merged by key, events appended (CNM
    /// events are attributed to flows at analysis time, see
    /// [`crate::analysis::metrics::attribute_cnms`]).
    pub fn absorb(&mut self, trace: TraceData) {
        for q in trace.queues {
            let dst = self.queue_mut(q.node.as_deref(), &q.port, q.priority, &q.kind);
            dst.samples.extend(q.samples);
            dst.samples.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        self.events.extend(trace.events);
        self.events.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        if trace.stats.bad_lines > 0 {
            self.warnings.push(format!(
                "trace {}: {} of {} lines unreadable{}",
                trace.source,
                trace.stats.bad_lines,
                trace.stats.lines,
                trace
                    .stats
                    .first_bad
                    .as_ref()
                    .map(|(n, e)| format!(" (first at line {n}: {e})"))
                    .unwrap_or_default()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_queues_and_events() {
        let text = r#"{"type":"queues","t":2000000000,"queues":[{"port":"eth1","priority":3,"kind":"output","bytes":1500}]}
{"type":"event","event":"drop","at":2500000000,"port":1,"priority":3,"reason":"output_full"}
"#;
        let d = read_trace(
            text.as_bytes(),
            "x",
            &TraceOptions {
                node: Some("sw0".into()),
                t0_ns: 1_000_000_000,
            },
        );
        assert_eq!(d.queues.len(), 1);
        assert_eq!(d.queues[0].name, "sw0/eth1/p3/output");
        assert_eq!(d.queues[0].samples, vec![(1.0, 1500)]);
        assert_eq!(d.events[0].port.as_deref(), Some("1"));
        assert_eq!(d.events[0].str_field("reason"), Some("output_full"));
        assert!((d.events[0].t_s - 1.5).abs() < 1e-9);
        assert_eq!(d.stats.bad_lines, 0);
    }
}

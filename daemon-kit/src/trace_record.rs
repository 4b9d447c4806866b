//! The trace record: one type for every line of a `--trace` file.
//!
//! Three writers produce traces — the `cp-switch` daemon, the `rp-agent` daemon and the
//! testbed's simulator — and one reader consumes them (the testbed's analysis). They all go
//! through [`TraceRecord`], so a line the simulator writes is by construction a line the
//! analysis can read, and a daemon's line has the simulator's shape for the same event.
//!
//! # The lines
//! One JSON object per line, told apart by `"type"`:
//!
//! | `type` | fields | written by |
//! |---|---|---|
//! | `queues` | `t` (ns), `node`?, `queues: [{port, priority, kind, bytes}]` | switch, simulator |
//! | `event` | `event` (its name), `at` (ns), `node`?, the event's own fields | all three |
//! | `cp_config` | `t`, `node`?, `set`, `change` or `error` | switch, simulator |
//! | `rp_config` | `t`, `node`?, `set`, `change` or `error` | simulator |
//!
//! # Time
//! Every time is an integer count of **nanoseconds**: `t` in `queues`, `cp_config` and
//! `rp_config` lines, `at` in `event` lines (the cores' event types carry `at`; the other
//! records are written by the writers and say `t`). The daemons read `CLOCK_MONOTONIC`
//! (`cnm_proto::phy::clock`: time since boot, never stepped, unrelated to the wall clock); the
//! simulator writes its virtual time, from 0. Packet captures are stamped with `CLOCK_REALTIME`
//! (seconds since the Unix epoch): pcap time = trace time + (`CLOCK_REALTIME −
//! CLOCK_MONOTONIC`), an offset the testbed records in a run's `summary.json` (`trace_clock`)
//! when the run starts.
//!
//! `node` names the writer's node in a multi-node trace (the simulator); a daemon's trace is
//! its own node's and leaves it out. A `queues` line lists only the queues that are not empty
//! or just emptied ([`QueueTracker`]): a queue missing from a line keeps its last value.
//!
//! # One type, two ends
//! The event body is generic: a writer puts its core's own event type in ([`TraceRecord<E>`]
//! with `E` = `cp_switch::Event`, `rp_agent::Event`, ...; they serialize with an `event`
//! tag and an `at` time), and the reader takes it out as [`EventFields`], the fields every
//! event shares. The reader is lenient where the writers have differed or may differ: a time
//! may be a float or a numeric string, a port a number or a name, a queue entry it cannot read
//! is skipped rather than spoiling the line.
//!
//! # Bytes on disk
//! [`TraceRecord::to_line`] writes every object with its keys sorted, the bytes a
//! `serde_json::Value` (whose objects are `BTreeMap`s) prints: the lines are byte for byte what
//! the writers produced before this type existed (the simulator's cross-check compares them),
//! and a line does not depend on the order fields are declared in. It writes them without
//! building the `Value` (`sorted_json`, which leaves the few shapes a `Value` would alter to
//! the `Value` path).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// One line of a trace. `E` is the event body: a core's event type when writing,
/// [`EventFields`] when reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceRecord<E = EventFields> {
    /// Queue occupancy.
    Queues(Queues),
    /// Something that happened.
    Event(Tagged<E>),
    /// A congestion-point parameter change.
    CpConfig(ConfigChange),
    /// A reaction-point parameter change.
    RpConfig(ConfigChange),
}

/// The `type` names [`TraceRecord`] knows.
pub const TYPES: [&str; 4] = ["queues", "event", "cp_config", "rp_config"];

impl<E: Serialize> TraceRecord<E> {
    /// The record as one JSON line (no newline), keys sorted (see the module documentation).
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        match crate::sorted_json::to_string(self) {
            Some(line) => Ok(line),
            None => serde_json::to_value(self).map(|v| v.to_string()),
        }
    }

    /// An event of `node` (`None` in a daemon's own trace).
    pub fn event(node: Option<&str>, event: E) -> TraceRecord<E> {
        TraceRecord::Event(Tagged {
            node: node.map(str::to_string),
            event,
        })
    }
}

/// A `queues` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Queues {
    /// When (ns; `CLOCK_MONOTONIC` in a daemon, virtual time in the simulator; see the module
    /// documentation).
    #[serde(deserialize_with = "lenient::nanos")]
    pub t: u64,
    /// Node, in a multi-node trace.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub node: Option<String>,
    /// The queues that are not empty or just emptied.
    #[serde(deserialize_with = "lenient::queue_entries")]
    pub queues: Vec<QueueEntry>,
}

/// One queue of a `queues` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// Port name (a number in some writers' lines).
    #[serde(deserialize_with = "lenient::port")]
    pub port: String,
    /// Priority 0..=7 (larger values read as 7; default 0).
    #[serde(default, deserialize_with = "lenient::priority")]
    pub priority: u8,
    /// `input` or `output` (default `output`).
    #[serde(default = "output")]
    pub kind: String,
    /// Occupancy (octets).
    pub bytes: u64,
}

fn output() -> String {
    "output".into()
}

/// Which queues a `queues` line lists: the ones not empty now, and the ones that just emptied
/// (written once at zero). Idle queues that stay idle are left out, which keeps an idle
/// switch's trace small.
#[derive(Debug, Clone, Default)]
pub struct QueueTracker {
    last: Vec<u64>,
}

impl QueueTracker {
    /// The `queues` line for the occupancies now (every queue of the node, always in the same
    /// order), or `None` when every queue is and was empty.
    pub fn line(
        &mut self,
        t: u64,
        node: Option<&str>,
        queues: impl ExactSizeIterator<Item = QueueEntry>,
    ) -> Option<Queues> {
        self.last.resize(queues.len(), 0);
        let mut listed = Vec::new();
        for (q, prev) in queues.zip(self.last.iter_mut()) {
            if q.bytes != 0 || *prev != 0 {
                *prev = q.bytes;
                listed.push(q);
            } else {
                *prev = q.bytes;
            }
        }
        (!listed.is_empty()).then(|| Queues {
            t,
            node: node.map(str::to_string),
            queues: listed,
        })
    }

    /// [`QueueTracker::line`] for `n` queues read on demand: `bytes(k)` is the occupancy of
    /// queue `k` and `entry(k, bytes)` builds its entry, called only for the queues the line
    /// lists (a busy switch has most of its queues idle: their entries are never built).
    pub fn line_by(
        &mut self,
        t: u64,
        node: Option<&str>,
        n: usize,
        mut bytes: impl FnMut(usize) -> u64,
        mut entry: impl FnMut(usize, u64) -> QueueEntry,
    ) -> Option<Queues> {
        self.last.resize(n, 0);
        let mut listed = Vec::new();
        for (k, prev) in self.last.iter_mut().enumerate() {
            let b = bytes(k);
            if b != 0 || *prev != 0 {
                listed.push(entry(k, b));
            }
            *prev = b;
        }
        (!listed.is_empty()).then(|| Queues {
            t,
            node: node.map(str::to_string),
            queues: listed,
        })
    }
}

/// An event line: the node (in a multi-node trace) and the event's own fields beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tagged<E> {
    /// Node, in a multi-node trace.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub node: Option<String>,
    /// The event (serialized as a map with an `event` name and an `at` time).
    #[serde(flatten)]
    pub event: E,
}

/// What a reader takes from any event line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventFields {
    /// Event name: `drop`, `pause_tx`, `cnm`, `rate_feedback`, `rate_change`, ...
    pub event: String,
    /// When (ns, the writer's clock: see the module documentation). Some writers said `t`;
    /// see [`EventFields::time`].
    #[serde(default, deserialize_with = "lenient::opt_nanos")]
    pub at: Option<u64>,
    /// When, in lines that say `t` instead of `at`.
    #[serde(default, deserialize_with = "lenient::opt_nanos")]
    pub t: Option<u64>,
    /// Port (a number or a name), when the event has one.
    #[serde(default, deserialize_with = "lenient::opt_port")]
    pub port: Option<String>,
    /// Priority (larger values read as 7), when the event has one.
    #[serde(default, deserialize_with = "lenient::opt_priority")]
    pub priority: Option<u8>,
    /// Flow name, when it is a string (reaction-point events number their flows instead).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub flow: Option<String>,
}

impl EventFields {
    /// When the event happened (ns): `at`, else `t`.
    pub fn time(&self) -> Option<u64> {
        self.at.or(self.t)
    }
}

/// A `cp_config` / `rp_config` line: a parameter change and its outcome. `set` and `change`
/// are the cores' own types (`CpPatch`/`RpPatch` or the operands as typed, `CpChange`/
/// `RpChange`) as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigChange {
    /// When (ns, the writer's clock: see the module documentation).
    #[serde(deserialize_with = "lenient::nanos")]
    pub t: u64,
    /// Node, in a multi-node trace.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::opt_string"
    )]
    pub node: Option<String>,
    /// What was asked.
    pub set: Value,
    /// What happened, when the change was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Value>,
    /// Why not, when it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Deserializers that accept what the writers have written over time and never fail on a
/// value of another kind where the reader can do without it.
mod lenient {
    use super::{Deserialize, Deserializer, QueueEntry, Value};
    use serde::de::Error;

    fn nanos_of(v: &Value) -> Option<u64> {
        match v {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| *f >= 0.0 && f.is_finite())
                    .map(|f| f as u64)
            }),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        }
    }

    fn port_of(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    fn priority_of(v: &Value) -> Option<u8> {
        v.as_u64().map(|p| p.min(7) as u8)
    }

    /// A time in nanoseconds: an integer, a non-negative float or a numeric string.
    pub fn nanos<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let v = Value::deserialize(d)?;
        nanos_of(&v).ok_or_else(|| D::Error::custom(format!("not a time in ns: {v}")))
    }

    pub fn opt_nanos<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Ok(nanos_of(&Value::deserialize(d)?))
    }

    pub fn port<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let v = Value::deserialize(d)?;
        port_of(&v).ok_or_else(|| D::Error::custom(format!("not a port: {v}")))
    }

    pub fn opt_port<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(port_of(&Value::deserialize(d)?))
    }

    pub fn priority<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
        Ok(priority_of(&Value::deserialize(d)?).unwrap_or(0))
    }

    pub fn opt_priority<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
        Ok(priority_of(&Value::deserialize(d)?))
    }

    pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(Value::deserialize(d)?.as_str().map(str::to_string))
    }

    /// The entries that read as queues; the others are left out.
    pub fn queue_entries<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<QueueEntry>, D::Error> {
        let v = Vec::<Value>::deserialize(d)?;
        Ok(v.into_iter()
            .filter_map(|q| QueueEntry::deserialize(q).ok())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize)]
    #[serde(tag = "event", rename_all = "snake_case")]
    enum Ev {
        Drop {
            at: u64,
            port: u16,
            priority: Option<u8>,
        },
    }

    #[test]
    fn lines_have_sorted_keys_and_read_back() {
        let rec = TraceRecord::event(
            Some("sw0"),
            Ev::Drop {
                at: 5,
                port: 1,
                priority: None,
            },
        );
        let line = rec.to_line().unwrap();
        assert_eq!(
            line,
            r#"{"at":5,"event":"drop","node":"sw0","port":1,"priority":null,"type":"event"}"#
        );
        let back: TraceRecord = serde_json::from_str(&line).unwrap();
        let TraceRecord::Event(t) = back else {
            panic!("{back:?}")
        };
        assert_eq!(t.node.as_deref(), Some("sw0"));
        assert_eq!(t.event.event, "drop");
        assert_eq!(t.event.time(), Some(5));
        assert_eq!(t.event.port.as_deref(), Some("1"));
        assert_eq!(t.event.priority, None);
    }

    #[test]
    fn a_daemon_line_has_no_node() {
        let q = QueueEntry {
            port: "eth1".into(),
            priority: 3,
            kind: "output".into(),
            bytes: 1500,
        };
        let rec: TraceRecord<Value> = TraceRecord::Queues(Queues {
            t: 7,
            node: None,
            queues: vec![q],
        });
        assert_eq!(
            rec.to_line().unwrap(),
            r#"{"queues":[{"bytes":1500,"kind":"output","port":"eth1","priority":3}],"t":7,"type":"queues"}"#
        );
        let rec: TraceRecord<Value> = TraceRecord::CpConfig(ConfigChange {
            t: 9,
            node: None,
            set: json!({"cp_feedback_weight": "4"}),
            change: Some(json!("in-place")),
            error: None,
        });
        assert_eq!(
            rec.to_line().unwrap(),
            r#"{"change":"in-place","set":{"cp_feedback_weight":"4"},"t":9,"type":"cp_config"}"#
        );
    }

    #[test]
    fn the_reader_is_lenient_where_writers_differ() {
        let line = r#"{"type":"queues","t":"2000","queues":[{"port":null,"bytes":"x"},{"port":7,"priority":99,"bytes":5}]}"#;
        let TraceRecord::Queues(q) = serde_json::from_str::<TraceRecord>(line).unwrap() else {
            panic!()
        };
        assert_eq!(q.t, 2000);
        assert_eq!(
            q.queues,
            vec![QueueEntry {
                port: "7".into(),
                priority: 7,
                kind: "output".into(),
                bytes: 5
            }]
        );
        let line = r#"{"type":"event","event":"drop","t":1.5e9,"flow":3}"#;
        let TraceRecord::Event(e) = serde_json::from_str::<TraceRecord>(line).unwrap() else {
            panic!()
        };
        assert_eq!(e.event.time(), Some(1_500_000_000));
        assert_eq!(e.event.flow, None);
        assert!(serde_json::from_str::<TraceRecord>(r#"{"type":"queues","t":"soon"}"#).is_err());
        assert!(serde_json::from_str::<TraceRecord>(r#"{"type":"event","at":5}"#).is_err());
    }

    #[test]
    fn the_tracker_lists_busy_queues_and_the_ones_that_just_emptied() {
        let q = |port: &str, bytes| QueueEntry {
            port: port.into(),
            priority: 0,
            kind: "output".into(),
            bytes,
        };
        let mut tr = QueueTracker::default();
        assert_eq!(tr.line(1, None, [q("a", 0), q("b", 0)].into_iter()), None);
        let l = tr.line(2, Some("sw"), [q("a", 10), q("b", 0)].into_iter());
        assert_eq!(l.unwrap().queues, vec![q("a", 10)]);
        let l = tr.line(3, None, [q("a", 0), q("b", 4)].into_iter());
        assert_eq!(l.unwrap().queues, vec![q("a", 0), q("b", 4)]);
        let l = tr.line(4, None, [q("a", 0), q("b", 0)].into_iter());
        assert_eq!(l.unwrap().queues, vec![q("b", 0)]);
        assert_eq!(tr.line(5, None, [q("a", 0), q("b", 0)].into_iter()), None);
    }
}

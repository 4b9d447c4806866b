//! Scenarios of `testbed run`: a simulator topology file plus an optional `[scenario]` table.
//!
//! The same file runs in both worlds. Everything except `[scenario]` is the topology format of
//! [`crate::sim::topo`] (nodes, links, bridge and agent settings, flows, events, incasts) and is
//! handed to it unchanged; `[scenario]` says how to run and judge the experiment:
//!
//! ```toml
//! [scenario]
//! name = "dumbbell"                 # default: the file stem
//! description = "4 flows, capacity step"
//! window = ["1s", "2s"]             # steady-state window (simulated time; default: 2nd half)
//! bottleneck = "sw0-r0"             # default: [output] bottleneck
//! fair_share = { f0 = "2.5gbit" }   # default: weighted max-min shares, computed
//! scale = 100                       # time scale S of netns mode (QCN-REFERENCE §5)
//!
//! [scenario.netns]                  # netns mode only; every key optional
//! duration = "30s"                  # wall-clock length (default: duration × scale)
//! hosts = "one-process"             # generators and sinks: one-process | per-process
//! ```
//!
//! # Time scaling (netns mode)
//! QCN-REFERENCE §5: the QCN loop is unchanged when every rate is divided by S, every time of
//! the loop (link delays, the RP timer `rpg_time_reset`, PAUSE quanta via the nominal rate)
//! multiplied by S and every byte quantity kept (buffers, Qeq, sampling base, byte counter).
//! The experiment's *schedule* — the run's length, flow start and stop times, link-rate events
//! and the steady-state window — is stretched by the same factor, unless
//! `[scenario.netns] duration` asks for a shorter run: then the whole schedule is compressed
//! proportionally (the loop's own times stay × S).
//!
//! # Overrides (`--set KEY=VALUE`)
//! `KEY` is a dotted path into the file's TOML tree; `VALUE` is read as a TOML value when it
//! parses as one (`2`, `true`, `[3, 5]`, `"x"`) and as a string otherwise (`50mbit`, `2s`):
//!
//! | path | meaning |
//! |---|---|
//! | `duration=2s` | a top-level key |
//! | `link.2.rate=50mbit` | a numeric segment indexes an array (`[[link]]` number 2, from 0) |
//! | `links.bottleneck.rate=50mbit` | `links.NAME` / `flows.NAME` / `events.N` pick the `[[link]]` / `[[flow]]` by its name (default `A-B`, `fN`) |
//! | `switch.sw0.bridge.cp.cp_queue_set_point=20KB` | tables are created when missing |
//! | `scenario.netns.duration=10s` | the `[scenario]` table too |
//!
//! # Errors
//! Every error names the file, the line when the text has one, and the field.

pub mod graph;
pub mod settings;

use std::collections::BTreeMap;
use std::path::Path;

use cnm_proto::{Bytes, Duration, Rate};
use serde::Deserialize;

use crate::sim::topo::{TopoError, Topology};

/// The built-in scenarios: (name, file text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("dumbbell", include_str!("../../scenarios/dumbbell.toml")),
    (
        "parking-lot",
        include_str!("../../scenarios/parking-lot.toml"),
    ),
    (
        "mixed-onoff",
        include_str!("../../scenarios/mixed-onoff.toml"),
    ),
    ("incast", include_str!("../../scenarios/incast.toml")),
    ("chain3", include_str!("../../scenarios/chain3.toml")),
    (
        "fan-in-victim",
        include_str!("../../scenarios/fan-in-victim.toml"),
    ),
    // The reproduction scenarios of docs/REPRODUCTION.md (the papers' parameters; netns mode
    // runs them at the S of their `[scenario]` table).
    (
        "repro-fqcn-dumbbell4",
        include_str!("../../scenarios/repro/fqcn_dumbbell4.toml"),
    ),
    (
        "repro-fqcn-weighted",
        include_str!("../../scenarios/repro/fqcn_weighted.toml"),
    ),
    (
        "repro-qcnbs-chain",
        include_str!("../../scenarios/repro/qcnbs_chain.toml"),
    ),
    (
        "repro-inputcp-victim",
        include_str!("../../scenarios/repro/inputcp_victim.toml"),
    ),
    (
        "repro-inputcp-victim-2src",
        include_str!("../../scenarios/repro/inputcp_victim_2src.toml"),
    ),
    (
        "repro-er-parking-lot",
        include_str!("../../scenarios/repro/er_parking_lot.toml"),
    ),
    (
        "repro-er-asymmetric",
        include_str!("../../scenarios/repro/er_asymmetric.toml"),
    ),
    (
        "repro-inputcp-fanin",
        include_str!("../../scenarios/repro/inputcp_fanin.toml"),
    ),
    (
        "repro-fqcn-step",
        include_str!("../../scenarios/repro/fqcn_step.toml"),
    ),
    (
        "repro-fqcn-mixed-onoff",
        include_str!("../../scenarios/repro/fqcn_mixed_onoff.toml"),
    ),
    (
        "repro-fqcn-weighted-cap",
        include_str!("../../scenarios/repro/fqcn_weighted_cap.toml"),
    ),
    (
        "repro-fqcn-incast",
        include_str!("../../scenarios/repro/fqcn_incast.toml"),
    ),
    (
        "repro-fqcn-parking-lot",
        include_str!("../../scenarios/repro/fqcn_parking_lot.toml"),
    ),
];

/// A scenario that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {}{field}: {msg}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct ScenarioError {
    /// The file (or built-in name).
    pub file: String,
    /// The line, when known (1-based).
    pub line: Option<usize>,
    /// The field, as a TOML path.
    pub field: String,
    /// What is wrong.
    pub msg: String,
}

/// `[scenario]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// Name (default: the file stem).
    pub name: Option<String>,
    /// One line saying what the scenario shows.
    pub description: Option<String>,
    /// Steady-state window `[from, to]` in simulated (unscaled) time.
    pub window: Option<[Duration; 2]>,
    /// The bottleneck link (default `[output] bottleneck`).
    pub bottleneck: Option<String>,
    /// Expected fair shares by flow name (unscaled); computed max-min shares otherwise.
    #[serde(default)]
    pub fair_share: BTreeMap<String, Rate>,
    /// Time scale S of netns mode (default 100).
    pub scale: Option<f64>,
    /// Why this S (free text, shown in `testbed list --long` and the report).
    pub scale_reason: Option<String>,
    /// netns-only settings.
    #[serde(default)]
    pub netns: NetnsMeta,
    /// Whether netns mode can run this scenario; `Some(reason)` when it cannot.
    pub netns_unsupported: Option<String>,
}

/// `[scenario.netns]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NetnsMeta {
    /// Wall-clock length of the run (default: duration × scale). The schedule is compressed
    /// to fit (see the module documentation).
    pub duration: Option<Duration>,
    /// Settling time before the schedule starts (daemons and sinks up). Default 300 ms.
    pub settle: Option<Duration>,
    /// How the hosts' generators and sinks run: all in one process (default) or one process
    /// each.
    #[serde(default)]
    pub hosts: HostsMode,
}

/// `[scenario.netns] hosts`: how a netns run emulates its generators and sinks.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum HostsMode {
    /// Every generator and sink in one `rp-agent hosts` process and one event loop.
    #[default]
    OneProcess,
    /// One `rp-agent gen` per generated flow and one `rp-agent sink` per receiver.
    PerProcess,
}

/// The default netns time scale: 10 Gb/s ÷ 100 = 100 Mb/s, which this kind of machine forwards
/// in user space with CPU to spare (see `testbed bench forwarding`).
pub const DEFAULT_SCALE: f64 = 100.0;

/// A loaded scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Where it came from (path or `builtin:NAME`).
    pub file: String,
    /// `[scenario]`.
    pub meta: Meta,
    /// Everything else.
    pub topo: Topology,
    /// The TOML tree after overrides, `[scenario]` included. Only the `--set` edge reads it
    /// (`KEY=VALUE` overrides and the mode flags re-parse the whole file from it,
    /// [`Scenario::with_overrides`]); everything else reads the typed [`Scenario::topo`].
    pub tree: toml::Table,
}

impl Scenario {
    /// Time scale S of netns mode.
    pub fn scale(&self) -> f64 {
        self.meta.scale.unwrap_or(DEFAULT_SCALE).max(1e-9)
    }

    /// The bottleneck link name, if any.
    pub fn bottleneck(&self) -> Option<String> {
        self.meta
            .bottleneck
            .clone()
            .or_else(|| self.topo.output.bottleneck.clone())
    }

    /// The steady-state window in simulated seconds (default: the second half).
    pub fn window_s(&self) -> (f64, f64) {
        match self.meta.window {
            Some([a, b]) => (a.as_secs_f64(), b.as_secs_f64()),
            None => {
                let d = self.topo.duration.as_secs_f64();
                (d / 2.0, d)
            }
        }
    }

    /// The scenario with its schedule — the run's length, the flows' starts and stops, the
    /// incasts' starts, the `[[event]]` instants, the steady window and the summary's warm-up —
    /// multiplied by `c`, everything else (rates, delays, the reaction points' timers, byte
    /// quantities) as it is: the experiment a netns run with a compressed schedule performs,
    /// seen at the scenario's own rates (`c` = the run's schedule factor ÷ S). The simulator
    /// twin of such a run simulates this (`crate::run`). The TOML tree is left as it was (the
    /// result is not meant for further `--set`).
    pub fn schedule_scaled(&self, c: f64) -> Scenario {
        let m = |d: Duration| Duration::from_nanos((d.as_nanos() as f64 * c).round() as u64);
        let mut sc = self.clone();
        sc.topo.duration = m(sc.topo.duration);
        for f in &mut sc.topo.flow {
            f.start = m(f.start);
            f.stop = f.stop.map(m);
        }
        for e in &mut sc.topo.event {
            e.at = m(e.at);
        }
        for i in &mut sc.topo.incast {
            i.start = m(i.start);
        }
        sc.meta.window = sc.meta.window.map(|[a, b]| [m(a), m(b)]);
        sc.topo.output.warmup = sc.topo.output.warmup.map(m);
        sc
    }

    /// The description, or an empty string.
    pub fn description(&self) -> &str {
        self.meta.description.as_deref().unwrap_or("")
    }

    /// The same scenario with more overrides applied.
    pub fn with_overrides(&self, sets: &[String]) -> Result<Scenario, ScenarioError> {
        let mut tree = self.tree.clone();
        for s in sets {
            apply_set(&mut tree, s).map_err(|(field, msg)| ScenarioError {
                file: self.file.clone(),
                line: None,
                field,
                msg,
            })?;
        }
        from_tree(tree, &self.file, &self.name)
    }
}

/// Resolves `spec`: a built-in name or a path.
pub fn load(spec: &str, sets: &[String]) -> Result<Scenario, ScenarioError> {
    if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == spec) {
        return parse(text, &format!("builtin:{spec}"), spec, sets);
    }
    let path = Path::new(spec);
    let text = daemon_kit::config_file::read(path).map_err(|e| ScenarioError {
        file: spec.to_string(),
        line: None,
        field: "(file)".into(),
        msg: if path.exists() {
            e
        } else {
            format!(
                "no such file, and not a built-in scenario (built-ins: {})",
                BUILTIN.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
            )
        },
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into());
    parse(&text, spec, &stem, sets)
}

#[derive(Deserialize)]
struct MetaOnly {
    #[serde(default)]
    scenario: Option<Meta>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&c| c == b'\n')
        .count()
        + 1
}

fn toml_err(text: &str, file: &str, e: &toml::de::Error) -> ScenarioError {
    let msg = e.message().to_string();
    let line = e.span().map(|s| line_of(text, s.start));
    // The key the message is about, when the span covers one.
    let field = e
        .span()
        .and_then(|s| text.get(s.clone()))
        .map(|k| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.contains('\n') && k.len() < 60)
        .and_then(|k| line.map(|l| path_at_line(text, l, &k)))
        .unwrap_or_else(|| "(syntax)".into());
    ScenarioError {
        file: file.into(),
        line,
        field,
        msg,
    }
}

/// The dotted path of key `key` on line `line` (1-based): the enclosing `[table]` or
/// `[[array]]` header (with the array index) plus the key before `=` on that line.
fn path_at_line(text: &str, line: usize, key: &str) -> String {
    let mut header = String::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut this_line = "";
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if i + 1 == line {
            this_line = t;
            break;
        }
        if let Some(h) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let h = h.trim().to_string();
            let n = counts.entry(h.clone()).or_insert(0);
            header = format!("{h}[{n}]");
            *n += 1;
        } else if let Some(h) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            header = h.trim().to_string();
        }
    }
    let k = this_line
        .split_once('=')
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.starts_with('['))
        .unwrap_or_else(|| key.to_string());
    if header.is_empty() {
        k
    } else if this_line.starts_with('[') {
        header
    } else {
        format!("{header}.{k}")
    }
}

/// The line (1-based) where `field` (a topology error path like `link[2].b` or
/// `switch.sw0.bridge.cp`) is written, best effort.
pub fn locate(text: &str, field: &str) -> Option<usize> {
    // Split `link[2].b` into ("link", Some(2), "b").
    let (head, rest) = match field.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (field, None),
    };
    let (table, idx) = match head.split_once('[') {
        Some((t, i)) => (t, i.trim_end_matches(']').parse::<usize>().ok()),
        None => (head, None),
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut start = None;
    if let Some(i) = idx {
        let hdr = format!("[[{table}]]");
        let mut n = 0;
        for (k, l) in lines.iter().enumerate() {
            if l.trim() == hdr {
                if n == i {
                    start = Some(k);
                    break;
                }
                n += 1;
            }
        }
        let s = start?;
        let Some(key) = rest else { return Some(s + 1) };
        let key = key.split('.').next().unwrap_or(key);
        for (k, l) in lines.iter().enumerate().skip(s + 1) {
            let t = l.trim();
            if t.starts_with('[') {
                break;
            }
            if t.split_once('=').is_some_and(|(a, _)| a.trim() == key) {
                return Some(k + 1);
            }
        }
        return Some(s + 1);
    }
    // A table path: the longest `[a.b.c]` header that prefixes the field.
    let parts: Vec<&str> = field.split('.').collect();
    for n in (1..=parts.len()).rev() {
        let hdr = format!("[{}]", parts[..n].join("."));
        if let Some(k) = lines.iter().position(|l| l.trim() == hdr) {
            if n < parts.len() {
                let key = parts[n];
                for (j, l) in lines.iter().enumerate().skip(k + 1) {
                    let t = l.trim();
                    if t.starts_with('[') {
                        break;
                    }
                    if t.split_once('=').is_some_and(|(a, _)| a.trim() == key) {
                        return Some(j + 1);
                    }
                }
            }
            return Some(k + 1);
        }
    }
    // A top-level key.
    lines
        .iter()
        .position(|l| l.split_once('=').is_some_and(|(a, _)| a.trim() == parts[0]))
        .map(|k| k + 1)
}

fn topo_err(text: Option<&str>, e: TopoError, file: &str) -> ScenarioError {
    if let Some(l) = e
        .field
        .strip_prefix("line ")
        .and_then(|l| l.parse::<usize>().ok())
    {
        let field = text
            .map(|t| path_at_line(t, l, ""))
            .unwrap_or_else(|| "(syntax)".into());
        return ScenarioError {
            file: file.into(),
            line: Some(l),
            field,
            msg: e.msg,
        };
    }
    ScenarioError {
        file: file.into(),
        line: text.and_then(|t| locate(t, &e.field)),
        field: e.field,
        msg: e.msg,
    }
}

/// Blanks the `[scenario]` and `[scenario.*]` sections of `text`, keeping line numbers.
fn blank_scenario(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut inside = false;
    for l in text.lines() {
        let t = l.trim_start();
        if t.starts_with('[') {
            let name = t.trim_start_matches('[');
            inside = name.starts_with("scenario]") || name.starts_with("scenario.");
        }
        if !inside {
            out.push_str(l);
        }
        out.push('\n');
    }
    out
}

/// Parses scenario text. `file` labels it in errors; `stem` is the default name.
pub fn parse(
    text: &str,
    file: &str,
    stem: &str,
    sets: &[String],
) -> Result<Scenario, ScenarioError> {
    // [scenario] first, straight from the text so errors carry lines.
    let m: MetaOnly = toml::from_str(text).map_err(|e| toml_err(text, file, &e))?;
    let _ = m;
    // The topology part, with line numbers intact.
    let blanked = blank_scenario(text);
    let topo = Topology::parse(&blanked, file).map_err(|e| topo_err(Some(text), e, file))?;
    topo.build().map_err(|e| topo_err(Some(text), e, file))?;
    let tree: toml::Table = toml::from_str(text).map_err(|e| toml_err(text, file, &e))?;
    let sc = from_tree(tree.clone(), file, stem)?;
    if sets.is_empty() {
        return Ok(sc);
    }
    sc.with_overrides(sets)
}

fn from_tree(mut tree: toml::Table, file: &str, stem: &str) -> Result<Scenario, ScenarioError> {
    let full = tree.clone();
    let meta: Meta = match tree.remove("scenario") {
        Some(v) => v.try_into().map_err(|e: toml::de::Error| ScenarioError {
            file: file.into(),
            line: None,
            field: "scenario".into(),
            msg: e.message().to_string(),
        })?,
        None => Meta::default(),
    };
    let text = toml::to_string(&tree).map_err(|e| ScenarioError {
        file: file.into(),
        line: None,
        field: "(tree)".into(),
        msg: e.to_string(),
    })?;
    // Lines of this generated text mean nothing to the user: keep only the field.
    let topo = Topology::parse(&text, file).map_err(|e| {
        let mut e = topo_err(Some(&text), e, file);
        e.line = None;
        e
    })?;
    topo.build().map_err(|e| topo_err(None, e, file))?;
    if let Some([a, b]) = meta.window {
        if a >= b {
            return Err(ScenarioError {
                file: file.into(),
                line: None,
                field: "scenario.window".into(),
                msg: format!("empty window {a}..{b}"),
            });
        }
    }
    if meta.scale.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
        return Err(ScenarioError {
            file: file.into(),
            line: None,
            field: "scenario.scale".into(),
            msg: "must be a positive number".into(),
        });
    }
    let names: Vec<String> = topo
        .flow
        .iter()
        .enumerate()
        .map(|(i, f)| f.name.clone().unwrap_or_else(|| format!("f{i}")))
        .collect();
    for k in meta.fair_share.keys() {
        if !names.contains(k) {
            return Err(ScenarioError {
                file: file.into(),
                line: None,
                field: format!("scenario.fair_share.{k}"),
                msg: format!("no flow {k:?}"),
            });
        }
    }
    let name = meta.name.clone().unwrap_or_else(|| stem.to_string());
    Ok(Scenario {
        name,
        file: file.into(),
        meta,
        topo,
        tree: full,
    })
}

/// Reads `VALUE` of `--set`: a TOML value when it parses as one, else a string.
fn set_value(v: &str) -> toml::Value {
    #[derive(Deserialize)]
    struct V {
        v: toml::Value,
    }
    match toml::from_str::<V>(&format!("v = {v}")) {
        Ok(x) => x.v,
        Err(_) => toml::Value::String(v.to_string()),
    }
}

/// Applies one `KEY=VALUE` override to the tree. Errors are `(field, reason)`.
pub fn apply_set(tree: &mut toml::Table, set: &str) -> Result<(), (String, String)> {
    let (key, value) = set
        .split_once('=')
        .ok_or_else(|| (set.to_string(), "expected KEY=VALUE".to_string()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err((set.into(), "empty key".into()));
    }
    let value = set_value(value.trim());
    let mut segs: Vec<String> = key.split('.').map(str::to_string).collect();
    // `links.NAME` / `flows.NAME` / `events.N` -> `link.I` / `flow.I` / `event.N`.
    if segs.len() >= 2 {
        let (arr, by_name) = match segs[0].as_str() {
            "links" => ("link", true),
            "flows" => ("flow", true),
            "events" => ("event", false),
            "incasts" => ("incast", false),
            _ => ("", false),
        };
        if !arr.is_empty() {
            segs[0] = arr.to_string();
            if by_name && segs[1].parse::<usize>().is_err() {
                let want = segs[1].clone();
                let list = tree.get(arr).and_then(|v| v.as_array());
                let idx = list.and_then(|l| {
                    l.iter().enumerate().position(|(i, e)| {
                        let explicit = e.get("name").and_then(|n| n.as_str());
                        let default = if arr == "link" {
                            format!(
                                "{}-{}",
                                e.get("a").and_then(|x| x.as_str()).unwrap_or(""),
                                e.get("b").and_then(|x| x.as_str()).unwrap_or("")
                            )
                        } else {
                            format!("f{i}")
                        };
                        explicit.map_or(default == want, |n| n == want)
                    })
                });
                let i = idx.ok_or_else(|| (key.to_string(), format!("no {arr} named {want:?}")))?;
                segs[1] = i.to_string();
            }
        }
    }
    let mut root = toml::Value::Table(std::mem::take(tree));
    let mut cur = &mut root;
    let n = segs.len();
    let mut result = Ok(());
    for (i, s) in segs.iter().enumerate() {
        let last = i + 1 == n;
        let path = segs[..=i].join(".");
        match cur {
            toml::Value::Table(t) => {
                if last {
                    t.insert(s.clone(), value.clone());
                    break;
                }
                cur = t
                    .entry(s.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            }
            toml::Value::Array(a) => {
                let Ok(idx) = s.parse::<usize>() else {
                    result = Err((path, "an array: expected an index".to_string()));
                    break;
                };
                let len = a.len();
                let Some(slot) = a.get_mut(idx) else {
                    result = Err((path, format!("index out of range (length {len})")));
                    break;
                };
                if last {
                    *slot = value.clone();
                    break;
                }
                cur = slot;
            }
            _ => {
                result = Err((path, "not a table".to_string()));
                break;
            }
        }
    }
    if let toml::Value::Table(t) = root {
        *tree = t;
    }
    result
}

/// One line per built-in scenario: `name  description`.
pub fn list() -> Vec<(String, String)> {
    BUILTIN
        .iter()
        .map(|(n, text)| {
            let d = toml::from_str::<MetaOnly>(text)
                .ok()
                .and_then(|m| m.scenario)
                .and_then(|m| m.description)
                .unwrap_or_default();
            ((*n).to_string(), d)
        })
        .collect()
}

/// Rate ÷ S (at least 1 bit/s).
pub fn scale_rate(r: Rate, s: f64) -> Rate {
    cnm_proto::Scale::scale(&r, s)
}

/// Duration × k.
pub fn scale_dur(d: Duration, k: f64) -> Duration {
    cnm_proto::Scale::scale(&d, k)
}

/// Bytes are unchanged by time scaling (a marker for readers of the runner).
pub fn scale_bytes(b: Bytes) -> Bytes {
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaled_schedule_moves_every_instant_and_nothing_else() {
        // The parking lot at S = 100 compressed to 182 s: × 0.26 of its 7 s.
        let s = load("parking-lot", &[]).unwrap();
        let c = s.schedule_scaled(0.26);
        assert_eq!(c.topo.duration, Duration::from_millis(1820));
        let starts: Vec<u64> = c.topo.flow.iter().map(|f| f.start.as_nanos()).collect();
        assert_eq!(
            starts,
            [0, 260, 520, 780, 1040, 1300].map(|ms| ms * 1_000_000)
        );
        assert_eq!(
            c.meta.window,
            Some([Duration::from_millis(1560), Duration::from_millis(1820)])
        );
        // Rates, delays and the loop's settings stay.
        assert_eq!(c.topo.link[0].rate, s.topo.link[0].rate);
        assert_eq!(c.topo.link[0].delay, s.topo.link[0].delay);
        // Events and stops move too (the dumbbell's capacity steps).
        let d = load("dumbbell", &["flow.0.stop=5s".into()]).unwrap();
        let h = d.schedule_scaled(0.5);
        let at: Vec<Duration> = h.topo.event.iter().map(|e| e.at).collect();
        let want: Vec<Duration> = d
            .topo
            .event
            .iter()
            .map(|e| Duration::from_nanos(e.at.as_nanos() / 2))
            .collect();
        assert!(!at.is_empty());
        assert_eq!(at, want);
        assert_eq!(h.topo.flow[0].stop, Some(Duration::from_millis(2500)));
    }

    #[test]
    fn builtins_parse() {
        for (n, _) in BUILTIN {
            let s = load(n, &[]).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(&s.name, n);
            assert!(!s.description().is_empty(), "{n}");
        }
    }

    #[test]
    fn set_paths() {
        let s = load(
            "dumbbell",
            &[
                "duration=2s".into(),
                "links.sw0-r0.rate=50mbit".into(),
                "link.0.delay=1us".into(),
                "scenario.scale=20".into(),
            ],
        )
        .unwrap();
        assert_eq!(s.topo.duration, Duration::from_secs(2));
        let l = s.topo.link.iter().find(|l| l.b == "r0").unwrap();
        assert_eq!(l.rate, Rate::from_mbps(50));
        assert_eq!(s.topo.link[0].delay, Duration::from_micros(1));
        assert_eq!(s.scale(), 20.0);
        let e = load("dumbbell", &["links.nope.rate=1".into()]).unwrap_err();
        assert!(e.to_string().contains("no link named"), "{e}");
        let e = load("dumbbell", &["link.99.rate=1".into()]).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }

    #[test]
    fn values_parse_as_toml_or_string() {
        assert_eq!(set_value("2"), toml::Value::Integer(2));
        assert_eq!(set_value("50mbit"), toml::Value::String("50mbit".into()));
        assert_eq!(set_value("true"), toml::Value::Boolean(true));
    }

    #[test]
    fn lines_count_from_one() {
        let t = "a = 1\nb = 2\nc = 3\n";
        assert_eq!(line_of(t, 0), 1);
        assert_eq!(line_of(t, 6), 2);
        assert_eq!(line_of(t, 8), 2);
        assert_eq!(line_of(t, 12), 3);
    }
}

//! Seed sweeps: one scenario over many seeds and parameter values, run in parallel on the local
//! cores or handed to a cluster runner, then summarised per grid point.
//!
//! The papers' claims are statements over seeds ("the 3-hop flow gets its fair share in 17 of
//! 20 seeds", QCN/BS paper §V), so a single run proves little. A sweep is a grid: every
//! combination of the values given with `--set KEY=V1,V2,...` (a *point*), each run once per
//! seed. Every run is an ordinary `testbed run` of its own, with its own results directory
//! `OUT/<point>/seed-<n>/` holding the usual `summary.json`; the sweep's summary is computed
//! from those files only. That one rule gives the three forms the same result by construction:
//!
//! - **local**: `testbed sweep SCENARIO --seeds 1..20` starts the runs as child processes,
//!   `--jobs` at a time (default: the machine's cores; a simulator run is single-threaded),
//!   with a progress bar, then merges;
//! - **emitted**: `--emit commands` prints one shell command per run (for GNU parallel,
//!   `xargs -P`, any batch system) and `--emit slurm` a Slurm job-array script that runs line
//!   `$SLURM_ARRAY_TASK_ID` of `OUT/commands.txt`; nothing runs here;
//! - **merge**: `testbed sweep --merge OUT` reads whatever runs have finished under `OUT`
//!   (the manifest `OUT/sweep.json` names the grid and the criteria) and prints the same
//!   summary the local form prints.
//!
//! The summary gives, per point and metric (flow share ratios, rates and CNM rates, Jain's
//! index, bottleneck utilisation, queue mean and p99, drops), the mean, minimum and maximum over
//! the seeds, the count of faithful runs, and for each `--criterion` (`f1.share_ratio>=0.8`)
//! the count of seeds meeting it — the form in which the papers state their results. The
//! summary JSON holds no wall-clock figure, so two sweeps of the same grid give identical files
//! (the simulator is deterministic per seed).
//!
//! Namespace runs (`--mode netns`) share the machine's CPUs with every other run; running them
//! side by side would break their fidelity, so they run one at a time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::run::Mode;

/// Largest number of runs one sweep may describe (a typo such as `--seeds 1..100000000` must
/// not fill a disk with directories).
pub const MAX_RUNS: usize = 100_000;

/// `testbed sweep` arguments.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// A built-in scenario or a scenario TOML file (not with --merge).
    #[arg(required_unless_present = "merge")]
    pub scenario: Option<String>,
    /// Seeds: `1..20` (inclusive), `1,5,9`, or `7`.
    #[arg(long, default_value = "1..5")]
    pub seeds: Seeds,
    /// A scenario override, one value or several separated by commas (a grid axis):
    /// `--set hosts.rp_mode=qcn,qcn-bs`. Repeat for more axes; the grid is their product.
    #[arg(long = "set", value_name = "KEY=V1,V2,...")]
    pub sets: Vec<String>,
    /// Variants (a grid axis): CP placements, RP modes or CP/RP as `testbed run --variant`
    /// takes them, e.g. `--variant qcn,adaptive-bc+qcn-bs`.
    #[arg(long, value_delimiter = ',')]
    pub variant: Vec<String>,
    /// Where the runs run.
    #[arg(long, value_enum, default_value = "sim")]
    pub mode: Mode,
    /// Runs at a time (default: the number of CPUs; always 1 in netns mode).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Results directory (default results/<scenario>-sweep-<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Count the seeds meeting METRIC OP NUMBER per point, e.g. `f1.share_ratio>=0.8`,
    /// `jain>0.95`, `sw0-r0.utilization>=0.9` (OP: >=, <=, >, <). Repeatable.
    #[arg(long = "criterion", value_name = "METRIC OP NUMBER")]
    pub criteria: Vec<Criterion>,
    /// Print the runs instead of running them: `commands` (one shell command per line) or
    /// `slurm` (a job-array script); the manifest and commands.txt are written to --out.
    #[arg(long, value_enum)]
    pub emit: Option<Emit>,
    /// Summarise the runs found under a sweep directory (written by a sweep or its emitted
    /// commands) instead of running anything.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["scenario", "emit"])]
    pub merge: Option<PathBuf>,
    /// The testbed binary the runs use (default: this program).
    #[arg(long)]
    pub testbed: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// The emitted forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    /// One shell command per run.
    Commands,
    /// A Slurm job-array script.
    Slurm,
}

/// A list of seeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeds(pub Vec<u64>);

impl FromStr for Seeds {
    type Err = String;

    fn from_str(s: &str) -> Result<Seeds, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim) {
            if let Some((a, b)) = part.split_once("..") {
                let a: u64 = a.trim().parse().map_err(|_| format!("bad seed {a:?}"))?;
                let b = b.trim().trim_start_matches('=');
                let b: u64 = b.parse().map_err(|_| format!("bad seed {b:?}"))?;
                if b < a {
                    return Err(format!("empty seed range {part:?}"));
                }
                if b - a >= MAX_RUNS as u64 {
                    return Err(format!("seed range {part:?} is over {MAX_RUNS} seeds"));
                }
                out.extend(a..=b);
            } else {
                out.push(part.parse().map_err(|_| format!("bad seed {part:?}"))?);
            }
        }
        if out.is_empty() {
            return Err("no seeds".into());
        }
        Ok(Seeds(out))
    }
}

/// A comparison operator of a criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `>=`
    Ge,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `<`
    Lt,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Ge => ">=",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Lt => "<",
        }
    }

    fn holds(self, x: f64, y: f64) -> bool {
        match self {
            Op::Ge => x >= y,
            Op::Le => x <= y,
            Op::Gt => x > y,
            Op::Lt => x < y,
        }
    }
}

/// `METRIC OP NUMBER`: a run meets it when its metric exists and the comparison holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// Metric name as in the summary (`jain`, `f1.share_ratio`, `sw0-r0.utilization`).
    pub metric: String,
    /// Operator.
    pub op: Op,
    /// Threshold.
    pub value: f64,
}

impl std::fmt::Display for Criterion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.metric, self.op.as_str(), self.value)
    }
}

impl FromStr for Criterion {
    type Err = String;

    fn from_str(s: &str) -> Result<Criterion, String> {
        // Two-character operators first, so `>=` is not read as `>` followed by `=0.8`.
        for (tok, op) in [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)] {
            if let Some((m, v)) = s.split_once(tok) {
                let metric = m.trim();
                if metric.is_empty() {
                    return Err(format!("criterion {s:?}: no metric before {tok}"));
                }
                let value: f64 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("criterion {s:?}: {:?} is not a number", v.trim()))?;
                if !value.is_finite() {
                    return Err(format!("criterion {s:?}: the threshold must be finite"));
                }
                return Ok(Criterion {
                    metric: metric.to_string(),
                    op,
                    value,
                });
            }
        }
        Err(format!(
            "criterion {s:?}: expected METRIC OP NUMBER with OP one of >= <= > <"
        ))
    }
}

/// One grid point: the overrides it applies (one value per axis).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// Directory name under the sweep directory.
    pub label: String,
    /// `testbed run --variant`, if any.
    pub variant: Option<String>,
    /// `KEY=VALUE` overrides, in axis order.
    pub sets: Vec<String>,
}

/// The sweep's description, written to `OUT/sweep.json` before any run starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Scenario as given.
    pub scenario: String,
    /// `netns` or `sim`.
    pub mode: String,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Grid points.
    pub points: Vec<Point>,
    /// Criteria counted per point.
    pub criteria: Vec<Criterion>,
}

/// The product of the axes, variants first: `["a=1,2", "b=x"]` → `[a=1 b=x]`, `[a=2 b=x]`.
pub fn grid(variants: &[String], sets: &[String]) -> anyhow::Result<Vec<Point>> {
    let mut out = Vec::new();
    let variants: Vec<Option<&String>> = if variants.is_empty() {
        vec![None]
    } else {
        variants.iter().map(Some).collect()
    };
    for v in &variants {
        for mut p in grid_sets(sets)? {
            if let Some(v) = v {
                let name = sanitize(&format!("variant={v}"));
                p.label = if p.label == "all" {
                    name
                } else {
                    format!("{name}+{}", p.label)
                };
                p.variant = Some(v.to_string());
            }
            out.push(p);
        }
    }
    if out.len() > MAX_RUNS {
        bail!("the grid has over {MAX_RUNS} points");
    }
    Ok(out)
}

fn grid_sets(sets: &[String]) -> anyhow::Result<Vec<Point>> {
    let mut points = vec![Vec::<String>::new()];
    for s in sets {
        let Some((key, values)) = s.split_once('=') else {
            bail!("--set {s:?}: expected KEY=V1,V2,...");
        };
        let key = key.trim();
        if key.is_empty() {
            bail!("--set {s:?}: empty key");
        }
        let values: Vec<&str> = values.split(',').map(str::trim).collect();
        if values.iter().any(|v| v.is_empty()) {
            bail!("--set {s:?}: an empty value");
        }
        let mut next = Vec::with_capacity(points.len() * values.len());
        for p in &points {
            for v in &values {
                let mut q = p.clone();
                q.push(format!("{key}={v}"));
                next.push(q);
            }
        }
        if next.len() > MAX_RUNS {
            bail!("the grid has over {MAX_RUNS} points");
        }
        points = next;
    }
    // Only the axes with more than one value name a point; fixed overrides apply to all.
    let varying: Vec<bool> = sets
        .iter()
        .map(|s| s.split_once('=').is_some_and(|(_, v)| v.contains(',')))
        .collect();
    Ok(points
        .into_iter()
        .map(|sets| {
            let named: Vec<&str> = sets
                .iter()
                .zip(&varying)
                .filter(|(_, v)| **v)
                .map(|(s, _)| s.as_str())
                .collect();
            let label = if named.is_empty() {
                "all".to_string()
            } else {
                sanitize(&named.join("+"))
            };
            Point {
                label,
                variant: None,
                sets,
            }
        })
        .collect())
}

/// A directory name from a label: path separators and shell-special characters become `_`.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "=+-._,".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One run of the sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Point label.
    pub label: String,
    /// Seed.
    pub seed: u64,
    /// Its results directory.
    pub dir: PathBuf,
    /// Its command line (program first).
    pub argv: Vec<String>,
}

/// The runs of a manifest, in grid order then seed order.
pub fn jobs(m: &Manifest, testbed: &Path, out: &Path) -> Vec<Job> {
    let mut v = Vec::new();
    for p in &m.points {
        for &seed in &m.seeds {
            let dir = run_dir(out, &p.label, seed);
            let mut argv = vec![
                testbed.display().to_string(),
                "run".into(),
                m.scenario.clone(),
                "--mode".into(),
                m.mode.clone(),
                "--seed".into(),
                seed.to_string(),
            ];
            if let Some(v) = &p.variant {
                argv.push("--variant".into());
                argv.push(v.clone());
            }
            for s in &p.sets {
                argv.push("--set".into());
                argv.push(s.clone());
            }
            argv.extend([
                "--out".into(),
                dir.display().to_string(),
                "--quiet".into(),
                "--no-plots".into(),
            ]);
            v.push(Job {
                label: p.label.clone(),
                seed,
                dir,
                argv,
            });
        }
    }
    v
}

fn run_dir(out: &Path, label: &str, seed: u64) -> PathBuf {
    out.join(label).join(format!("seed-{seed}"))
}

/// The shell form of a job (its output goes to `run.log` beside its summary).
pub fn command_line(j: &Job) -> String {
    let log = j.dir.with_extension("log");
    format!(
        "{} > {} 2>&1",
        shell_words::join(&j.argv),
        shell_words::quote(&log.display().to_string())
    )
}

/// A Slurm job-array script running line `$SLURM_ARRAY_TASK_ID` of `commands.txt`.
pub fn slurm_script(m: &Manifest, out: &Path, n: usize) -> String {
    let cmds = shell_words::quote(&out.join("commands.txt").display().to_string()).into_owned();
    let name = sanitize(&format!("sweep-{}", m.scenario.replace('/', "_")));
    format!(
        "#!/bin/sh\n\
         #SBATCH --job-name={name}\n\
         #SBATCH --array=1-{n}\n\
         #SBATCH --cpus-per-task=1\n\
         # One run of the sweep per array task; afterwards: testbed sweep --merge {out}\n\
         sed -n \"${{SLURM_ARRAY_TASK_ID}}p\" {cmds} | sh\n",
        out = shell_words::quote(&out.display().to_string())
    )
}

/// Statistics of one metric over the seeds of a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// Runs that reported the metric.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
}

/// A criterion's count at one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionCount {
    /// The criterion, as text.
    pub criterion: String,
    /// Seeds meeting it.
    pub met: usize,
    /// Seeds with a result.
    pub of: usize,
    /// The seeds meeting it.
    pub seeds: Vec<u64>,
}

/// One grid point's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointSummary {
    /// Label.
    pub label: String,
    /// Variant.
    pub variant: Option<String>,
    /// Overrides.
    pub sets: Vec<String>,
    /// Seeds with a `summary.json`.
    pub seeds_done: Vec<u64>,
    /// Seeds without one (not run yet, or failed: see `seed-N.log`).
    pub seeds_missing: Vec<u64>,
    /// Runs whose fidelity check passed.
    pub faithful: usize,
    /// Per metric.
    pub metrics: BTreeMap<String, Stat>,
    /// Per criterion.
    pub criteria: Vec<CriterionCount>,
}

/// The sweep's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// Scenario.
    pub scenario: String,
    /// Mode.
    pub mode: String,
    /// Seeds asked for.
    pub seeds: Vec<u64>,
    /// Per point.
    pub points: Vec<PointSummary>,
}

/// The metrics of one run's `summary.json`, flattened: `jain`, `<flow>.share_ratio`,
/// `<flow>.mean_bps`, `<flow>.cnm_per_s`, `<bottleneck>.utilization`,
/// `<bottleneck>.queue_mean_bytes`, `<bottleneck>.queue_p99_bytes`, `<bottleneck>.drops`.
pub fn flatten(summary: &serde_json::Value) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    if let Some(j) = summary.get("jain").and_then(|v| v.as_f64()) {
        m.insert("jain".to_string(), j);
    }
    let mut pick = |list: &str, keys: &[&str]| {
        for item in summary
            .get(list)
            .and_then(|v| v.as_array())
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let Some(name) = item.get("name").and_then(|v| v.as_str()) else {
                continue;
            };
            for k in keys {
                if let Some(x) = item.get(*k).and_then(|v| v.as_f64()) {
                    m.insert(format!("{name}.{k}"), x);
                }
            }
        }
    };
    pick("flows", &["share_ratio", "mean_bps", "cnm_per_s"]);
    pick(
        "bottlenecks",
        &[
            "utilization",
            "queue_mean_bytes",
            "queue_p99_bytes",
            "drops",
        ],
    );
    m
}

/// Summarises the runs found under `out` for the manifest.
pub fn summarise(m: &Manifest, out: &Path) -> anyhow::Result<SweepSummary> {
    let mut points = Vec::new();
    for p in &m.points {
        let mut done = Vec::new();
        let mut missing = Vec::new();
        let mut faithful = 0;
        let mut runs: Vec<(u64, BTreeMap<String, f64>)> = Vec::new();
        for &seed in &m.seeds {
            let path = run_dir(out, &p.label, seed).join("summary.json");
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    missing.push(seed);
                    continue;
                }
                Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            };
            let v: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{}: not a run summary", path.display()))?;
            if v.get("faithful").and_then(|f| f.as_bool()) == Some(true) {
                faithful += 1;
            }
            done.push(seed);
            runs.push((seed, flatten(&v)));
        }
        let mut metrics: BTreeMap<String, Stat> = BTreeMap::new();
        for (_, r) in &runs {
            for (k, &x) in r {
                let s = metrics.entry(k.clone()).or_insert(Stat {
                    n: 0,
                    mean: 0.0,
                    min: f64::INFINITY,
                    max: f64::NEG_INFINITY,
                });
                s.n += 1;
                s.mean += x;
                s.min = s.min.min(x);
                s.max = s.max.max(x);
            }
        }
        for s in metrics.values_mut() {
            s.mean /= s.n as f64;
        }
        let criteria = m
            .criteria
            .iter()
            .map(|c| {
                let seeds: Vec<u64> = runs
                    .iter()
                    .filter(|(_, r)| r.get(&c.metric).is_some_and(|&x| c.op.holds(x, c.value)))
                    .map(|(s, _)| *s)
                    .collect();
                CriterionCount {
                    criterion: c.to_string(),
                    met: seeds.len(),
                    of: runs.len(),
                    seeds,
                }
            })
            .collect();
        points.push(PointSummary {
            label: p.label.clone(),
            variant: p.variant.clone(),
            sets: p.sets.clone(),
            seeds_done: done,
            seeds_missing: missing,
            faithful,
            metrics,
            criteria,
        });
    }
    Ok(SweepSummary {
        scenario: m.scenario.clone(),
        mode: m.mode.clone(),
        seeds: m.seeds.clone(),
        points,
    })
}

impl SweepSummary {
    /// The human table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "sweep {} ({}), {} seeds, {} grid point(s)",
            self.scenario,
            self.mode,
            self.seeds.len(),
            self.points.len()
        );
        for p in &self.points {
            let _ = writeln!(s);
            let mut what: Vec<String> =
                p.variant.iter().map(|v| format!("--variant {v}")).collect();
            what.extend(p.sets.iter().map(|s| format!("--set {s}")));
            let sets = if what.is_empty() {
                "(as the file says)".to_string()
            } else {
                what.join(" ")
            };
            let _ = writeln!(
                s,
                "point {}: {}  — {} of {} runs done, {} faithful",
                p.label,
                sets,
                p.seeds_done.len(),
                p.seeds_done.len() + p.seeds_missing.len(),
                p.faithful
            );
            if !p.seeds_missing.is_empty() {
                let _ = writeln!(s, "  missing seeds: {}", join_u64(&p.seeds_missing));
            }
            let w = p.metrics.keys().map(String::len).max().unwrap_or(6).max(6);
            let _ = writeln!(
                s,
                "  {:<w$}  {:>14}  {:>14}  {:>14}",
                "metric", "mean", "min", "max"
            );
            for (k, st) in &p.metrics {
                let _ = writeln!(
                    s,
                    "  {k:<w$}  {:>14}  {:>14}  {:>14}",
                    fmt_num(st.mean),
                    fmt_num(st.min),
                    fmt_num(st.max)
                );
            }
            for c in &p.criteria {
                let _ = writeln!(
                    s,
                    "  {}: {} of {} seeds{}",
                    c.criterion,
                    c.met,
                    c.of,
                    if c.seeds.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", join_u64(&c.seeds))
                    }
                );
            }
        }
        s
    }
}

fn join_u64(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// Numbers in the table: rates in engineering form, ratios with four decimals.
fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.3} G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}", x)
    } else {
        format!("{x:.4}")
    }
}

/// What `testbed sweep` did.
#[derive(Debug)]
pub enum Outcome {
    /// Runs were emitted, not run.
    Emitted,
    /// The summary, and how many runs failed.
    Summary(SweepSummary, usize),
}

/// `testbed sweep`.
pub fn main(args: &SweepArgs) -> anyhow::Result<Outcome> {
    if let Some(dir) = &args.merge {
        let m = read_manifest(dir)?;
        let mut m2 = m.clone();
        if !args.criteria.is_empty() {
            m2.criteria = args.criteria.clone();
        }
        return Ok(Outcome::Summary(summarise(&m2, dir)?, 0));
    }
    let Some(scenario) = args.scenario.clone() else {
        bail!("a scenario is needed (or --merge DIR)");
    };
    // Refuse a bad scenario or override before starting hundreds of runs that would all fail.
    let points = grid(&args.variant, &args.sets)?;
    let mut name = String::new();
    for p in &points {
        let sc = crate::scenario::load(&scenario, &p.sets)
            .with_context(|| format!("grid point {}", p.label))?;
        if let Some(v) = &p.variant {
            crate::run::apply_variant(&sc, v).with_context(|| format!("grid point {}", p.label))?;
        }
        name = sc.name;
    }
    let n = points.len() * args.seeds.0.len();
    if n > MAX_RUNS {
        bail!("the sweep has {n} runs, over the limit of {MAX_RUNS}");
    }
    let m = Manifest {
        scenario,
        mode: args.mode.as_str().to_string(),
        seeds: args.seeds.0.clone(),
        points,
        criteria: args.criteria.clone(),
    };
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!("{name}-sweep-{}", crate::run::timestamp()))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("sweep.json"), serde_json::to_string_pretty(&m)?)
        .with_context(|| format!("writing {}", out.join("sweep.json").display()))?;
    let testbed = match &args.testbed {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("locating this program")?,
    };
    let js = jobs(&m, &testbed, &out);
    for j in &js {
        if let Some(parent) = j.dir.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
    }
    let lines: String = js.iter().map(|j| command_line(j) + "\n").collect();
    std::fs::write(out.join("commands.txt"), &lines)
        .with_context(|| format!("writing {}", out.join("commands.txt").display()))?;
    match args.emit {
        Some(Emit::Commands) => {
            print!("{lines}");
            eprintln!(
                "{} runs; afterwards: testbed sweep --merge {}",
                js.len(),
                out.display()
            );
            print_written(&out, &[]);
            return Ok(Outcome::Emitted);
        }
        Some(Emit::Slurm) => {
            print!("{}", slurm_script(&m, &out, js.len()));
            print_written(&out, &[]);
            return Ok(Outcome::Emitted);
        }
        None => {}
    }
    let jobs_at_once = match args.mode {
        Mode::Netns => 1,
        Mode::Sim => args
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
    .max(1);
    let failed = run_local(&js, jobs_at_once, args.quiet)?;
    let summary = summarise(&m, &out)?;
    std::fs::write(
        out.join("sweep-summary.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    print_written(&out, &js);
    Ok(Outcome::Summary(summary, failed))
}

/// Lists on stderr (stdout carries the emitted commands or the summary) what the sweep wrote
/// into `out`: its own files (`sweep.json`, `commands.txt`, `sweep-summary.json`) and each
/// run's log and results directory, with the number of files in it (a run's files are listed
/// by `testbed run`).
fn print_written(out: &Path, js: &[Job]) {
    eprintln!("results: {}", out.display());
    for name in ["sweep.json", "commands.txt", "sweep-summary.json"] {
        let p = out.join(name);
        if p.is_file() {
            eprintln!("  {}", p.display());
        }
    }
    for j in js {
        let log = j.dir.with_extension("log");
        if log.is_file() {
            eprintln!("  {}", log.display());
        }
        if j.dir.is_dir() {
            let n = crate::run::files_under(&j.dir).len();
            eprintln!("  {}/ ({n} files)", j.dir.display());
        }
    }
}

fn read_manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join("sweep.json");
    let text = daemon_kit::config_file::read(&path)
        .map_err(|e| anyhow::anyhow!("{}: not a sweep directory: {e}", dir.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a sweep manifest", path.display()))
}

/// Runs the jobs, `n` at a time, each its own `testbed run` process with its output in
/// `seed-N.log`; returns how many failed. Stops starting runs on SIGINT/SIGTERM.
fn run_local(js: &[Job], n: usize, quiet: bool) -> anyhow::Result<usize> {
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let b = indicatif::ProgressBar::new(js.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "sweep [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ~{eta} left {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b
    };
    let failures = crate::pool::map_indexed(js.len(), n, |i| {
        let j = js.get(i)?;
        let r = run_one(j).err().map(|e| {
            let msg = format!("{} seed {}: {e:#}", j.label, j.seed);
            bar.println(format!("sweep: {msg}"));
            msg
        });
        bar.inc(1);
        r
    });
    bar.finish_and_clear();
    if crate::signals::requested() {
        bail!("interrupted");
    }
    Ok(failures.into_iter().flatten().flatten().count())
}

fn run_one(j: &Job) -> anyhow::Result<()> {
    let log_path = j.dir.with_extension("log");
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let err = log.try_clone()?;
    let status = Command::new(&j.argv[0])
        .args(&j.argv[1..])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .status()
        .with_context(|| format!("starting {}", j.argv[0]))?;
    if !status.success() {
        bail!("{status}; see {}", log_path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_ranges_lists_and_single() {
        assert_eq!("1..4".parse::<Seeds>().unwrap().0, vec![1, 2, 3, 4]);
        assert_eq!("1..=3".parse::<Seeds>().unwrap().0, vec![1, 2, 3]);
        assert_eq!("7".parse::<Seeds>().unwrap().0, vec![7]);
        assert_eq!("1,5, 9".parse::<Seeds>().unwrap().0, vec![1, 5, 9]);
        assert_eq!("1..2,10".parse::<Seeds>().unwrap().0, vec![1, 2, 10]);
        assert!("5..1".parse::<Seeds>().is_err());
        assert!("x".parse::<Seeds>().is_err());
        assert!("0..18446744073709551615".parse::<Seeds>().is_err());
    }

    #[test]
    fn criteria_parse_two_character_operators_first() {
        let c: Criterion = "f1.share_ratio>=0.8".parse().unwrap();
        assert_eq!(
            (c.metric.as_str(), c.op, c.value),
            ("f1.share_ratio", Op::Ge, 0.8)
        );
        let c: Criterion = " jain < 0.9 ".parse().unwrap();
        assert_eq!((c.metric.as_str(), c.op, c.value), ("jain", Op::Lt, 0.9));
        assert!("jain".parse::<Criterion>().is_err());
        assert!(">=1".parse::<Criterion>().is_err());
        assert!("jain>=x".parse::<Criterion>().is_err());
        assert!("jain>=inf".parse::<Criterion>().is_err());
        assert!(Op::Ge.holds(0.8, 0.8) && !Op::Gt.holds(0.8, 0.8));
    }

    #[test]
    fn grid_is_the_product_and_names_only_varying_axes() {
        let g = grid(&[], &["a=1,2".into(), "dur=1s".into(), "b=x,y".into()]).unwrap();
        let sets: Vec<Vec<String>> = g.iter().map(|p| p.sets.clone()).collect();
        assert_eq!(
            sets,
            vec![
                vec!["a=1", "dur=1s", "b=x"],
                vec!["a=1", "dur=1s", "b=y"],
                vec!["a=2", "dur=1s", "b=x"],
                vec!["a=2", "dur=1s", "b=y"],
            ]
        );
        assert_eq!(g[1].label, "a=1+b=y");
        assert_eq!(grid(&[], &[]).unwrap()[0].label, "all");
        let g = grid(&[], &["k=v/w".into(), "z=1,2".into()]).unwrap();
        assert_eq!(g[0].label, "z=1");
        assert_eq!(sanitize("p=a/b c"), "p=a_b_c");
        assert!(grid(&[], &["novalue".into()]).is_err());
        assert!(grid(&[], &["a=1,,2".into()]).is_err());
        let g = grid(&["qcn".into(), "input/qcn-bs".into()], &["z=1,2".into()]).unwrap();
        let labels: Vec<&str> = g.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "variant=qcn+z=1",
                "variant=qcn+z=2",
                "variant=input_qcn-bs+z=1",
                "variant=input_qcn-bs+z=2"
            ]
        );
        assert_eq!(g[3].variant.as_deref(), Some("input/qcn-bs"));
        let g = grid(&["off".into()], &[]).unwrap();
        assert_eq!((g[0].label.as_str(), g.len()), ("variant=off", 1));
    }

    #[test]
    fn jobs_and_commands_name_seed_point_and_directory() {
        let m = Manifest {
            scenario: "dumbbell".into(),
            mode: "sim".into(),
            seeds: vec![3],
            points: grid(&[], &["a=it's".into()]).unwrap(),
            criteria: vec![],
        };
        let js = jobs(&m, Path::new("/bin/testbed"), Path::new("out dir"));
        assert_eq!(js.len(), 1);
        assert_eq!(js[0].dir, Path::new("out dir/all/seed-3"));
        assert_eq!(
            command_line(&js[0]),
            "/bin/testbed run dumbbell --mode sim --seed 3 --set 'a=it'\\''s' \
             --out 'out dir/all/seed-3' --quiet --no-plots > 'out dir/all/seed-3.log' 2>&1"
        );
        let script = slurm_script(&m, Path::new("o"), 1);
        assert!(script.contains("#SBATCH --array=1-1\n"), "{script}");
        assert!(script.contains("sed -n \"${SLURM_ARRAY_TASK_ID}p\" o/commands.txt | sh"));
    }

    #[test]
    fn summary_counts_criteria_and_missing_seeds() {
        let dir = tempfile::tempdir().unwrap();
        let m = Manifest {
            scenario: "s".into(),
            mode: "sim".into(),
            seeds: vec![1, 2, 3],
            points: grid(&[], &[]).unwrap(),
            criteria: vec!["f1.share_ratio>=0.8".parse().unwrap()],
        };
        for (seed, ratio, faithful) in [(1, 0.5, true), (2, 0.9, false)] {
            let d = run_dir(dir.path(), "all", seed);
            std::fs::create_dir_all(&d).unwrap();
            let v = serde_json::json!({
                "jain": ratio, "faithful": faithful,
                "flows": [{"name": "f1", "share_ratio": ratio, "mean_bps": 1e9 * ratio}],
                "bottlenecks": [{"name": "sw0-r0", "utilization": 1.0, "drops": 2}],
            });
            std::fs::write(d.join("summary.json"), v.to_string()).unwrap();
        }
        let s = summarise(&m, dir.path()).unwrap();
        let p = &s.points[0];
        assert_eq!(p.seeds_done, vec![1, 2]);
        assert_eq!(p.seeds_missing, vec![3]);
        assert_eq!(p.faithful, 1);
        let r = &p.metrics["f1.share_ratio"];
        assert_eq!((r.n, r.min, r.max), (2, 0.5, 0.9));
        assert!((r.mean - 0.7).abs() < 1e-12);
        assert_eq!(p.metrics["sw0-r0.drops"].mean, 2.0);
        assert_eq!(p.criteria[0].met, 1);
        assert_eq!(p.criteria[0].of, 2);
        assert_eq!(p.criteria[0].seeds, vec![2]);
        let t = s.table();
        assert!(t.contains("f1.share_ratio >= 0.8: 1 of 2 seeds (2)"), "{t}");
        assert!(t.contains("missing seeds: 3"), "{t}");
    }
}

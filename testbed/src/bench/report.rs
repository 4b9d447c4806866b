//! Results of `testbed bench forwarding`: rows, ratios, and the printed table.

use std::fmt::Write as _;

use serde::Serialize;

/// The forwarding path a row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathKind {
    /// A veth pair straight from h1 to h2: the limit of the machine.
    Veth,
    /// The Linux bridge in the DUT namespace.
    Bridge,
    /// cp-switch (no shaping) in the DUT namespace.
    CpSwitch,
}

impl PathKind {
    /// The name printed in tables and JSON.
    pub fn label(self) -> &'static str {
        match self {
            PathKind::Veth => "veth",
            PathKind::Bridge => "bridge",
            PathKind::CpSwitch => "cp-switch",
        }
    }
}

/// What one measurement window saw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measurement {
    /// Length of the window, seconds (measured, not requested).
    pub window_s: f64,
    /// Frames the blaster handed to the kernel during the window.
    pub sent_frames: u64,
    /// Test frames of this measurement the counter received during the window.
    pub rx_frames: u64,
    /// `sent_frames / window_s`.
    pub sent_fps: f64,
    /// `rx_frames / window_s` — the figure that matters.
    pub rx_fps: f64,
    /// Received throughput in Gb/s: `rx_fps × size × 8` (FCS, preamble and gap excluded).
    pub rx_gbps: f64,
    /// `1 − rx/sent` over the window (frames in flight at the window edges make it inexact by
    /// at most a ring's worth).
    pub loss: f64,
    /// Frames the kernel dropped because the counter's receive ring was full, over the whole
    /// measurement (warm-up included): they reached h2 but were not counted.
    pub counter_ring_drops: u64,
    /// CPU used by the blaster thread over the window, in CPUs (1.0 = one core all the time;
    /// includes the kernel work done in its `sendto`, which for veth and the Linux bridge is
    /// the whole forwarding path).
    pub blaster_cpu: Option<f64>,
    /// CPU used by the counter thread over the window, in CPUs.
    pub counter_cpu: Option<f64>,
}

impl Measurement {
    /// Derives the rates from counts over a window.
    pub fn from_counts(size: usize, window_s: f64, sent_frames: u64, rx_frames: u64) -> Self {
        let w = if window_s > 0.0 { window_s } else { f64::NAN };
        let sent_fps = sent_frames as f64 / w;
        let rx_fps = rx_frames as f64 / w;
        let loss = if sent_frames == 0 {
            0.0
        } else {
            (1.0 - rx_frames as f64 / sent_frames as f64).max(0.0)
        };
        Measurement {
            window_s,
            sent_frames,
            rx_frames,
            sent_fps,
            rx_fps,
            rx_gbps: rx_fps * size as f64 * 8.0 / 1e9,
            loss,
            counter_ring_drops: 0,
            blaster_cpu: None,
            counter_cpu: None,
        }
    }
}

/// The outcome of one (path, size) cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    /// Measured.
    Measured(Measurement),
    /// The cp-switch binary was not found.
    NotBuilt {
        /// Where it was looked for.
        looked_for: String,
    },
    /// The measurement failed.
    Failed {
        /// Why.
        error: String,
    },
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The path.
    pub path: PathKind,
    /// Frame size (octets on the socket, FCS excluded).
    pub size: usize,
    /// The result (for several rounds: the round with the median received frames/s).
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Received frames/s of every measured round, ascending (empty if none was measured).
    pub rounds_rx_fps: Vec<f64>,
}

impl Row {
    /// A row of one round.
    pub fn new(path: PathKind, size: usize, outcome: Outcome) -> Row {
        let rounds_rx_fps = match outcome {
            Outcome::Measured(m) => vec![m.rx_fps],
            _ => Vec::new(),
        };
        Row {
            path,
            size,
            outcome,
            rounds_rx_fps,
        }
    }
}

/// Ratios of received frames/s at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ratio {
    /// Frame size.
    pub size: usize,
    /// cp-switch / Linux bridge.
    pub cp_switch_over_bridge: Option<f64>,
    /// Linux bridge / veth pair.
    pub bridge_over_veth: Option<f64>,
}

/// The whole benchmark report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Requested window per cell, seconds.
    pub duration_s: f64,
    /// Warm-up before each window, seconds.
    pub warmup_s: f64,
    /// Rounds of the whole sequence.
    pub rounds: usize,
    /// CPUs the machine has.
    pub cpus: usize,
    /// The 1-minute load average when the run started (`/proc/loadavg`): other work competing
    /// for the CPUs lowers every figure.
    pub load_avg_1m: Option<f64>,
    /// The cells, in measurement order.
    pub rows: Vec<Row>,
    /// Ratios per size.
    pub ratios: Vec<Ratio>,
    /// Caveats for reading the numbers.
    pub notes: Vec<String>,
}

impl Report {
    /// Received frames/s of `path` at `size`, if measured.
    pub fn rx_fps(&self, path: PathKind, size: usize) -> Option<f64> {
        self.rows.iter().find_map(|r| match r.outcome {
            Outcome::Measured(m) if r.path == path && r.size == size => Some(m.rx_fps),
            _ => None,
        })
    }

    /// Computes [`Report::ratios`] from the rows.
    pub fn compute_ratios(&mut self) {
        let mut sizes: Vec<usize> = self.rows.iter().map(|r| r.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        self.ratios = sizes
            .into_iter()
            .map(|size| Ratio {
                size,
                cp_switch_over_bridge: ratio(
                    self.rx_fps(PathKind::CpSwitch, size),
                    self.rx_fps(PathKind::Bridge, size),
                ),
                bridge_over_veth: ratio(
                    self.rx_fps(PathKind::Bridge, size),
                    self.rx_fps(PathKind::Veth, size),
                ),
            })
            .collect();
    }

    /// The human-readable table, ratios and notes.
    pub fn table(&self) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(
            s,
            "forwarding benchmark: {}s window after {}s warm-up per cell, {} round(s), {} CPUs, \
             load average {} at start",
            self.duration_s,
            self.warmup_s,
            self.rounds,
            self.cpus,
            self.load_avg_1m
                .map_or_else(|| "?".to_owned(), |l| format!("{l:.2}"))
        );
        let _ = writeln!(
            s,
            "{:<10} {:>5} {:>9} {:>8} {:>10} {:>6} {:>9} {:>9}  rounds (rx Mpps)",
            "path", "size", "rx Mpps", "rx Gb/s", "sent Mpps", "loss", "ctr drop", "CPU b/c",
        );
        for r in &self.rows {
            let head = format!("{:<10} {:>5}", r.path.label(), r.size);
            let _ = match &r.outcome {
                Outcome::Measured(m) => {
                    let spread = if r.rounds_rx_fps.len() > 1 {
                        r.rounds_rx_fps
                            .iter()
                            .map(|f| format!("{:.3}", f / 1e6))
                            .collect::<Vec<_>>()
                            .join(" ")
                    } else {
                        String::new()
                    };
                    writeln!(
                        s,
                        "{head} {:>9.3} {:>8.3} {:>10.3} {:>5.1}% {:>9} {:>9}  {spread}",
                        m.rx_fps / 1e6,
                        m.rx_gbps,
                        m.sent_fps / 1e6,
                        m.loss * 100.0,
                        m.counter_ring_drops,
                        cpu_pair(m.blaster_cpu, m.counter_cpu),
                    )
                }
                Outcome::NotBuilt { looked_for } => {
                    writeln!(s, "{head} cp-switch: not built ({looked_for})")
                }
                Outcome::Failed { error } => writeln!(s, "{head} failed: {error}"),
            };
        }
        let fmt = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}x"));
        let _ = writeln!(s, "ratios of received frames/s:");
        for r in &self.ratios {
            let _ = writeln!(
                s,
                "  {:>5} B: cp-switch/bridge {:>6}   bridge/veth {:>6}",
                r.size,
                fmt(r.cp_switch_over_bridge),
                fmt(r.bridge_over_veth)
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }
}

/// `95/20%`: blaster and counter CPU shares.
fn cpu_pair(b: Option<f64>, c: Option<f64>) -> String {
    let pct = |x: Option<f64>| x.map_or_else(|| "?".to_owned(), |x| format!("{:.0}", x * 100.0));
    format!("{}/{}%", pct(b), pct(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: PathKind, size: usize, rx: u64) -> Row {
        Row::new(
            path,
            size,
            Outcome::Measured(Measurement::from_counts(size, 2.0, 2 * rx, rx)),
        )
    }

    #[test]
    fn measurement_rates() {
        let m = Measurement::from_counts(1500, 2.0, 2_000_000, 1_000_000);
        assert_eq!(m.rx_fps, 500_000.0);
        assert_eq!(m.sent_fps, 1_000_000.0);
        assert!((m.rx_gbps - 6.0).abs() < 1e-9);
        assert!((m.loss - 0.5).abs() < 1e-12);
        assert_eq!(Measurement::from_counts(64, 1.0, 0, 0).loss, 0.0);
        assert_eq!(Measurement::from_counts(64, 1.0, 5, 7).loss, 0.0);
    }

    #[test]
    fn ratios_and_table() {
        let mut rep = Report {
            duration_s: 2.0,
            warmup_s: 0.5,
            rounds: 1,
            cpus: 2,
            load_avg_1m: Some(0.1),
            rows: vec![
                row(PathKind::Veth, 64, 2_000_000),
                row(PathKind::Bridge, 64, 1_000_000),
                row(PathKind::CpSwitch, 64, 1_200_000),
                row(PathKind::Veth, 1500, 1_000_000),
                Row::new(
                    PathKind::Bridge,
                    1500,
                    Outcome::Failed { error: "x".into() },
                ),
                Row::new(
                    PathKind::CpSwitch,
                    1500,
                    Outcome::NotBuilt {
                        looked_for: "/nowhere/cp-switch".into(),
                    },
                ),
            ],
            ratios: vec![],
            notes: vec!["shared CPUs".into()],
        };
        rep.compute_ratios();
        assert_eq!(rep.ratios.len(), 2);
        assert_eq!(rep.ratios[0].size, 64);
        assert!((rep.ratios[0].cp_switch_over_bridge.unwrap() - 1.2).abs() < 1e-9);
        assert!((rep.ratios[0].bridge_over_veth.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(rep.ratios[1].cp_switch_over_bridge, None);
        let t = rep.table();
        assert!(t.contains("cp-switch: not built"), "{t}");
        assert!(t.contains("1.20x"), "{t}");
        assert!(t.contains("note: shared CPUs"), "{t}");
        let j = serde_json::to_value(&rep).unwrap();
        assert_eq!(j["rows"][0]["path"], "veth");
        assert_eq!(j["rows"][0]["status"], "measured");
        assert_eq!(j["rows"][5]["status"], "not-built");
        assert!(j["rows"][0]["rx_fps"].as_f64().unwrap() > 0.0);
    }
}

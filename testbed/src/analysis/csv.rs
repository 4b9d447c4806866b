//! CSV time series of a run, in long format (one row per sample), ready for any plotting tool:
//! - `flows.csv`: `t_s,flow,bps,fair_share_bps` (`t_s` = end of the sample's interval);
//! - `queues.csv`: `t_s,queue,bytes`;
//! - `cnms.csv`: `t_s,flow,count`.

use std::fmt::Write as _;

use super::metrics::{share_at, Epoch};
use super::model::RunData;

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// `flows.csv` text.
pub fn flows_csv(run: &RunData, epochs: &[Epoch]) -> String {
    let mut s = String::from("t_s,flow,bps,fair_share_bps\n");
    for (i, f) in run.flows.iter().enumerate() {
        let name = field(&f.name);
        for (from, to, v) in f.intervals() {
            let share = share_at(epochs, i, 0.5 * (from + to));
            let _ = writeln!(s, "{to},{name},{v},{}", opt(share));
        }
    }
    s
}

/// `queues.csv` text.
pub fn queues_csv(run: &RunData) -> String {
    let mut s = String::from("t_s,queue,bytes\n");
    for q in &run.queues {
        let name = field(&q.name);
        for (t, b) in &q.samples {
            let _ = writeln!(s, "{t},{name},{b}");
        }
    }
    s
}

/// `cnms.csv` text from the per-flow CNM lists of
/// [`crate::analysis::metrics::attribute_cnms`].
pub fn cnms_csv(run: &RunData, per_flow: &[Vec<(f64, u64)>]) -> String {
    let mut s = String::from("t_s,flow,count\n");
    for (f, cnm) in run.flows.iter().zip(per_flow) {
        let name = field(&f.name);
        for (t, n) in cnm {
            let _ = writeln!(s, "{t},{name},{n}");
        }
    }
    s
}

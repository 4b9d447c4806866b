//! What a netns run measures while it runs, every 0.25 s: the CPU (all CPUs from
//! `/proc/stat`, each switch process from `/proc/PID/stat`) for the fidelity report, and the
//! bottleneck port's transmitted octets (its switch's `ctl stats`).

use serde_json::Value;

use crate::analysis::RunData;

/// Clock ticks per second of /proc (USER_HZ; 100 on every Linux architecture in use).
const USER_HZ: f64 = 100.0;

/// The sampling interval (seconds of the schedule).
pub const EVERY: f64 = 0.25;

/// CPU time (jiffies) of a process: utime + stime.
fn proc_jiffies(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// (busy, total) jiffies of all CPUs.
fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// The previous readings.
#[derive(Debug, Default)]
pub struct Probe {
    cpu_prev: Option<(u64, u64)>,
    proc_prev: Vec<Option<u64>>,
    bn_prev: Option<(f64, u64)>,
}

impl Probe {
    /// First readings of the CPUs and of the switch processes `pids`.
    pub fn new(pids: &[u32]) -> Probe {
        Probe {
            cpu_prev: cpu_jiffies(),
            proc_prev: pids.iter().map(|p| proc_jiffies(*p)).collect(),
            bn_prev: None,
        }
    }

    /// CPU shares since the last call: all CPUs, and each switch (`(name, pid)`).
    pub fn cpu(&mut self, now: f64, switches: &[(&str, u32)], run: &mut RunData) {
        let c = cpu_jiffies();
        if let (Some((b0, t0j)), Some((b1, t1j))) = (self.cpu_prev, c) {
            if t1j > t0j {
                run.fidelity.cpu.push((
                    "all CPUs".into(),
                    now,
                    (b1 - b0) as f64 / (t1j - t0j) as f64,
                ));
            }
        }
        self.cpu_prev = c;
        for (i, (name, pid)) in switches.iter().enumerate() {
            let j = proc_jiffies(*pid);
            if let (Some(Some(a)), Some(b)) = (self.proc_prev.get(i), j) {
                run.fidelity.cpu.push((
                    format!("cp-switch {name}"),
                    now,
                    (b.saturating_sub(*a)) as f64 / USER_HZ / EVERY,
                ));
            }
            if let Some(p) = self.proc_prev.get_mut(i) {
                *p = j;
            }
        }
    }

    /// The bottleneck's transmit rate since the last reading, from its switch's `stats`
    /// answer.
    pub fn bottleneck(&mut self, now: f64, stats: &Value, port: &str, run: &mut RunData) {
        let tx = stats["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|x| x["name"] == port))
            .and_then(|x| x["tx_bytes"].as_u64());
        let Some(tx) = tx else {
            return;
        };
        if let Some((tp, bp)) = self.bn_prev {
            if now > tp {
                if let Some(b) = run.bottlenecks.first_mut() {
                    b.tx_samples
                        .push((now, tx.saturating_sub(bp) as f64 * 8.0 / (now - tp)));
                }
            }
        }
        self.bn_prev = Some((now, tx));
    }
}

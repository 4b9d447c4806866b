//! What a netns run measures while it runs, every 0.25 s: the CPU (the CPUs the run may use,
//! from `/proc/stat`, each switch process from `/proc/PID/stat`) for the fidelity report, and
//! the bottleneck port's transmitted octets (its switch's `ctl stats`).
//!
//! "The CPUs the run may use" are the runner's affinity when it started (`taskset -c 0
//! testbed run ...` gives the run one CPU, and every daemon inherits it): a second, idle CPU
//! would halve the share of a run that keeps its one CPU busy, and hide the starvation.

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

/// (busy, total) jiffies of one `/proc/stat` CPU line's fields (after its name).
fn line_jiffies(fields: &str) -> (u64, u64) {
    let v: Vec<u64> = fields
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// (busy, total) jiffies of the CPUs `cpus` in the text of `/proc/stat` (every CPU, the
/// `cpu` line, when `cpus` is empty).
fn cpu_jiffies_in(stat: &str, cpus: &[usize]) -> Option<(u64, u64)> {
    if cpus.is_empty() {
        let fields = stat.lines().next()?.strip_prefix("cpu ")?;
        return Some(line_jiffies(fields));
    }
    let mut sum = (0, 0);
    let mut found = 0;
    for line in stat.lines() {
        let Some((name, fields)) = line.split_once(' ') else {
            continue;
        };
        let Some(n) = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if cpus.contains(&n) {
            let (b, t) = line_jiffies(fields);
            sum = (sum.0 + b, sum.1 + t);
            found += 1;
        }
    }
    (found > 0).then_some(sum)
}

/// The number of `cpuN` lines of `/proc/stat`: the machine's CPUs.
fn cpu_lines(stat: &str) -> usize {
    stat.lines()
        .filter(|l| {
            l.split_once(' ')
                .and_then(|(name, _)| name.strip_prefix("cpu"))
                .is_some_and(|n| n.parse::<usize>().is_ok())
        })
        .count()
}

/// (busy, total) jiffies of the CPUs `cpus` (all when empty).
fn cpu_jiffies(cpus: &[usize]) -> Option<(u64, u64)> {
    cpu_jiffies_in(&std::fs::read_to_string("/proc/stat").ok()?, cpus)
}

/// The previous readings.
#[derive(Debug, Default)]
pub struct Probe {
    /// The CPUs the run may use (empty: all).
    cpus: Vec<usize>,
    /// Their name in the report.
    cpus_name: String,
    cpu_prev: Option<(u64, u64)>,
    proc_prev: Vec<Option<u64>>,
    bn_prev: Option<(f64, u64)>,
}

impl Probe {
    /// First readings of the CPUs `cpus` (the run's; empty or every online CPU: all) and of
    /// the switch processes `pids`.
    pub fn new(pids: &[u32], cpus: &[usize]) -> Probe {
        // Every CPU of the machine (not `available_parallelism`, which counts the affinity).
        let online = std::fs::read_to_string("/proc/stat").map_or(0, |s| cpu_lines(&s));
        let all = cpus.is_empty() || cpus.len() >= online;
        let cpus: Vec<usize> = if all { Vec::new() } else { cpus.to_vec() };
        let cpus_name = if all {
            "all CPUs".to_string()
        } else {
            let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
            format!("the run's CPU(s) {}", list.join(","))
        };
        Probe {
            cpu_prev: cpu_jiffies(&cpus),
            cpus,
            cpus_name,
            proc_prev: pids.iter().map(|p| proc_jiffies(*p)).collect(),
            bn_prev: None,
        }
    }

    /// CPU shares since the last call: all CPUs, and each switch (`(name, pid)`).
    pub fn cpu(&mut self, now: f64, switches: &[(&str, u32)], run: &mut RunData) {
        let c = cpu_jiffies(&self.cpus);
        if let (Some((b0, t0j)), Some((b1, t1j))) = (self.cpu_prev, c) {
            if t1j > t0j {
                run.fidelity.cpu.push((
                    self.cpus_name.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 0 50 800 50 0 0 0 0 0
cpu0 60 0 40 300 0 0 0 0 0 0
cpu1 40 0 10 500 50 0 0 0 0 0
intr 12345
";

    /// The run's CPUs are read from their own lines: busy = user + nice + system + irq +
    /// softirq + steal, total = those + idle + iowait.
    #[test]
    fn the_runs_cpus_are_read_from_their_own_lines() {
        assert_eq!(cpu_jiffies_in(STAT, &[]), Some((150, 1000)));
        assert_eq!(cpu_jiffies_in(STAT, &[0]), Some((100, 400)));
        assert_eq!(cpu_jiffies_in(STAT, &[1]), Some((50, 600)));
        assert_eq!(cpu_jiffies_in(STAT, &[0, 1]), Some((150, 1000)));
        assert_eq!(cpu_jiffies_in(STAT, &[7]), None);
        assert_eq!(cpu_lines(STAT), 2);
    }
}

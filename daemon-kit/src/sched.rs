//! `--sched fifo:PRIO|other` and `--cpu N[,M]`: how the kernel schedules a daemon's dataplane
//! thread.
//!
//! # Why
//!
//! A dataplane loop sleeps in `ppoll` until a frame, a pacer's deadline or a control request
//! wakes it. Under the default time-sharing policy (`SCHED_OTHER`) a wakeup on a busy CPU
//! waits for the running task's slice: on a 2-CPU machine running a switch, agents, generators
//! and sinks, a CNM then waits hundreds of microseconds before the agent reads it, and a pacer
//! wakes late and sends its backlog in a burst. `SCHED_FIFO` (sched(7)) puts the thread ahead
//! of every `SCHED_OTHER` task of its CPU from the moment it becomes runnable; it runs until it
//! blocks again. The loops never spin (each iteration ends in `ppoll` with the next deadline),
//! so a real-time dataplane uses the CPU only for the frames it moves, and the kernel's
//! real-time throttling (`kernel.sched_rt_runtime_us`, 950 ms of every second by default)
//! leaves the rest to everything else even if it did.
//!
//! `--cpu` pins the thread to the listed CPUs (sched_setaffinity(2)): a pinned thread keeps a
//! warm cache and never waits for a migration, and two real-time daemons pinned apart never
//! queue behind each other.
//!
//! # Scope
//!
//! [`SchedArgs::apply`] sets both on the *calling thread* only (Linux schedules threads, and
//! pid 0 names the caller): call it on the dataplane thread, after the helper threads (control
//! socket, metrics, trace writer, port reopening) have started, so they stay time-shared and
//! never delay the loop. [`current`] reads back what the kernel applies to the calling thread,
//! for `ctl stats` (`"sched": {"policy": "fifo:50", "cpus": [1]}`).
//!
//! # Refusal
//!
//! `SCHED_FIFO` needs root or `CAP_SYS_NICE` (or an `RLIMIT_RTPRIO` at least the priority): the
//! kernel answers `EPERM`, and the daemon stops with a configuration error saying so (exit
//! status 2) rather than run with a policy it was not given. A CPU the machine does not have
//! is refused the same way.

use std::io;

use cnm_proto::phy::process::{self, Policy};
use serde_json::{json, Value};

use crate::DaemonError;

/// The `--sched` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedPolicy {
    /// Leave the thread time-shared (`SCHED_OTHER`, the default).
    #[default]
    Other,
    /// `SCHED_FIFO` at this static priority (1-99).
    Fifo(u8),
}

impl std::str::FromStr for SchedPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "other" {
            return Ok(SchedPolicy::Other);
        }
        let bad = || format!("{s:?}: expected other or fifo:PRIO with PRIO 1-99");
        let prio = s.strip_prefix("fifo:").ok_or_else(bad)?;
        match prio.trim().parse::<u8>() {
            Ok(p @ 1..=99) => Ok(SchedPolicy::Fifo(p)),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for SchedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchedPolicy::Other => write!(f, "other"),
            SchedPolicy::Fifo(p) => write!(f, "fifo:{p}"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for SchedPolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A `--cpu N[,M...]` list: CPU numbers as sched_setaffinity(2) counts them (a TOML array
/// of numbers in a file).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct CpuList(pub Vec<usize>);

impl std::str::FromStr for CpuList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_cpus(s).map(CpuList)
    }
}

impl std::fmt::Display for CpuList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self.0.iter().map(usize::to_string).collect();
        write!(f, "{}", list.join(","))
    }
}

fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let cpus: Vec<usize> = s
        .split(',')
        .map(|c| {
            c.trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n < 1024)
                .ok_or_else(|| format!("{s:?}: expected CPU numbers 0-1023 separated by commas"))
        })
        .collect::<Result<_, _>>()?;
    Ok(cpus)
}

/// The two flags, flattened into each daemon's argument struct.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args, serde::Deserialize)]
pub struct SchedArgs {
    /// Scheduling policy of the dataplane thread: `other` (time-shared, default) or
    /// `fifo:PRIO` (real-time SCHED_FIFO, PRIO 1-99; needs root or CAP_SYS_NICE).
    #[arg(long, value_name = "fifo:PRIO|other")]
    #[serde(default)]
    pub sched: Option<SchedPolicy>,
    /// Pin the dataplane thread to these CPUs (default: any).
    #[arg(long, value_name = "N[,M]")]
    #[serde(default)]
    pub cpu: Option<CpuList>,
}

impl SchedArgs {
    /// Applies the flags to the calling thread (see the module documentation); nothing given,
    /// nothing done. A refusal is a [`DaemonError::Config`] naming the flag and the reason.
    pub fn apply(&self) -> Result<(), DaemonError> {
        if let Some(cpus) = &self.cpu {
            process::set_affinity(&cpus.0).map_err(|e| refused_cpu(cpus, &e))?;
        }
        if let Some(p) = self.sched {
            let policy = match p {
                SchedPolicy::Other => Policy::Other,
                SchedPolicy::Fifo(n) => Policy::Fifo(n),
            };
            process::set_policy(policy).map_err(|e| refused_sched(p, &e))?;
            tracing::info!(sched = %p, "scheduling policy set");
        }
        Ok(())
    }

    /// `self` with every flag given in `flags` replacing it (a file overlaid by the command
    /// line).
    pub fn overlay(&mut self, flags: &SchedArgs) {
        if flags.sched.is_some() {
            self.sched = flags.sched;
        }
        if flags.cpu.is_some() {
            self.cpu.clone_from(&flags.cpu);
        }
    }
}

/// The message of a refused `--sched`.
fn refused_sched(p: SchedPolicy, e: &io::Error) -> DaemonError {
    let why = match e.raw_os_error() {
        Some(EPERM) => {
            "refused: a real-time policy needs root or CAP_SYS_NICE (or RLIMIT_RTPRIO)".to_string()
        }
        _ => format!("refused: {e}"),
    };
    DaemonError::Config(format!("--sched {p}: {why}"))
}

/// The message of a refused `--cpu`.
fn refused_cpu(cpus: &CpuList, e: &io::Error) -> DaemonError {
    let why = match e.raw_os_error() {
        Some(EINVAL) => {
            let online = std::thread::available_parallelism().map_or(0, usize::from);
            format!("no such CPU on this machine ({online} online)")
        }
        Some(EPERM) => "refused: not permitted".to_string(),
        _ => format!("refused: {e}"),
    };
    DaemonError::Config(format!("--cpu {cpus}: {why}"))
}

/// `EPERM` and `EINVAL` (asm-generic/errno-base.h; the same on every Linux architecture).
const EPERM: i32 = 1;
const EINVAL: i32 = 22;

/// What the kernel applies to the calling thread: `{"policy": "fifo:50", "cpus": [1]}`
/// (`"policy": "other"` when time-shared; `null` fields when the kernel cannot say).
pub fn current() -> Value {
    let policy = match process::policy() {
        Ok(Policy::Other) => json!("other"),
        Ok(Policy::Fifo(p)) => json!(format!("fifo:{p}")),
        Ok(Policy::RoundRobin(p)) => json!(format!("rr:{p}")),
        Ok(Policy::Unknown(n)) => json!(format!("policy {n}")),
        Err(_) => Value::Null,
    };
    let cpus = process::affinity().map_or(Value::Null, |c| json!(c));
    json!({ "policy": policy, "cpus": cpus })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[command(flatten)]
        sched: SchedArgs,
    }

    fn flags(args: &[&str]) -> Result<SchedArgs, clap::Error> {
        use clap::Parser;
        let mut v = vec!["daemon"];
        v.extend_from_slice(args);
        Flags::try_parse_from(v).map(|f| f.sched)
    }

    #[test]
    fn sched_and_cpu_flags_parse() {
        let f = flags(&["--sched", "fifo:50", "--cpu", "1"]).unwrap();
        assert_eq!(f.sched, Some(SchedPolicy::Fifo(50)));
        assert_eq!(f.cpu, Some(CpuList(vec![1])));
        let f = flags(&["--sched", "other", "--cpu", "0,1"]).unwrap();
        assert_eq!(f.sched, Some(SchedPolicy::Other));
        assert_eq!(f.cpu, Some(CpuList(vec![0, 1])));
        assert_eq!(flags(&[]).unwrap(), SchedArgs::default());
        for bad in ["fifo:0", "fifo:100", "fifo", "rr:5", "fifo:x", ""] {
            assert!(flags(&["--sched", bad]).is_err(), "{bad:?}");
        }
        for bad in ["", "a", "1,", "-1", "1024"] {
            assert!(flags(&["--cpu", bad]).is_err(), "{bad:?}");
        }
        assert_eq!(SchedPolicy::Fifo(7).to_string(), "fifo:7");
        assert_eq!("fifo:99".parse::<SchedPolicy>(), Ok(SchedPolicy::Fifo(99)));
    }

    #[test]
    fn toml_and_overlay() {
        let mut file: SchedArgs = toml::from_str("sched = \"fifo:10\"\ncpu = [0]\n").unwrap();
        assert_eq!(file.sched, Some(SchedPolicy::Fifo(10)));
        let e = toml::from_str::<SchedArgs>("sched = \"fifo:200\"").unwrap_err();
        assert!(e.to_string().contains("fifo:PRIO"), "{e}");
        file.overlay(&SchedArgs {
            sched: None,
            cpu: Some(CpuList(vec![1])),
        });
        assert_eq!(file.sched, Some(SchedPolicy::Fifo(10)));
        assert_eq!(file.cpu, Some(CpuList(vec![1])));
    }

    #[test]
    fn refusals_say_why() {
        let e = refused_sched(SchedPolicy::Fifo(50), &io::Error::from_raw_os_error(EPERM));
        assert_eq!(e.exit_code(), crate::error::EXIT_CONFIG);
        assert!(e.to_string().starts_with("--sched fifo:50: refused"), "{e}");
        assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}");
        let e = refused_cpu(&CpuList(vec![5, 7]), &io::Error::from_raw_os_error(EINVAL));
        assert!(e.to_string().starts_with("--cpu 5,7: no such CPU"), "{e}");
    }

    /// On a thread of its own, so the test runner keeps its policy.
    fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().expect("thread")
    }

    #[test]
    fn a_cpu_the_machine_lacks_is_refused() {
        let e = on_thread(|| {
            SchedArgs {
                sched: None,
                cpu: Some(CpuList(vec![1023])),
            }
            .apply()
        })
        .unwrap_err();
        assert!(e.to_string().contains("no such CPU"), "{e}");
        assert_eq!(e.exit_code(), crate::error::EXIT_CONFIG);
    }

    #[test]
    fn fifo_is_applied_or_refused_with_a_reason() {
        // Root (or CAP_SYS_NICE) gets the policy and `current` reports it; anyone else gets
        // the refusal. Both outcomes are checked: which one depends on who runs the test.
        let (r, now) = on_thread(|| {
            let args = SchedArgs {
                sched: Some(SchedPolicy::Fifo(1)),
                cpu: None,
            };
            let r = args.apply();
            (r, current())
        });
        match r {
            Ok(()) => assert_eq!(now["policy"], "fifo:1", "{now}"),
            Err(e) => {
                println!("not permitted to use SCHED_FIFO here: checking the refusal");
                assert!(e.to_string().starts_with("--sched fifo:1: refused"), "{e}");
                assert_eq!(now["policy"], "other", "{now}");
            }
        }
        let plain = on_thread(current);
        assert!(
            plain["cpus"].as_array().is_some_and(|c| !c.is_empty()),
            "{plain}"
        );
    }
}

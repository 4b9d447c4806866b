//! `testbed`: experiments for the QCN dataplane.
//!
//! ```text
//! testbed bench forwarding [--duration 3s] [--sizes 64,1500] [--rounds N] [--json] [--cp-switch PATH]
//! testbed bench qcn [--duration 3s] [--warmup 500ms] [--rounds 3] [--json]
//! testbed down [--all] [--dry-run] [--json]
//! ```
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use cnm_proto::Duration;

use testbed::bench::forwarding;
use testbed::{netns, signals};

#[derive(Debug, Parser)]
#[command(name = "testbed", version, about = "Experiments for the QCN dataplane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a topology in the deterministic virtual-time simulator.
    Sim(testbed::sim::cli::SimArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(Bench),
    /// Remove namespaces, interfaces and processes that crashed runs left behind.
    Down {
        /// Also remove objects of runs whose process is still alive.
        #[arg(long)]
        all: bool,
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Frames/s through a veth pair, the Linux bridge and cp-switch (h1 — DUT — h2).
    Forwarding {
        /// Measurement window per path and size (after the warm-up).
        #[arg(long, default_value = "3s")]
        duration: Duration,
        /// Warm-up before each window (FDB learning, rings filling).
        #[arg(long, default_value = "500ms")]
        warmup: Duration,
        /// Frame sizes in bytes (Ethernet header + payload, FCS excluded), 60-1514.
        #[arg(long, value_delimiter = ',', default_value = "64,1500")]
        sizes: Vec<usize>,
        /// The cp-switch binary (default: next to this executable).
        #[arg(long)]
        cp_switch: Option<PathBuf>,
        /// Repeat the whole sequence of paths this many times; each cell reports its median.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// QCN loop: CNM reaction latency, cost of CP sampling, rp-agent throughput.
    Qcn {
        /// Traffic time of the latency part and window of the throughput parts.
        #[arg(long, default_value = "3s")]
        duration: Duration,
        /// Warm-up before each window.
        #[arg(long, default_value = "500ms")]
        warmup: Duration,
        /// Rounds of the CP on/off comparison (interleaved; medians reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if signals::requested() {
                eprintln!("testbed: {e}");
                return ExitCode::from(signals::INTERRUPTED_EXIT as u8);
            }
            eprintln!("testbed: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Sim(args) => {
            testbed::sim::cli::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Down { all, dry_run, json } => {
            let report = netns::state::down(all, dry_run).context("testbed down")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                let verb = if dry_run { "would remove" } else { "removed" };
                for n in &report.namespaces {
                    println!("{verb} namespace {n}");
                }
                for l in &report.links {
                    println!("{verb} link {l}");
                }
                for f in &report.state_files {
                    println!("{verb} state file {f}");
                }
                for s in &report.skipped_live {
                    println!("kept {s} (its run is still alive; --all removes it)");
                }
                for e in &report.errors {
                    eprintln!("error: {e}");
                }
                if report.namespaces.is_empty() && report.links.is_empty() {
                    println!("nothing to remove");
                }
            }
            Ok(if report.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Bench(Bench::Forwarding {
            duration,
            warmup,
            sizes,
            cp_switch,
            rounds,
            json,
        }) => {
            signals::install().context("installing signal handlers")?;
            let cfg = forwarding::Config {
                duration,
                warmup,
                sizes,
                cp_switch: cp_switch.or_else(forwarding::default_cp_switch_path),
                rounds,
            };
            let report = forwarding::run(&cfg)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.table());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(Bench::Qcn {
            duration,
            warmup,
            rounds,
            json,
        }) => {
            signals::install().context("installing signal handlers")?;
            let cfg = testbed::bench::qcn::Config {
                duration,
                warmup,
                rounds,
                cp_switch: testbed::bench::qcn::sibling_binary("cp-switch"),
                rp_agent: testbed::bench::qcn::sibling_binary("rp-agent"),
            };
            let report = testbed::bench::qcn::run(&cfg)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.table());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

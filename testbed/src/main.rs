//! `testbed`: experiments for the QCN dataplane.
//!
//! ```text
//! testbed bench forwarding [--duration 3s] [--sizes 64,1500] [--json] [--cp-switch PATH]
//! testbed down [--all] [--dry-run] [--json]
//! ```
#![forbid(unsafe_code)]

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use testbed::{netns, signals};

#[derive(Debug, Parser)]
#[command(name = "testbed", version, about = "Experiments for the QCN dataplane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if e.downcast_ref::<signals::Interrupted>().is_some() {
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
    }
}

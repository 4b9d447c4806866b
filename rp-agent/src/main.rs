//! `rp-agent`: the QCN reaction point as a host agent.
//!
//! ```text
//! rp-agent --uplink IF [--tap NAME] [--tap-ip CIDR] [--line-rate R] [--ctl PATH] [--trace FILE]
//!          [--rp-mode qcn|adaptive-bc|qcn-bs|adaptive-bc+qcn-bs|explicit-rate] [--config FILE.toml]
//! rp-agent gen --uplink IF --dst MAC [--flows N] [--pattern P] [--priority P] [--duration D] [--json]
//! rp-agent sink --uplink IF [--duration D] [--json]
//! rp-agent ctl --socket PATH <show flows | stats | set rate RATE | set rp KEY=VALUE...> [--json]
//! ```
#![forbid(unsafe_code)]

mod daemon;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use daemon::{ctl, run, traffic, DaemonError};

#[derive(Debug, Parser)]
#[command(
    name = "rp-agent",
    version,
    about = "QCN reaction point: TAP shim with per-flow rate limiters, traffic generator and sink",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Sub>,
    #[command(flatten)]
    run: run::RunArgs,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Generate traffic through an agent onto an interface.
    Gen(traffic::GenArgs),
    /// Count generated traffic received on an interface.
    Sink(traffic::SinkArgs),
    /// Talk to a running rp-agent through its control socket.
    Ctl {
        /// The daemon's --ctl path.
        #[arg(long)]
        socket: PathBuf,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
        /// show flows | stats
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

fn signals() -> Arc<AtomicBool> {
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, term.clone()) {
            eprintln!("rp-agent: cannot install signal handler: {e}");
            std::process::exit(1);
        }
    }
    term
}

fn exit_on(r: Result<(), DaemonError>) {
    if let Err(e) = r {
        eprintln!("rp-agent: {e}");
        std::process::exit(e.exit_code());
    }
}

fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Some(Sub::Ctl {
            socket,
            mut json,
            mut words,
        }) => {
            if let Some(i) = words.iter().position(|w| w == "--json") {
                words.remove(i);
                json = true;
            }
            match ctl::client(&socket, &words) {
                Ok(v) if json => println!("{v}"),
                Ok(v) => print!("{}", ctl::table(&v)),
                Err(e) => {
                    eprintln!("rp-agent ctl: {e}");
                    std::process::exit(1);
                }
            }
        }
        Some(Sub::Gen(a)) => exit_on(traffic::gen(a, signals())),
        Some(Sub::Sink(a)) => exit_on(traffic::sink(a, signals())),
        None => exit_on(run::run(cli.run, signals())),
    }
}

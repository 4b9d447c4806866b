//! `rp-agent`: the QCN reaction point as a host agent.
//!
//! ```text
//! rp-agent --uplink IF [--tap NAME] [--tap-ip CIDR] [--line-rate R] [--ctl PATH] [--trace FILE]
//!          [--rp-mode qcn|adaptive-bc|qcn-bs|adaptive-bc+qcn-bs|explicit-rate] [--config FILE.toml]
//! rp-agent gen --uplink IF --dst MAC [--flows N] [--pattern P] [--priority P] [--duration D] [--json]
//! rp-agent sink --uplink IF [--duration D] [--json]
//! rp-agent hosts --ctl PATH     (then: start gen|sink NETNS OUT ARGS... on PATH)
//! rp-agent ctl --socket PATH <show flows | stats | set rate RATE | set rp KEY=VALUE...> [--json]
//! rp-agent completions bash|zsh|fish|elvish|powershell
//! rp-agent man [--out-dir DIR]
//! ```
//!
//! Diagnostics are logged through `tracing` on standard error, filtered by `RUST_LOG`
//! (default `info`).
//!
//! `--die-with-parent` (every mode but `ctl`) shuts the process down when its parent dies.
//! Exit status: 0 after SIGINT/SIGTERM or the end of `--duration`, 2 for an invalid
//! configuration (flags, file, interface, control socket path), 1 for a run-time failure;
//! `ctl` exits 1 when the daemon cannot be reached, 2 when it refuses the command, 141 when its
//! output pipe closed early.
#![forbid(unsafe_code)]

mod daemon;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};
use daemon::{ctl, hosts, run, traffic, DaemonError};
use daemon_kit::process::{self, out, outln};

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
    /// Run many generators and sinks (each in its own network namespace) in one event loop,
    /// started through the control socket.
    Hosts(hosts::HostsArgs),
    /// Talk to a running rp-agent through its control socket.
    Ctl {
        /// The daemon's --ctl path.
        #[arg(long)]
        socket: PathBuf,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
        /// The command: `show flows` | `stats` | `set rate RATE` (the line rate) |
        /// `set rp KEY=VALUE...` (reaction-point settings under their `[rp]` names, e.g.
        /// `set rp rp_mode=adaptive-bc rpg_gd=6`).
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        words: Vec<String>,
    },
    /// The hidden `completions SHELL` and `man [--out-dir DIR]`.
    #[command(flatten)]
    Docs(daemon_kit::cli::Docs),
}

/// Runs `mode` with the SIGINT/SIGTERM flag (and the parent-death signal if asked), then
/// exits with the error's status if it failed.
fn exit_on(die_with_parent: bool, mode: impl FnOnce(Arc<AtomicBool>) -> Result<(), DaemonError>) {
    let r = process::term_flag().and_then(|term| {
        if die_with_parent {
            process::die_with_parent()?;
        }
        mode(term)
    });
    if let Err(e) = r {
        eprintln!("rp-agent: {e}");
        std::process::exit(e.exit_code());
    }
}

fn main() {
    let cli = Cli::parse();
    daemon_kit::cli::init_logging();
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
                Ok(v) if json => outln(&v.to_string()),
                Ok(v) => out(&ctl::table(&v)),
                Err(e) => {
                    eprintln!("rp-agent ctl: {e}");
                    std::process::exit(e.exit_code());
                }
            }
        }
        Some(Sub::Docs(docs)) => docs.run(Cli::command()),
        Some(Sub::Gen(a)) => exit_on(a.agent.die_with_parent, |t| traffic::gen(a, t)),
        Some(Sub::Sink(a)) => exit_on(a.die_with_parent, |t| traffic::sink(a, t)),
        Some(Sub::Hosts(a)) => exit_on(a.die_with_parent, |t| hosts::hosts(a, t)),
        None => exit_on(cli.run.agent.die_with_parent, |t| run::run(cli.run, t)),
    }
}

//! `cp-switch`: a userspace L2 switch with VOQ input buffers, output queues, emulated line rate
//! and delay, PAUSE/PFC, and 802.1Qau congestion points.
//!
//! ```text
//! cp-switch --port IF[,rate=R][,delay=D] ... [--default-rate R] [--lossless pause|pfc]
//!           [--buffer BYTES] [--cp output|input|off] [--cnpv P[,P]] [--cp-set-point BYTES]
//!           [--cp-weight W] [--cp-sample-base BYTES] [--cnm-priority P]
//!           [--config FILE.toml] [--ctl PATH] [--trace FILE] [--metrics ADDR]
//!           [--die-with-parent]
//! cp-switch ctl --socket PATH <show ports | show fdb | show queues | show cps | stats |
//!                              set rate PORT RATE | set delay PORT DUR | set cp KEY=VALUE...> [--json]
//! cp-switch completions bash|zsh|fish|elvish|powershell
//! cp-switch man [--out-dir DIR]
//! ```
//!
//! Exit status: 0 after SIGINT/SIGTERM, 2 for an invalid configuration (command line, file,
//! interface, control socket path), 1 for a run-time failure; `ctl` exits 1 when the daemon
//! cannot be reached, 2 when it refuses the command, 141 when its output pipe closed early.
#![forbid(unsafe_code)]

mod daemon;

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};
use daemon::{cli::RunArgs, ctl, driver};
use daemon_kit::process::{self, out, outln};

#[derive(Debug, Parser)]
#[command(
    name = "cp-switch",
    version,
    about = "Userspace L2 switch with VOQ input buffers, output queues, emulated line rate, PAUSE/PFC and 802.1Qau congestion points",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Talk to a running cp-switch through its control socket.
    Ctl {
        /// The daemon's --ctl path.
        #[arg(long)]
        socket: PathBuf,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
        /// The command: `show ports` | `show fdb` | `show queues` | `show cps` | `stats` |
        /// `set rate PORT RATE` (`none` removes shaping) | `set delay PORT DUR` |
        /// `set cp KEY=VALUE...` (congestion-point settings under their `[cp]` names, e.g.
        /// `set cp cp_queue_set_point=33KB mode=fqcn`).
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
                Ok(v) => {
                    if json {
                        outln(&v.to_string());
                    } else {
                        out(&ctl::print_answer(&v));
                    }
                }
                Err(e) => {
                    eprintln!("cp-switch ctl: {e}");
                    std::process::exit(e.exit_code());
                }
            }
        }
        Some(Sub::Docs(docs)) => docs.run(Cli::command()),
        None => {
            daemon_kit::cli::init_logging();
            let args = match cli.run.resolve() {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("cp-switch: {e}");
                    std::process::exit(daemon_kit::error::EXIT_CONFIG);
                }
            };
            let started = process::term_flag().and_then(|term| {
                if args.die_with_parent {
                    process::die_with_parent()?;
                }
                driver::run(args, term)
            });
            if let Err(e) = started {
                eprintln!("cp-switch: {e}");
                std::process::exit(e.exit_code());
            }
        }
    }
}

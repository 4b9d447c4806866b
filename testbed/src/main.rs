//! `testbed`: experiments for the QCN dataplane.
//!
//! ```text
//! testbed bench forwarding [--duration 3s] [--sizes 64,1500] [--rounds N] [--json] [--cp-switch PATH]
//! testbed bench qcn [--duration 3s] [--warmup 500ms] [--rounds 3] [--json]
//! testbed bench app [--duration 5s] [--warmup 1s] [--rounds 3] [--no-shaped] [--congestion CC] [--json]
//! testbed bench sim [--duration 1s] [--rounds 3] [--json]
//! testbed down [--all] [--dry-run] [--json]
//! testbed run SCENARIO [--out DIR] [--mode netns|sim] [--twin [--twin-seeds N]] [--capture [all|cnms|LINK,...]] [--seed N] [--set K=V]...
//!              [--cp-mode qcn|fqcn|explicit-rate]
//!              [--culprit arrival|occupancy-deterministic|occupancy-random]
//!              [--rp-mode qcn|adaptive-bc|qcn-bs|adaptive-bc+qcn-bs|explicit-rate]
//! testbed list
//! testbed compare SCENARIO --variants qcn,off [--mode netns|sim] [--out DIR] [--set K=V]...
//! testbed completions bash|zsh|fish|elvish|powershell
//! testbed man [--out-dir DIR]
//! testbed sim TOPOLOGY.toml
//! testbed sweep SCENARIO [--seeds 1..20] [--set K=V1,V2]... [--criterion 'f1.share_ratio>=0.8']
//!              [--jobs N] [--out DIR] [--emit commands|slurm] [--json]
//! testbed sweep --merge DIR [--criterion ...] [--json]
//! ```
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use cnm_proto::Duration;

use testbed::bench::forwarding;
use testbed::{netns, run, scenario, signals};

#[derive(Debug, Parser)]
#[command(name = "testbed", version, about = "Experiments for the QCN dataplane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario (built-in name or TOML path) on namespaces or in the simulator.
    Run(RunCmd),
    /// List the built-in scenarios.
    List,
    /// Run one scenario under several congestion-point variants, side by side.
    Compare(CompareCmd),
    /// Run a topology in the deterministic virtual-time simulator.
    Sim(testbed::sim::cli::SimArgs),
    /// Run a scenario over many seeds and parameter values (in parallel, or emitted for a
    /// cluster runner) and summarise per grid point.
    Sweep(testbed::sweep::SweepArgs),
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
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(hide = true)]
    Completions {
        /// The shell.
        shell: daemon_kit::cli::Shell,
    },
    /// Print the man page, or write one page per command into a directory.
    #[command(hide = true)]
    Man {
        /// Write testbed.1, testbed-run.1, ... there and print their paths.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Incast server inside a run's namespace (see testbed::run::incast).
    #[command(hide = true)]
    IncastServer {
        /// TCP port.
        #[arg(long)]
        port: u16,
    },
    /// Incast client inside a run's namespace (see testbed::run::incast).
    #[command(hide = true)]
    IncastClient {
        /// A server, IP:PORT (repeat).
        #[arg(long = "server", required = true)]
        servers: Vec<std::net::SocketAddr>,
        /// Octets asked of each server per round.
        #[arg(long)]
        sru: cnm_proto::Bytes,
        /// Rounds at most.
        #[arg(long)]
        rounds: u64,
        /// Stop starting rounds after this long.
        #[arg(long)]
        duration: Duration,
    },
}

#[derive(Debug, clap::Args)]
struct Common {
    /// A built-in scenario (`testbed list`) or a scenario TOML file.
    scenario: String,
    /// Where to run it.
    #[arg(long, value_enum, default_value = "netns")]
    mode: run::Mode,
    /// Seed (default: the file's).
    #[arg(long)]
    seed: Option<u64>,
    /// Override a scenario field: `duration=2s`, `links.sw0-r0.rate=50mbit`, `link.2.delay=1us`,
    /// `scenario.netns.duration=10s` (see `testbed::scenario`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Congestion-point algorithm of every switch (default: the file's).
    #[arg(long, value_enum)]
    cp_mode: Option<run::modes::CpModeArg>,
    /// Culprit selection of every switch's congestion points (default: the file's).
    #[arg(long, value_enum)]
    culprit: Option<run::modes::CulpritArg>,
    /// Reaction-point mode of every host (default: the file's).
    #[arg(long, value_enum)]
    rp_mode: Option<run::modes::RpModeArg>,
    /// Capture into pcap files: alone, the bottleneck (bottleneck.pcap, cnms.pcap); `cnms`,
    /// cnms.pcap alone; `all`, every link; or the links named (`s1-h1,s1-s2`), one
    /// link-<LINK>.pcap each.
    #[arg(long, value_name = "all|cnms|LINK,...", num_args = 0..=1, default_missing_value = run::capture::BOTTLENECK)]
    capture: Option<run::capture::Capture>,
    /// Directory of the cp-switch and rp-agent binaries (default: next to this program).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Skip the plots.
    #[arg(long)]
    no_plots: bool,
    /// After a netns run, run the simulator on the same scenario and seed (into twin-sim/)
    /// and compare them metric by metric; the run is faithful only within the limits.
    #[arg(long)]
    twin: bool,
    /// Seeds of the twin: the run's, then the following ones; each flow's share is judged
    /// against the simulator's spread over them (1: the run's seed alone).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100))]
    twin_seeds: u32,
    /// Netns runs: `--sched` of every switch daemon's dataplane thread (`fifo:PRIO`
    /// real-time, or `other`; default: the daemon's own, time-shared).
    #[arg(long, value_name = "fifo:PRIO|other")]
    switch_sched: Option<daemon_kit::sched::SchedPolicy>,
    /// Netns runs: `--sched` of the `rp-agent hosts` process's loop (every generator and
    /// sink; default: `fifo:50` when the loop has a CPU of its own, see `--no-pin`,
    /// time-shared otherwise).
    #[arg(long, value_name = "fifo:PRIO|other")]
    hosts_sched: Option<daemon_kit::sched::SchedPolicy>,
    /// Netns runs: leave the daemons' loops unpinned (by default, with a CPU for each switch
    /// and one more, each switch's loop and the hosts process's loop get a CPU of their own).
    #[arg(long)]
    no_pin: bool,
}

#[derive(Debug, clap::Args)]
struct RunCmd {
    #[command(flatten)]
    common: Common,
    /// Results directory (default results/<scenario>-<mode>-<timestamp>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Variant: CP placement (output, input, off), RP mode (qcn-bs, adaptive-bc, ...) or CP/RP.
    #[arg(long)]
    variant: Option<String>,
    /// Print the summary JSON instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct CompareCmd {
    #[command(flatten)]
    common: Common,
    /// Variants to compare: CP placements, RP modes or CP/RP (e.g. qcn,off,input/qcn-bs); all
    /// are checked before the first one runs. (`--modes` is the old name of this option.)
    #[arg(
        long,
        alias = "modes",
        value_name = "VARIANT,...",
        value_delimiter = ',',
        default_value = "qcn,off"
    )]
    variants: Vec<String>,
    /// Results directory (default results/<scenario>-<mode>-compare-<timestamp>).
    #[arg(long)]
    out: Option<PathBuf>,
}

impl Common {
    fn options(&self) -> run::RunOptions {
        let mut o = run::RunOptions::new(self.mode);
        o.seed = self.seed;
        o.capture = self.capture.clone().unwrap_or_default();
        o.bin_dir = self.bin_dir.clone();
        o.quiet = self.quiet;
        o.no_plots = self.no_plots;
        o.twin = self.twin;
        o.twin_seeds = self.twin_seeds;
        o.switch_sched = self.switch_sched;
        o.hosts_sched = self.hosts_sched;
        o.pin = !self.no_pin;
        o.modes = run::modes::ModeFlags {
            cp_mode: self.cp_mode,
            culprit: self.culprit,
            rp_mode: self.rp_mode,
        };
        o
    }
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
        /// `--sched` of the switch, agent and generator of parts 1 and 4 (real-time by
        /// default: on a busy machine a time-shared daemon waits milliseconds for a CPU; `other`
        /// measures them time-shared).
        #[arg(long, value_name = "fifo:PRIO|other", default_value = "fifo:50")]
        sched: daemon_kit::sched::SchedPolicy,
        /// Pin those daemons apart: the switch on CPU 0, the agent/generator on the last CPU.
        #[arg(long)]
        pin: bool,
        /// Run only these parts (1 latency, 2 sampling, 3 agent throughput, 4 pacing, 5 ingress
        /// stage cost).
        #[arg(long, value_name = "N[,N]", value_delimiter = ',')]
        parts: Vec<u8>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// iperf3 TCP through rp-agent + cp-switch + rp-agent against the Linux bridge, and
    /// through a shaped 1 Gb/s bottleneck with QCN active.
    App {
        /// Measured time of each iperf3 test (whole seconds).
        #[arg(long, default_value = "5s")]
        duration: Duration,
        /// Omitted start of each test (whole seconds, iperf3 -O).
        #[arg(long, default_value = "1s")]
        warmup: Duration,
        /// Rounds (bridge, agents and shaped interleaved; medians reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Skip the shaped bottleneck.
        #[arg(long)]
        no_shaped: bool,
        /// TCP congestion control of every test (iperf3 -C, e.g. cubic or bbr; default: the
        /// system's).
        #[arg(long)]
        congestion: Option<String>,
        /// The iperf3 binary.
        #[arg(long, default_value = "iperf3")]
        iperf3: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Simulator speed: the 10 Gb/s dumbbell and parking lot in virtual time.
    Sim {
        /// Virtual time per round.
        #[arg(long, default_value = "1s")]
        duration: Duration,
        /// Rounds per topology (interleaved; medians reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    daemon_kit::cli::init_logging();
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

/// Dispatches a parsed command line to its subcommand.
fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::List => cmd_list(),
        Command::Run(cmd) => cmd_run(cmd),
        Command::Compare(cmd) => cmd_compare(cmd),
        Command::Sweep(args) => cmd_sweep(&args),
        Command::Completions { shell } => cmd_completions(shell),
        Command::Man { out_dir } => cmd_man(out_dir),
        Command::Sim(args) => {
            testbed::sim::cli::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::IncastServer { port } => {
            run::incast::serve(port)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::IncastClient {
            servers,
            sru,
            rounds,
            duration,
        } => cmd_incast_client(servers, sru, rounds, duration),
        Command::Down { all, dry_run, json } => cmd_down(all, dry_run, json),
        Command::Bench(b) => cmd_bench(b),
    }
}

/// `testbed list`: the built-in scenarios, one a line.
fn cmd_list() -> anyhow::Result<ExitCode> {
    let list = scenario::list();
    let w = list.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, desc) in list {
        println!("{name:<w$}  {desc}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `testbed run`: one scenario, its summary as a table or JSON.
fn cmd_run(cmd: RunCmd) -> anyhow::Result<ExitCode> {
    signals::install().context("installing signal handlers")?;
    let sc = scenario::load(&cmd.common.scenario, &cmd.common.sets)?;
    let mut opts = cmd.common.options();
    opts.out = cmd.out;
    opts.variant = cmd.variant;
    let out = run::run_scenario(&sc, &opts)?;
    if cmd.json {
        println!("{}", out.report.summary.to_json());
        run::print_files(&out.dir, true);
    } else {
        run::print_outcome(&out);
    }
    Ok(ExitCode::SUCCESS)
}

/// `testbed compare`: one scenario under several variants, then the comparison table and the
/// files written.
fn cmd_compare(cmd: CompareCmd) -> anyhow::Result<ExitCode> {
    signals::install().context("installing signal handlers")?;
    let sc = scenario::load(&cmd.common.scenario, &cmd.common.sets)?;
    let opts = cmd.common.options();
    let dir = cmd.out.unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "{}-{}-compare-{}",
            sc.name,
            cmd.common.mode.as_str(),
            run::timestamp()
        ))
    });
    let (outs, rep) = run::compare(&sc, &cmd.variants, &opts, &dir)?;
    for o in &outs {
        print!(
            "{}",
            testbed::report::table::summary_table(&o.report.summary)
        );
        println!();
    }
    print!("{}", rep.table);
    run::print_files(&dir, false);
    Ok(ExitCode::SUCCESS)
}

/// `testbed sweep`: emits the runs, or runs them and prints the per-point summary; fails when a
/// run failed.
fn cmd_sweep(args: &testbed::sweep::SweepArgs) -> anyhow::Result<ExitCode> {
    signals::install().context("installing signal handlers")?;
    match testbed::sweep::main(args)? {
        testbed::sweep::Outcome::Emitted => Ok(ExitCode::SUCCESS),
        testbed::sweep::Outcome::Summary(s, failed) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print!("{}", s.table());
            }
            if failed > 0 {
                eprintln!("testbed: {failed} run(s) of the sweep failed (see their logs)");
                return Ok(ExitCode::FAILURE);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `testbed completions`: a shell completion script on stdout.
fn cmd_completions(shell: daemon_kit::cli::Shell) -> anyhow::Result<ExitCode> {
    let script = daemon_kit::cli::completions(Cli::command(), shell);
    daemon_kit::process::out(&script);
    Ok(ExitCode::SUCCESS)
}

/// `testbed man`: the man page on stdout, or one page per command into a directory.
fn cmd_man(out_dir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    match out_dir {
        None => daemon_kit::process::out(&daemon_kit::cli::man_page(Cli::command())?),
        Some(d) => {
            for f in daemon_kit::cli::man_pages(Cli::command(), &d)? {
                daemon_kit::process::outln(&f.display().to_string());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `testbed incast-client` (inside a run's namespace): rounds against the servers, results on
/// stdout.
fn cmd_incast_client(
    servers: Vec<std::net::SocketAddr>,
    sru: cnm_proto::Bytes,
    rounds: u64,
    duration: Duration,
) -> anyhow::Result<ExitCode> {
    let o = run::incast::ClientOptions {
        servers,
        sru: sru.get(),
        rounds,
        duration: duration.to_std(),
    };
    run::incast::client(&o, &mut std::io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}

/// `testbed down`: removes what crashed runs left behind; fails when a removal failed.
fn cmd_down(all: bool, dry_run: bool, json: bool) -> anyhow::Result<ExitCode> {
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

/// `testbed bench ...`: runs one benchmark and prints its report as a table or JSON.
fn cmd_bench(b: Bench) -> anyhow::Result<ExitCode> {
    match b {
        Bench::Forwarding {
            duration,
            warmup,
            sizes,
            cp_switch,
            rounds,
            json,
        } => {
            signals::install().context("installing signal handlers")?;
            let cfg = forwarding::Config {
                duration,
                warmup,
                sizes,
                cp_switch: cp_switch.or_else(forwarding::default_cp_switch_path),
                rounds,
            };
            let report = forwarding::run(&cfg)?;
            print_report(json, &report, || report.table())
        }
        Bench::Qcn {
            duration,
            warmup,
            rounds,
            sched,
            pin,
            parts,
            json,
        } => {
            signals::install().context("installing signal handlers")?;
            let cfg = testbed::bench::qcn::Config {
                duration,
                warmup,
                rounds,
                sched: Some(sched),
                pin,
                parts,
                cp_switch: testbed::bins::path("cp-switch"),
                rp_agent: testbed::bins::path("rp-agent"),
            };
            let report = testbed::bench::qcn::run(&cfg)?;
            print_report(json, &report, || report.table())
        }
        Bench::App {
            duration,
            warmup,
            rounds,
            no_shaped,
            congestion,
            iperf3,
            json,
        } => {
            signals::install().context("installing signal handlers")?;
            let cfg = testbed::bench::app::Config {
                duration,
                warmup,
                rounds,
                no_shaped,
                cp_switch: testbed::bins::path("cp-switch"),
                rp_agent: testbed::bins::path("rp-agent"),
                iperf3,
                congestion,
            };
            let report = testbed::bench::app::run(&cfg)?;
            print_report(json, &report, || report.table())
        }
        Bench::Sim {
            duration,
            rounds,
            json,
        } => {
            let cfg = testbed::bench::sim::Config { duration, rounds };
            let report = testbed::bench::sim::run(&cfg)?;
            print_report(json, &report, || report.table())
        }
    }
}

/// Prints a benchmark report: pretty JSON with `--json`, else its table.
fn print_report<R: serde::Serialize>(
    json: bool,
    report: &R,
    table: impl FnOnce() -> String,
) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", table());
    }
    Ok(ExitCode::SUCCESS)
}

//! `cargo run --release -p testbed --example sim_run -- TOPOLOGY.toml [options]`: the
//! `testbed sim` command before it is wired into the `testbed` binary.
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: testbed::sim::cli::SimArgs,
}

fn main() -> anyhow::Result<()> {
    testbed::sim::cli::run(Cli::parse().args)
}

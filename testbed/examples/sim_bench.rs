//! Speed of the simulator: the 4-flow QCN dumbbell at 10 Gb/s with 1500-octet frames for
//! 1 s of virtual time (or the duration given as the first argument), no trace.
//!
//! `cargo run --release -p testbed --example sim_bench [-- DURATION [TOPOLOGY.toml]]`
#![allow(clippy::unwrap_used)]

use cnm_proto::{Duration, Instant};
use testbed::sim::engine::Direction;
use testbed::sim::topo::Topology;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let duration: Duration = args.next().as_deref().unwrap_or("1s").parse()?;
    let path = args.next().unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/sim/dumbbell4.toml").into()
    });
    let mut topo = Topology::load(std::path::Path::new(&path))?;
    topo.output.trace = None;
    topo.duration = duration;
    let (mut sim, built) = topo.build()?;
    let wall = std::time::Instant::now();
    sim.run_until(Instant::ZERO + duration);
    let wall = wall.elapsed().as_secs_f64();
    let st = sim.stats();
    let bottleneck = built
        .bottleneck
        .map(|l| sim.link_stats(l, Direction::AtoB).frames)
        .unwrap_or(0);
    println!("virtual time           {duration}");
    println!("wall time              {wall:.3} s");
    println!(
        "virtual / wall         {:.3}",
        duration.as_secs_f64() / wall
    );
    println!(
        "events                 {} ({:.0}/s)",
        st.events,
        st.events as f64 / wall
    );
    println!(
        "frame deliveries       {} ({:.0}/s)",
        st.deliveries,
        st.deliveries as f64 / wall
    );
    println!(
        "bottleneck frames      {} ({:.0}/s of wall time)",
        bottleneck,
        bottleneck as f64 / wall
    );
    println!("node polls             {}", st.polls);
    println!("spin breaks            {}", st.spin_breaks);
    Ok(())
}

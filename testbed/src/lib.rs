//! `testbed`: builds topologies of Linux network namespaces, runs the daemons and traffic of
//! the QCN dataplane in them, and measures.
//!
//! * [`netns`] — namespaces, veth pairs, bridges and guarded processes with guaranteed
//!   teardown ([`netns::Lab`]); the base of every real-network test.
//! * [`signals`] — SIGINT/SIGTERM turn into a flag the run loops check, so the guards tear
//!   down before exit.
//! * [`bench`](mod@bench) — `testbed bench forwarding`: frames/s through a veth pair, the Linux bridge
//!   and cp-switch, measured in the same run with the testbed's own blaster and counter.
//! * [`bins`] — where the workspace's binaries are (next to the running program).
//! * [`analysis`] — the run model both worlds fill, trace reader, metrics (Jain, max-min
//!   shares, convergence, queue statistics), fidelity check, `summary.json`.
//! * [`sweep`] — `testbed sweep`: a scenario over a grid of seeds and overrides, run in
//!   parallel or emitted for a cluster runner, summarised per grid point.
//! * [`pool`] — independent jobs (a sweep's runs, a twin's seeds) on a few threads.
//! * [`report`] — results directory: CSV, plots, `report.md`, comparisons, terminal tables.
#![forbid(unsafe_code)]

pub mod analysis;
pub mod bench;
pub mod bins;
pub mod netns;
pub mod pool;
pub mod report;
pub mod run;
pub mod scenario;
pub mod signals;
pub mod sim;
pub mod sweep;

//! Analysis of a run: the model both worlds fill, trace readers, metrics, fair shares,
//! fidelity, and the summary.
//!
//! The scenario runner builds a [`model::RunData`] — flows with their paths and throughput
//! samples, links with capacities, queue series and daemon events (usually via
//! [`trace::read_trace_file`] and [`model::RunData::absorb`]), bottlenecks to report, fidelity
//! measurements — and calls [`summary::analyze`]. The result is the `summary.json` of issue 6
//! item 4; [`crate::report`] turns it into CSV files, plots, `report.md`, terminal tables and
//! side-by-side comparisons.
//!
//! Metrics follow QCN-REFERENCE §6: Jain's index over rates normalized by max-min shares,
//! weighted max-min shares by progressive filling, convergence to ±10 % of the share, queue
//! mean/std/p99 weighted by time, time above Qhigh, drops, PAUSE frames, utilization, CNMs per
//! second per flow.

pub mod csv;
pub mod fidelity;
pub mod maxmin;
pub mod metrics;
pub mod model;
pub mod summary;
pub mod trace;

pub use model::{
    Bottleneck, Event, FidelityInputs, FlowSeries, LinkSpec, Marker, QueueSeries, RunData, RunMeta,
};
pub use summary::{analyze, Analysis, AnalysisOptions, Summary};

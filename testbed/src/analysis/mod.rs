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
//! ```
//! use cnm_proto::Rate;
//! use testbed::analysis::trace::{read_trace, TraceOptions};
//! use testbed::analysis::{analyze, Bottleneck, FlowSeries, LinkSpec, RunData, RunMeta};
//!
//! let mut meta = RunMeta::new("dumbbell", "sim", 6.0, 1);
//! meta.steady_window = Some((1.0, 2.0));
//! meta.q_eq_bytes = Some(33_000);
//! let mut run = RunData::new(meta);
//! run.add_link(LinkSpec::new("bn", Rate::from_gbps(10)).step(2.0, Rate::from_gbps(1)));
//! run.mark(2.0, "bottleneck 10→1 Gb/s");
//! for i in 0..4 {
//!     let mut f = FlowSeries::new(&format!("f{i}"), &["bn"]).at_host(&format!("h{i}"), Some(0));
//!     for k in 1..=600 {
//!         let t = k as f64 * 0.01;
//!         f.push_bps(t, if t <= 2.0 { 2.5e9 } else { 0.25e9 });
//!     }
//!     run.add_flow(f);
//! }
//! let trace = r#"{"type":"queues","t":1500000000,"node":"sw0","queues":[{"port":"eth4","priority":3,"kind":"output","bytes":33000}]}"#;
//! run.absorb(read_trace(trace.as_bytes(), "sw0.trace", &TraceOptions::default()));
//! run.add_bottleneck(Bottleneck::new("sw0:eth4", "bn", Some("sw0/eth4/p3/output")).events_from(Some("sw0"), &["4", "eth4"]));
//! let a = analyze(&run, &Default::default());
//! assert!((a.summary.jain.unwrap() - 1.0).abs() < 1e-9);
//! assert_eq!(a.summary.flows[0].fair_share_bps, Some(2.5e9));
//! assert_eq!(a.summary.convergence_s, vec![Some(0.0)]);
//! println!("{}", testbed::report::table::summary_table(&a.summary));
//! ```
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
pub mod twin;

pub use model::{
    Bottleneck, Event, FidelityInputs, FlowSeries, IngressBurst, IngressStage, LinkSpec, Marker,
    QueueSeries, RunData, RunMeta, SenderLateness,
};
pub use summary::{analyze, Analysis, AnalysisOptions, Summary};

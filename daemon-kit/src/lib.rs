//! The shell both daemons (`cp-switch`, `rp-agent`) share around their sans-IO cores.
//!
//! `cnm-proto` keeps the codecs, units, the RNG and thin Linux I/O; what only a daemon (or the
//! testbed that reads a daemon's output) needs lives here:
//!
//! * [`ctl`] — the control socket (bounded: connections, line length, deadlines), generic over
//!   each daemon's command type, and its client;
//! * [`exposition`], [`metrics_http`] — the Prometheus exposition builder and the HTTP server
//!   that serves it;
//! * [`trace_record`] — [`trace_record::TraceRecord`], the one type of every trace line, written
//!   by both daemons and the testbed's simulator and read by the testbed's analysis;
//! * [`trace_writer`] — the `--trace` JSON-lines writer thread (never blocks the dataplane);
//! * [`error`] — [`DaemonError`] and the exit statuses every binary uses (2 = configuration);
//! * [`offload`] — turning an interface's offloads off before a port opens;
//! * [`process`] — signals, `--die-with-parent`, standard output that survives a closed pipe;
//! * [`reopen`] — a port-reopening thread, so a port's loss and return never stall the
//!   dataplane thread;
//! * [`sched`] — `--sched fifo:PRIO|other` and `--cpu N[,M]`: the dataplane thread's
//!   scheduling policy and CPU affinity, and what `stats` reports of them;
//! * [`patch`] — run-time parameter changes: `KEY=VALUE` operands → a typed patch;
//! * [`cli`] — what every binary (the tools too) does alike: `RUST_LOG` logging, shell
//!   completions and man pages from its clap definition.

#![forbid(unsafe_code)]

pub mod cli;
pub mod config_file;
pub mod ctl;
pub mod error;
pub mod exposition;
pub mod metrics_http;
pub mod offload;
pub mod patch;
pub mod process;
pub mod reopen;
pub mod sched;
mod sorted_json;
pub mod trace_record;
pub mod trace_writer;

pub use error::DaemonError;

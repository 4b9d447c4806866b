//! A deterministic discrete-event simulator that runs the production sans-IO cores in virtual
//! time.
//!
//! # Why
//! The QCN papers run at 10 Gb/s; a 2-core machine cannot forward that in user space. Because
//! [`cp_switch::Bridge`] (and the reaction-point agent) are sans-IO cores — frames in through
//! `handle_*`, frames out through `poll_*`, time and randomness passed in — the very same code
//! runs here against a virtual clock. Nothing in this module re-implements an algorithm of the
//! cores, and the cores contain no simulator-only branch.
//!
//! # Model
//! * **Clock and events.** Virtual time is a [`cnm_proto::Instant`] starting at 0. Events sit
//!   in one binary heap ordered by `(time, insertion sequence)`: ties break in the order the
//!   events were scheduled, so a run is a pure function of its topology and seed.
//! * **Nodes** are driven exactly like the daemons drive their cores: a frame that reaches a
//!   node is handed to its `handle_*` at the arrival instant; the node is polled (`poll_*`) at
//!   the instant its `poll_timeout()` names, and right after any input that makes it due. A
//!   node reporting "due now" again and again at the same instant without making progress is
//!   pushed 1 ns forward (counted in [`SimStats::spin_breaks`]) so a misbehaving core cannot
//!   hang the run.
//! * **Links** are full duplex, each direction with a rate and a propagation delay. A frame
//!   handed to a link at `start` reaches the far end when its last bit does:
//!   `start + serialisation + delay`, where serialisation counts what the frame costs on an
//!   Ethernet wire (padded to 60 octets, + 4 FCS + 20 preamble/SFD/IPG, 802.3-2018 clauses
//!   3.1.1, 4.2.3.3, 4.4.2): each direction's transmitter is a [`cnm_proto::line::LineClock`],
//!   the same line clock as the bridge's shaper and the agent's pacers.
//!   *Who paces.* A switch port's line rate is emulated by the [`cp_switch::Bridge`]'s own
//!   shaper (the port is configured with the link's rate and zero delay), so a link whose
//!   sender is a switch adds only the frame's serialisation latency and the propagation delay
//!   and never refuses a frame: pacing it twice would only add rounding disagreements. Any
//!   other sender (hosts, test injectors) meets a link transmitter that is busy for the
//!   frame's serialisation time and refuses frames meanwhile (`tx` returns false, as a full
//!   NIC ring would); the node is polled again when the transmitter frees up.
//!   *Rate changes* ([`engine::Action::SetRate`]) act like a physical line's: the rest of the
//!   frame being serialised goes at the new rate and arrives accordingly (the line clock's
//!   re-timing), so a link set to 1 bit/s and back is not held by the frame that started
//!   meanwhile.
//! * **Frames** are real byte buffers: what the cores emit is what the far end parses (a CNM
//!   in the simulator is the same bytes as on the wire), and what the pcap shows.
//! * **Randomness.** Node `i` (in declaration order) gets `root.fork(i)` of
//!   `Rng::new(seed)`; the same seed gives the same run bit for bit.
//!
//! # Outputs
//! A trace of JSON lines in the daemons' format (queue occupancy every `trace_interval`,
//! bridge events: drops, PAUSE, rate changes; host events when the host core reports them),
//! each line with a `node` field; pcap files of chosen links; a summary (per-link
//! utilisation, drops, queue mean/std/p99, per-node summaries).
//!
//! * **Hosts** ([`host::HostNode`]) run the production [`rp_agent::Agent`] with the agent's
//!   own traffic models and sink as applications, plus optional TCP-like incast endpoints
//!   ([`tcp`]) whose segments enter the agent like any host frame.
//!
//! # Speed and memory
//! Measured on the 2-core development machine (shared with other builds), release build, the
//! 4-flow QCN dumbbell of `scenarios/sim/dumbbell4.toml` (10 Gb/s, 1500-octet frames, no
//! trace): 1 s of virtual time in about 2.1-2.3 s of wall time, 0.78 M frame deliveries and
//! 0.39 M bottleneck frames per wall-clock second, 4.2 M events; resident memory 7.8 MB after
//! 1 s as after 100 ms (buffers are recycled: every queue is bounded by configuration, the
//! links by rate × delay). `cargo run --release -p testbed --example sim_bench` prints these.
//! Profile (perf): the agent's `poll_uplink` (22 %) and `poll_timeout` (10 %, a scan of its
//! flow table), frame copies (15 %), the event heap (9 %), the engine's dispatch (4 %).
//!
//! # Modules
//! [`engine`] (clock, events, links, nodes), [`node`] (the node interface), [`host`] (agent
//! hosts), [`tcp`] (TCP-like transport for incast), [`stats`] (queue histograms,
//! utilisation), [`topo`] (TOML topology files), [`cli`] (`testbed sim TOPOLOGY.toml`).

pub mod cli;
pub mod engine;
pub mod host;
pub mod node;
mod queue;
pub mod stats;
pub mod tcp;
pub mod topo;

pub use engine::{LinkId, LinkSpec, NodeId, Sim, SimBuilder, SimError, SimStats, TraceOptions};
pub use node::SimNode;

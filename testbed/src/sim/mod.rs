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
//! * **Clock and events.** Virtual time is a [`cnm_proto::Instant`] starting at 0. Events are
//!   ordered by `(time, insertion sequence)`: ties break in the order the events were
//!   scheduled, so a run is a pure function of its topology and seed. Future events sit in a
//!   small array of packed `(time, sequence)` keys kept sorted (the earliest last); events
//!   scheduled for the instant being processed (a host polled for the
//!   frame that just reached it) go to a FIFO beside it, which gives the same order at less
//!   cost (`queue`, with the argument). A node's wake-up due now when nothing else is due now
//!   would be the very next event: it skips the queue altogether (the engine's ready slot,
//!   [`engine`]'s `reschedule`), the same order again, and still counted as an event.
//! * **Nodes** are a plain enum: switches ([`cp_switch::Bridge`]) and hosts
//!   ([`host::HostNode`]), plus, for tests, one typed kind of their own ([`node`]); no dynamic
//!   dispatch, no downcasts. They are driven exactly like the daemons drive their cores: a frame that reaches a
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
//! `testbed bench sim` measures the 4-flow QCN dumbbell of `scenarios/sim/dumbbell4.toml`
//! (10 Gb/s, 1500-octet frames) and the 10 Gb/s parking lot: simulated seconds per wall
//! second, CPU per simulated second, events and frame deliveries per second, peak memory.
//! About 4.2 M events and 1.6 M frame deliveries per simulated second on the dumbbell.
//! Memory stays flat over virtual time (buffers are recycled: every queue is bounded by
//! configuration, the links by rate × delay). Where the time goes (perf, release build): the
//! frame copies every hop makes (the cores take and hand out borrowed frames, so a frame is
//! copied into the agent's flow queue, tagged into its transmit buffer, onto the link, into
//! the bridge's queue, onto the next link and into the receiving agent's host queue), the
//! bridge's transmit and deadline scans, the event heap (one sift per event: a pop leaves its
//! slot to the push that follows it), and the agent's classification.
//! The agent's per-poll work visits its occupied flow slots only, not its whole table, and
//! walks a host frame's headers once (the key is read off the walk; the tag layout is kept
//! with the queued frame for tagging in place). Trace lines are written with sorted keys
//! straight from their records, without a `serde_json::Value` in between.
//! A profile of `testbed sim scenarios/sim/dumbbell4.toml --duration 1s` (perf, release
//! build, self time): the engine's loop about 10 %, the event heap's sift 7 %, header walks
//! 6-8 % (host, sink and bridge), `Agent::host_frame` 6 %, the bridge's `poll_timeout` and
//! `poll_transmit_buf` 5 % each, `Agent::poll_uplink_buf` 4-6 %, the generator's zero fill of
//! each payload 2-3 %; the trace lines fell from about 5 % (through `Value`) to under 1 %.
//!
//! # Modules
//! [`engine`] (clock, links, nodes), `queue` (the event queue), [`node`] (the node kinds),
//! [`host`] (agent hosts), [`tcp`] (TCP-like transport for incast), [`stats`] (queue histograms,
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
pub use node::{NoNode, SimNode};

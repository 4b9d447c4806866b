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
//!   small array kept sorted by `(time, sequence)` (the earliest last); events
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
//! configuration, the links by rate × delay). No frame is copied from hop to hop: its buffer
//! moves from the sending core onto the link and into the receiving core, each handing a
//! recycled buffer back ([`engine`]).
//!
//! Where the time goes: about 6 100 instructions per delivered frame on the dumbbell
//! (`valgrind --tool=callgrind`, 100 ms of virtual time; instruction counts, unlike seconds,
//! repeat exactly on a busy machine). Nothing dominates. Inclusive shares: the generating
//! hosts about a third (the generator's frame, the agent's classification, pacing and
//! tagging, and the frame refused with backpressure and offered again each turn), the bridge
//! about a quarter (receive, forwarding, the CP's sampling, transmit and the next deadline),
//! the engine's own loop, queue and rescheduling a fifth, the receiving host and its sink a
//! tenth, the trace lines 4 %. What the cores do once per frame is cheap where it repeats:
//! the agent's per-poll work visits its occupied flow slots only; a host frame whose L2
//! header is the previous one's takes that header's flow key and tag layout without a walk;
//! the sink finds a recent flow's counters through a small cache; the bridge keeps its busy
//! ports as a bitmap and passes a frame no VOQ waits ahead of straight to its output queue;
//! the event queue is a sorted array (a short walk from its end per event). Trace
//! lines are written with sorted keys straight from their records, without a
//! `serde_json::Value` in between.
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

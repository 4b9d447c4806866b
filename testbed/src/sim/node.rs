//! The nodes of the simulator: a plain enum of switches and hosts.
//!
//! A switch is a [`cp_switch::Bridge`] and a host a [`super::host::HostNode`] (the
//! [`rp_agent::Agent`] with its applications); the engine drives both directly, with no dynamic
//! dispatch and no downcasts: [`super::Sim::bridge`] and [`super::Sim::host`] hand them out by
//! type.
//!
//! Tests sometimes need a node that is neither (a frame injector, a scripted station). The
//! engine is generic over one such kind `X`, which implements [`SimNode`], the sans-IO shape of
//! the project's cores: frames in with a timestamp, frames out when polled, and the next
//! instant the node has work. Such nodes are handed out typed too ([`super::Sim::custom`]).
//! Production runs use [`NoNode`], a kind with no values, so that branch of the engine does not
//! exist in them.

use cnm_proto::Instant;
use serde_json::Value;

/// A simulated node other than a switch or a host (test injectors). Ports are numbered in the
/// order the node's links were declared.
pub trait SimNode: std::fmt::Debug {
    /// A frame fully arrived on `port` at `now`.
    fn handle_frame(&mut self, now: Instant, port: usize, frame: &[u8]);

    /// Hands every frame due at `now` to `tx(port, frame)`. `tx` returns false when the
    /// port's link transmitter is busy: the node keeps the frame and is polled again when the
    /// transmitter is free.
    fn poll(&mut self, now: Instant, tx: &mut dyn FnMut(usize, &[u8]) -> bool);

    /// The next instant the node has work (an instant at or before the last `now` means
    /// "now"); `None` when idle until a frame arrives.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Trace records the node produced since the last call (JSON objects; the engine adds
    /// `"type": "event"` when absent and the `node` field).
    fn drain_events(&mut self, _f: &mut dyn FnMut(Value)) {}

    /// What the node reports in the run summary.
    fn summary(&self, _now: Instant) -> Value {
        Value::Null
    }
}

/// The kind of extra node of a simulation that has none: switches and hosts only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoNode {}

impl SimNode for NoNode {
    fn handle_frame(&mut self, _now: Instant, _port: usize, _frame: &[u8]) {
        match *self {}
    }
    fn poll(&mut self, _now: Instant, _tx: &mut dyn FnMut(usize, &[u8]) -> bool) {
        match *self {}
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match *self {}
    }
}

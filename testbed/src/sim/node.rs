//! The node interface of the simulator.
//!
//! A switch is a [`cp_switch::Bridge`] driven directly by the engine. Every other node (hosts
//! running the reaction-point agent, test injectors) implements [`SimNode`], the sans-IO shape
//! of the project's cores: frames in with a timestamp, frames out when polled, and the next
//! instant the node has work.

use cnm_proto::Instant;
use serde_json::Value;
use std::any::Any;

/// A simulated node other than a switch. Ports are numbered in the order the node's links
/// were declared.
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

    /// For inspection by tests (downcast to the concrete type).
    fn as_any(&self) -> &dyn Any;

    /// For inspection by tests (downcast to the concrete type).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

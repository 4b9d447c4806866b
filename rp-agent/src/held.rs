//! Backpressure from the agent to whatever feeds it host frames.
//!
//! [`Agent::handle_host`] refuses a frame with [`HostError::Backpressure`] when the frame's
//! flow queue is full. Refusing is not dropping: the producer (the TAP reader of the daemon,
//! the traffic generator, a simulated application) keeps the frame, stops producing, and
//! offers it again once the agent has room ([`Agent::can_accept`]), so a host sending faster
//! than its flows may leave is slowed down, never silently cut. [`HeldFrames`] is that
//! producer side, once: a FIFO of refused frames, offered again oldest first, with new frames
//! queued behind them so order is kept within a producer.
//!
//! A producer that reads a batch at a time (the TAP) cannot stop in the middle of a batch, so
//! it may hold up to one batch; it reads again only when [`HeldFrames::may_offer`] says so.

use std::collections::VecDeque;

use cnm_proto::Instant;

use crate::tagger::UPLINK_HEADROOM;
use crate::{Agent, HostError};

/// What became of a frame offered with [`HeldFrames::offer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// The agent took it.
    Accepted,
    /// Kept, to be offered again by [`HeldFrames::retry`].
    Held,
    /// The agent refused it for good (malformed, too long, flow table full); not kept.
    Refused(HostError),
}

/// Frames refused with backpressure, each with the producer's tag (e.g. a source index).
#[derive(Debug, Default)]
pub struct HeldFrames {
    /// Tag, offset of the frame in its buffer (after the headroom a frame produced in place
    /// keeps for the agent's tags), buffer.
    queue: VecDeque<(u64, usize, Vec<u8>)>,
    /// Buffers of frames that left, for reuse.
    spare: Vec<Vec<u8>>,
}

impl HeldFrames {
    /// No frame held.
    pub fn new() -> HeldFrames {
        HeldFrames::default()
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Drops every held frame (their producer stopped: the frames it was blocked on are never
    /// written, as a blocked `write(2)` that is interrupted sends nothing); returns how many.
    /// Their buffers are kept for reuse.
    pub fn clear(&mut self) -> usize {
        let n = self.queue.len();
        self.spare
            .extend(self.queue.drain(..).map(|(_, _, buf)| buf));
        n
    }

    /// True when the producer may produce new frames: nothing is held and the agent has room.
    pub fn may_offer(&self, agent: &Agent) -> bool {
        self.queue.is_empty() && agent.can_accept()
    }

    /// True when frames are held, the agent has room for them again, and it has nothing
    /// queued whose departure would wake the producer: the producer must retry now, as no
    /// deadline of the agent's will come. A line that sent the whole queue in the turn that
    /// refused the frame (a loop woken late, its pacers catching up) leaves exactly this;
    /// waiting for the agent's next deadline then waited for nothing (in the daemons, their
    /// longest sleep, 10 ms, the line idle).
    pub fn stranded(&self, agent: &Agent) -> bool {
        !self.queue.is_empty() && agent.queued_frames() == 0 && agent.can_accept()
    }

    /// Offers the held frames again, oldest first, until the agent refuses one with
    /// backpressure. `done(tag, len, result)` is called for every frame that leaves the queue:
    /// accepted (`Ok`) or refused for good (`Err`).
    pub fn retry(
        &mut self,
        agent: &mut Agent,
        now: Instant,
        done: &mut dyn FnMut(u64, usize, Result<(), HostError>),
    ) {
        while let Some((tag, start, frame)) = self.queue.front_mut() {
            let len = frame.len().saturating_sub(*start);
            // Taken, the frame's buffer moves into the agent and a spare takes its place.
            let r = agent.handle_host_buf_at(now, frame, *start);
            if r == Err(HostError::Backpressure) {
                return;
            }
            done(*tag, len, r);
            if let Some((_, _, buf)) = self.queue.pop_front() {
                self.spare.push(buf);
            }
        }
    }

    /// Offers a new frame. Behind held frames it is held too (order is kept); otherwise it
    /// goes to the agent and is held if refused with backpressure.
    pub fn offer(&mut self, agent: &mut Agent, now: Instant, tag: u64, frame: &[u8]) -> Offered {
        if self.queue.is_empty() {
            match agent.handle_host(now, frame) {
                Ok(()) => return Offered::Accepted,
                Err(HostError::Backpressure) => {}
                Err(e) => return Offered::Refused(e),
            }
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        self.queue.push_back((tag, 0, buf));
        Offered::Held
    }

    /// Like [`HeldFrames::offer`] for a producer that writes its frame in place: `make` fills
    /// a buffer of `len` octets and returns the frame's length, or `None` when it has no frame
    /// (then nothing is offered and `None` returned). Produced into a buffer the queue would
    /// keep, a frame refused with backpressure is held without a copy, and one the agent
    /// takes moves into the agent without a copy ([`Agent::handle_host_buf_at`], after
    /// [`UPLINK_HEADROOM`] octets the agent tags it in), as do held
    /// frames taken by [`HeldFrames::retry`]. Call only when
    /// [`HeldFrames::is_empty`] (new frames queue behind held ones: produce them after
    /// [`HeldFrames::retry`] emptied the queue).
    pub fn offer_from(
        &mut self,
        agent: &mut Agent,
        now: Instant,
        tag: u64,
        len: usize,
        make: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Option<Offered> {
        let mut buf = self.spare.pop().unwrap_or_default();
        // A recycled buffer of this length is reused as it is: `make` writes every octet
        // it returns. The frame starts after room for the agent's tags, which it then adds
        // in place.
        let h = UPLINK_HEADROOM;
        buf.resize(h + len, 0);
        let Some(n) = make(&mut buf[h..]).map(|n| n.min(len)) else {
            self.spare.push(buf);
            return None;
        };
        buf.truncate(h + n);
        let offered = if self.queue.is_empty() {
            // Taken, the frame's buffer moves into the agent and `buf` becomes a spare.
            match agent.handle_host_buf_at(now, &mut buf, h) {
                Ok(()) => Offered::Accepted,
                Err(HostError::Backpressure) => Offered::Held,
                Err(e) => Offered::Refused(e),
            }
        } else {
            Offered::Held
        };
        if offered == Offered::Held {
            self.queue.push_back((tag, h, buf));
        } else {
            self.spare.push(buf);
        }
        Some(offered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AgentConfig;
    use cnm_proto::rng::Rng;
    use cnm_proto::{Bytes, Rate};

    fn frame(len: usize, tag: u8) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = tag;
        f
    }

    /// An agent on a 10 Mb/s line with a 10 000-octet queue.
    fn small_agent() -> Agent {
        agent_with_queue(10_000)
    }

    /// An agent on a 10 Mb/s line whose flow queues hold `limit` octets.
    fn agent_with_queue(limit: u64) -> Agent {
        let cfg = AgentConfig {
            line_rate: Rate::from_mbps(10),
            queue_limit: Bytes::new(limit),
            wire_overhead: false,
            ..AgentConfig::default()
        };
        Agent::new(cfg, Rng::new(1)).unwrap()
    }

    #[test]
    fn refused_frames_wait_in_order_and_leave_when_there_is_room() {
        let mut agent = small_agent();
        let now = Instant::from_nanos(1_000);
        let mut held = HeldFrames::new();
        // Two 4000-octet frames take 8000 of the 10000-octet queue: the third does not fit
        // and is held, and so is the fourth (behind it, although it would fit).
        assert_eq!(
            held.offer(&mut agent, now, 1, &frame(4000, 1)),
            Offered::Accepted
        );
        assert_eq!(
            held.offer(&mut agent, now, 2, &frame(4000, 2)),
            Offered::Accepted
        );
        assert_eq!(
            held.offer(&mut agent, now, 3, &frame(4000, 3)),
            Offered::Held
        );
        assert_eq!(
            held.offer(&mut agent, now, 4, &frame(100, 4)),
            Offered::Held
        );
        assert_eq!(held.len(), 2);
        assert!(!held.may_offer(&agent));
        // A frame the agent can never take is refused at once, not held.
        let mut fresh = Agent::new(AgentConfig::default(), Rng::new(1)).unwrap();
        let mut none_held = HeldFrames::new();
        assert_eq!(
            none_held.offer(&mut fresh, now, 9, &[1]),
            Offered::Refused(HostError::Malformed)
        );
        assert!(none_held.is_empty());
        let mut left = Vec::new();
        held.retry(&mut agent, now, &mut |t, n, r| left.push((t, n, r)));
        assert!(left.is_empty(), "no room yet");
        // The line sends one frame up (4000 octets leave the queue): both held frames fit
        // (4000 + 4000 + 100 <= 10000) and leave in the order they came.
        let mut sent = 0;
        agent.poll_uplink(now, &mut |_| {
            sent += 1;
            true
        });
        assert_eq!(sent, 1);
        held.retry(&mut agent, now, &mut |t, n, r| left.push((t, n, r)));
        assert_eq!(left, vec![(3, 4000, Ok(())), (4, 100, Ok(()))]);
        assert!(held.may_offer(&agent));
    }

    #[test]
    fn the_frames_of_a_stopped_producer_are_dropped_and_their_buffers_kept() {
        let mut agent = small_agent();
        let now = Instant::from_nanos(1_000);
        let mut held = HeldFrames::new();
        for tag in 1..=2 {
            let r = held.offer(&mut agent, now, tag, &frame(4000, tag as u8));
            assert_eq!(r, Offered::Accepted);
        }
        for tag in [3, 4, 3, 5] {
            let r = held.offer(&mut agent, now, tag, &frame(4000, tag as u8));
            assert_eq!(r, Offered::Held);
        }
        assert_eq!(held.clear(), 4);
        assert!(held.is_empty());
        assert_eq!(held.clear(), 0);
        // The agent still has room for nothing new; the dropped frames never reach it, and
        // the next frame held reuses one of their buffers.
        let spare = held.spare.len();
        assert_eq!(spare, 4);
        assert_eq!(
            held.offer(&mut agent, now, 6, &frame(4000, 6)),
            Offered::Held
        );
        assert_eq!(held.spare.len(), spare - 1);
        let mut left = Vec::new();
        agent.poll_uplink(now, &mut |_| true);
        held.retry(&mut agent, now, &mut |t, n, r| left.push((t, n, r)));
        assert_eq!(left, vec![(6, 4000, Ok(()))]);
    }

    #[test]
    fn a_frame_made_in_place_is_held_as_made_and_its_buffer_reused() {
        let mut agent = small_agent();
        let now = Instant::from_nanos(1_000);
        let mut held = HeldFrames::new();
        let make = |tag: u8, n: usize| {
            move |buf: &mut [u8]| {
                buf[..n].copy_from_slice(&frame(n, tag));
                Some(n)
            }
        };
        // Nothing to produce: nothing offered, nothing held.
        assert_eq!(held.offer_from(&mut agent, now, 0, 4000, |_| None), None);
        assert!(held.is_empty());
        for tag in 1..=2 {
            let r = held.offer_from(&mut agent, now, u64::from(tag), 4000, make(tag, 4000));
            assert_eq!(r, Some(Offered::Accepted));
        }
        // The third does not fit: held with exactly the octets produced (3000 of a 4000-octet
        // buffer).
        let r = held.offer_from(&mut agent, now, 3, 4000, make(3, 3000));
        assert_eq!(r, Some(Offered::Held));
        assert_eq!(held.len(), 1);
        // Too short to classify: refused at once, not held.
        let mut fresh = Agent::new(AgentConfig::default(), Rng::new(1)).unwrap();
        let mut none_held = HeldFrames::new();
        let r = none_held.offer_from(&mut fresh, now, 9, 64, |_| Some(1));
        assert_eq!(r, Some(Offered::Refused(HostError::Malformed)));
        assert!(none_held.is_empty());
        let mut sent = Vec::new();
        agent.poll_uplink(now, &mut |f| {
            sent.push(f.len());
            true
        });
        assert_eq!(sent.len(), 1);
        let mut left = Vec::new();
        held.retry(&mut agent, now, &mut |t, n, r| left.push((t, n, r)));
        assert_eq!(left, vec![(3, 3000, Ok(()))]);
        assert!(held.is_empty());
    }

    #[test]
    fn held_frames_are_stranded_only_when_nothing_queued_can_wake_their_producer() {
        // A queue of one 9000-octet frame on a 10 Mb/s line.
        let mut agent = agent_with_queue(crate::config::MAX_FRAME as u64);
        let now = Instant::from_nanos(1_000);
        let mut held = HeldFrames::new();
        assert!(!held.stranded(&agent), "nothing held");
        assert_eq!(
            held.offer(&mut agent, now, 1, &frame(9000, 1)),
            Offered::Accepted
        );
        assert_eq!(
            held.offer(&mut agent, now, 2, &frame(9000, 2)),
            Offered::Held
        );
        // The queued frame's departure will wake the producer.
        assert!(!held.stranded(&agent));
        // The line sends it: nothing queued, room for the held frame, no deadline left.
        agent.poll_uplink(now, &mut |_| true);
        assert_eq!(agent.queued_frames(), 0);
        assert_eq!(agent.poll_timeout(), None);
        assert!(held.stranded(&agent));
        let mut left = Vec::new();
        held.retry(&mut agent, now, &mut |t, _, r| left.push((t, r)));
        assert_eq!(left, vec![(2, Ok(()))]);
        assert!(!held.stranded(&agent), "nothing held any more");
    }
}

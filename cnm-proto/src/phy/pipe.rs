//! An in-memory port pair for tests: what one end sends the other receives, through a bounded
//! queue per direction. Frame buffers are recycled, so a steady exchange allocates nothing.
//!
//! Every frame carries a receive time like a kernel's (`CLOCK_REALTIME` nanoseconds, see
//! [`Port::recv_batch_stamped`]): the instant it was sent, or the instant a test chose with
//! [`PipePort::send_stamped`].
//!
//! Each end has an `eventfd(2)` that is readable exactly while frames wait for it, so a
//! daemon loop that polls port descriptors works unchanged with pipes. The ends may live in
//! different threads.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Port, PortError, PortStats};

/// One end of an in-memory port pair (see [`PipePort::pair`]).
#[derive(Debug)]
pub struct PipePort {
    name: String,
    /// Frames travelling towards this end.
    rx: Arc<Channel>,
    /// Frames travelling towards the peer.
    tx: Arc<Channel>,
    /// Frames taken from `rx` for the current batch, with their stamps (buffers go back
    /// after the callbacks).
    batch: Vec<(Vec<u8>, u64)>,
    stats: PortStats,
}

#[derive(Debug)]
struct Channel {
    queue: Mutex<Queue>,
    /// Readable while `queue.frames` is non-empty (kept in step under the lock). `None` only
    /// if the process ran out of descriptors; the pipe then works without a pollable fd.
    event: Option<OwnedFd>,
}

#[derive(Debug)]
struct Queue {
    /// Frames and their receive stamps (ns since the Unix epoch).
    frames: VecDeque<(Vec<u8>, u64)>,
    free: Vec<Vec<u8>>,
    capacity: usize,
    /// Both ends alive.
    connected: bool,
}

impl PipePort {
    /// Two connected ends, each direction holding at most `capacity_frames` frames (at least 1).
    /// The ends are named `pipe0` and `pipe1`.
    pub fn pair(capacity_frames: usize) -> (PipePort, PipePort) {
        Self::pair_named(capacity_frames, "pipe0", "pipe1")
    }

    /// As [`PipePort::pair`] with chosen names.
    pub fn pair_named(capacity_frames: usize, a: &str, b: &str) -> (PipePort, PipePort) {
        let a_to_b = Arc::new(Channel::new(capacity_frames.max(1)));
        let b_to_a = Arc::new(Channel::new(capacity_frames.max(1)));
        let end = |name: &str, rx: &Arc<Channel>, tx: &Arc<Channel>| PipePort {
            name: name.to_owned(),
            rx: Arc::clone(rx),
            tx: Arc::clone(tx),
            batch: Vec::new(),
            stats: PortStats::default(),
        };
        (end(a, &b_to_a, &a_to_b), end(b, &a_to_b, &b_to_a))
    }

    /// Counters of this end.
    pub fn stats(&self) -> PortStats {
        self.stats
    }

    /// Frames waiting to be received by this end.
    pub fn pending(&self) -> usize {
        self.rx.lock().frames.len()
    }
}

impl Port for PipePort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv_batch(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        self.recv_batch_stamped(max, &mut |frame, _| f(frame))
    }

    fn recv_batch_stamped(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], Option<u64>),
    ) -> Result<usize, PortError> {
        {
            let mut q = self.rx.lock();
            while self.batch.len() < max {
                match q.frames.pop_front() {
                    Some(frame) => self.batch.push(frame),
                    None => break,
                }
            }
            if q.frames.is_empty() {
                self.rx.clear_event();
                if self.batch.is_empty() && !q.connected {
                    // Everything the peer sent is delivered and it is gone: the link is down.
                    return Err(PortError::Disconnected {
                        iface: self.name.clone(),
                    });
                }
            }
        }
        // Callbacks run without the lock, so they may send on any port, this pair included.
        let n = self.batch.len();
        for (frame, stamp) in &self.batch {
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += frame.len() as u64;
            f(frame, Some(*stamp));
        }
        if n > 0 {
            let mut q = self.rx.lock();
            q.free.extend(self.batch.drain(..).map(|(buf, _)| buf));
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        self.send_stamped(frame, realtime_ns())
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.rx.event.as_ref().map(|e| e.as_raw_fd())
    }

    fn counters(&mut self) -> PortStats {
        self.stats
    }
}

/// Now on `CLOCK_REALTIME`, in nanoseconds since the Unix epoch (0 if the clock is before it).
fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl PipePort {
    /// As [`Port::send`], the frame to be received with the stamp `stamp_ns` (what the
    /// kernel's receive time would be) instead of the time of sending.
    pub fn send_stamped(&mut self, frame: &[u8], stamp_ns: u64) -> Result<bool, PortError> {
        let mut q = self.tx.lock();
        if !q.connected {
            return Err(PortError::Disconnected {
                iface: self.name.clone(),
            });
        }
        if q.frames.len() >= q.capacity {
            self.stats.tx_full += 1;
            return Ok(false);
        }
        let mut buf = q.free.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        let was_empty = q.frames.is_empty();
        q.frames.push_back((buf, stamp_ns));
        if was_empty {
            self.tx.set_event();
        }
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Ok(true)
    }
}

impl Drop for PipePort {
    fn drop(&mut self) {
        self.tx.lock().connected = false;
        self.rx.lock().connected = false;
    }
}

impl Channel {
    fn new(capacity: usize) -> Channel {
        Channel {
            queue: Mutex::new(Queue {
                frames: VecDeque::with_capacity(capacity),
                free: Vec::new(),
                capacity,
                connected: true,
            }),
            event: new_eventfd(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding the lock cannot leave the queue inconsistent (every update is a
        // single push/pop), so a poisoned lock is simply taken over.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_event(&self) {
        let Some(event) = &self.event else { return };
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. A full counter (EAGAIN) still
        // leaves the fd readable, which is all we need, so the result is ignored.
        let _ = unsafe {
            libc::write(
                event.as_raw_fd(),
                (&one as *const u64).cast::<libc::c_void>(),
                8,
            )
        };
    }

    fn clear_event(&self) {
        let Some(event) = &self.event else { return };
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; EAGAIN (already clear) is fine to ignore.
        let _ = unsafe {
            libc::read(
                event.as_raw_fd(),
                (&mut v as *mut u64).cast::<libc::c_void>(),
                8,
            )
        };
    }
}

fn new_eventfd() -> Option<OwnedFd> {
    // SAFETY: plain eventfd(2) call.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    // SAFETY: a non-negative `fd` is a fresh descriptor owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phy::poll;
    use crate::Duration;

    #[test]
    fn frames_cross_and_queue_is_bounded() {
        let (mut a, mut b) = PipePort::pair(2);
        assert!(a.send(&[1, 2, 3]).unwrap());
        assert!(a.send(&[4]).unwrap());
        assert!(!a.send(&[5]).unwrap());
        assert_eq!(a.stats().tx_full, 1);
        let mut got = Vec::new();
        let n = b.recv_batch(1, &mut |f| got.push(f.to_vec())).unwrap();
        assert_eq!(n, 1);
        let n = b.recv_batch(8, &mut |f| got.push(f.to_vec())).unwrap();
        assert_eq!(n, 1);
        assert_eq!(got, vec![vec![1, 2, 3], vec![4]]);
        assert_eq!(b.recv_batch(8, &mut |_| {}).unwrap(), 0);
        assert!(b.send(&[9]).unwrap());
        assert_eq!(a.recv_batch(8, &mut |f| assert_eq!(f, [9])).unwrap(), 1);
        assert_eq!(b.stats().rx_frames, 2);
    }

    #[test]
    fn frames_carry_their_stamps() {
        let (mut a, mut b) = PipePort::pair(4);
        assert!(a.send_stamped(&[1], 1_000).unwrap());
        assert!(a.send_stamped(&[2], 13_000).unwrap());
        let before = realtime_ns();
        assert!(a.send(&[3]).unwrap());
        let mut got = Vec::new();
        let n = b
            .recv_batch_stamped(8, &mut |f, t| got.push((f[0], t)))
            .unwrap();
        assert_eq!(n, 3);
        assert_eq!(got[..2], [(1, Some(1_000)), (2, Some(13_000))]);
        // An unstamped send is stamped with the time it was sent.
        assert!(got[2].1.is_some_and(|t| t >= before), "{got:?}");
    }

    #[test]
    fn eventfd_tracks_queue() {
        let (mut a, mut b) = PipePort::pair(4);
        let fd = b.raw_fd().unwrap();
        assert!(poll::wait(&[fd], Some(Duration::ZERO)).unwrap().is_empty());
        a.send(&[1]).unwrap();
        a.send(&[2]).unwrap();
        assert!(poll::wait(&[fd], Some(Duration::ZERO)).unwrap().is_ready(0));
        b.recv_batch(1, &mut |_| {}).unwrap();
        assert!(poll::wait(&[fd], Some(Duration::ZERO)).unwrap().is_ready(0));
        b.recv_batch(1, &mut |_| {}).unwrap();
        assert!(poll::wait(&[fd], Some(Duration::ZERO)).unwrap().is_empty());
    }

    #[test]
    fn echo_from_callback_does_not_deadlock() {
        let (mut a, mut b) = PipePort::pair(4);
        a.send(&[7]).unwrap();
        let n = b
            .recv_batch(4, &mut |f| {
                // Send on the peer's direction from inside the callback.
                assert!(a.send(f).unwrap());
            })
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(b.pending(), 1);
    }

    #[test]
    fn dropped_peer_is_link_gone() {
        let (mut a, b) = PipePort::pair(4);
        drop(b);
        let e = a.send(&[1]).unwrap_err();
        assert!(e.is_link_gone());
        // Frames the peer sent before it went are still delivered, then the loss shows.
        let (mut a, mut b) = PipePort::pair(4);
        b.send(&[2]).unwrap();
        drop(b);
        assert_eq!(a.recv_batch(8, &mut |f| assert_eq!(f, [2])).unwrap(), 1);
        assert!(a.recv_batch(8, &mut |_| {}).unwrap_err().is_link_gone());
    }
}

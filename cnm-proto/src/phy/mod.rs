//! Thin Linux packet I/O: the only module of the workspace allowed to use `unsafe`.
//!
//! Everything above this module is sans-IO; everything here is a small, direct wrapper around a
//! kernel interface, kept as thin as possible so that the daemons' cost per frame is the
//! kernel's, not ours.
//!
//! * [`Port`] — the interface every dataplane port implements: batched non-blocking receive
//!   through a callback (with each frame's kernel receive time where the port has one,
//!   [`Port::recv_batch_stamped`]), queued transmit, one flush per batch, an fd to poll.
//! * [`AfPacketPort`] — an `AF_PACKET` socket with `PACKET_MMAP` `TPACKET_V2` receive and
//!   transmit rings (Linux `Documentation/networking/packet_mmap.rst`). The fast path: no
//!   syscall per received frame, one `sendto` per transmitted batch.
//! * [`TapPort`] — a TAP device (`/dev/net/tun`, `Documentation/networking/tuntap.rst`); the
//!   host side of a reaction-point agent.
//! * [`PipePort`] — an in-memory pair of bounded frame queues for tests.
//! * [`pcap`] — classic libpcap capture files, writer and reader.
//! * [`clock`], [`poll`] — the monotonic clock, the [`clock::Clock`] seam a daemon loop reads
//!   time and sleeps through (real, or warped in tests), and `ppoll` with nanosecond timeouts.
//! * [`iface`], [`offload`], [`netns`] — interface facts (index, MAC, MTU, flags), ethtool
//!   offload control and network-namespace entry; [`process`] — dying with the parent, the
//!   calling thread's scheduling policy and CPU affinity.
//!
//! Errors carry the interface name and the operation that failed ([`PortError`]);
//! [`PortError::is_link_gone`] tells a port that vanished or went down (the caller marks it
//! down and reopens it later) from every other failure.
#![allow(unsafe_code)]

use std::fmt;
use std::io;
use std::os::fd::RawFd;

mod af_packet;
pub mod clock;
pub mod iface;
pub mod netns;
pub mod offload;
pub mod pcap;
mod pipe;
pub mod poll;
pub mod process;
mod tap;

pub use af_packet::{AfPacketConfig, AfPacketPort};
pub use pipe::PipePort;
pub use tap::{TapOffloadStats, TapPort};

/// A dataplane port: a source and sink of whole Ethernet frames.
///
/// Frames are complete L2 frames as they were on the wire, from the destination address to
/// the end of the payload (no preamble, no FCS). An 802.1Q/802.1ad tag is present in the bytes
/// even when the kernel delivered it out of band (VLAN receive offload).
///
/// A port may move between threads (`Send`): a process that serves many ports in one loop
/// opens and closes them on helper threads, since setting up and releasing a packet socket's
/// rings takes tens of milliseconds during which the loop would serve no other port.
pub trait Port: Send {
    /// The interface (or port) name, for logs and errors.
    fn name(&self) -> &str;
    /// Receive up to `max` frames without blocking, calling `f` for each (full L2 frame,
    /// VLAN tag present in the bytes even if the kernel stripped it). Returns how many.
    fn recv_batch(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError>;
    /// As [`Port::recv_batch`], also giving each frame its receive time when the port knows
    /// it: nanoseconds since the Unix epoch (`CLOCK_REALTIME`, the clock the kernel stamps
    /// received frames with), `None` otherwise. Only differences between stamps of one port
    /// are meaningful; a port that does not know the time gives `None` (the default).
    fn recv_batch_stamped(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], Option<u64>),
    ) -> Result<usize, PortError> {
        self.recv_batch(max, &mut |frame| f(frame, None))
    }
    /// Queue one frame for transmission. Ok(false) = no room now (frame not taken).
    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError>;
    /// Hand queued frames to the kernel (one syscall for the batch).
    fn flush(&mut self) -> Result<(), PortError>;
    /// File descriptor to poll for readability, if any.
    fn raw_fd(&self) -> Option<RawFd>;
    /// The port's counters now (an AF_PACKET port first adds the kernel's ring drops,
    /// `PACKET_STATISTICS`).
    fn counters(&mut self) -> PortStats;
}

impl<P: Port + ?Sized> Port for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn recv_batch(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        (**self).recv_batch(max, f)
    }
    fn recv_batch_stamped(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], Option<u64>),
    ) -> Result<usize, PortError> {
        (**self).recv_batch_stamped(max, f)
    }
    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        (**self).send(frame)
    }
    fn flush(&mut self) -> Result<(), PortError> {
        (**self).flush()
    }
    fn raw_fd(&self) -> Option<RawFd> {
        (**self).raw_fd()
    }
    fn counters(&mut self) -> PortStats {
        (**self).counters()
    }
}

/// Monotonically increasing counters of one port (a snapshot; see [`Port::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortStats {
    /// Frames handed to the receive callback.
    pub rx_frames: u64,
    /// Octets handed to the receive callback (including restored VLAN tags).
    pub rx_bytes: u64,
    /// Received frames whose 802.1Q/802.1ad tag the kernel had stripped and the port put back.
    pub rx_vlan_restored: u64,
    /// Frames the kernel dropped because the receive ring was full (`PACKET_STATISTICS`
    /// `tp_drops`; AF_PACKET ports only).
    pub rx_dropped: u64,
    /// Frames dropped by the port because they were larger than a ring slot (or the TAP read
    /// buffer) and arrived truncated.
    pub rx_truncated: u64,
    /// Own transmissions seen in the ring (`PACKET_OUTGOING`) and skipped.
    pub rx_outgoing_skipped: u64,
    /// Frames accepted by `send`.
    pub tx_frames: u64,
    /// Octets accepted by `send`.
    pub tx_bytes: u64,
    /// `send` calls refused with `Ok(false)` because the ring or queue was full.
    pub tx_full: u64,
    /// Transmit errors reported by the kernel that did not fail the port (frames dropped:
    /// `ENOBUFS`, malformed slots).
    pub tx_errors: u64,
    /// Frames refused by `send` because they are longer than the interface's MTU allows (the
    /// kernel would drop them); dropped, never transmitted.
    pub tx_oversize: u64,
    /// Flush system calls made.
    pub flushes: u64,
}

impl PortStats {
    /// Adds `other`'s counts to these (a port reopened keeps counting where it stopped).
    pub fn accumulate(&mut self, other: &PortStats) {
        let PortStats {
            rx_frames,
            rx_bytes,
            rx_vlan_restored,
            rx_dropped,
            rx_truncated,
            rx_outgoing_skipped,
            tx_frames,
            tx_bytes,
            tx_full,
            tx_errors,
            tx_oversize,
            flushes,
        } = *other;
        self.rx_frames += rx_frames;
        self.rx_bytes += rx_bytes;
        self.rx_vlan_restored += rx_vlan_restored;
        self.rx_dropped += rx_dropped;
        self.rx_truncated += rx_truncated;
        self.rx_outgoing_skipped += rx_outgoing_skipped;
        self.tx_frames += tx_frames;
        self.tx_bytes += tx_bytes;
        self.tx_full += tx_full;
        self.tx_errors += tx_errors;
        self.tx_oversize += tx_oversize;
        self.flushes += flushes;
    }
}

/// An I/O error of a port, an interface helper or an offload control, with context.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// A system call failed.
    #[error("interface {iface}: {op}: {source}")]
    Io {
        /// The interface (or device) name.
        iface: String,
        /// What was being done, e.g. `"bind"`, `"mmap rings"`, `"flush"`.
        op: &'static str,
        /// The operating-system error.
        #[source]
        source: io::Error,
    },
    /// The interface does not exist (in the calling thread's network namespace).
    #[error("interface {iface}: {op}: no such interface")]
    NoSuchInterface {
        /// The name that was looked up.
        iface: String,
        /// What was being done.
        op: &'static str,
    },
    /// A frame handed to `send` cannot be transmitted by this port at all.
    #[error("interface {iface}: send: frame of {len} octets rejected ({reason})")]
    BadFrame {
        /// The interface name.
        iface: String,
        /// Length of the rejected frame.
        len: usize,
        /// Why: shorter than an Ethernet header, or larger than a transmit slot.
        reason: &'static str,
    },
    /// A configuration value is unusable (ring geometry, interface name length, ...).
    #[error("interface {iface}: {op}: invalid configuration: {msg}")]
    Config {
        /// The interface name.
        iface: String,
        /// What was being configured.
        op: &'static str,
        /// What is wrong.
        msg: String,
    },
    /// The other end of an in-memory pipe was dropped.
    #[error("port {iface}: peer disconnected")]
    Disconnected {
        /// The port name.
        iface: String,
    },
}

impl PortError {
    pub(crate) fn io(iface: &str, op: &'static str, source: io::Error) -> Self {
        PortError::Io {
            iface: iface.to_owned(),
            op,
            source,
        }
    }

    pub(crate) fn last_os(iface: &str, op: &'static str) -> Self {
        Self::io(iface, op, io::Error::last_os_error())
    }

    pub(crate) fn config(iface: &str, op: &'static str, msg: impl fmt::Display) -> Self {
        PortError::Config {
            iface: iface.to_owned(),
            op,
            msg: msg.to_string(),
        }
    }

    /// The interface (or port) the error is about.
    pub fn iface(&self) -> &str {
        match self {
            PortError::Io { iface, .. }
            | PortError::NoSuchInterface { iface, .. }
            | PortError::BadFrame { iface, .. }
            | PortError::Config { iface, .. }
            | PortError::Disconnected { iface } => iface,
        }
    }

    /// True when the interface vanished or went down (`ENXIO`, `ENODEV`, `ENETDOWN`,
    /// `EBADFD` from a detached TAP, a missing interface, a disconnected pipe). The caller
    /// should mark the port down and try to reopen it later; other errors are bugs or
    /// configuration problems.
    pub fn is_link_gone(&self) -> bool {
        match self {
            PortError::Io { source, .. } => is_link_gone_errno(source.raw_os_error()),
            PortError::NoSuchInterface { .. } | PortError::Disconnected { .. } => true,
            PortError::BadFrame { .. } | PortError::Config { .. } => false,
        }
    }

    /// The OS error number behind the error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            PortError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

fn is_link_gone_errno(errno: Option<i32>) -> bool {
    matches!(
        errno,
        Some(libc::ENXIO) | Some(libc::ENODEV) | Some(libc::ENETDOWN) | Some(libc::EBADFD)
    )
}

/// The longest interface name Linux accepts (`IFNAMSIZ` − 1 for the terminating NUL).
pub const IFNAME_MAX: usize = libc::IFNAMSIZ - 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_gone_classification() {
        for errno in [libc::ENXIO, libc::ENODEV, libc::ENETDOWN, libc::EBADFD] {
            let e = PortError::io("veth0", "flush", io::Error::from_raw_os_error(errno));
            assert!(e.is_link_gone(), "{e}");
        }
        let e = PortError::io("veth0", "flush", io::Error::from_raw_os_error(libc::EINVAL));
        assert!(!e.is_link_gone());
        let e = PortError::NoSuchInterface {
            iface: "nope0".into(),
            op: "open",
        };
        assert!(e.is_link_gone());
        assert!(e.to_string().contains("nope0"));
        assert_eq!(e.iface(), "nope0");
    }
}

//! TAP devices (`/dev/net/tun`, Linux `Documentation/networking/tuntap.rst`): an Ethernet
//! interface whose "wire" is a file descriptor. What the host stack transmits on the TAP we
//! read; what we write, the host stack receives.
//!
//! Opened with `IFF_TAP | IFF_NO_PI` (whole Ethernet frames, no packet-information prefix) and
//! `O_NONBLOCK`. The device lives as long as the port (it is not made persistent).
//!
//! **Offloads** ([`TapPort::create_offload`]): with `IFF_VNET_HDR` every frame crossing the
//! descriptor carries a `virtio_net_hdr`, and `TUNSETOFFLOAD(TUN_F_CSUM | TUN_F_TSO4 |
//! TUN_F_TSO_ECN)` lets the host stack hand over what it hands a NIC with checksum and TCP
//! segmentation offload: frames with a checksum still to complete and TCP/IPv4 segments of up
//! to 64 KiB. The port does the NIC's part in software ([`crate::wire::segment`]): a read
//! becomes wire frames of at most the MTU, each given to the receive callback (one system call
//! for up to ~45 frames instead of one per frame). Towards the host, consecutive in-order
//! TCP/IPv4 segments of one connection given to [`Port::send`] are merged (GRO) and written as
//! one super-segment at the next [`Port::flush`] or when a frame that does not continue them
//! arrives, so the host's TCP receives one large segment instead of many.
//!
//! The merged frame is assembled by copying each segment's payload into one buffer and then
//! written with one `writev` of two parts (header, frame). Leaving the payloads where they are
//! and writing one part per segment saves that copy but costs more in the kernel than it
//! saves: the tun driver's copy from a vector of ~45 parts of ~1.4 KiB was measured slower
//! than a copy into one buffer plus the write of it (a 45-segment, 64 KiB merged frame on the
//! 2-core test machine, busy: ~15.9 us gathered, ~14.3 us copied then written, ~10 us written
//! from a buffer already contiguous), and the receiving agent's CPU time per transferred
//! octet went up, not down, in `testbed bench app`. Nothing else
//! changes: the frames the callback sees and the frames on the wire are the ones a TAP without
//! offloads would give.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::iface::{self, check_name};
use super::{Port, PortError, PortStats};
use crate::wire::segment::{self, Coalescer, VnetHdr, VNET_HDR_LEN};

/// `TUN_F_TSO_ECN` (Linux `include/uapi/linux/if_tun.h`): TSO frames may carry CWR.
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

/// Counters of the offload path (zero without offloads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TapOffloadStats {
    /// Reads that carried a TCP segmentation request.
    pub rx_gso_frames: u64,
    /// Wire frames cut from them.
    pub rx_gso_segments: u64,
    /// Reads whose checksum the port completed.
    pub rx_csum_completed: u64,
    /// Reads dropped because they could not be segmented (malformed or unsupported GSO).
    pub rx_gso_errors: u64,
    /// Merged writes towards the host (two segments or more).
    pub tx_gro_frames: u64,
    /// Segments in those writes.
    pub tx_gro_segments: u64,
    /// Frames dropped because the driver refused a write with `EAGAIN` after `send` had
    /// accepted them (merged writes happen at flush).
    pub tx_dropped: u64,
}

/// Read buffer size: the largest frame a TAP without offloads can hand us (64 KiB IP datagram
/// plus Ethernet and VLAN headers), with room to spare.
const READ_BUF: usize = 65_536 + 64;

/// A TAP interface owned by this process.
#[derive(Debug)]
pub struct TapPort {
    name: String,
    fd: OwnedFd,
    buf: Box<[u8]>,
    stats: PortStats,
    /// `Some` with offloads: the segmentation buffer and the coalescer.
    offload: Option<Offload>,
}

#[derive(Debug, Default)]
struct Offload {
    seg: Vec<u8>,
    gro: Coalescer,
    stats: TapOffloadStats,
}

impl TapPort {
    /// Create (or attach to) the TAP interface `name`. The interface starts down; see
    /// [`TapPort::set_up`].
    pub fn create(name: &str) -> Result<TapPort, PortError> {
        TapPort::open(name, false)
    }

    /// Like [`TapPort::create`], with `IFF_VNET_HDR` and checksum and TCP segmentation offload
    /// towards the host stack (see the module documentation).
    pub fn create_offload(name: &str) -> Result<TapPort, PortError> {
        TapPort::open(name, true)
    }

    /// True when the port was created with offloads.
    pub fn offloads(&self) -> bool {
        self.offload.is_some()
    }

    /// Counters of the offload path.
    pub fn offload_stats(&self) -> TapOffloadStats {
        self.offload.as_ref().map(|o| o.stats).unwrap_or_default()
    }

    fn open(name: &str, offload: bool) -> Result<TapPort, PortError> {
        check_name(name, "create tap")?;
        // SAFETY: opening a fixed NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(PortError::last_os(name, "open /dev/net/tun"));
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an all-zero `ifreq` is valid; name and flags are filled below.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // IFF_TAP | IFF_NO_PI | IFF_VNET_HDR = 0x5002 fits a C short.
        let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
        if offload {
            flags |= libc::IFF_VNET_HDR;
        }
        req.ifr_ifru.ifru_flags = flags as libc::c_short;
        // SAFETY: TUNSETIFF takes a `struct ifreq *`; `req` lives across the call.
        let rc = unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::TUNSETIFF as _,
                &mut req as *mut libc::ifreq,
            )
        };
        if rc < 0 {
            return Err(PortError::last_os(name, "TUNSETIFF"));
        }
        if offload {
            // The legacy 10-octet header (the driver's default size, set explicitly).
            let size: libc::c_int = VNET_HDR_LEN as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ takes an `int *`; `size` lives across the call.
            let rc = unsafe {
                libc::ioctl(
                    fd.as_raw_fd(),
                    libc::TUNSETVNETHDRSZ as _,
                    &size as *const libc::c_int,
                )
            };
            if rc < 0 {
                return Err(PortError::last_os(name, "TUNSETVNETHDRSZ"));
            }
            let features = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | TUN_F_TSO_ECN;
            // SAFETY: TUNSETOFFLOAD takes the feature bits by value.
            let rc = unsafe {
                libc::ioctl(
                    fd.as_raw_fd(),
                    libc::TUNSETOFFLOAD as _,
                    libc::c_ulong::from(features),
                )
            };
            if rc < 0 {
                return Err(PortError::last_os(name, "TUNSETOFFLOAD"));
            }
        }
        // The kernel writes back the final name (NUL-terminated within IFNAMSIZ).
        let bytes: Vec<u8> = req
            .ifr_name
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        let actual = String::from_utf8(bytes).unwrap_or_else(|_| name.to_owned());
        Ok(TapPort {
            name: actual,
            fd,
            buf: vec![0u8; READ_BUF].into_boxed_slice(),
            stats: PortStats::default(),
            offload: offload.then(Offload::default),
        })
    }

    /// Bring the interface administratively up or down.
    pub fn set_up(&self, up: bool) -> Result<(), PortError> {
        iface::set_up(&self.name, up)
    }

    /// The interface's MAC address.
    pub fn mac(&self) -> Result<[u8; 6], PortError> {
        iface::mac(&self.name)
    }

    /// Set the interface's MAC address.
    pub fn set_mac(&self, addr: [u8; 6]) -> Result<(), PortError> {
        iface::set_mac(&self.name, addr)
    }

    /// Counters of this port.
    pub fn stats(&self) -> PortStats {
        self.stats
    }
}

/// `writev` of `parts` as one frame, retried on `EINTR`.
fn write_parts(fd: RawFd, parts: [&[u8]; 2]) -> io::Result<()> {
    let iov = parts.map(|p| libc::iovec {
        iov_base: p.as_ptr() as *mut libc::c_void,
        iov_len: p.len(),
    });
    // Empty parts are left out (a frame without a header is written alone).
    let iov: &[libc::iovec] = if parts[1].is_empty() { &iov[..1] } else { &iov };
    loop {
        // SAFETY: every iovec points into a live slice for the duration of the call; the
        // kernel only reads from them. At most 2 parts, so the count fits a C int.
        let rc = unsafe { libc::writev(fd, iov.as_ptr(), iov.len() as libc::c_int) };
        if rc >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// The error of a refused write, as [`Port::send`] reports it; `None` for `EAGAIN` (no room).
fn write_error(name: &str, len: usize, err: io::Error, stats: &mut PortStats) -> Option<PortError> {
    match err.raw_os_error() {
        Some(libc::EAGAIN) => None,
        // The tun driver refuses writes while the interface is down (EIO): report it as the
        // link being down so the caller treats it like any other vanished port.
        Some(libc::EIO) => Some(PortError::io(
            name,
            "write (interface down)",
            io::Error::from_raw_os_error(libc::ENETDOWN),
        )),
        Some(libc::EINVAL) => {
            stats.tx_errors += 1;
            Some(PortError::BadFrame {
                iface: name.to_owned(),
                len,
                reason: "rejected by the tun driver",
            })
        }
        _ => Some(PortError::io(name, "write", err)),
    }
}

/// Writes one frame leaving the coalescer (header and octets); a refusal with `EAGAIN` drops
/// it (counted), any other error is kept in `first` (the first one wins).
fn write_merged(
    fd: RawFd,
    name: &str,
    (hdr, frame): segment::Merged<'_>,
    segs: usize,
    stats: &mut PortStats,
    off: &mut TapOffloadStats,
    first: &mut Option<PortError>,
) {
    let mut h = [0u8; VNET_HDR_LEN];
    // A 10-octet buffer always holds the header.
    let _ = hdr.emit(&mut h);
    match write_parts(fd, [&h, frame]) {
        Ok(()) => {
            if segs > 1 {
                off.tx_gro_frames += 1;
                off.tx_gro_segments += segs as u64;
            }
        }
        Err(e) => match write_error(name, frame.len(), e, stats) {
            None => off.tx_dropped += segs as u64,
            Some(e) => {
                first.get_or_insert(e);
            }
        },
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv_batch(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        let mut n = 0;
        while n < max {
            // SAFETY: reads at most `buf.len()` bytes into our own buffer.
            let rc = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast::<libc::c_void>(),
                    self.buf.len(),
                )
            };
            if rc < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::EINTR) => continue,
                    _ => return Err(PortError::io(&self.name, "read", err)),
                }
            }
            // rc >= 0 here and never more than the buffer length.
            let len = rc as usize;
            if len >= self.buf.len() {
                self.stats.rx_truncated += 1;
                continue;
            }
            let Some(o) = self.offload.as_mut() else {
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += len as u64;
                f(&self.buf[..len]);
                n += 1;
                continue;
            };
            let data = &self.buf[..len];
            let stats = &mut self.stats;
            let r = VnetHdr::parse(data).and_then(|h| {
                let k = segment::segment(&h, &data[VNET_HDR_LEN..], &mut o.seg, &mut |w| {
                    stats.rx_frames += 1;
                    stats.rx_bytes += w.len() as u64;
                    f(w);
                })?;
                Ok((h, k))
            });
            match r {
                Ok((h, k)) => {
                    if h.gso_type != segment::GSO_NONE {
                        o.stats.rx_gso_frames += 1;
                        o.stats.rx_gso_segments += k as u64;
                    } else if h.flags & segment::F_NEEDS_CSUM != 0 {
                        o.stats.rx_csum_completed += 1;
                    }
                    n += k;
                }
                Err(_) => o.stats.rx_gso_errors += 1,
            }
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        if frame.len() < 14 {
            return Err(PortError::BadFrame {
                iface: self.name.clone(),
                len: frame.len(),
                reason: "shorter than an Ethernet header",
            });
        }
        let fd = self.fd.as_raw_fd();
        if let Some(o) = self.offload.as_mut() {
            // Taken now, written when the merged frame is complete (or at the next flush).
            let mut first = None;
            let segs = o.gro.segments();
            let (stats, off, name) = (&mut self.stats, &mut o.stats, &self.name);
            o.gro.push(frame, &mut |m| {
                write_merged(fd, name, m, segs, stats, off, &mut first)
            });
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += frame.len() as u64;
            return first.map_or(Ok(true), Err);
        }
        match write_parts(fd, [frame, &[]]) {
            Ok(()) => {
                self.stats.tx_frames += 1;
                self.stats.tx_bytes += frame.len() as u64;
                Ok(true)
            }
            Err(e) => match write_error(&self.name, frame.len(), e, &mut self.stats) {
                None => {
                    self.stats.tx_full += 1;
                    Ok(false)
                }
                Some(e) => Err(e),
            },
        }
    }

    fn flush(&mut self) -> Result<(), PortError> {
        let fd = self.fd.as_raw_fd();
        let Some(o) = self.offload.as_mut() else {
            return Ok(());
        };
        if o.gro.is_empty() {
            return Ok(());
        }
        let mut first = None;
        let segs = o.gro.segments();
        let (stats, off, name) = (&mut self.stats, &mut o.stats, &self.name);
        o.gro
            .flush(&mut |m| write_merged(fd, name, m, segs, stats, off, &mut first));
        self.stats.flushes += 1;
        first.map_or(Ok(()), Err)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn counters(&mut self) -> PortStats {
        self.stats
    }
}

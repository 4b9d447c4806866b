//! TAP devices (`/dev/net/tun`, Linux `Documentation/networking/tuntap.rst`): an Ethernet
//! interface whose "wire" is a file descriptor. What the host stack transmits on the TAP we
//! read; what we write, the host stack receives.
//!
//! Opened with `IFF_TAP | IFF_NO_PI` (whole Ethernet frames, no packet-information prefix) and
//! `O_NONBLOCK`. The device lives as long as the port (it is not made persistent).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::iface::{self, check_name};
use super::{Port, PortError, PortStats};

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
}

impl TapPort {
    /// Create (or attach to) the TAP interface `name`. The interface starts down; see
    /// [`TapPort::set_up`].
    pub fn create(name: &str) -> Result<TapPort, PortError> {
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
        // IFF_TAP | IFF_NO_PI = 0x1002 fits a C short.
        req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
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
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += len as u64;
            f(&self.buf[..len]);
            n += 1;
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
        loop {
            // SAFETY: writes `frame.len()` bytes from a live slice.
            let rc = unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast::<libc::c_void>(),
                    frame.len(),
                )
            };
            if rc >= 0 {
                self.stats.tx_frames += 1;
                self.stats.tx_bytes += frame.len() as u64;
                return Ok(true);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EAGAIN) => {
                    self.stats.tx_full += 1;
                    return Ok(false);
                }
                Some(libc::EINTR) => continue,
                // The tun driver refuses writes while the interface is down (EIO): report it as
                // the link being down so the caller treats it like any other vanished port.
                Some(libc::EIO) => {
                    return Err(PortError::io(
                        &self.name,
                        "write (interface down)",
                        io::Error::from_raw_os_error(libc::ENETDOWN),
                    ))
                }
                Some(libc::EINVAL) => {
                    self.stats.tx_errors += 1;
                    return Err(PortError::BadFrame {
                        iface: self.name.clone(),
                        len: frame.len(),
                        reason: "rejected by the tun driver",
                    });
                }
                _ => return Err(PortError::io(&self.name, "write", err)),
            }
        }
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn counters(&mut self) -> PortStats {
        self.stats
    }
}

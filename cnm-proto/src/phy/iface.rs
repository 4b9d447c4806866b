//! Interface facts and simple settings through the classic `SIOC*IF*` ioctls
//! (netdevice(7)): index, MAC address, MTU, the administrative up flag.
//!
//! Every call acts in the network namespace of the calling thread (see [`super::netns`]).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{PortError, IFNAME_MAX};

/// The interface index of `name` (`if_nametoindex(3)`).
pub fn index(name: &str) -> Result<u32, PortError> {
    check_name(name, "ifindex")?;
    let c = CString::new(name).map_err(|_| PortError::config(name, "ifindex", "NUL in name"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        let err = io::Error::last_os_error();
        return Err(classify(name, "ifindex", err));
    }
    Ok(idx)
}

/// True when an interface called `name` exists.
pub fn exists(name: &str) -> bool {
    index(name).is_ok()
}

/// The hardware (MAC) address of `name` (`SIOCGIFHWADDR`).
pub fn mac(name: &str) -> Result<[u8; 6], PortError> {
    let mut req = IfReq::new(name, "get MAC address")?;
    req.ioctl(libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member of the union.
    let sa = unsafe { req.req.ifr_ifru.ifru_hwaddr };
    let mut out = [0u8; 6];
    for (o, b) in out.iter_mut().zip(sa.sa_data.iter()) {
        *o = *b as u8;
    }
    Ok(out)
}

/// Set the hardware (MAC) address of `name` (`SIOCSIFHWADDR`, `ARPHRD_ETHER`).
pub fn set_mac(name: &str, addr: [u8; 6]) -> Result<(), PortError> {
    let mut req = IfReq::new(name, "set MAC address")?;
    // SAFETY: an all-zero `sockaddr` is valid; we then fill the family and the six octets.
    let mut sa: libc::sockaddr = unsafe { std::mem::zeroed() };
    sa.sa_family = libc::ARPHRD_ETHER;
    for (d, s) in sa.sa_data.iter_mut().zip(addr.iter()) {
        *d = *s as libc::c_char;
    }
    req.req.ifr_ifru.ifru_hwaddr = sa;
    req.ioctl(libc::SIOCSIFHWADDR)
}

/// The MTU of `name` in octets (`SIOCGIFMTU`).
pub fn mtu(name: &str) -> Result<u32, PortError> {
    let mut req = IfReq::new(name, "get MTU")?;
    req.ioctl(libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member.
    let mtu = unsafe { req.req.ifr_ifru.ifru_mtu };
    Ok(u32::try_from(mtu).unwrap_or(0))
}

/// Set the MTU of `name` (`SIOCSIFMTU`).
pub fn set_mtu(name: &str, mtu: u32) -> Result<(), PortError> {
    let mut req = IfReq::new(name, "set MTU")?;
    req.req.ifr_ifru.ifru_mtu = i32::try_from(mtu)
        .map_err(|_| PortError::config(name, "set MTU", format!("MTU {mtu} out of range")))?;
    req.ioctl(libc::SIOCSIFMTU)
}

/// True when `name` is administratively up (`IFF_UP` from `SIOCGIFFLAGS`).
pub fn is_up(name: &str) -> Result<bool, PortError> {
    Ok(flags(name, "get flags")? & libc::IFF_UP != 0)
}

/// True when `name` has carrier (`IFF_RUNNING`, i.e. operationally up).
pub fn is_running(name: &str) -> Result<bool, PortError> {
    Ok(flags(name, "get flags")? & libc::IFF_RUNNING != 0)
}

/// Bring `name` administratively up or down (`SIOCSIFFLAGS`, read-modify-write of `IFF_UP`).
pub fn set_up(name: &str, up: bool) -> Result<(), PortError> {
    let op = if up { "set up" } else { "set down" };
    let mut req = IfReq::new(name, op)?;
    req.ioctl(libc::SIOCGIFFLAGS)?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member.
    let cur = i32::from(unsafe { req.req.ifr_ifru.ifru_flags });
    let new = if up {
        cur | libc::IFF_UP
    } else {
        cur & !libc::IFF_UP
    };
    // Interface flags are a C `short`; IFF_UP and friends all fit in its low 16 bits.
    req.req.ifr_ifru.ifru_flags = new as libc::c_short;
    req.ioctl(libc::SIOCSIFFLAGS)
}

fn flags(name: &str, op: &'static str) -> Result<i32, PortError> {
    let mut req = IfReq::new(name, op)?;
    req.ioctl(libc::SIOCGIFFLAGS)?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member. Flags are a C `short`; widen
    // without sign extension so high flag bits stay high.
    Ok(i32::from(unsafe { req.req.ifr_ifru.ifru_flags } as u16))
}

/// Validate an interface name: 1..=15 octets, no NUL, no `/`, not `.` or `..`
/// (the kernel's `dev_valid_name`).
pub fn check_name(name: &str, op: &'static str) -> Result<(), PortError> {
    let bad = name.is_empty()
        || name.len() > IFNAME_MAX
        || name == "."
        || name == ".."
        || name
            .bytes()
            .any(|b| b == 0 || b == b'/' || b == b':' || b.is_ascii_whitespace());
    if bad {
        return Err(PortError::config(
            name,
            op,
            format!(
                "invalid interface name (1 to {IFNAME_MAX} octets, no '/', ':', NUL or blanks)"
            ),
        ));
    }
    Ok(())
}

/// Map an errno to [`PortError::NoSuchInterface`] when it means "no such device".
pub(crate) fn classify(name: &str, op: &'static str, err: io::Error) -> PortError {
    match err.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::NoSuchInterface {
            iface: name.to_owned(),
            op,
        },
        _ => PortError::io(name, op, err),
    }
}

/// An `ifreq` for one interface plus a datagram socket to run ioctls on.
pub(crate) struct IfReq {
    pub(crate) req: libc::ifreq,
    sock: OwnedFd,
    name: String,
    op: &'static str,
}

impl IfReq {
    pub(crate) fn new(name: &str, op: &'static str) -> Result<IfReq, PortError> {
        check_name(name, op)?;
        // SAFETY: an all-zero `ifreq` is a valid value (empty name, zero union).
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        let sock = control_socket().map_err(|e| PortError::io(name, op, e))?;
        Ok(IfReq {
            req,
            sock,
            name: name.to_owned(),
            op,
        })
    }

    pub(crate) fn ioctl(&mut self, request: libc::c_ulong) -> Result<(), PortError> {
        // SAFETY: `self.req` is a properly initialised `ifreq` that lives across the call; all
        // requests used with it take a `struct ifreq *`.
        let rc = unsafe {
            libc::ioctl(
                self.sock.as_raw_fd(),
                request as _,
                &mut self.req as *mut libc::ifreq,
            )
        };
        if rc < 0 {
            return Err(classify(&self.name, self.op, io::Error::last_os_error()));
        }
        Ok(())
    }
}

/// A socket on which interface ioctls can be issued: `AF_INET` datagram, or `AF_PACKET`
/// where IPv4 is not built in.
fn control_socket() -> io::Result<OwnedFd> {
    for domain in [libc::AF_INET, libc::AF_PACKET, libc::AF_INET6] {
        // SAFETY: plain socket(2) call; the returned fd is owned below.
        let fd = unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd >= 0 {
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    Err(io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_facts() {
        assert!(exists("lo"));
        assert!(index("lo").unwrap() >= 1);
        assert!(mtu("lo").unwrap() >= 1500);
        assert_eq!(mac("lo").unwrap(), [0; 6]);
    }

    #[test]
    fn missing_interface_is_named() {
        let e = mtu("nosuchif-x9").unwrap_err();
        assert!(matches!(e, PortError::NoSuchInterface { .. }), "{e:?}");
        assert!(e.to_string().contains("nosuchif-x9"));
        assert!(!exists("nosuchif-x9"));
        assert!(index("nosuchif-x9").unwrap_err().is_link_gone());
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("", "t").is_err());
        assert!(check_name("a/b", "t").is_err());
        assert!(check_name("0123456789abcdef", "t").is_err());
        assert!(check_name("0123456789abcde", "t").is_ok());
    }
}

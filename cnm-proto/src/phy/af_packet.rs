//! `AF_PACKET` ports with `PACKET_MMAP` rings (`TPACKET_V2`), the dataplane's fast path.
//!
//! Source: Linux `Documentation/networking/packet_mmap.rst` and packet(7). The socket
//! (`SOCK_RAW`, `ETH_P_ALL`, bound to one interface) shares two rings of fixed-size slots with
//! the kernel, mapped once:
//!
//! ```text
//!  mmap:  [ RX ring: rx_blocks x block_size ][ TX ring: tx_blocks x block_size ]
//!  block: [ slot | slot | ... ]   block_size / frame_size slots, slots never cross blocks
//!  slot:  tpacket2_hdr (32) | sockaddr_ll (20) | pad | reserve | MAC frame ...
//! ```
//!
//! **Receive.** The kernel fills a slot and sets `tp_status |= TP_STATUS_USER`; we read the
//! frame at `tp_mac` (`tp_snaplen` octets) and hand the slot back by writing
//! `TP_STATUS_KERNEL`. No system call per frame. Frames whose 802.1Q/802.1ad tag the kernel
//! stripped (it always untags on receive, before packet taps see the frame) come with
//! `TP_STATUS_VLAN_VALID`, `tp_vlan_tci` and `tp_vlan_tpid`; the port writes the tag back in
//! front of the EtherType, in place, using 4 octets of headroom requested with
//! `PACKET_RESERVE`: the 12 address octets move 4 octets towards the slot start and the tag
//! goes in the gap. Callers therefore always see the frame as it was on the wire.
//!
//! **Transmit.** `send` copies a frame into the next slot (data at `tpacket2_hdr`'s aligned
//! size, 32 octets, when `PACKET_TX_HAS_OFF` is not used), sets `tp_len` and marks the slot
//! `TP_STATUS_SEND_REQUEST`; `flush` is one `sendto(fd, NULL, 0, MSG_DONTWAIT)` that makes the
//! kernel transmit every requested slot; it returns each slot to `TP_STATUS_AVAILABLE` once
//! the frame is gone. A slot still owned by the kernel means the ring is full: `Ok(false)`.
//! `PACKET_LOSS` is set so that a malformed slot (e.g. larger than the MTU) is skipped and
//! freed instead of stalling the ring.
//!
//! **Own frames.** `PACKET_IGNORE_OUTGOING` (Linux ≥ 4.20) keeps every frame transmitted on
//! the interface out of the RX ring; on older kernels slots whose `sll_pkttype` is
//! `PACKET_OUTGOING` are skipped.
//!
//! Memory is exactly `(rx_blocks + tx_blocks) * block_size`, fixed at open.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use socket2::{Domain, Protocol, Socket, Type};

use super::iface::{self, check_name};
use super::{Port, PortError, PortStats};

/// `TPACKET_V2` (`enum tpacket_versions`, `include/uapi/linux/if_packet.h`).
const TPACKET_V2: libc::c_int = 1;
/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`: where `sockaddr_ll` starts in a slot, and
/// where transmit data starts.
const V2_HDR_ALIGNED: usize = (size_of::<libc::tpacket2_hdr>() + 15) & !15;
/// `TPACKET2_HDRLEN`: the aligned header plus `sockaddr_ll`.
const V2_HDRLEN: usize = V2_HDR_ALIGNED + size_of::<libc::sockaddr_ll>();
/// Length of an 802.1Q / 802.1ad tag (IEEE 802.1Q-2022 clause 9.3: TPID 2 + TCI 2).
const VLAN_HLEN: usize = 4;
/// Offset of the EtherType/TPID in an Ethernet frame (two 6-octet addresses).
const ADDRS_LEN: usize = 12;
/// Where the kernel puts the network header of a received Ethernet frame in a `TPACKET_V2`
/// slot without a vnet header: `netoff = TPACKET_ALIGN(TPACKET2_HDRLEN + 16) + reserve`
/// = 84, so `tp_mac = netoff - 14` = 70 (`net/packet/af_packet.c`, `tpacket_rcv`). Used to
/// size slots for an MTU; the real-network tests check the resulting limit to the octet.
const RX_SLOT_OVERHEAD: usize = ((V2_HDRLEN + 16 + 15) & !15) + VLAN_HLEN;
/// Empty receive calls between two `SO_ERROR` checks (see [`AfPacketPort::take_error`]).
const ERROR_CHECK_INTERVAL: u32 = 64;

/// Ring geometry and socket options of an [`AfPacketPort`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Size of one ring slot (`tp_frame_size`), a multiple of 16. The largest frame a slot
    /// holds is `frame_size - 70` on receive (see [`AfPacketConfig::max_rx_frame`]) and
    /// `frame_size - 32` on transmit. Default 2048: a 1500-octet MTU plus VLAN tag.
    pub frame_size: u32,
    /// Size of one ring block (`tp_block_size`): a multiple of the page size, holding
    /// `block_size / frame_size` slots. Default 32 KiB.
    pub block_size: u32,
    /// Blocks in the receive ring. Default 128 (2048 slots of 2048, 4 MiB). The ring only has
    /// to absorb the time the reading thread is not scheduled; on a shared 2-core machine a
    /// 512-slot ring overflowed under a 0.7 Mpps burst where 2048 slots cut the drops tenfold
    /// (`examples/ring_bench.rs`).
    pub rx_blocks: u32,
    /// Blocks in the transmit ring. Default 16 (256 slots of 2048, 512 KiB).
    pub tx_blocks: u32,
    /// Put the interface in promiscuous mode for the socket's lifetime
    /// (`PACKET_ADD_MEMBERSHIP` / `PACKET_MR_PROMISC`). Default on: a switch port receives
    /// frames for every address.
    pub promiscuous: bool,
    /// Keep frames transmitted on the interface (ours and the host's) out of the receive ring
    /// (`PACKET_IGNORE_OUTGOING`). Default on.
    pub ignore_outgoing: bool,
    /// Hand frames straight to the driver, skipping the interface's qdisc
    /// (`PACKET_QDISC_BYPASS`). Default off.
    pub qdisc_bypass: bool,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            frame_size: 2048,
            block_size: 32 * 1024,
            rx_blocks: 128,
            tx_blocks: 16,
            promiscuous: true,
            ignore_outgoing: true,
            qdisc_bypass: false,
        }
    }
}

impl AfPacketConfig {
    /// Defaults with slots large enough for an `mtu`-octet payload plus Ethernet header and
    /// one VLAN tag (slot size rounded up to a power of two; blocks hold at least one slot).
    /// The rings keep the default's memory (4 MiB RX, 512 KiB TX) but never fewer than 256
    /// RX and 64 TX slots.
    pub fn for_mtu(mtu: u32) -> Self {
        let need = RX_SLOT_OVERHEAD as u32 + mtu.saturating_add(14 + VLAN_HLEN as u32);
        let frame_size = need.next_power_of_two().max(256);
        let d = Self::default();
        let block_size = d.block_size.max(frame_size);
        let per_block = block_size / frame_size;
        let blocks = |default_blocks: u32, min_slots: u32| {
            let bytes = u64::from(default_blocks) * u64::from(d.block_size);
            let slots = u32::try_from(bytes / u64::from(frame_size))
                .unwrap_or(u32::MAX)
                .max(min_slots);
            slots.div_ceil(per_block)
        };
        AfPacketConfig {
            frame_size,
            block_size,
            rx_blocks: blocks(d.rx_blocks, 256),
            tx_blocks: blocks(d.tx_blocks, 64),
            ..d
        }
    }

    /// Slots in the receive ring.
    pub fn rx_slots(&self) -> u32 {
        self.slots_per_block() * self.rx_blocks
    }

    /// Slots in the transmit ring.
    pub fn tx_slots(&self) -> u32 {
        self.slots_per_block() * self.tx_blocks
    }

    /// Largest frame (octets, without restored VLAN tag) a receive slot holds untruncated.
    pub fn max_rx_frame(&self) -> usize {
        (self.frame_size as usize).saturating_sub(RX_SLOT_OVERHEAD - 14)
    }

    /// Largest frame a transmit slot holds.
    pub fn max_tx_frame(&self) -> usize {
        (self.frame_size as usize).saturating_sub(V2_HDR_ALIGNED)
    }

    /// Bytes of ring memory the port maps.
    pub fn ring_bytes(&self) -> u64 {
        u64::from(self.block_size) * (u64::from(self.rx_blocks) + u64::from(self.tx_blocks))
    }

    fn slots_per_block(&self) -> u32 {
        self.block_size.checked_div(self.frame_size).unwrap_or(0)
    }

    /// Check the geometry against the kernel's rules (`packet_set_ring`).
    pub fn validate(&self) -> Result<(), String> {
        let page = page_size();
        if self.frame_size < 256 || self.frame_size % 16 != 0 {
            return Err(format!(
                "frame_size {} must be a multiple of 16 and at least 256",
                self.frame_size
            ));
        }
        if self.block_size == 0 || self.block_size as usize % page != 0 {
            return Err(format!(
                "block_size {} must be a non-zero multiple of the page size {page}",
                self.block_size
            ));
        }
        if self.block_size < self.frame_size {
            return Err(format!(
                "block_size {} is smaller than frame_size {}",
                self.block_size, self.frame_size
            ));
        }
        if self.rx_blocks == 0 || self.tx_blocks == 0 {
            return Err("rx_blocks and tx_blocks must be at least 1".into());
        }
        // A generous bound that keeps every size computation in range.
        if self.ring_bytes() > 1 << 32 {
            return Err(format!(
                "rings of {} bytes are too large",
                self.ring_bytes()
            ));
        }
        Ok(())
    }
}

/// An `AF_PACKET` socket bound to one interface, with mmap'd `TPACKET_V2` RX and TX rings.
#[derive(Debug)]
pub struct AfPacketPort {
    name: String,
    ifindex: u32,
    cfg: AfPacketConfig,
    // Declared before `sock` so the rings are unmapped before the socket closes.
    map: Mapping,
    sock: Socket,
    /// Offset of the TX ring in the mapping.
    tx_off: usize,
    slots_per_block: usize,
    rx_slots: usize,
    tx_slots: usize,
    rx_next: usize,
    tx_next: usize,
    /// Slots marked `SEND_REQUEST` since the last successful flush.
    tx_pending: usize,
    /// Consecutive `recv_batch` calls that found the ring empty.
    empty_streak: u32,
    /// Used only if a slot ever lacks headroom for an in-place tag restore.
    scratch: Vec<u8>,
    /// The longest frame the interface transmits: its MTU plus the Ethernet header (plus a
    /// VLAN tag when the frame carries one, as the kernel allows).
    max_untagged_len: usize,
    stats: PortStats,
}

// SAFETY: the mapping is owned exclusively by this port (no other Rust value aliases it) and
// the kernel side synchronises through the per-slot status words, so the port may move to
// another thread.
unsafe impl Send for AfPacketPort {}

impl AfPacketPort {
    /// Open `ifname` (in the calling thread's network namespace) with the given rings.
    ///
    /// Fails with [`PortError::NoSuchInterface`] if the interface does not exist and with an
    /// `ENETDOWN` error ([`PortError::is_link_gone`]) if it is not up.
    pub fn open(ifname: &str, cfg: &AfPacketConfig) -> Result<AfPacketPort, PortError> {
        check_name(ifname, "open")?;
        cfg.validate()
            .map_err(|m| PortError::config(ifname, "ring geometry", m))?;
        let ifindex = match iface::index(ifname) {
            Ok(i) => i,
            Err(PortError::NoSuchInterface { .. }) => {
                return Err(PortError::NoSuchInterface {
                    iface: ifname.to_owned(),
                    op: "open AF_PACKET port",
                })
            }
            Err(e) => return Err(e),
        };
        if !iface::is_up(ifname)? {
            return Err(PortError::io(
                ifname,
                "open AF_PACKET port (interface is down)",
                io::Error::from_raw_os_error(libc::ENETDOWN),
            ));
        }
        // Protocol 0: nothing is delivered until the rings exist and we bind with ETH_P_ALL.
        let sock = Socket::new(Domain::PACKET, Type::RAW, Some(Protocol::from(0)))
            .map_err(|e| PortError::io(ifname, "socket(AF_PACKET)", e))?;
        sock.set_nonblocking(true)
            .map_err(|e| PortError::io(ifname, "set non-blocking", e))?;
        let fd = sock.as_raw_fd();
        setsockopt_int(fd, libc::PACKET_VERSION, TPACKET_V2)
            .map_err(|e| PortError::io(ifname, "PACKET_VERSION TPACKET_V2", e))?;
        setsockopt_int(fd, libc::PACKET_RESERVE, VLAN_HLEN as libc::c_int)
            .map_err(|e| PortError::io(ifname, "PACKET_RESERVE", e))?;
        setsockopt_int(fd, libc::PACKET_LOSS, 1)
            .map_err(|e| PortError::io(ifname, "PACKET_LOSS", e))?;

        let spb = cfg.slots_per_block();
        let rx_req = libc::tpacket_req {
            tp_block_size: cfg.block_size,
            tp_block_nr: cfg.rx_blocks,
            tp_frame_size: cfg.frame_size,
            tp_frame_nr: spb * cfg.rx_blocks,
        };
        let tx_req = libc::tpacket_req {
            tp_block_nr: cfg.tx_blocks,
            tp_frame_nr: spb * cfg.tx_blocks,
            ..rx_req
        };
        setsockopt(fd, libc::PACKET_RX_RING, &rx_req)
            .map_err(|e| PortError::io(ifname, "PACKET_RX_RING", e))?;
        setsockopt(fd, libc::PACKET_TX_RING, &tx_req)
            .map_err(|e| PortError::io(ifname, "PACKET_TX_RING", e))?;
        let rx_bytes = cfg.block_size as usize * cfg.rx_blocks as usize;
        let tx_bytes = cfg.block_size as usize * cfg.tx_blocks as usize;
        let map = Mapping::new(fd, rx_bytes + tx_bytes)
            .map_err(|e| PortError::io(ifname, "mmap rings", e))?;

        if cfg.ignore_outgoing {
            match setsockopt_int(fd, libc::PACKET_IGNORE_OUTGOING, 1) {
                Ok(()) => {}
                // Older kernels: the sll_pkttype check in the ring walk does the job.
                Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {}
                Err(e) => return Err(PortError::io(ifname, "PACKET_IGNORE_OUTGOING", e)),
            }
        }
        if cfg.qdisc_bypass {
            setsockopt_int(fd, libc::PACKET_QDISC_BYPASS, 1)
                .map_err(|e| PortError::io(ifname, "PACKET_QDISC_BYPASS", e))?;
        }

        // SAFETY: an all-zero sockaddr_ll is valid; family, protocol and index are set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as libc::c_ushort;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: `sll` is a valid sockaddr_ll of the length passed.
        let rc = unsafe {
            libc::bind(
                fd,
                (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(iface::classify(ifname, "bind", io::Error::last_os_error()));
        }
        if cfg.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as libc::c_int,
                mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setsockopt(fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|e| PortError::io(ifname, "PACKET_MR_PROMISC", e))?;
        }
        // Read once: an MTU change while the port is open shows up as kernel transmit errors
        // (`tx_errors`) until the port is reopened.
        let mtu = iface::mtu(ifname).unwrap_or(u32::MAX) as usize;
        let mut port = AfPacketPort {
            name: ifname.to_owned(),
            ifindex,
            cfg: cfg.clone(),
            map,
            sock,
            tx_off: rx_bytes,
            slots_per_block: spb as usize,
            rx_slots: (spb * cfg.rx_blocks) as usize,
            tx_slots: (spb * cfg.tx_blocks) as usize,
            rx_next: 0,
            tx_next: 0,
            tx_pending: 0,
            empty_streak: 0,
            scratch: Vec::with_capacity(cfg.frame_size as usize + VLAN_HLEN),
            max_untagged_len: mtu.saturating_add(14),
            stats: PortStats::default(),
        };
        // Start the drop counter from zero (reading PACKET_STATISTICS resets it).
        port.read_kernel_stats()?;
        port.take_error()?;
        Ok(port)
    }

    /// The interface index the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The configuration the port was opened with.
    pub fn config(&self) -> &AfPacketConfig {
        &self.cfg
    }

    /// Slots in the transmit ring (frames `send` accepts before a `flush`).
    pub fn tx_capacity(&self) -> usize {
        self.tx_slots
    }

    /// Slots in the receive ring.
    pub fn rx_capacity(&self) -> usize {
        self.rx_slots
    }

    /// Counters, including the kernel's ring-full drops (`PACKET_STATISTICS`).
    pub fn stats(&mut self) -> Result<PortStats, PortError> {
        self.read_kernel_stats()?;
        Ok(self.stats)
    }

    /// Report (and clear) a pending socket error (`SO_ERROR`). The kernel sets `ENETDOWN` when
    /// the interface goes down or is deleted; [`PortError::is_link_gone`] is then true.
    ///
    /// `recv_batch` checks this by itself every 64th consecutive call that finds the ring
    /// empty, and [`super::poll::wait`] reports such a socket as ready, so a daemon loop that
    /// polls its ports notices a vanished interface within a few iterations.
    pub fn take_error(&mut self) -> Result<(), PortError> {
        match self.sock.take_error() {
            Ok(None) => Ok(()),
            Ok(Some(e)) => Err(PortError::io(&self.name, "socket error", e)),
            Err(e) => Err(PortError::io(&self.name, "getsockopt SO_ERROR", e)),
        }
    }

    fn read_kernel_stats(&mut self) -> Result<(), PortError> {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` is a writable tpacket_stats and `len` its size.
        let rc = unsafe {
            libc::getsockopt(
                self.sock.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast::<libc::c_void>(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(PortError::last_os(&self.name, "PACKET_STATISTICS"));
        }
        self.stats.rx_dropped += u64::from(st.tp_drops);
        Ok(())
    }

    /// Pointer to the start of slot `idx` of the ring at byte offset `ring_off`.
    fn slot(&self, ring_off: usize, idx: usize) -> *mut u8 {
        let block = idx / self.slots_per_block;
        let within = idx % self.slots_per_block;
        let off =
            ring_off + block * self.cfg.block_size as usize + within * self.cfg.frame_size as usize;
        // SAFETY: `idx` < slot count of the ring, so `off` + frame_size lies inside the mapping.
        unsafe { self.map.ptr.as_ptr().add(off) }
    }

    /// Handle the RX slot at `p`, which the kernel has handed to us. Returns `true` when a
    /// frame went to `f`.
    fn deliver(&mut self, p: *mut u8, status: u32, f: &mut dyn FnMut(&[u8], Option<u64>)) -> bool {
        let frame_size = self.cfg.frame_size as usize;
        // SAFETY: the slot belongs to us (TP_STATUS_USER, read with Acquire) and starts with
        // a tpacket2_hdr (16-byte aligned slot, 4-byte aligned struct).
        let hdr = unsafe { std::ptr::read(p.cast::<libc::tpacket2_hdr>()) };
        // SAFETY: the sockaddr_ll follows the aligned header inside the slot.
        let sll =
            unsafe { std::ptr::read_unaligned(p.add(V2_HDR_ALIGNED).cast::<libc::sockaddr_ll>()) };
        if sll.sll_pkttype == libc::PACKET_OUTGOING {
            self.stats.rx_outgoing_skipped += 1;
            return false;
        }
        // The kernel's receive time of the frame (`tpacket_get_timestamp`: the skb's stamp or
        // `CLOCK_REALTIME` when the socket took it; `TPACKET_V2` gives nanoseconds).
        let stamp = (u64::from(hdr.tp_sec))
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(hdr.tp_nsec));
        let stamp = (stamp != 0).then_some(stamp);
        let mac = hdr.tp_mac as usize;
        let snap = hdr.tp_snaplen as usize;
        if snap < (hdr.tp_len as usize) || mac + snap > frame_size || mac < V2_HDRLEN {
            // Larger than a slot: the kernel truncated it. A truncated frame must not be
            // forwarded, so it is dropped and counted.
            self.stats.rx_truncated += 1;
            return false;
        }
        let tagged = status & libc::TP_STATUS_VLAN_VALID != 0 || hdr.tp_vlan_tci != 0;
        if tagged && snap >= ADDRS_LEN {
            let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 && hdr.tp_vlan_tpid != 0 {
                hdr.tp_vlan_tpid
            } else {
                0x8100
            };
            let mut tag = [0u8; VLAN_HLEN];
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&hdr.tp_vlan_tci.to_be_bytes());
            self.stats.rx_vlan_restored += 1;
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += (snap + VLAN_HLEN) as u64;
            if mac >= V2_HDRLEN + VLAN_HLEN {
                // SAFETY: [mac - 4, mac + snap) lies inside our slot and after the
                // sockaddr_ll; `copy` handles the overlapping move of the two addresses.
                let frame = unsafe {
                    let start = p.add(mac - VLAN_HLEN);
                    std::ptr::copy(p.add(mac), start, ADDRS_LEN);
                    std::ptr::copy_nonoverlapping(tag.as_ptr(), start.add(ADDRS_LEN), VLAN_HLEN);
                    std::slice::from_raw_parts(start, snap + VLAN_HLEN)
                };
                f(frame, stamp);
            } else {
                // SAFETY: [mac, mac + snap) lies inside our slot.
                let data = unsafe { std::slice::from_raw_parts(p.add(mac), snap) };
                self.scratch.clear();
                self.scratch.extend_from_slice(&data[..ADDRS_LEN]);
                self.scratch.extend_from_slice(&tag);
                self.scratch.extend_from_slice(&data[ADDRS_LEN..]);
                f(&self.scratch, stamp);
            }
        } else {
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += snap as u64;
            // SAFETY: [mac, mac + snap) lies inside our slot.
            let frame = unsafe { std::slice::from_raw_parts(p.add(mac), snap) };
            f(frame, stamp);
        }
        true
    }
}

impl Port for AfPacketPort {
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
        let mut delivered = 0;
        let mut scanned = 0;
        while delivered < max && scanned < self.rx_slots {
            let p = self.slot(0, self.rx_next);
            // SAFETY: the status word is the first, 4-byte aligned field of the slot and is
            // shared with the kernel, hence accessed atomically.
            let status_word = unsafe { &*p.cast::<AtomicU32>() };
            let status = status_word.load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            if self.deliver(p, status, f) {
                delivered += 1;
            }
            status_word.store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.rx_next = (self.rx_next + 1) % self.rx_slots;
            scanned += 1;
        }
        if scanned == 0 {
            self.empty_streak = self.empty_streak.wrapping_add(1);
            if self.empty_streak % ERROR_CHECK_INTERVAL == 0 {
                self.take_error()?;
            }
        } else {
            self.empty_streak = 0;
        }
        Ok(delivered)
    }

    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        if frame.len() < 14 {
            return Err(PortError::BadFrame {
                iface: self.name.clone(),
                len: frame.len(),
                reason: "shorter than an Ethernet header",
            });
        }
        if frame.len() > self.cfg.max_tx_frame() {
            return Err(PortError::BadFrame {
                iface: self.name.clone(),
                len: frame.len(),
                reason: "larger than a transmit ring slot",
            });
        }
        if frame.len() > self.max_untagged_len {
            // The kernel allows 4 more octets for an 802.1Q/802.1ad tag (packet_snd's
            // `packet_extra_vlan_len_allowed`).
            let tpid = u16::from_be_bytes([frame[12], frame[13]]);
            let tagged = tpid == 0x8100 || tpid == 0x88a8;
            if !tagged || frame.len() > self.max_untagged_len + VLAN_HLEN {
                self.stats.tx_oversize += 1;
                return Err(PortError::BadFrame {
                    iface: self.name.clone(),
                    len: frame.len(),
                    reason: "longer than the interface MTU allows",
                });
            }
        }
        let p = self.slot(self.tx_off, self.tx_next);
        // SAFETY: as in recv_batch, the first field of the slot is the shared status word.
        let status_word = unsafe { &*p.cast::<AtomicU32>() };
        let status = status_word.load(Ordering::Acquire);
        if status & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
            self.stats.tx_full += 1;
            return Ok(false);
        }
        if status & libc::TP_STATUS_WRONG_FORMAT != 0 {
            // The kernel rejected this slot's previous frame.
            self.stats.tx_errors += 1;
        }
        // SAFETY: the slot is ours (AVAILABLE); the data area [32, 32 + len) fits in the slot
        // because len <= frame_size - 32 (checked above); tp_len is the u32 at offset 4.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), p.add(V2_HDR_ALIGNED), frame.len());
            let hdr = p.cast::<libc::tpacket2_hdr>();
            (*hdr).tp_len = frame.len() as u32;
            (*hdr).tp_snaplen = frame.len() as u32;
        }
        status_word.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.tx_next = (self.tx_next + 1) % self.tx_slots;
        self.tx_pending += 1;
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Ok(true)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.tx_pending == 0 {
            return Ok(());
        }
        loop {
            self.stats.flushes += 1;
            // SAFETY: a zero-length send with no buffer and no address: "transmit the ring".
            let rc = unsafe {
                libc::sendto(
                    self.sock.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc >= 0 {
                self.tx_pending = 0;
                return Ok(());
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                // Transient: the unsent slots stay requested and go with the next flush.
                Some(libc::EAGAIN) => return Ok(()),
                // The device or qdisc dropped a frame; the rest stay requested.
                Some(libc::ENOBUFS) => {
                    self.stats.tx_errors += 1;
                    return Ok(());
                }
                _ => return Err(PortError::io(&self.name, "flush (sendto)", err)),
            }
        }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }

    fn counters(&mut self) -> PortStats {
        // A failed PACKET_STATISTICS read (the socket is going away) keeps the last counts.
        let _ = self.read_kernel_stats();
        self.stats
    }
}

/// The shared ring mapping.
#[derive(Debug)]
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(fd: RawFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: maps `len` bytes of the packet socket's rings; checked for MAP_FAILED below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(ptr.cast::<u8>())
            .map(|ptr| Mapping { ptr, len })
            .ok_or_else(|| io::Error::other("mmap returned NULL"))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mapped in `new`; nothing references it afterwards
        // (slices handed to callbacks do not outlive `recv_batch`).
        unsafe { libc::munmap(self.ptr.as_ptr().cast::<libc::c_void>(), self.len) };
    }
}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live T of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            opt,
            (val as *const T).cast::<libc::c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn setsockopt_int(fd: RawFd, opt: libc::c_int, val: libc::c_int) -> io::Result<()> {
    setsockopt(fd, opt, &val)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory side effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|p| *p > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_constants() {
        assert_eq!(size_of::<libc::tpacket2_hdr>(), 32);
        assert_eq!(V2_HDR_ALIGNED, 32);
        assert_eq!(V2_HDRLEN, libc::TPACKET2_HDRLEN);
        assert_eq!(V2_HDRLEN, 52);
    }

    #[test]
    fn default_geometry() {
        let c = AfPacketConfig::default();
        c.validate().unwrap();
        assert_eq!(c.rx_slots(), 2048);
        assert_eq!(c.tx_slots(), 256);
        assert_eq!(c.ring_bytes(), (4 << 20) + (512 << 10));
        assert!(c.max_rx_frame() >= 1518);
        assert!(c.max_tx_frame() >= 1518);
    }

    #[test]
    fn mtu_geometry() {
        let c = AfPacketConfig::for_mtu(9000);
        c.validate().unwrap();
        assert!(c.max_rx_frame() >= 9018, "{c:?}");
        assert_eq!(c.rx_slots(), 256);
        assert_eq!(c.tx_slots(), 64);
        let c = AfPacketConfig::for_mtu(1500);
        assert_eq!(c, AfPacketConfig::default());
    }

    #[test]
    fn bad_geometry() {
        let mut c = AfPacketConfig {
            frame_size: 2047,
            ..AfPacketConfig::default()
        };
        assert!(c.validate().is_err());
        c.frame_size = 2048;
        c.block_size = 1000;
        assert!(c.validate().is_err());
        c.block_size = 4096;
        c.rx_blocks = 0;
        assert!(c.validate().is_err());
    }
}

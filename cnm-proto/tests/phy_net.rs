//! Real-network tests of `cnm_proto::phy`: AF_PACKET rings over a veth pair, TAP devices,
//! offload control. Each test builds its own network namespace (unique name: process id and a
//! counter) and deletes it on the way out, even when the test fails. Without root the tests
//! print why and return.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use cnm_proto::phy::{self, AfPacketConfig, AfPacketPort, Port, PortError, TapPort};
use cnm_proto::Duration;

/// IEEE Std 802 local experimental EtherType 1: marks the test's own frames so that stray
/// traffic (IPv6 neighbour discovery and the like) is ignored.
const TEST_ETHERTYPE: u16 = 0x88B5;

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// A network namespace that is deleted when the guard drops.
struct Netns {
    name: String,
    seq: u32,
}

impl Netns {
    /// A fresh namespace, or `None` (with the reason printed) when the test cannot run here.
    fn create(test: &str) -> Option<Netns> {
        if !is_root() {
            eprintln!("skipping {test}: needs root (network namespaces)");
            return None;
        }
        let seq = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("qcnphy-{}-{seq}", std::process::id());
        if let Err(e) = ip(&["netns", "add", &name]) {
            eprintln!("skipping {test}: cannot create a namespace: {e}");
            return None;
        }
        let ns = Netns { name, seq };
        // Quiet the namespace: no IPv6 autoconfiguration chatter on the test links.
        for key in [
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ] {
            let _ = Command::new("ip")
                .args(["netns", "exec", &ns.name, "sysctl", "-qw", key])
                .status();
        }
        Some(ns)
    }

    /// Interface name unique to this namespace and process (≤ 15 octets).
    fn ifname(&self, tag: &str) -> String {
        let n = format!("{tag}{}x{}", std::process::id() % 100_000, self.seq);
        assert!(n.len() <= 15, "{n}");
        n
    }

    /// A veth pair inside the namespace, both ends up.
    fn veth(&self) -> (String, String) {
        let (a, b) = (self.ifname("va"), self.ifname("vb"));
        ip(&[
            "-n", &self.name, "link", "add", &a, "type", "veth", "peer", "name", &b,
        ])
        .unwrap();
        ip(&["-n", &self.name, "link", "set", &a, "up"]).unwrap();
        ip(&["-n", &self.name, "link", "set", &b, "up"]).unwrap();
        (a, b)
    }

    /// Run `body` in a thread that has entered the namespace (the harness thread stays put).
    fn run<T: Send + 'static>(&self, body: impl FnOnce() -> T + Send + 'static) -> T {
        let name = self.name.clone();
        let h = std::thread::spawn(move || {
            phy::netns::enter(&name).unwrap();
            body()
        });
        match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// An Ethernet frame `dst · src · ethertype · payload`, padded to 60 octets.
fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(60 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize(f.len().max(60), 0);
    f
}

/// Insert a tag (TPID + TCI) after the addresses.
fn tagged(f: &[u8], tpid: u16, tci: u16) -> Vec<u8> {
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&tpid.to_be_bytes());
    t.extend_from_slice(&tci.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

/// True for frames a test sent: the test EtherType, directly or behind up to two tags.
fn is_test_frame(f: &[u8]) -> bool {
    let mut off = 12;
    while off + 2 <= f.len() {
        let et = u16::from_be_bytes([f[off], f[off + 1]]);
        match et {
            0x8100 | 0x88A8 => off += 4,
            TEST_ETHERTYPE => return true,
            _ => return false,
        }
    }
    false
}

/// Receive test frames until `want` arrived or `timeout` passed.
fn collect(port: &mut dyn Port, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = phy::clock::now() + timeout;
    let mut got = Vec::new();
    while got.len() < want {
        let now = phy::clock::now();
        if now >= deadline {
            break;
        }
        let fd = port.raw_fd().unwrap();
        phy::poll::wait(&[fd], Some(deadline - now)).unwrap();
        port.recv_batch(64, &mut |f| {
            if is_test_frame(f) {
                got.push(f.to_vec());
            }
        })
        .unwrap();
    }
    got
}

const A_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa];
const B_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb];

fn open_pair(a: &str, b: &str) -> (AfPacketPort, AfPacketPort) {
    phy::offload::disable_all(a).unwrap();
    phy::offload::disable_all(b).unwrap();
    let cfg = AfPacketConfig::default();
    (
        AfPacketPort::open(a, &cfg).unwrap(),
        AfPacketPort::open(b, &cfg).unwrap(),
    )
}

#[test]
fn veth_frames_cross_both_ways() {
    let Some(ns) = Netns::create("veth_frames_cross_both_ways") else {
        return;
    };
    let (a, b) = ns.veth();
    ns.run(move || {
        let (mut pa, mut pb) = open_pair(&a, &b);
        assert_eq!(pa.name(), a);
        let sent_ab: Vec<Vec<u8>> = (0..40u8)
            .map(|i| frame(B_MAC, A_MAC, TEST_ETHERTYPE, &vec![i; 46 + 30 * i as usize]))
            .collect();
        for f in &sent_ab {
            assert!(pa.send(f).unwrap());
        }
        pa.flush().unwrap();
        let got = collect(&mut pb, sent_ab.len(), Duration::from_secs(3));
        assert_eq!(got, sent_ab);

        let sent_ba: Vec<Vec<u8>> = (0..5u8)
            .map(|i| frame(A_MAC, B_MAC, TEST_ETHERTYPE, &[i; 1500]))
            .collect();
        for f in &sent_ba {
            assert!(pb.send(f).unwrap());
        }
        pb.flush().unwrap();
        let got = collect(&mut pa, sent_ba.len(), Duration::from_secs(3));
        assert_eq!(got, sent_ba);

        let sa = pa.stats().unwrap();
        let sb = pb.stats().unwrap();
        assert_eq!(sa.tx_frames, 40);
        assert_eq!(sb.rx_frames, 40);
        assert_eq!(sb.tx_frames, 5);
        assert_eq!(sa.rx_frames, 5);
        assert_eq!(sb.rx_dropped, 0);
    });
}

#[test]
fn received_frames_carry_kernel_receive_times() {
    let Some(ns) = Netns::create("received_frames_carry_kernel_receive_times") else {
        return;
    };
    let (a, b) = ns.veth();
    ns.run(move || {
        let (mut pa, mut pb) = open_pair(&a, &b);
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        for i in 0..10u8 {
            assert!(pa
                .send(&frame(B_MAC, A_MAC, TEST_ETHERTYPE, &[i; 100]))
                .unwrap());
        }
        pa.flush().unwrap();
        let deadline = phy::clock::now() + Duration::from_secs(3);
        let mut stamps = Vec::new();
        while stamps.len() < 10 && phy::clock::now() < deadline {
            let fd = pb.raw_fd().unwrap();
            phy::poll::wait(&[fd], Some(Duration::from_millis(100))).unwrap();
            pb.recv_batch_stamped(64, &mut |f, t| {
                if is_test_frame(f) {
                    stamps.push(t);
                }
            })
            .unwrap();
        }
        assert_eq!(stamps.len(), 10);
        // The kernel stamps every frame on CLOCK_REALTIME, in the order they arrived.
        let stamps: Vec<u64> = stamps.into_iter().map(|t| t.unwrap()).collect();
        assert!(stamps[0] >= before, "{stamps:?} before {before}");
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    });
}

#[test]
fn vlan_tags_arrive_intact() {
    let Some(ns) = Netns::create("vlan_tags_arrive_intact") else {
        return;
    };
    let (a, b) = ns.veth();
    ns.run(move || {
        // Leave VLAN offload on one side on (the default) to show it does not matter.
        phy::offload::disable_all(&a).unwrap();
        let cfg = AfPacketConfig::default();
        let mut pa = AfPacketPort::open(&a, &cfg).unwrap();
        let mut pb = AfPacketPort::open(&b, &cfg).unwrap();
        let base = frame(B_MAC, A_MAC, TEST_ETHERTYPE, b"tagged frame payload");
        let sent = vec![
            tagged(&base, 0x8100, (5 << 13) | 100), // PCP 5, VID 100
            tagged(&base, 0x8100, 3 << 13),         // priority tag: VID 0
            tagged(&base, 0x8100, 0),               // TCI all zero
            tagged(&base, 0x88A8, 7 << 13 | 4094),  // 802.1ad S-tag
            tagged(&tagged(&base, 0x8100, 42), 0x88A8, 300), // QinQ
            base.clone(),                           // untagged stays untagged
        ];
        for f in &sent {
            assert!(pa.send(f).unwrap());
        }
        pa.flush().unwrap();
        let got = collect(&mut pb, sent.len(), Duration::from_secs(3));
        assert_eq!(got, sent);
        assert_eq!(pb.stats().unwrap().rx_vlan_restored, 5);

        // And the other way, through the side whose offloads are still on.
        for f in &sent {
            let mut r = f.clone();
            r[..6].copy_from_slice(&A_MAC);
            r[6..12].copy_from_slice(&B_MAC);
            assert!(pb.send(&r).unwrap());
        }
        pb.flush().unwrap();
        let got = collect(&mut pa, sent.len(), Duration::from_secs(3));
        assert_eq!(got.len(), sent.len());
        for (g, s) in got.iter().zip(&sent) {
            assert_eq!(g[12..], s[12..]);
        }
    });
}

#[test]
fn own_transmissions_are_not_received() {
    let Some(ns) = Netns::create("own_transmissions_are_not_received") else {
        return;
    };
    let (a, b) = ns.veth();
    ns.run(move || {
        let (mut pa, mut pb) = open_pair(&a, &b);
        // A second socket on the same interface must not see `pa`'s frames either.
        let mut pa2 = AfPacketPort::open(&a, &AfPacketConfig::default()).unwrap();
        // Without PACKET_IGNORE_OUTGOING the kernel shows outgoing frames to other sockets
        // on the interface; the ring walk skips them by their `PACKET_OUTGOING` type.
        let no_ignore = AfPacketConfig {
            ignore_outgoing: false,
            ..AfPacketConfig::default()
        };
        let mut pa3 = AfPacketPort::open(&a, &no_ignore).unwrap();
        for i in 0..10u8 {
            assert!(pa
                .send(&frame(B_MAC, A_MAC, TEST_ETHERTYPE, &[i; 50]))
                .unwrap());
        }
        pa.flush().unwrap();
        let got = collect(&mut pb, 10, Duration::from_secs(3));
        assert_eq!(got.len(), 10);
        assert!(collect(&mut pa, 1, Duration::from_millis(200)).is_empty());
        assert!(collect(&mut pa2, 1, Duration::from_millis(50)).is_empty());
        assert!(collect(&mut pa3, 1, Duration::from_millis(50)).is_empty());
        assert_eq!(pa.stats().unwrap().rx_frames, 0);
        assert!(pa3.stats().unwrap().rx_outgoing_skipped >= 10);
    });
}

#[test]
fn full_tx_ring_refuses_without_error() {
    let Some(ns) = Netns::create("full_tx_ring_refuses_without_error") else {
        return;
    };
    let (a, b) = ns.veth();
    ns.run(move || {
        phy::offload::disable_all(&a).unwrap();
        let cfg = AfPacketConfig {
            frame_size: 2048,
            block_size: 4096,
            rx_blocks: 2,
            tx_blocks: 2,
            ..AfPacketConfig::default()
        };
        let mut pa = AfPacketPort::open(&a, &cfg).unwrap();
        let mut pb = AfPacketPort::open(&b, &AfPacketConfig::default()).unwrap();
        assert_eq!(pa.tx_capacity(), 4);
        let f = frame(B_MAC, A_MAC, TEST_ETHERTYPE, &[7; 100]);
        for _ in 0..4 {
            assert!(pa.send(&f).unwrap());
        }
        assert!(!pa.send(&f).unwrap(), "a full ring must refuse");
        assert_eq!(pa.stats().unwrap().tx_full, 1);
        pa.flush().unwrap();
        assert_eq!(collect(&mut pb, 4, Duration::from_secs(3)).len(), 4);
        // Slots come back once the kernel is done with them.
        let deadline = phy::clock::now() + Duration::from_secs(2);
        while !pa.send(&f).unwrap() {
            assert!(phy::clock::now() < deadline, "TX slots never came back");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        pa.flush().unwrap();
        assert_eq!(collect(&mut pb, 1, Duration::from_secs(3)).len(), 1);

        // Frames that cannot fit a slot are errors, not "try again".
        let big = vec![0u8; 4000];
        assert!(matches!(pa.send(&big), Err(PortError::BadFrame { .. })));
        assert!(matches!(
            pa.send(&[0u8; 5]),
            Err(PortError::BadFrame { .. })
        ));
    });
}

#[test]
fn missing_interface_error_names_it() {
    let Some(ns) = Netns::create("missing_interface_error_names_it") else {
        return;
    };
    let missing = ns.ifname("nx");
    ns.run(move || {
        let err = AfPacketPort::open(&missing, &AfPacketConfig::default()).unwrap_err();
        assert!(matches!(err, PortError::NoSuchInterface { .. }), "{err:?}");
        assert!(err.to_string().contains(&missing), "{err}");
        assert!(err.is_link_gone());
        let err = phy::iface::mac(&missing).unwrap_err();
        assert!(err.to_string().contains(&missing), "{err}");
        assert!(!phy::iface::exists(&missing));
    });
}

#[test]
fn down_or_deleted_interface_is_link_gone() {
    let Some(ns) = Netns::create("down_or_deleted_interface_is_link_gone") else {
        return;
    };
    let (a, b) = ns.veth();
    let nsname = ns.name.clone();
    ns.run(move || {
        let (mut pa, _pb) = open_pair(&a, &b);
        ip(&["-n", &nsname, "link", "set", &a, "down"]).unwrap();
        let err = AfPacketPort::open(&a, &AfPacketConfig::default()).unwrap_err();
        assert!(err.is_link_gone(), "{err}");
        // The open port notices: by poll error + a few empty receive calls, or on flush.
        let fd = pa.raw_fd().unwrap();
        let ready = phy::poll::wait(&[fd], Some(Duration::from_millis(100))).unwrap();
        assert!(ready.has_error(0));
        let mut seen = None;
        for _ in 0..200 {
            if let Err(e) = pa.recv_batch(32, &mut |_| {}) {
                seen = Some(e);
                break;
            }
        }
        let e = seen.expect("recv_batch never reported the link going down");
        assert!(e.is_link_gone(), "{e}");
        assert!(e.to_string().contains(&a), "{e}");

        ip(&["-n", &nsname, "link", "del", &a]).unwrap();
        assert!(pa.send(&frame(B_MAC, A_MAC, TEST_ETHERTYPE, &[1])).unwrap());
        let e = pa.flush().unwrap_err();
        assert!(e.is_link_gone(), "{e}");
    });
}

#[test]
fn offloads_can_be_turned_off() {
    let Some(ns) = Netns::create("offloads_can_be_turned_off") else {
        return;
    };
    let (a, _b) = ns.veth();
    ns.run(move || {
        let before = phy::offload::get(&a).unwrap();
        assert!(!before.all_off(), "veth starts with offloads on: {before}");
        let changed = phy::offload::disable_all(&a).unwrap();
        assert!(!changed.is_empty());
        let after = phy::offload::get(&a).unwrap();
        assert!(after.all_off(), "{after}");
        assert_eq!(after.rx_vlan, Some(false));
        assert_eq!(after.tx_vlan, Some(false));
        assert_eq!(after.tso, Some(false));
        assert_eq!(after.gro, Some(false));
        // Idempotent.
        assert!(phy::offload::disable_all(&a).unwrap().is_empty());
        // And back on, one feature.
        phy::offload::set(&a, phy::offload::Feature::Gro, true).unwrap();
        assert_eq!(phy::offload::get(&a).unwrap().gro, Some(true));
    });
}

#[test]
fn iface_facts_inside_namespace() {
    let Some(ns) = Netns::create("iface_facts_inside_namespace") else {
        return;
    };
    let (a, _b) = ns.veth();
    ns.run(move || {
        assert!(phy::iface::exists(&a));
        assert!(phy::iface::index(&a).unwrap() > 1);
        assert_eq!(phy::iface::mtu(&a).unwrap(), 1500);
        assert!(phy::iface::is_up(&a).unwrap());
        phy::iface::set_mac(&a, A_MAC).unwrap();
        assert_eq!(phy::iface::mac(&a).unwrap(), A_MAC);
        phy::iface::set_up(&a, false).unwrap();
        assert!(!phy::iface::is_up(&a).unwrap());
        phy::iface::set_mtu(&a, 9000).unwrap();
        assert_eq!(phy::iface::mtu(&a).unwrap(), 9000);
    });
}

#[test]
fn tap_create_send_recv() {
    let Some(ns) = Netns::create("tap_create_send_recv") else {
        return;
    };
    let name = ns.ifname("tq");
    ns.run(move || {
        let mut tap = TapPort::create(&name).unwrap();
        assert_eq!(tap.name(), name);
        tap.set_mac(A_MAC).unwrap();
        tap.set_up(true).unwrap();
        assert_eq!(tap.mac().unwrap(), A_MAC);
        phy::offload::disable_all(&name).unwrap();
        // The "wire" side of the TAP as the kernel sees it: a packet socket on the interface.
        let mut wire = AfPacketPort::open(&name, &AfPacketConfig::default()).unwrap();

        // What we write to the TAP, the kernel receives on the interface.
        let to_host = frame(A_MAC, B_MAC, TEST_ETHERTYPE, b"written to the tap");
        assert!(tap.send(&to_host).unwrap());
        assert_eq!(collect(&mut wire, 1, Duration::from_secs(3)), vec![to_host]);

        // What the kernel transmits on the interface, we read from the TAP.
        let from_host = frame(B_MAC, A_MAC, TEST_ETHERTYPE, b"sent by the host");
        let tagged_from_host = tagged(&from_host, 0x8100, 10);
        assert!(wire.send(&from_host).unwrap());
        assert!(wire.send(&tagged_from_host).unwrap());
        wire.flush().unwrap();
        let got = collect(&mut tap, 2, Duration::from_secs(3));
        assert_eq!(got, vec![from_host, tagged_from_host]);
        assert_eq!(tap.stats().tx_frames, 1);

        assert!(matches!(
            tap.send(&[1, 2, 3]),
            Err(PortError::BadFrame { .. })
        ));
        tap.set_up(false).unwrap();
        let e = tap
            .send(&frame(A_MAC, B_MAC, TEST_ETHERTYPE, b"down"))
            .unwrap_err();
        assert!(e.is_link_gone(), "{e}");
    });
}

#[test]
fn jumbo_frames_and_oversized_drops() {
    let Some(ns) = Netns::create("jumbo_frames_and_oversized_drops") else {
        return;
    };
    let (a, b) = ns.veth();
    ns.run(move || {
        for i in [&a, &b] {
            phy::iface::set_mtu(i, 9000).unwrap();
            phy::offload::disable_all(i).unwrap();
        }
        let jumbo = AfPacketConfig::for_mtu(9000);
        let mut pa = AfPacketPort::open(&a, &jumbo).unwrap();
        let mut pb = AfPacketPort::open(&b, &jumbo).unwrap();
        // A receiver with default (1500-MTU) slots on the same link.
        let mut small = AfPacketPort::open(&b, &AfPacketConfig::default()).unwrap();
        let max = frame(B_MAC, A_MAC, TEST_ETHERTYPE, &[0x5a; 9000]);
        let max_tagged = tagged(&max, 0x8100, 7);
        assert_eq!(max_tagged.len(), 9018);
        assert!(pa.send(&max).unwrap());
        assert!(pa.send(&max_tagged).unwrap());
        pa.flush().unwrap();
        assert_eq!(
            collect(&mut pb, 2, Duration::from_secs(3)),
            vec![max, max_tagged]
        );
        // Too large for the small slots: dropped and counted, never delivered truncated.
        assert!(collect(&mut small, 1, Duration::from_millis(100)).is_empty());
        assert_eq!(small.stats().unwrap().rx_truncated, 2);
        // The slot limit is exact: max_rx_frame() fits, one more octet does not.
        let limit = AfPacketConfig::default().max_rx_frame();
        let fits = frame(B_MAC, A_MAC, TEST_ETHERTYPE, &vec![1; limit - 14]);
        let over = frame(B_MAC, A_MAC, TEST_ETHERTYPE, &vec![2; limit - 13]);
        assert!(pa.send(&fits).unwrap());
        assert!(pa.send(&over).unwrap());
        pa.flush().unwrap();
        assert_eq!(
            collect(&mut small, 2, Duration::from_millis(300)),
            vec![fits]
        );
        assert_eq!(small.stats().unwrap().rx_truncated, 3);
        assert!(jumbo.max_rx_frame() >= 9018);
        assert!(AfPacketConfig::default().max_rx_frame() >= 1518);
    });
}

#[test]
fn tap_offload_completes_checksums_and_merges_tcp() {
    use cnm_proto::wire::segment::{self, fold, sum16, VnetHdr};
    let Some(ns) = Netns::create("tap_offload_completes_checksums_and_merges_tcp") else {
        return;
    };
    let name = ns.ifname("to");
    ns.run(move || {
        let mut tap = TapPort::create_offload(&name).unwrap();
        assert!(tap.offloads());
        tap.set_mac(A_MAC).unwrap();
        tap.set_up(true).unwrap();
        ip(&["addr", "add", "10.201.0.1/24", "dev", &name]).unwrap();
        ip(&[
            "neigh",
            "replace",
            "10.201.0.2",
            "lladdr",
            "02:00:00:00:00:0b",
            "dev",
            &name,
            "nud",
            "permanent",
        ])
        .unwrap();

        // The host stack leaves a UDP checksum to the "NIC"; the port completes it.
        let sock = std::net::UdpSocket::bind("10.201.0.1:0").unwrap();
        sock.send_to(&[7u8; 300], "10.201.0.2:9").unwrap();
        let deadline = phy::clock::now() + Duration::from_secs(3);
        let mut udp = None;
        while udp.is_none() && phy::clock::now() < deadline {
            phy::poll::wait(&[tap.raw_fd().unwrap()], Some(Duration::from_millis(100))).unwrap();
            tap.recv_batch(64, &mut |f| {
                if f.len() > 42 && f[12..14] == [8, 0] && f[23] == 17 {
                    udp = Some(f.to_vec());
                }
            })
            .unwrap();
        }
        let f = udp.expect("the host's UDP datagram");
        assert_eq!(f.len(), 14 + 20 + 8 + 300);
        let pseudo = sum16(&f[26..34], 17 + (f.len() - 34) as u64);
        assert_eq!(
            fold(sum16(&f[34..], pseudo)),
            0xffff,
            "UDP checksum verifies"
        );
        assert!(tap.offload_stats().rx_csum_completed >= 1);

        // Three in-order TCP segments towards the host leave as one merged frame.
        let mut wire = AfPacketPort::open(&name, &AfPacketConfig::for_mtu(9000)).unwrap();
        let mut big = frame(A_MAC, B_MAC, 0x0800, &[]);
        big.truncate(14);
        big.extend_from_slice(&[
            0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 201, 0, 2, 10, 201, 0, 1,
        ]);
        big.extend_from_slice(&[
            0x1f, 0x90, 0x1f, 0x91, 0, 0, 0x03, 0xe8, 0, 0, 0, 1, 0x50, 0x10, 0x10, 0, 0, 0, 0, 0,
        ]);
        big.extend((0..3000u32).map(|i| i as u8));
        let gso = VnetHdr {
            gso_type: segment::GSO_TCPV4,
            gso_size: 1000,
            ..VnetHdr::default()
        };
        let mut segs = Vec::new();
        segment::segment(&gso, &big, &mut Vec::new(), &mut |s| segs.push(s.to_vec())).unwrap();
        assert_eq!(segs.len(), 3);
        for s in &segs {
            assert!(tap.send(s).unwrap());
        }
        tap.flush().unwrap();
        let deadline = phy::clock::now() + Duration::from_secs(3);
        let mut seen = Vec::new();
        while seen.is_empty() && phy::clock::now() < deadline {
            phy::poll::wait(&[wire.raw_fd().unwrap()], Some(Duration::from_millis(100))).unwrap();
            wire.recv_batch(64, &mut |f| {
                if f.len() > 54 && f[12..14] == [8, 0] && f[23] == 6 {
                    seen.push(f.len());
                }
            })
            .unwrap();
        }
        assert_eq!(seen, vec![54 + 3000]);
        let st = tap.offload_stats();
        assert_eq!((st.tx_gro_frames, st.tx_gro_segments), (1, 3));
    });
}

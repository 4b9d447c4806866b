//! Cross-checks the frames `cnm_proto::wire` emits against tshark's own dissectors (Ethernet,
//! 802.1Q, MAC Control PAUSE/PFC, LLDP with the 802.1Qau CN TLV): an implementation written by
//! other people reads every field where this crate put it. Skipped, with a message, when tshark
//! is not installed.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use cnm_proto::wire::{
    build_pause_frame, lldp, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
    LldpCnTlvRepr, MacControlRepr, VlanRepr, VlanTag,
};

const SRC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x07]);

fn have_tshark() -> bool {
    Command::new("tshark").arg("--version").output().is_ok()
}

/// A classic pcap file (LINKTYPE_ETHERNET) of `frames`, deleted on drop.
struct Pcap(PathBuf);

impl Pcap {
    fn new(frames: &[&[u8]]) -> Pcap {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "cnm-wire-{}-{}.pcap",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let mut b = Vec::new();
        b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic, microseconds
        b.extend_from_slice(&2u16.to_le_bytes()); // version 2.4
        b.extend_from_slice(&4u16.to_le_bytes());
        b.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        b.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        b.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
        b.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        for (i, f) in frames.iter().enumerate() {
            b.extend_from_slice(&(i as u32).to_le_bytes()); // seconds
            b.extend_from_slice(&0u32.to_le_bytes()); // microseconds
            b.extend_from_slice(&(f.len() as u32).to_le_bytes());
            b.extend_from_slice(&(f.len() as u32).to_le_bytes());
            b.extend_from_slice(f);
        }
        std::fs::write(&path, b).unwrap();
        Pcap(path)
    }

    /// tshark's value of each of `fields` for each frame, `|`-separated, one line per frame.
    fn fields(&self, fields: &[&str]) -> Vec<String> {
        let mut cmd = Command::new("tshark");
        cmd.args(["-n", "-r"])
            .arg(&self.0)
            .args(["-T", "fields", "-E", "separator=|"]);
        for f in fields {
            cmd.args(["-e", f]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "tshark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Pcap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn pause_and_pfc_as_tshark_reads_them() {
    if !have_tshark() {
        eprintln!("skipped: tshark is not installed");
        return;
    }
    let mut pause = [0u8; 60];
    build_pause_frame(SRC, &MacControlRepr::Pause { quanta: 0xabcd }, &mut pause).unwrap();
    let mut pfc = [0u8; 60];
    let repr = MacControlRepr::Pfc {
        class_enable: 0x0088,
        times: [1, 2, 3, 0x0300, 5, 6, 7, 0xffff],
    };
    build_pause_frame(SRC, &repr, &mut pfc).unwrap();
    let pcap = Pcap::new(&[&pause, &pfc]);
    let lines = pcap.fields(&[
        "eth.dst",
        "eth.src",
        "macc.opcode",
        "macc.pause_time",
        "macc.cbfc.enbv",
        "macc.cbfc.pause_time.c0",
        "macc.cbfc.pause_time.c3",
        "macc.cbfc.pause_time.c7",
        "_ws.expert",
    ]);
    assert_eq!(
        lines,
        [
            "01:80:c2:00:00:01|02:00:00:00:00:07|0x0001|43981|||||",
            "01:80:c2:00:00:01|02:00:00:00:00:07|0x0101||0x0088|1|768|65535|",
        ]
    );
}

#[test]
fn lldp_cn_tlv_as_tshark_reads_it() {
    if !have_tshark() {
        eprintln!("skipped: tshark is not installed");
        return;
    }
    let mut f = [0u8; 80];
    let cn = LldpCnTlvRepr {
        cnpv: 0x28,
        ready: 0x08,
    };
    let n = lldp::build_lldp_frame(SRC, b"port1", 120, &cn, &mut f).unwrap();
    let pcap = Pcap::new(&[&f[..n]]);
    let lines = pcap.fields(&[
        "lldp.chassis.id.mac",
        "lldp.port.id",
        "lldp.time_to_live",
        "lldp.ieee.802_1qau.cnpv.prio3",
        "lldp.ieee.802_1qau.cnpv.prio4",
        "lldp.ieee.802_1qau.cnpv.prio5",
        "lldp.ieee.802_1qau.ready.prio3",
        "lldp.ieee.802_1qau.ready.prio5",
        "_ws.expert",
    ]);
    assert_eq!(lines.len(), 1);
    let v: Vec<&str> = lines[0].split('|').collect();
    assert_eq!(&v[..3], &["02:00:00:00:00:07", "port1", "120"]);
    let truth = |s: &str| matches!(s, "1" | "True");
    assert_eq!(
        v[3..8].iter().map(|s| truth(s)).collect::<Vec<_>>(),
        [true, false, true, true, false],
        "{v:?}"
    );
    // Wireshark 4.0's LLDP dissector under-counts the LLDPDU by one octet and so reports the zero
    // padding as a non-zero trailer (it does so for any LLDPDU, with or without the CN TLV);
    // anything worse than that note is a failure.
    assert!(
        !v[8].contains("Malformed") && !v[8].contains("Error"),
        "{v:?}"
    );
}

#[test]
fn vlan_header_as_tshark_reads_it() {
    if !have_tshark() {
        eprintln!("skipped: tshark is not installed");
        return;
    }
    let mut f = [0u8; 60];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    EthernetRepr {
        src_addr: SRC,
        dst_addr: EthernetAddress::BROADCAST,
        ethertype: EtherType::Vlan,
    }
    .emit(&mut eth);
    VlanRepr {
        pcp: 5,
        dei: true,
        vid: 0x123,
        ethertype: EtherType::Arp,
    }
    .emit(&mut VlanTag::new_unchecked(eth.payload_mut()));
    let pcap = Pcap::new(&[&f]);
    let lines = pcap.fields(&["vlan.priority", "vlan.dei", "vlan.id", "vlan.etype"]);
    let v: Vec<&str> = lines[0].split('|').collect();
    assert_eq!(v[0], "5");
    assert!(matches!(v[1], "1" | "True"), "{v:?}");
    assert_eq!(&v[2..], &["291", "0x0806"]);
}

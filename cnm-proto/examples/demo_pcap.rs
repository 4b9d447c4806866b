//! Writes a demo capture of frames emitted by `cnm-proto`:
//!
//! * data frames a reaction point sends: untagged, VLAN-tagged, with and without a CN-TAG;
//! * CNMs a congestion point builds from them with [`build_cnm`] (several QntzFb / offset
//!   values, one from an input congestion point);
//! * an 802.3x PAUSE and its resume, an 802.1Qbb PFC frame;
//! * an LLDPDU carrying the Congestion Notification TLV;
//! * an explicit-rate feedback message (non-standard, experimental);
//! * one deliberately malformed CNM (encapsulated MSDU length 100 > 64).
//!
//! Usage: `cargo run -p cnm-proto --example demo_pcap -- OUT.pcap`. The decoders can then be
//! compared: `cnm-dump OUT.pcap`, `tshark -r OUT.pcap` (with `scripts/wireshark/qcn.lua`).
//!
//! The integration tests include this file as a module and check every field the decoders
//! print against [`Expect`].
#![forbid(unsafe_code)]
#![allow(dead_code)] // Parts are used only by the tests that include this file.

use std::io::{self, BufWriter};

use cnm_proto::phy::pcap::PcapWriter;
use cnm_proto::wire::cnm::{build_cnm, quantize_queue, CnmParams};
use cnm_proto::wire::{
    self, build_pause_frame, CnTag, CnTagRepr, CpId, EtherType, EthernetAddress, EthernetFrame,
    EthernetRepr, LldpCnTlv, LldpCnTlvRepr, MacControlRepr, RateFeedback, RateFeedbackRepr,
    VlanRepr, VlanTag,
};
use cnm_proto::{Duration, Instant, Rate};

/// The reaction point host (sender of the data frames).
pub const HOST_A: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0a]);
/// The destination host of the data frames.
pub const HOST_B: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0b]);
/// The switch whose congestion points send the CNMs.
pub const SWITCH: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x5c, 0x01]);

/// What a decoder must report for a demo frame.
#[derive(Debug, Clone)]
pub enum Expect {
    /// A data frame; `rpid` when it carries a CN-TAG.
    Data {
        vlan: Option<(u8, u16)>,
        rpid: Option<u16>,
    },
    /// A CNM built from a sampled data frame.
    Cnm {
        /// (pcp, vid) of the CNM's own VLAN tag.
        vlan: Option<(u8, u16)>,
        rpid: Option<u16>,
        version: u8,
        qntz_fb: u8,
        cpid: CpId,
        q_offset: i16,
        q_delta: i16,
        encap_priority: u8,
        encap_da: EthernetAddress,
        encap_msdu: Vec<u8>,
    },
    Pause {
        quanta: u16,
    },
    Pfc {
        class_enable: u16,
        times: [u16; 8],
    },
    Lldp {
        cnpv: u8,
        ready: u8,
    },
    RateFeedback {
        cpid: CpId,
        rate_bps: u64,
        encap_priority: u8,
        encap_da: EthernetAddress,
    },
    /// A CNM that must be reported as malformed.
    MalformedCnm,
}

/// One frame of the demo capture.
#[derive(Debug, Clone)]
pub struct DemoFrame {
    pub label: &'static str,
    pub src: EthernetAddress,
    pub dst: EthernetAddress,
    pub frame: Vec<u8>,
    pub expect: Expect,
}

/// An IPv4/UDP datagram of `payload_len` octets after the UDP header (checksums: IPv4 header
/// computed, UDP zero = none).
fn ipv4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    let total = 20 + 8 + payload_len;
    let total16 = u16::try_from(total).unwrap_or(u16::MAX);
    let mut p = Vec::with_capacity(total);
    p.extend_from_slice(&[0x45, 0x00]);
    p.extend_from_slice(&total16.to_be_bytes());
    p.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, 17, 0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    let mut sum: u32 = 0;
    for pair in p.chunks(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let csum = !(sum as u16);
    p[10..12].copy_from_slice(&csum.to_be_bytes());
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(
        &u16::try_from(8 + payload_len)
            .unwrap_or(u16::MAX)
            .to_be_bytes(),
    );
    p.extend_from_slice(&[0, 0]);
    p.extend((0..payload_len).map(|i| (i % 251) as u8));
    p
}

/// An IPv6/TCP segment (ACK) with `payload_len` octets of data.
fn ipv6_tcp(payload_len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&[0x60, 0x00, 0x00, 0x00]);
    p.extend_from_slice(
        &u16::try_from(20 + payload_len)
            .unwrap_or(u16::MAX)
            .to_be_bytes(),
    );
    p.extend_from_slice(&[6, 64]);
    p.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a]);
    p.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b]);
    p.extend_from_slice(&40000u16.to_be_bytes());
    p.extend_from_slice(&5201u16.to_be_bytes());
    p.extend_from_slice(&1_000_000u32.to_be_bytes());
    p.extend_from_slice(&1u32.to_be_bytes());
    p.extend_from_slice(&[0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    p.extend((0..payload_len).map(|i| (i % 253) as u8));
    p
}

/// A data frame: Ethernet header, optional VLAN tag, optional CN-TAG, then `l3` / `payload`.
/// Returns the frame and the offset where a CNM's encapsulated MSDU starts (the EtherType
/// after the VLAN tag).
fn data_frame(
    vlan: Option<(u8, u16)>,
    rpid: Option<u16>,
    l3: EtherType,
    payload: &[u8],
) -> wire::Result<(Vec<u8>, usize)> {
    let mut frame = vec![0u8; 14 + 4 + 4 + payload.len()];
    let after_vlan = if vlan.is_some() { 16 } else { 12 };
    let first = match (vlan, rpid) {
        (Some(_), _) => EtherType::Vlan,
        (None, Some(_)) => EtherType::CnTag,
        (None, None) => l3,
    };
    EthernetRepr {
        src_addr: HOST_A,
        dst_addr: HOST_B,
        ethertype: first,
    }
    .emit(&mut EthernetFrame::new_checked(&mut frame[..])?);
    let mut at = 14;
    if let Some((pcp, vid)) = vlan {
        let repr = VlanRepr {
            pcp,
            dei: false,
            vid,
            ethertype: if rpid.is_some() { EtherType::CnTag } else { l3 },
        };
        repr.emit(&mut VlanTag::new_checked(&mut frame[at..])?);
        at += 4;
    }
    if let Some(rpid) = rpid {
        CnTagRepr {
            rpid,
            ethertype: l3,
        }
        .emit(&mut CnTag::new_checked(&mut frame[at..])?);
        at += 4;
    }
    frame.truncate(at);
    frame.extend_from_slice(payload);
    Ok((frame, after_vlan))
}

/// The CNM a congestion point sends for `sampled`, and what a decoder must show for it.
fn cnm_for(
    label: &'static str,
    sampled: &(Vec<u8>, usize),
    vlan: Option<(u8, u16)>,
    rpid: Option<u16>,
    p: &CnmParams,
) -> wire::Result<DemoFrame> {
    let mut out = [0u8; 256];
    let n = build_cnm(&sampled.0, p, &mut out)?;
    let msdu_end = (sampled.1 + p.max_msdu).min(sampled.0.len());
    Ok(DemoFrame {
        label,
        src: p.cp_mac,
        dst: HOST_A,
        frame: out[..n].to_vec(),
        expect: Expect::Cnm {
            vlan: vlan.map(|(_, vid)| (p.cnm_priority, vid)),
            rpid,
            version: 0,
            qntz_fb: p.qntz_fb,
            cpid: p.cpid,
            q_offset: p.q_offset,
            q_delta: p.q_delta,
            encap_priority: vlan.map_or(p.default_priority, |(pcp, _)| pcp),
            encap_da: HOST_B,
            encap_msdu: sampled.0[sampled.1..msdu_end].to_vec(),
        },
    })
}

/// Pads a frame with zeros to the 60-octet minimum (IEEE 802.3 clause 4.4.2).
fn pad(mut f: Vec<u8>) -> Vec<u8> {
    if f.len() < wire::MIN_FRAME_LEN {
        f.resize(wire::MIN_FRAME_LEN, 0);
    }
    f
}

/// Every frame of the demo capture, in order.
pub fn demo_frames() -> wire::Result<Vec<DemoFrame>> {
    let mut frames = Vec::new();
    let data = |label, vlan, rpid, f: &(Vec<u8>, usize)| DemoFrame {
        label,
        src: HOST_A,
        dst: HOST_B,
        frame: f.0.clone(),
        expect: Expect::Data { vlan, rpid },
    };

    // Data frames of three flows.
    let udp_big = ipv4_udp([10, 0, 0, 10], [10, 0, 0, 11], 40001, 5201, 1400);
    let f_plain = data_frame(None, None, EtherType::Ipv4, &udp_big)?;
    let v_tagged = Some((3, 100));
    let f_tagged = data_frame(v_tagged, Some(0x0101), EtherType::Ipv4, &udp_big)?;
    let f_cn_untagged = data_frame(None, Some(0x0202), EtherType::Ipv6, &ipv6_tcp(1200))?;
    let udp_small = ipv4_udp([10, 0, 0, 10], [10, 0, 0, 11], 40002, 5201, 10);
    let f_small = data_frame(Some((5, 200)), None, EtherType::Ipv4, &udp_small)?;
    frames.push(data("data, untagged", None, None, &f_plain));
    frames.push(data(
        "data, VLAN 100 + CN-TAG",
        v_tagged,
        Some(0x0101),
        &f_tagged,
    ));
    frames.push(data(
        "data, CN-TAG only",
        None,
        Some(0x0202),
        &f_cn_untagged,
    ));
    frames.push(data(
        "data, VLAN 200, short",
        Some((5, 200)),
        None,
        &f_small,
    ));

    // CNMs built from them by a congestion point on port 2, priority 3 (index 2*8+3).
    let base = CnmParams {
        cp_mac: SWITCH,
        cpid: CpId::new(SWITCH, 2 * 8 + 3),
        qntz_fb: 12,
        q_offset: quantize_queue(-20 * 64),
        q_delta: quantize_queue(5 * 64),
        cnm_priority: 6,
        default_priority: 0,
        max_msdu: 64,
    };
    frames.push(cnm_for(
        "CNM for the VLAN + CN-TAG flow",
        &f_tagged,
        v_tagged,
        Some(0x0101),
        &base,
    )?);
    frames.push(cnm_for(
        "CNM, saturated feedback",
        &f_plain,
        None,
        None,
        &CnmParams {
            qntz_fb: 63,
            q_offset: quantize_queue(-10_000_000),
            q_delta: quantize_queue(10_000_000),
            ..base
        },
    )?);
    frames.push(cnm_for(
        "CNM from an input CP",
        &f_cn_untagged,
        None,
        Some(0x0202),
        &CnmParams {
            // Input CP on port 1, priority 0: index 1*8+0 with the input flag.
            cpid: CpId::new(SWITCH, CpId::INPUT_FLAG | 8),
            qntz_fb: 1,
            q_offset: quantize_queue(3 * 64),
            q_delta: quantize_queue(-64),
            default_priority: 2,
            ..base
        },
    )?);
    frames.push(cnm_for(
        "CNM for a short frame (MSDU < 64)",
        &f_small,
        Some((5, 200)),
        None,
        &CnmParams {
            qntz_fb: 30,
            q_offset: quantize_queue(-640),
            q_delta: 0,
            ..base
        },
    )?);

    frames.extend(control_frames()?);
    frames.push(lldp_frame()?);
    frames.push(rate_feedback_frame()?);

    // A malformed CNM: the encapsulated MSDU length field says 100 (> 64).
    let mut bad = frames
        .iter()
        .find(|d| d.label == "CNM, saturated feedback")
        .map(|d| d.frame.clone())
        .ok_or(wire::Error::Malformed)?;
    // Untagged CNM: Ethernet header (14) + 22 octets of PDU before the MSDU length field.
    bad[14 + 22..14 + 24].copy_from_slice(&100u16.to_be_bytes());
    frames.push(DemoFrame {
        label: "malformed CNM (MSDU length 100)",
        src: SWITCH,
        dst: HOST_A,
        frame: bad,
        expect: Expect::MalformedCnm,
    });
    Ok(frames)
}

/// PAUSE and its resume (802.3 Annex 31B), and PFC stopping priority 3 (802.1Q clause 36).
fn control_frames() -> wire::Result<Vec<DemoFrame>> {
    let mut frames = Vec::new();
    let mut buf = [0u8; 64];
    for quanta in [0xffff, 0] {
        let n = build_pause_frame(HOST_B, &MacControlRepr::Pause { quanta }, &mut buf)?;
        frames.push(DemoFrame {
            label: if quanta == 0 { "PAUSE resume" } else { "PAUSE" },
            src: HOST_B,
            dst: EthernetAddress([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]),
            frame: buf[..n].to_vec(),
            expect: Expect::Pause { quanta },
        });
    }
    let mut times = [0u16; 8];
    times[3] = 0x0100;
    let pfc = MacControlRepr::Pfc {
        class_enable: 1 << 3,
        times,
    };
    let n = build_pause_frame(SWITCH, &pfc, &mut buf)?;
    frames.push(DemoFrame {
        label: "PFC priority 3",
        src: SWITCH,
        dst: EthernetAddress([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]),
        frame: buf[..n].to_vec(),
        expect: Expect::Pfc {
            class_enable: 1 << 3,
            times,
        },
    });
    Ok(frames)
}

/// An LLDPDU: Chassis ID, Port ID, TTL, the CN TLV (CNPV on priority 3, ready), End.
fn lldp_frame() -> wire::Result<DemoFrame> {
    let lldp_da = EthernetAddress([0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e]);
    let mut lldp = vec![0u8; 14];
    EthernetRepr {
        src_addr: SWITCH,
        dst_addr: lldp_da,
        ethertype: EtherType::Lldp,
    }
    .emit(&mut EthernetFrame::new_checked(&mut lldp[..])?);
    let tlv = |ty: u16, value: &[u8]| {
        let mut t = ((ty << 9) | value.len() as u16).to_be_bytes().to_vec();
        t.extend_from_slice(value);
        t
    };
    let mut chassis = vec![4]; // subtype: MAC address
    chassis.extend_from_slice(&SWITCH.0);
    lldp.extend(tlv(1, &chassis));
    lldp.extend(tlv(2, b"\x07swp2")); // subtype: locally assigned
    lldp.extend(tlv(3, &120u16.to_be_bytes()));
    let cn = LldpCnTlvRepr {
        cnpv: 1 << 3,
        ready: 1 << 3,
    };
    let mut cn_tlv = vec![0u8; cn.buffer_len()];
    cn.emit(&mut LldpCnTlv::new_checked(&mut cn_tlv[..])?);
    lldp.extend(cn_tlv);
    lldp.extend(tlv(0, &[]));
    Ok(DemoFrame {
        label: "LLDP with the CN TLV",
        src: SWITCH,
        dst: lldp_da,
        frame: pad(lldp),
        expect: Expect::Lldp {
            cnpv: 1 << 3,
            ready: 1 << 3,
        },
    })
}

/// Explicit-rate feedback to host A: 2.5 Gbit/s for priority 3.
fn rate_feedback_frame() -> wire::Result<DemoFrame> {
    let rf = RateFeedbackRepr {
        version: 0,
        encap_priority: 3,
        cpid: CpId::new(SWITCH, 2 * 8 + 3),
        rate: Rate::from_bps(2_500_000_000),
        encap_dst: HOST_B,
    };
    let mut f = vec![0u8; 14 + rf.buffer_len()];
    EthernetRepr {
        src_addr: SWITCH,
        dst_addr: HOST_A,
        ethertype: EtherType::RateFeedback,
    }
    .emit(&mut EthernetFrame::new_checked(&mut f[..])?);
    rf.emit(&mut RateFeedback::new_checked(&mut f[14..])?);
    Ok(DemoFrame {
        label: "rate feedback (experimental)",
        src: SWITCH,
        dst: HOST_A,
        frame: pad(f),
        expect: Expect::RateFeedback {
            cpid: rf.cpid,
            rate_bps: 2_500_000_000,
            encap_priority: 3,
            encap_da: HOST_B,
        },
    })
}

/// Writes `frames` to `path` as a pcap file, 10 µs apart from a fixed start time.
pub fn write_pcap(path: &std::path::Path, frames: &[DemoFrame]) -> io::Result<()> {
    let file = std::fs::File::create(path)?;
    let mut w = PcapWriter::new(BufWriter::new(file))?;
    let mut ts = Instant::from_nanos(1_700_000_000_000_000_000);
    for f in frames {
        w.write(ts, &f.frame)?;
        ts += Duration::from_micros(10);
    }
    w.flush()?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: demo_pcap OUT.pcap");
        return std::process::ExitCode::from(2);
    };
    let frames = match demo_frames() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("demo_pcap: building the frames failed: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Err(e) = write_pcap(std::path::Path::new(&path), &frames) {
        eprintln!("demo_pcap: writing {}: {e}", path.to_string_lossy());
        return std::process::ExitCode::FAILURE;
    }
    for (i, f) in frames.iter().enumerate() {
        println!("{:3} {:4} octets  {}", i + 1, f.frame.len(), f.label);
    }
    std::process::ExitCode::SUCCESS
}

//! `cnm-dump`: prints the congestion-notification traffic of a capture file or a live interface,
//! one line per frame, in capture order.
//!
//! Files may be classic pcap (what the testbed and `tcpdump -w` write; read with
//! [`cnm_proto::phy::pcap`]) or pcapng (Wireshark's and `tshark -w`'s default; read with the
//! `pcap-file` crate). The format is told by the file's first four octets: `0a 0d 0d 0a` is a
//! pcapng section header. In pcapng every packet names its interface; its link type must be
//! Ethernet and its time stamps are converted with the interface's `if_tsresol` (default
//! microseconds) and `if_tsoffset`. Simple packet blocks carry no time stamp and print time 0.
//!
//! Frames shown: CNMs (EtherType 0x22E7, IEEE 802.1Q clause 33.4), CN-tagged frames (0x22E9,
//! clause 33.3), 802.3x PAUSE and 802.1Qbb PFC (0x8808) and the project's experimental
//! explicit-rate feedback (0x88B5). With `--all` every other frame gets a line too (`other`,
//! or `lldp` with the Congestion Notification TLV's indicators when present).
//!
//! A frame of one of these EtherTypes that does not parse prints a `malformed` line with the
//! error and the run goes on. Exit status: 0 when the file's header was readable (and for live
//! capture stopped by SIGINT/SIGTERM or `--count`), 2 when the file cannot be read at all
//! (missing, neither pcap nor pcapng, header cut short) or the interface cannot be opened.
//!
//! A capture cut short in the middle of its last record (a writer that was killed, a capture
//! still being written) is not an error of the frames before it: they are printed, a warning
//! naming the truncated record goes to stderr, and the exit status stays 0. A corrupt record
//! (a captured length no capture can have) or a read error is different: the lines before it
//! are printed, then an error, and the exit status is 2. Files of another link type than
//! Ethernet are refused with status 2 (in pcapng: at the first packet of such an interface).
//!
//! `--json` prints one JSON object per line. Keys: `ts` (a string, `seconds.nanoseconds` since
//! the Unix epoch: exact, unlike a JSON float), `kind` (`cnm`,
//! `cn-tag`, `pause`, `pfc`, `rate-feedback`, `malformed`, and with `--all` `lldp`/`other`),
//! `len` (octets captured), `src`, `dst`, `pcp`/`dei`/`vid` when VLAN-tagged, `rpid` when
//! CN-tagged, `ethertype` (hex, of the payload after any VLAN tag and CN-TAG); for a CNM
//! `version`, `reserved`, `qntz_fb`, `cpid` (16 hex digits), `cpid_mac`, `cpid_index`,
//! `q_offset`, `q_delta` (raw signed fields, 64-octet units), `encap_priority` (0-7),
//! `encap_da`, `encap_msdu_len`, `encap_msdu` (hex); `pause_time` (quanta) for PAUSE;
//! `class_enable` and `times` for PFC; `cpid`, `rate_bps`, `encap_priority`, `encap_da` for
//! rate feedback; `error` for malformed frames.
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::{CommandFactory, Parser};
use serde::Serialize;

use cnm_proto::phy::pcap::{PcapError, PcapReader};
use cnm_proto::phy::{AfPacketConfig, AfPacketPort, Port};
use cnm_proto::wire::{
    self, CnmRepr, EtherType, EthernetAddress, MacControlRepr, RateFeedbackRepr,
};
use cnm_proto::{Duration, Instant};
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;

/// `LINKTYPE_ETHERNET` (tcpdump.org link-layer header types).
const LINKTYPE_ETHERNET: u32 = 1;

/// Print CNMs, CN-tagged frames, PAUSE/PFC and rate feedback from a pcap or pcapng file or an
/// interface.
#[derive(Debug, Parser)]
#[command(name = "cnm-dump", version, about)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["file", "iface", "completions", "man"]))]
struct Args {
    /// Capture file to read: pcap or pcapng, Ethernet link type.
    file: Option<PathBuf>,
    /// Capture live on this interface (AF_PACKET, needs CAP_NET_RAW).
    #[arg(long, short = 'i', value_name = "IF")]
    iface: Option<String>,
    /// Also print a line for every other frame.
    #[arg(long, short = 'a')]
    all: bool,
    /// One JSON object per line instead of text.
    #[arg(long, short = 'j')]
    json: bool,
    /// Stop after printing N lines.
    #[arg(long, short = 'c', value_name = "N")]
    count: Option<u64>,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long, value_name = "SHELL", hide = true)]
    completions: Option<daemon_kit::cli::Shell>,
    /// Print the man page and exit.
    #[arg(long, hide = true)]
    man: bool,
}

/// One output line. Absent fields are left out of the JSON object.
#[derive(Debug, Default, Serialize)]
struct Line {
    /// Capture time, `seconds.nanoseconds` since the Unix epoch, exact (a JSON float is not).
    ts: String,
    kind: &'static str,
    len: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    src: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dst: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pcp: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dei: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vid: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rpid: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ethertype: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reserved: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    qntz_fb: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpid_mac: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpid_index: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    q_offset: Option<i16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    q_delta: Option<i16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_bps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encap_priority: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encap_da: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encap_msdu_len: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encap_msdu: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pause_time: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    class_enable: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    times: Option<[u16; 8]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    opcode: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cnpv: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ready: Option<u8>,
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing into a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn be16(frame: &[u8], at: usize) -> Option<u16> {
    let b = frame.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// True for the EtherTypes whose frames are always shown (and reported when malformed).
fn is_ours(et: EtherType) -> bool {
    matches!(
        et,
        EtherType::Cnm | EtherType::CnTag | EtherType::MacControl | EtherType::RateFeedback
    )
}

/// The first EtherType of interest among the raw header fields, for frames the L2 walk
/// rejected: the outer one, or the one after up to two VLAN tags.
fn raw_ours(frame: &[u8]) -> bool {
    let mut at = 12;
    for _ in 0..3 {
        let Some(v) = be16(frame, at) else {
            return false;
        };
        let et = EtherType::from(v);
        if is_ours(et) {
            return true;
        }
        if !matches!(et, EtherType::Vlan | EtherType::QinQ) {
            return false;
        }
        at += 4;
    }
    false
}

/// Looks for the IEEE 802.1 Congestion Notification TLV (OUI 00-80-C2, subtype 8) in an LLDPDU.
fn lldp_cn_tlv(lldpdu: &[u8]) -> Option<(u8, u8)> {
    let mut at = 0usize;
    while let Some(h) = be16(lldpdu, at) {
        let ty = h >> 9;
        let len = usize::from(h & 0x01ff);
        let value = lldpdu.get(at + 2..at + 2 + len)?;
        if ty == 0 {
            return None; // End of LLDPDU.
        }
        if ty == 127 && len >= 6 && value[..4] == [0x00, 0x80, 0xc2, 0x08] {
            return Some((value[4], value[5]));
        }
        at += 2 + len;
    }
    None
}

/// Decodes one frame into its line, or `None` when it is not shown.
fn describe(ts: Instant, frame: &[u8], all: bool) -> Option<Line> {
    let mut line = Line {
        ts: format!(
            "{}.{:09}",
            ts.as_nanos() / 1_000_000_000,
            ts.as_nanos() % 1_000_000_000
        ),
        len: frame.len(),
        ..Line::default()
    };
    let l2 = match wire::walk(frame) {
        Ok(l2) => l2,
        Err(e) => {
            if !(all || raw_ours(frame)) {
                return None;
            }
            if frame.len() >= 12 {
                line.dst = Some(hex_mac(&frame[0..6]));
                line.src = Some(hex_mac(&frame[6..12]));
            }
            line.kind = "malformed";
            line.error = Some(e.to_string());
            return Some(line);
        }
    };
    line.src = Some(l2.src.to_string());
    line.dst = Some(l2.dst.to_string());
    if let Some(v) = l2.vlan {
        line.pcp = Some(v.pcp);
        line.dei = Some(v.dei);
        line.vid = Some(v.vid);
    }
    line.rpid = l2.rpid;
    line.ethertype = Some(format!("0x{:04x}", u16::from(l2.ethertype)));
    let payload = frame.get(l2.payload_offset..).unwrap_or(&[]);

    match l2.ethertype {
        EtherType::Cnm => match parse_cnm(payload) {
            Ok(repr) => {
                line.kind = "cnm";
                line.version = Some(repr.version);
                line.reserved = Some(repr.reserved);
                line.qntz_fb = Some(repr.qntz_fb);
                line.cpid = Some(format!("{:016x}", repr.cpid.0));
                line.cpid_mac = Some(repr.cpid.mac().to_string());
                line.cpid_index = Some(repr.cpid.index());
                line.q_offset = Some(repr.q_offset);
                line.q_delta = Some(repr.q_delta);
                line.encap_priority = Some(repr.encap_priority);
                line.encap_da = Some(repr.encap_dst.to_string());
                line.encap_msdu_len = Some(repr.encap_msdu.len());
                line.encap_msdu = Some(hex(repr.encap_msdu));
            }
            Err(e) => malformed(&mut line, "CNM", e, cnm_defect(payload)),
        },
        EtherType::RateFeedback => match parse_rate_feedback(payload) {
            Ok(repr) => {
                line.kind = "rate-feedback";
                line.version = Some(repr.version);
                line.cpid = Some(format!("{:016x}", repr.cpid.0));
                line.rate_bps = Some(repr.rate.bps());
                line.encap_priority = Some(repr.encap_priority);
                line.encap_da = Some(repr.encap_dst.to_string());
            }
            Err(e) => malformed(
                &mut line,
                "rate feedback",
                e,
                short(payload, RATE_FEEDBACK_LEN),
            ),
        },
        EtherType::MacControl => match parse_mac_control(payload) {
            Ok(MacControlRepr::Pause { quanta }) => {
                line.kind = "pause";
                line.pause_time = Some(quanta);
            }
            Ok(MacControlRepr::Pfc {
                class_enable,
                times,
            }) => {
                line.kind = "pfc";
                line.class_enable = Some(class_enable);
                line.times = Some(times);
            }
            Ok(MacControlRepr::Unknown { opcode }) => {
                if !all && line.rpid.is_none() {
                    return None;
                }
                line.kind = if line.rpid.is_some() {
                    "cn-tag"
                } else {
                    "other"
                };
                line.opcode = Some(opcode);
            }
            Err(e) => malformed(&mut line, "MAC control", e, short(payload, MAC_CONTROL_LEN)),
        },
        _ if line.rpid.is_some() => line.kind = "cn-tag",
        EtherType::Lldp if all => {
            line.kind = "lldp";
            if let Some((cnpv, ready)) = lldp_cn_tlv(payload) {
                line.cnpv = Some(cnpv);
                line.ready = Some(ready);
            }
        }
        _ if all => line.kind = "other",
        _ => return None,
    }
    Some(line)
}

fn malformed(line: &mut Line, what: &str, e: wire::Error, detail: Option<String>) {
    line.kind = "malformed";
    line.error = Some(match detail {
        Some(d) => format!("{what}: {e} ({d})"),
        None => format!("{what}: {e}"),
    });
}

use cnm_proto::wire::cnm::{HEADER_LEN as CNM_HEADER_LEN, MAX_MSDU_LEN as CNM_MAX_MSDU};
use cnm_proto::wire::pause::MIN_LEN as MAC_CONTROL_LEN;
use cnm_proto::wire::rate_feedback::MSG_LEN as RATE_FEEDBACK_LEN;

/// What is wrong with a CNM PDU the codec refused, in words.
fn cnm_defect(pdu: &[u8]) -> Option<String> {
    if pdu.len() < CNM_HEADER_LEN {
        return short(pdu, CNM_HEADER_LEN);
    }
    let msdu_len = usize::from(be16(pdu, 22)?);
    let present = pdu.len() - CNM_HEADER_LEN;
    if msdu_len > CNM_MAX_MSDU {
        Some(format!(
            "encapsulated MSDU length {msdu_len} > {CNM_MAX_MSDU}"
        ))
    } else if msdu_len > present {
        Some(format!(
            "encapsulated MSDU length {msdu_len} > the {present} octets present"
        ))
    } else {
        None
    }
}

fn short(pdu: &[u8], needed: usize) -> Option<String> {
    (pdu.len() < needed).then(|| format!("{} octets, {needed} needed", pdu.len()))
}

fn hex_mac(b: &[u8]) -> String {
    let mut a = [0u8; 6];
    a.copy_from_slice(&b[..6]);
    EthernetAddress(a).to_string()
}

fn parse_cnm(payload: &[u8]) -> wire::Result<CnmRepr<'_>> {
    let view = wire::Cnm::new_checked(payload)?;
    CnmRepr::parse(&view)
}

fn parse_rate_feedback(payload: &[u8]) -> wire::Result<RateFeedbackRepr> {
    let view = wire::RateFeedback::new_checked(payload)?;
    RateFeedbackRepr::parse(&view)
}

fn parse_mac_control(payload: &[u8]) -> wire::Result<MacControlRepr> {
    let view = wire::MacControl::new_checked(payload)?;
    MacControlRepr::parse(&view)
}

/// The human-readable form of a line.
fn text(l: &Line) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(160);
    // Writing into a String cannot fail; the results are ignored below for that reason.
    // Microseconds are enough to read; JSON has the nanoseconds.
    let ts = l.ts.get(..l.ts.len().saturating_sub(3)).unwrap_or(&l.ts);
    let _ = write!(s, "{ts} {:<13}", l.kind);
    if let (Some(src), Some(dst)) = (&l.src, &l.dst) {
        let _ = write!(s, " {src} > {dst}");
    }
    if let (Some(vid), Some(pcp)) = (l.vid, l.pcp) {
        let _ = write!(s, " vlan {vid} pcp {pcp}");
    }
    if let Some(rpid) = l.rpid {
        let _ = write!(s, " rpid 0x{rpid:04x}");
    }
    match l.kind {
        "cnm" => {
            let _ = write!(
                s,
                " qntz_fb {} cpid {} q_offset {} q_delta {} encap_prio {} encap_da {} msdu {}",
                l.qntz_fb.unwrap_or_default(),
                l.cpid.as_deref().unwrap_or("-"),
                l.q_offset.unwrap_or_default(),
                l.q_delta.unwrap_or_default(),
                l.encap_priority.unwrap_or_default(),
                l.encap_da.as_deref().unwrap_or("-"),
                l.encap_msdu_len.unwrap_or_default(),
            );
            if l.version.unwrap_or_default() != 0 {
                let _ = write!(s, " version {}", l.version.unwrap_or_default());
            }
        }
        "rate-feedback" => {
            let _ = write!(
                s,
                " cpid {} rate {} encap_prio {} encap_da {}",
                l.cpid.as_deref().unwrap_or("-"),
                cnm_proto::Rate::from_bps(l.rate_bps.unwrap_or_default()),
                l.encap_priority.unwrap_or_default(),
                l.encap_da.as_deref().unwrap_or("-"),
            );
        }
        "pause" => {
            let _ = write!(s, " pause_time {}", l.pause_time.unwrap_or_default());
        }
        "pfc" => {
            let _ = write!(
                s,
                " class_enable 0x{:02x} times {:?}",
                l.class_enable.unwrap_or_default(),
                l.times.unwrap_or_default()
            );
        }
        "lldp" => {
            if let (Some(cnpv), Some(ready)) = (l.cnpv, l.ready) {
                let _ = write!(s, " cn_tlv cnpv 0x{cnpv:02x} ready 0x{ready:02x}");
            }
        }
        "malformed" => {
            let _ = write!(s, " error: {}", l.error.as_deref().unwrap_or("-"));
        }
        _ => {
            if let Some(et) = &l.ethertype {
                let _ = write!(s, " ethertype {et}");
            }
            if let Some(op) = l.opcode {
                let _ = write!(s, " opcode 0x{op:04x}");
            }
        }
    }
    let _ = write!(s, " len {}", l.len);
    s
}

/// Where lines go: stdout, with `--count` and a closed pipe (e.g. `| head`) ending the run.
struct Printer {
    out: io::BufWriter<io::Stdout>,
    json: bool,
    left: Option<u64>,
    live: bool,
}

enum Flow {
    Go,
    Stop,
}

impl Printer {
    fn print(&mut self, line: &Line) -> Flow {
        let res = if self.json {
            match serde_json::to_string(line) {
                Ok(s) => writeln!(self.out, "{s}"),
                Err(e) => writeln!(self.out, "{{\"kind\":\"malformed\",\"error\":\"{e}\"}}"),
            }
        } else {
            writeln!(self.out, "{}", text(line))
        };
        // Live lines are wanted as they come.
        let res = res.and_then(|()| if self.live { self.out.flush() } else { Ok(()) });
        if res.is_err() {
            // Reader went away (broken pipe): nothing more to do.
            return Flow::Stop;
        }
        if let Some(n) = self.left.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                return Flow::Stop;
            }
        }
        Flow::Go
    }
}

fn wall_clock() -> Instant {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Instant::from_nanos(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

/// The first octets of a pcapng file: the section header block's type.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

fn run_file(path: &PathBuf, args: &Args, p: &mut Printer, stop: &AtomicBool) -> ExitCode {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cnm-dump: cannot open {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let mut file = BufReader::new(file);
    let is_pcapng = match file.fill_buf() {
        Ok(b) => b.starts_with(&PCAPNG_MAGIC),
        Err(e) => {
            eprintln!("cnm-dump: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    if is_pcapng {
        return run_pcapng(path, file, args, p, stop);
    }
    let mut reader = match PcapReader::new(file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "cnm-dump: {} is not a readable pcap file: {e}",
                path.display()
            );
            return ExitCode::from(2);
        }
    };
    if reader.linktype() != LINKTYPE_ETHERNET {
        eprintln!(
            "cnm-dump: {}: link type {} is not Ethernet (1)",
            path.display(),
            reader.linktype()
        );
        return ExitCode::from(2);
    }
    while !stop.load(Ordering::Relaxed) {
        match reader.next_record() {
            Ok(Some(rec)) => {
                if let Some(line) = describe(rec.ts, &rec.data, args.all) {
                    if let Flow::Stop = p.print(&line) {
                        break;
                    }
                }
            }
            Ok(None) => break,
            Err(e @ PcapError::TruncatedRecord { .. }) => {
                let _ = p.out.flush();
                eprintln!(
                    "cnm-dump: warning: {}: capture cut short, last record ignored: {e}",
                    path.display()
                );
                break;
            }
            Err(e) => {
                let _ = p.out.flush();
                eprintln!("cnm-dump: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    let _ = p.out.flush();
    ExitCode::SUCCESS
}

/// What a packet needs from its interface description.
#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: DataLink,
    /// `if_tsresol`: bit 7 clear = 10^-n s per unit, set = 2^-n s (pcapng section 4.2).
    tsresol: u8,
    /// `if_tsoffset`: seconds added to every time stamp.
    tsoffset: u64,
}

/// A pcapng time stamp (in the interface's units) as nanoseconds since the epoch.
fn pcapng_nanos(raw: u64, iface: &Interface) -> u64 {
    let raw = u128::from(raw);
    let n = u32::from(iface.tsresol & 0x7f);
    let ns = if iface.tsresol & 0x80 == 0 {
        match n {
            0..=9 => raw * 10u128.pow(9 - n),
            _ => raw / 10u128.pow((n - 9).min(38)),
        }
    } else {
        (raw * 1_000_000_000) >> n.min(127)
    };
    let ns = ns + u128::from(iface.tsoffset) * 1_000_000_000;
    u64::try_from(ns).unwrap_or(u64::MAX)
}

fn run_pcapng(
    path: &std::path::Path,
    file: impl Read,
    args: &Args,
    p: &mut Printer,
    stop: &AtomicBool,
) -> ExitCode {
    let mut reader = match PcapNgReader::new(file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "cnm-dump: {} is not a readable pcapng file: {e}",
                path.display()
            );
            return ExitCode::from(2);
        }
    };
    let mut interfaces: Vec<Interface> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let block = match reader.next_block() {
            None => break,
            Some(Ok(b)) => b,
            Some(Err(pcap_file::PcapError::IoError(e)))
                if e.kind() == io::ErrorKind::UnexpectedEof =>
            {
                let _ = p.out.flush();
                eprintln!(
                    "cnm-dump: warning: {}: capture cut short, last block ignored",
                    path.display()
                );
                break;
            }
            Some(Err(e)) => {
                let _ = p.out.flush();
                eprintln!("cnm-dump: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        let (iface, raw_ts, data) = match block {
            // A new section starts its own interface numbering.
            Block::SectionHeader(_) => {
                interfaces.clear();
                continue;
            }
            Block::InterfaceDescription(d) => {
                let mut i = Interface {
                    linktype: d.linktype,
                    tsresol: 6,
                    tsoffset: 0,
                };
                for o in &d.options {
                    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption as O;
                    match o {
                        O::IfTsResol(r) => i.tsresol = *r,
                        O::IfTsOffset(s) => i.tsoffset = *s,
                        _ => {}
                    }
                }
                interfaces.push(i);
                continue;
            }
            // The crate keeps the raw 64-bit time stamp in a Duration's nanoseconds.
            Block::EnhancedPacket(b) => (
                b.interface_id as usize,
                u64::try_from(b.timestamp.as_nanos()).unwrap_or(u64::MAX),
                b.data,
            ),
            Block::Packet(b) => (usize::from(b.interface_id), b.timestamp, b.data),
            Block::SimplePacket(b) => (0, 0, b.data),
            _ => continue,
        };
        let Some(i) = interfaces.get(iface).copied() else {
            let _ = p.out.flush();
            eprintln!(
                "cnm-dump: {}: packet on interface {iface}, which the file does not describe",
                path.display()
            );
            return ExitCode::from(2);
        };
        if i.linktype != DataLink::ETHERNET {
            let _ = p.out.flush();
            eprintln!(
                "cnm-dump: {}: interface {iface}: link type {} is not Ethernet (1)",
                path.display(),
                u32::from(i.linktype)
            );
            return ExitCode::from(2);
        }
        // Simple packet blocks have no time stamp.
        let ns = if raw_ts == 0 {
            0
        } else {
            pcapng_nanos(raw_ts, &i)
        };
        if let Some(line) = describe(Instant::from_nanos(ns), &data, args.all) {
            if let Flow::Stop = p.print(&line) {
                break;
            }
        }
    }
    let _ = p.out.flush();
    ExitCode::SUCCESS
}

fn run_live(ifname: &str, args: &Args, p: &mut Printer, stop: &AtomicBool) -> ExitCode {
    // Like tcpdump, show what the host itself sends too (a local switch daemon's CNMs).
    let cfg = AfPacketConfig {
        ignore_outgoing: false,
        ..AfPacketConfig::default()
    };
    let mut port = match AfPacketPort::open(ifname, &cfg) {
        Ok(port) => port,
        Err(e) => {
            eprintln!("cnm-dump: cannot capture on {ifname}: {e}");
            return ExitCode::from(2);
        }
    };
    let fd = port.raw_fd();
    let mut lines = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if let Some(fd) = fd {
            // Short timeout so that a signal is noticed promptly even without traffic.
            if let Err(e) = cnm_proto::phy::poll::wait(&[fd], Some(Duration::from_millis(200))) {
                if e.kind() != io::ErrorKind::Interrupted {
                    eprintln!("cnm-dump: poll on {ifname}: {e}");
                    return ExitCode::from(1);
                }
                continue;
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let ts = wall_clock();
        let all = args.all;
        let res = port.recv_batch(64, &mut |frame: &[u8]| {
            if let Some(line) = describe(ts, frame, all) {
                lines.push(line);
            }
        });
        if let Err(e) = res {
            eprintln!("cnm-dump: receive on {ifname}: {e}");
            return ExitCode::from(1);
        }
        for line in lines.drain(..) {
            if let Flow::Stop = p.print(&line) {
                let _ = p.out.flush();
                return ExitCode::SUCCESS;
            }
        }
    }
    let _ = p.out.flush();
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(shell) = args.completions {
        let script = daemon_kit::cli::completions(Args::command(), shell);
        daemon_kit::process::out(&script);
        return ExitCode::SUCCESS;
    }
    if args.man {
        return match daemon_kit::cli::man_page(Args::command()) {
            Ok(page) => {
                daemon_kit::process::out(&page);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("cnm-dump: man page: {e}");
                ExitCode::from(1)
            }
        };
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            eprintln!("cnm-dump: cannot install signal handler: {e}");
            return ExitCode::from(1);
        }
    }
    if args.count == Some(0) {
        return ExitCode::SUCCESS;
    }
    let mut printer = Printer {
        out: io::BufWriter::new(io::stdout()),
        json: args.json,
        left: args.count,
        live: args.iface.is_some(),
    };
    match (&args.file, &args.iface) {
        (Some(path), _) => run_file(path, &args, &mut printer, &stop),
        (None, Some(ifname)) => run_live(ifname, &args, &mut printer, &stop),
        // clap's argument group makes one of the two mandatory.
        (None, None) => ExitCode::from(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcapng_time_stamps_follow_the_interface_resolution() {
        let i = |tsresol, tsoffset| Interface {
            linktype: DataLink::ETHERNET,
            tsresol,
            tsoffset,
        };
        // Default: microseconds.
        assert_eq!(
            pcapng_nanos(1_700_000_000_123_456, &i(6, 0)),
            1_700_000_000_123_456_000
        );
        // Nanoseconds.
        assert_eq!(pcapng_nanos(42, &i(9, 0)), 42);
        // Picoseconds: 10^-12 s.
        assert_eq!(pcapng_nanos(5_000, &i(12, 0)), 5);
        // Binary: 2^-10 s units, 1024 of them make 1 s.
        assert_eq!(pcapng_nanos(1024, &i(0x80 | 10, 0)), 1_000_000_000);
        // Offset in seconds.
        assert_eq!(pcapng_nanos(1, &i(0, 10)), 11_000_000_000);
        // Absurd values saturate instead of panicking.
        assert_eq!(pcapng_nanos(u64::MAX, &i(0, u64::MAX)), u64::MAX);
    }
}

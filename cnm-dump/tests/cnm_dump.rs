//! Runs the `cnm-dump` binary on the demo capture (frames emitted by `cnm-proto`) and checks
//! its JSON lines field by field, the malformed line, `--all`, `--count`, the text output and
//! the exit codes for unreadable files; the same capture as pcapng (written by the `pcap-file`
//! crate, and by Wireshark's `editcap` when installed); and, as root, a live capture on a veth
//! pair inside a network namespace of its own.
#![allow(clippy::unwrap_used)]

#[path = "../../cnm-proto/examples/demo_pcap.rs"]
mod demo;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use demo::{DemoFrame, Expect};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_cnm-dump");

/// A temporary directory removed on drop, even when the test fails.
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("qcn-{tag}-"))
        .tempdir()
        .unwrap()
}

fn run(args: &[&str], file: Option<&Path>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    if let Some(f) = file {
        cmd.arg(f);
    }
    cmd.output().unwrap()
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

fn demo_pcap(dir: &tempfile::TempDir) -> (PathBuf, Vec<DemoFrame>) {
    let pcap = dir.path().join("demo.pcap");
    let frames = demo::demo_frames().unwrap();
    demo::write_pcap(&pcap, &frames).unwrap();
    (pcap, frames)
}

/// The `ts` string as seconds.
fn ts_of(v: &Value) -> f64 {
    let s = v["ts"].as_str().unwrap();
    let (_, frac) = s.split_once('.').unwrap();
    assert_eq!(frac.len(), 9, "ts {s} has nanoseconds");
    s.parse().unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `kind` cnm-dump must print for a demo frame without `--all`, or `None` if skipped.
fn expected_kind(e: &Expect) -> Option<&'static str> {
    match e {
        Expect::Data { rpid: Some(_), .. } => Some("cn-tag"),
        Expect::Data { rpid: None, .. } | Expect::Lldp { .. } => None,
        Expect::Cnm { .. } => Some("cnm"),
        Expect::Pause { .. } => Some("pause"),
        Expect::Pfc { .. } => Some("pfc"),
        Expect::RateFeedback { .. } => Some("rate-feedback"),
        Expect::MalformedCnm => Some("malformed"),
    }
}

fn check_line(d: &DemoFrame, v: &Value) {
    let what = d.label;
    let s = |k: &str| v[k].as_str().map(str::to_string);
    let n = |k: &str| v[k].as_i64();
    assert_eq!(s("src"), Some(d.src.to_string()), "{what}: src in {v}");
    assert_eq!(s("dst"), Some(d.dst.to_string()), "{what}: dst in {v}");
    assert!(ts_of(v) > 1.6e9, "{what}: ts in {v}");
    assert_eq!(n("len"), Some(d.frame.len() as i64), "{what}: len");
    match &d.expect {
        Expect::Data { vlan, rpid } => {
            assert_eq!(n("rpid"), rpid.map(i64::from), "{what}: rpid");
            assert_eq!(n("vid"), vlan.map(|(_, vid)| i64::from(vid)), "{what}: vid");
            assert_eq!(n("pcp"), vlan.map(|(pcp, _)| i64::from(pcp)), "{what}: pcp");
        }
        Expect::Cnm {
            vlan,
            rpid,
            version,
            qntz_fb,
            cpid,
            q_offset,
            q_delta,
            encap_priority,
            encap_da,
            encap_msdu,
        } => {
            assert_eq!(n("rpid"), rpid.map(i64::from), "{what}: rpid");
            assert_eq!(n("vid"), vlan.map(|(_, vid)| i64::from(vid)), "{what}: vid");
            assert_eq!(n("pcp"), vlan.map(|(pcp, _)| i64::from(pcp)), "{what}: pcp");
            assert_eq!(n("version"), Some(i64::from(*version)), "{what}");
            assert_eq!(n("qntz_fb"), Some(i64::from(*qntz_fb)), "{what}");
            assert_eq!(s("cpid"), Some(format!("{:016x}", cpid.0)), "{what}");
            assert_eq!(s("cpid").unwrap().len(), 16, "{what}: 16 hex digits");
            assert_eq!(n("q_offset"), Some(i64::from(*q_offset)), "{what}");
            assert_eq!(n("q_delta"), Some(i64::from(*q_delta)), "{what}");
            assert_eq!(
                n("encap_priority"),
                Some(i64::from(*encap_priority)),
                "{what}"
            );
            assert_eq!(s("encap_da"), Some(encap_da.to_string()), "{what}");
            assert_eq!(n("encap_msdu_len"), Some(encap_msdu.len() as i64), "{what}");
            assert_eq!(s("encap_msdu"), Some(hex(encap_msdu)), "{what}");
        }
        Expect::Pause { quanta } => {
            assert_eq!(n("pause_time"), Some(i64::from(*quanta)), "{what}");
        }
        Expect::Pfc {
            class_enable,
            times,
        } => {
            assert_eq!(n("class_enable"), Some(i64::from(*class_enable)), "{what}");
            let got: Vec<i64> = v["times"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_i64().unwrap())
                .collect();
            let want: Vec<i64> = times.iter().map(|&t| i64::from(t)).collect();
            assert_eq!(got, want, "{what}");
        }
        Expect::Lldp { cnpv, ready } => {
            assert_eq!(n("cnpv"), Some(i64::from(*cnpv)), "{what}");
            assert_eq!(n("ready"), Some(i64::from(*ready)), "{what}");
        }
        Expect::RateFeedback {
            cpid,
            rate_bps,
            encap_priority,
            encap_da,
        } => {
            assert_eq!(s("cpid"), Some(format!("{:016x}", cpid.0)), "{what}");
            assert_eq!(v["rate_bps"].as_u64(), Some(*rate_bps), "{what}");
            assert_eq!(
                n("encap_priority"),
                Some(i64::from(*encap_priority)),
                "{what}"
            );
            assert_eq!(s("encap_da"), Some(encap_da.to_string()), "{what}");
        }
        Expect::MalformedCnm => {
            assert!(!s("error").unwrap().is_empty(), "{what}: error in {v}");
        }
    }
}

#[test]
fn json_lines_match_the_demo_frames() {
    let dir = temp_dir("dump-json");
    let (pcap, frames) = demo_pcap(&dir);
    let out = run(&["--json"], Some(&pcap));
    assert!(out.status.success(), "{out:?}");
    let lines = json_lines(&out);
    let shown: Vec<&DemoFrame> = frames
        .iter()
        .filter(|d| expected_kind(&d.expect).is_some())
        .collect();
    assert_eq!(lines.len(), shown.len(), "{lines:#?}");
    let mut last_ts = 0.0;
    for (d, v) in shown.iter().zip(&lines) {
        assert_eq!(
            v["kind"].as_str(),
            expected_kind(&d.expect),
            "{}: {v}",
            d.label
        );
        check_line(d, v);
        // Capture order.
        let ts = ts_of(v);
        assert!(ts > last_ts, "{v}");
        last_ts = ts;
    }
    for kind in [
        "cnm",
        "cn-tag",
        "pause",
        "pfc",
        "rate-feedback",
        "malformed",
    ] {
        assert!(
            lines.iter().any(|v| v["kind"] == kind),
            "no {kind} line in the demo"
        );
    }
}

#[test]
fn all_shows_every_frame_and_count_stops_early() {
    let dir = temp_dir("dump-all");
    let (pcap, frames) = demo_pcap(&dir);
    let out = run(&["--json", "--all"], Some(&pcap));
    assert!(out.status.success());
    let lines = json_lines(&out);
    assert_eq!(lines.len(), frames.len());
    for (d, v) in frames.iter().zip(&lines) {
        let kind = v["kind"].as_str().unwrap();
        match expected_kind(&d.expect) {
            Some(k) => assert_eq!(kind, k, "{}", d.label),
            None => assert!(kind == "other" || kind == "lldp", "{}: {v}", d.label),
        }
        check_line(d, v);
    }

    let out = run(&["--json", "--count", "2"], Some(&pcap));
    assert!(out.status.success());
    assert_eq!(json_lines(&out).len(), 2);
}

#[test]
fn text_output_has_one_line_per_frame() {
    let dir = temp_dir("dump-text");
    let (pcap, frames) = demo_pcap(&dir);
    let out = run(&[], Some(&pcap));
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let shown: Vec<&DemoFrame> = frames
        .iter()
        .filter(|d| expected_kind(&d.expect).is_some())
        .collect();
    assert_eq!(lines.len(), shown.len(), "{text}");
    for (d, l) in shown.iter().zip(&lines) {
        let kind = expected_kind(&d.expect).unwrap();
        assert!(l.contains(&format!(" {kind} ")), "{}: {l}", d.label);
        if let Expect::Cnm { qntz_fb, cpid, .. } = &d.expect {
            assert!(l.contains(&format!("qntz_fb {qntz_fb} ")), "{l}");
            assert!(l.contains(&format!("cpid {:016x} ", cpid.0)), "{l}");
        }
    }
}

#[test]
fn unreadable_files_exit_2() {
    let dir = temp_dir("dump-bad");
    let missing = dir.path().join("missing.pcap");
    let out = run(&[], Some(&missing));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.pcap"));

    let not_pcap = dir.path().join("not.pcap");
    std::fs::write(&not_pcap, b"this is not a capture file, just some text\n").unwrap();
    let out = run(&["--json"], Some(&not_pcap));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(!out.stderr.is_empty());

    let empty = dir.path().join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(run(&[], Some(&empty)).status.code(), Some(2));

    // A valid header cut short.
    let (pcap, _) = demo_pcap(&dir);
    let bytes = std::fs::read(&pcap).unwrap();
    let short = dir.path().join("short-header.pcap");
    std::fs::write(&short, &bytes[..10]).unwrap();
    assert_eq!(run(&[], Some(&short)).status.code(), Some(2));

    // Neither a file nor --iface: usage error.
    assert_eq!(run(&[], None).status.code(), Some(2));
}

#[test]
fn truncated_last_record_prints_the_rest_warns_and_exits_0() {
    let dir = temp_dir("dump-trunc");
    let (pcap, _) = demo_pcap(&dir);
    let full = json_lines(&run(&["--json", "--all"], Some(&pcap)));
    let bytes = std::fs::read(&pcap).unwrap();
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
    let out = run(&["--json", "--all"], Some(&cut));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), full.len() - 1);
    assert_eq!(lines, full[..full.len() - 1]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning"), "{stderr}");
}

#[test]
fn malformed_frames_of_every_kind_do_not_stop_the_run() {
    let dir = temp_dir("dump-malformed");
    let mut frames = demo::demo_frames().unwrap();
    let good = frames
        .iter()
        .find(|d| matches!(d.expect, Expect::Cnm { vlan: None, .. }))
        .unwrap()
        .clone();
    let mut bad = Vec::new();
    for (ethertype, len) in [
        (0x22e7u16, 14 + 23),
        (0x22e7, 14 + 3),
        (0x88b5, 14 + 25),
        (0x8808, 14 + 1),
        (0x22e9, 14 + 3),
    ] {
        let mut f = good.frame[..len].to_vec();
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        bad.push(DemoFrame {
            label: "truncated",
            frame: f,
            expect: Expect::MalformedCnm,
            ..good.clone()
        });
    }
    // VLAN-tagged CNM whose PDU is cut after 5 octets.
    let mut f = good.frame[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00, 0xc0, 0x64, 0x22, 0xe7]);
    f.extend_from_slice(&good.frame[14..19]);
    bad.push(DemoFrame {
        label: "tagged, truncated",
        frame: f,
        expect: Expect::MalformedCnm,
        ..good.clone()
    });
    bad.push(DemoFrame {
        label: "runt",
        frame: vec![0x22; 7],
        expect: Expect::MalformedCnm,
        ..good.clone()
    });
    let n_bad = bad.len();
    frames.splice(0..0, bad);
    let pcap = dir.path().join("bad.pcap");
    demo::write_pcap(&pcap, &frames).unwrap();
    let out = run(&["--json"], Some(&pcap));
    assert!(out.status.success());
    let lines = json_lines(&out);
    // The runt (7 octets, no EtherType) is not one of ours: skipped without --all.
    for v in &lines[..n_bad - 1] {
        assert_eq!(v["kind"], "malformed", "{v}");
        assert!(!v["error"].as_str().unwrap().is_empty());
    }
    assert!(lines[n_bad - 1..].iter().any(|v| v["kind"] == "cnm"));
    let all = json_lines(&run(&["--json", "--all"], Some(&pcap)));
    assert_eq!(all.len(), frames.len());
    assert_eq!(all[n_bad - 1]["kind"], "malformed");
}

// ---- live capture (root only) ----------------------------------------------------------------

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A network namespace deleted on drop (with the veth pair inside it).
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        ip(&["netns", "del", &self.0]);
    }
}

/// A child process killed on drop.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `frame` on `iface` inside namespace `ns` through an [`AfPacketPort`] every 50 ms
/// until `stop` is set. Runs in its own thread: entering a namespace is per thread.
///
/// [`AfPacketPort`]: cnm_proto::phy::AfPacketPort
fn spawn_sender(
    ns: String,
    iface: &'static str,
    frame: Vec<u8>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use cnm_proto::phy::{netns, AfPacketConfig, AfPacketPort, Port};
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        netns::enter(&ns).unwrap();
        let mut port = AfPacketPort::open(iface, &AfPacketConfig::default()).unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        while !stop.load(Ordering::Relaxed) && Instant::now() < end {
            let _ = port.send(&frame).unwrap();
            port.flush().unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// Stops the sender thread on drop.
struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn live_capture_on_a_veth_pair() {
    if !is_root() {
        eprintln!("skipped: live capture needs root (network namespace and AF_PACKET)");
        return;
    }
    let ns = Netns(format!("qcnd{}", std::process::id()));
    assert!(ip(&["netns", "add", &ns.0]), "ip netns add failed");
    assert!(ip(&[
        "-n", &ns.0, "link", "add", "dumpa", "type", "veth", "peer", "name", "dumpb"
    ]));
    for dev in ["dumpa", "dumpb"] {
        assert!(ip(&["-n", &ns.0, "link", "set", dev, "up"]));
    }
    let cnm = demo::demo_frames()
        .unwrap()
        .into_iter()
        .find(|d| matches!(d.expect, Expect::Cnm { .. }))
        .unwrap();

    let dump = Command::new("ip")
        .args([
            "netns", "exec", &ns.0, BIN, "--iface", "dumpb", "--json", "--count", "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut dump = Child(dump);
    // Let cnm-dump open its socket; the sender repeats anyway.
    std::thread::sleep(Duration::from_millis(300));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _stop = StopOnDrop(stop.clone());
    let sender = spawn_sender(ns.0.clone(), "dumpa", cnm.frame.clone(), stop.clone());

    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = dump.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "cnm-dump did not print a line in 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    use std::io::Read;
    dump.0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    dump.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "cnm-dump failed: {stderr}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sender.join().unwrap();
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert_eq!(lines[0]["kind"], "cnm", "{stdout}");
    check_line_live(&cnm, &lines[0]);
}

/// Like [`check_line`], but the timestamp is the wall clock of the capture.
fn check_line_live(d: &DemoFrame, v: &Value) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let ts = ts_of(v);
    assert!((now - ts).abs() < 60.0, "live timestamp {ts} vs now {now}");
    check_line(d, v);
}

#[test]
fn live_capture_exits_cleanly_on_sigint_and_sigterm() {
    if !is_root() {
        eprintln!("skipped: live capture needs root (network namespace and AF_PACKET)");
        return;
    }
    let ns = Netns(format!("qcnds{}", std::process::id()));
    assert!(ip(&["netns", "add", &ns.0]), "ip netns add failed");
    assert!(ip(&["-n", &ns.0, "link", "set", "lo", "up"]));
    for signal in ["-INT", "-TERM"] {
        let dump = Command::new("ip")
            .args(["netns", "exec", &ns.0, BIN, "--iface", "lo", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut dump = Child(dump);
        std::thread::sleep(Duration::from_millis(300));
        let pid = dump.0.id().to_string();
        assert!(Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(st) = dump.0.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "cnm-dump ignored SIG{}",
                &signal[1..]
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0), "exit status after {signal}");
    }
}

/// Rewrites a classic pcap as pcapng with the `pcap-file` crate: one interface of link type
/// `linktype` with `if_tsresol` = `tsresol` (6 or 9), one enhanced packet block per record.
fn to_pcapng(
    pcap: &Path,
    out: &Path,
    tsresol: u8,
    big_endian: bool,
    linktype: pcap_file::DataLink,
) {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::Endianness;
    let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(pcap).unwrap()).unwrap();
    let endianness = if big_endian {
        Endianness::Big
    } else {
        Endianness::Little
    };
    let file = std::fs::File::create(out).unwrap();
    let mut w = PcapNgWriter::with_endianness(file, endianness).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype,
        snaplen: 0,
        options: vec![InterfaceDescriptionOption::IfTsResol(tsresol)],
    })
    .unwrap();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        let ns = u64::try_from(p.timestamp.as_nanos()).unwrap();
        let units = if tsresol == 9 { ns } else { ns / 1000 };
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            // The crate writes a Duration's nanoseconds as the raw time stamp.
            timestamp: Duration::from_nanos(units),
            original_len: p.orig_len,
            data: p.data,
            options: vec![],
        })
        .unwrap();
    }
}

#[test]
fn pcapng_prints_the_same_lines_as_pcap() {
    let dir = temp_dir("dump-pcapng");
    let (pcap, frames) = demo_pcap(&dir);
    let want = json_lines(&run(&["--json", "--all"], Some(&pcap)));
    assert_eq!(want.len(), frames.len());
    for (tsresol, big) in [(9, false), (6, true)] {
        let ng = dir.path().join(format!("demo-{tsresol}-{big}.pcapng"));
        to_pcapng(&pcap, &ng, tsresol, big, pcap_file::DataLink::ETHERNET);
        assert_eq!(&std::fs::read(&ng).unwrap()[..4], &[0x0a, 0x0d, 0x0d, 0x0a]);
        let out = run(&["--json", "--all"], Some(&ng));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(
            json_lines(&out),
            want,
            "if_tsresol {tsresol}, big endian {big}"
        );
        let text = run(&[], Some(&ng));
        assert_eq!(text.stdout, run(&[], Some(&pcap)).stdout);
    }
}

/// Wireshark's own writer: `editcap -F pcapng`, skipped with a note when not installed.
#[test]
fn pcapng_from_editcap_prints_the_same_lines_as_pcap() {
    let dir = temp_dir("dump-editcap");
    let (pcap, _) = demo_pcap(&dir);
    let ng = dir.path().join("demo.pcapng");
    let made = Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&pcap)
        .arg(&ng)
        .output();
    match made {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("editcap failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipped: editcap not available ({e}); scripts/install-deps.sh installs it");
            return;
        }
    }
    let out = run(&["--json", "--all"], Some(&ng));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        json_lines(&out),
        json_lines(&run(&["--json", "--all"], Some(&pcap)))
    );
}

#[test]
fn pcapng_cut_short_prints_the_rest_warns_and_exits_0() {
    let dir = temp_dir("dump-pcapng-cut");
    let (pcap, _) = demo_pcap(&dir);
    let ng = dir.path().join("demo.pcapng");
    to_pcapng(&pcap, &ng, 9, false, pcap_file::DataLink::ETHERNET);
    let full = json_lines(&run(&["--json", "--all"], Some(&ng)));
    let bytes = std::fs::read(&ng).unwrap();
    let cut = dir.path().join("cut.pcapng");
    std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
    let out = run(&["--json", "--all"], Some(&cut));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json_lines(&out), full[..full.len() - 1]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
    // Only the section header's start: not a readable file.
    let short = dir.path().join("short.pcapng");
    std::fs::write(&short, &bytes[..10]).unwrap();
    assert_eq!(run(&[], Some(&short)).status.code(), Some(2));
}

#[test]
fn pcapng_of_another_link_type_exits_2() {
    let dir = temp_dir("dump-pcapng-sll");
    let (pcap, _) = demo_pcap(&dir);
    let ng = dir.path().join("sll.pcapng");
    to_pcapng(&pcap, &ng, 9, false, pcap_file::DataLink::LINUX_SLL);
    let out = run(&["--json"], Some(&ng));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not Ethernet"), "{stderr}");
}

#[test]
fn completions_and_man_page_generate() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_cnm-dump"))
            .args(["--completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let s = String::from_utf8(out.stdout).unwrap();
        assert!(s.contains("iface") && s.contains("count"), "{shell}: {s}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cnm-dump"))
        .arg("--man")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains(".TH cnm-dump 1"));
}

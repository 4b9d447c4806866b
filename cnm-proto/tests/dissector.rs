//! Checks the Wireshark dissector (`scripts/wireshark/qcn.lua`) against frames emitted by
//! `cnm-proto`: the demo capture is written to a temporary pcap, decoded by
//! `tshark -X lua_script:... -T fields`, and every CNM field, the CN-TAG RPID, the rate-feedback
//! fields and the malformed-CNM expert error are compared with what the frames were built from.
//! PAUSE, PFC and the LLDP CN TLV are checked against Wireshark's own dissectors.
//!
//! Without tshark the test prints why and returns (`scripts/install-deps.sh` installs it).
#![allow(clippy::unwrap_used)]

#[path = "../examples/demo_pcap.rs"]
mod demo;

use std::path::{Path, PathBuf};
use std::process::Command;

use demo::{DemoFrame, Expect};

/// A temporary directory removed on drop, even when the test fails.
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("qcn-{tag}-"))
        .tempdir()
        .unwrap()
}

fn have_tshark() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn lua_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("wireshark")
        .join("qcn.lua")
}

/// Runs tshark with the repository's dissector on `pcap`. HOME points at an empty directory so
/// that a copy installed as a personal plugin (possibly older) is not loaded instead.
fn tshark(home: &Path, pcap: &Path, args: &[&str]) -> String {
    let script = format!("lua_script:{}", lua_script().display());
    let out = Command::new("tshark")
        .env("HOME", home)
        .args(["-X", &script, "-n", "-r"])
        .arg(pcap)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {stderr}");
    assert!(
        !stderr.contains("Lua"),
        "tshark reported a Lua problem: {stderr}"
    );
    String::from_utf8(out.stdout).unwrap()
}

const FIELDS: &[&str] = &[
    "frame.number",
    "eth.src",
    "eth.dst",
    "vlan.priority",
    "vlan.id",
    "cntag.rpid",
    "cnm.version",
    "cnm.reserved",
    "cnm.qntzfb",
    "cnm.cpid",
    "cnm.qoffset",
    "cnm.qdelta",
    "cnm.encap_priority",
    "cnm.encap_da",
    "cnm.encap_msdu_len",
    "cnm.encap_msdu",
    "cnm.malformed",
    "ratefb.version",
    "ratefb.reserved",
    "ratefb.encap_priority",
    "ratefb.cpid",
    "ratefb.rate",
    "ratefb.encap_da",
    "macc.pause_time",
    "macc.cbfc.enbv",
    "macc.cbfc.pause_time.c3",
    "_ws.col.Protocol",
    "_ws.col.Info",
];

/// One decoded frame: field name → first occurrence ("" when absent).
struct Row(Vec<(&'static str, String)>);

impl Row {
    fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("field {name} not requested"))
    }
    /// A number tshark printed in decimal or as 0x-prefixed hex.
    fn num(&self, name: &str) -> i128 {
        let v = self.get(name);
        let parsed = match v.strip_prefix("0x") {
            Some(h) => i128::from_str_radix(h, 16),
            None => v.parse(),
        };
        parsed.unwrap_or_else(|_| panic!("field {name}: {v:?} is not a number"))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn decode(home: &Path, pcap: &Path) -> Vec<Row> {
    let mut args = vec!["-T", "fields", "-E", "occurrence=f", "-E", "separator=\t"];
    for f in FIELDS {
        args.push("-e");
        args.push(f);
    }
    let text = tshark(home, pcap, &args);
    text.lines()
        .map(|l| {
            let vals: Vec<&str> = l.split('\t').collect();
            assert_eq!(vals.len(), FIELDS.len(), "line {l:?}");
            Row(FIELDS
                .iter()
                .zip(vals)
                .map(|(f, v)| (*f, v.to_string()))
                .collect())
        })
        .collect()
}

fn check_frame(d: &DemoFrame, r: &Row) {
    let what = d.label;
    assert_eq!(r.get("eth.src"), d.src.to_string(), "{what}: eth.src");
    assert_eq!(r.get("eth.dst"), d.dst.to_string(), "{what}: eth.dst");
    match &d.expect {
        Expect::Data { vlan, rpid } => {
            match vlan {
                Some((pcp, vid)) => {
                    assert_eq!(r.num("vlan.priority"), i128::from(*pcp), "{what}");
                    assert_eq!(r.num("vlan.id"), i128::from(*vid), "{what}");
                }
                None => assert_eq!(r.get("vlan.id"), "", "{what}"),
            }
            match rpid {
                Some(rpid) => assert_eq!(r.num("cntag.rpid"), i128::from(*rpid), "{what}"),
                None => assert_eq!(r.get("cntag.rpid"), "", "{what}"),
            }
            assert_eq!(r.get("cnm.qntzfb"), "", "{what}: not a CNM");
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
            match vlan {
                Some((pcp, vid)) => {
                    assert_eq!(r.num("vlan.priority"), i128::from(*pcp), "{what}: CNM PCP");
                    assert_eq!(r.num("vlan.id"), i128::from(*vid), "{what}: CNM VID");
                }
                None => assert_eq!(r.get("vlan.id"), "", "{what}: untagged CNM"),
            }
            match rpid {
                Some(rpid) => assert_eq!(r.num("cntag.rpid"), i128::from(*rpid), "{what}: RPID"),
                None => assert_eq!(r.get("cntag.rpid"), "", "{what}: no CN-TAG"),
            }
            assert_eq!(
                r.num("cnm.version"),
                i128::from(*version),
                "{what}: version"
            );
            assert_eq!(r.num("cnm.reserved"), 0, "{what}: reserved");
            assert_eq!(r.num("cnm.qntzfb"), i128::from(*qntz_fb), "{what}: QntzFb");
            assert_eq!(r.num("cnm.cpid"), i128::from(cpid.0), "{what}: CPID");
            assert_eq!(
                r.num("cnm.qoffset"),
                i128::from(*q_offset),
                "{what}: QOffset"
            );
            assert_eq!(r.num("cnm.qdelta"), i128::from(*q_delta), "{what}: QDelta");
            assert_eq!(
                r.num("cnm.encap_priority"),
                i128::from(*encap_priority),
                "{what}: encapsulated priority"
            );
            assert_eq!(
                r.get("cnm.encap_da"),
                encap_da.to_string(),
                "{what}: encap DA"
            );
            assert_eq!(
                r.num("cnm.encap_msdu_len"),
                encap_msdu.len() as i128,
                "{what}: MSDU length"
            );
            assert_eq!(r.get("cnm.encap_msdu"), hex(encap_msdu), "{what}: MSDU");
            assert_eq!(r.get("cnm.malformed"), "", "{what}: well-formed");
            assert_eq!(r.get("_ws.col.Protocol"), "CNM", "{what}");
            let info = r.get("_ws.col.Info");
            assert!(
                info.contains(&format!("CNM QntzFb={qntz_fb} "))
                    && info.contains(&format!("Qoff={q_offset} Qdelta={q_delta} ")),
                "{what}: Info column {info:?}"
            );
        }
        Expect::Pause { quanta } => {
            assert_eq!(r.num("macc.pause_time"), i128::from(*quanta), "{what}");
        }
        Expect::Pfc {
            class_enable,
            times,
        } => {
            assert_eq!(r.num("macc.cbfc.enbv"), i128::from(*class_enable), "{what}");
            assert_eq!(
                r.num("macc.cbfc.pause_time.c3"),
                i128::from(times[3]),
                "{what}"
            );
        }
        Expect::Lldp { .. } => {} // Checked with its own field list below.
        Expect::RateFeedback {
            cpid,
            rate_bps,
            encap_priority,
            encap_da,
        } => {
            assert_eq!(r.num("ratefb.version"), 0, "{what}");
            assert_eq!(r.num("ratefb.reserved"), 0, "{what}");
            assert_eq!(
                r.num("ratefb.encap_priority"),
                i128::from(*encap_priority),
                "{what}"
            );
            assert_eq!(r.num("ratefb.cpid"), i128::from(cpid.0), "{what}");
            assert_eq!(r.num("ratefb.rate"), i128::from(*rate_bps), "{what}");
            assert_eq!(r.get("ratefb.encap_da"), encap_da.to_string(), "{what}");
        }
        Expect::MalformedCnm => {
            assert_eq!(r.get("cnm.malformed"), "1", "{what}: expert info expected");
            assert!(r.get("_ws.col.Info").contains("malformed"), "{what}");
        }
    }
}

#[test]
fn tshark_decodes_every_field_of_the_demo_frames() {
    if !have_tshark() {
        eprintln!("skipped: tshark is not installed (scripts/install-deps.sh installs it)");
        return;
    }
    let dir = temp_dir("dissector");
    let pcap = dir.path().join("demo.pcap");
    let frames = demo::demo_frames().unwrap();
    demo::write_pcap(&pcap, &frames).unwrap();

    let rows = decode(dir.path(), &pcap);
    assert_eq!(rows.len(), frames.len());
    for (i, (d, r)) in frames.iter().zip(&rows).enumerate() {
        assert_eq!(r.num("frame.number"), i as i128 + 1);
        check_frame(d, r);
    }

    // Every kind of frame is in the capture (so none of the checks above is vacuous).
    let has = |f: fn(&Expect) -> bool| frames.iter().any(|d| f(&d.expect));
    assert!(has(|e| matches!(
        e,
        Expect::Cnm {
            rpid: Some(_),
            vlan: Some(_),
            ..
        }
    )));
    assert!(has(|e| matches!(
        e,
        Expect::Cnm {
            rpid: None,
            vlan: None,
            ..
        }
    )));
    assert!(has(
        |e| matches!(e, Expect::Cnm { cpid, .. } if cpid.index() & 0x8000 != 0)
    ));
    assert!(has(|e| matches!(e, Expect::RateFeedback { .. })));
    assert!(has(|e| matches!(e, Expect::MalformedCnm)));
    assert!(has(|e| matches!(e, Expect::Lldp { .. })));

    // LLDP CN TLV, through Wireshark's own LLDP dissector.
    for (i, d) in frames.iter().enumerate() {
        let Expect::Lldp { cnpv, ready } = d.expect else {
            continue;
        };
        let mut args = vec!["-Y".to_string(), format!("frame.number == {}", i + 1)];
        args.extend(["-T", "fields", "-E", "occurrence=f"].map(String::from));
        for p in 0..8 {
            args.push("-e".into());
            args.push(format!("lldp.ieee.802_1qau.cnpv.prio{p}"));
            args.push("-e".into());
            args.push(format!("lldp.ieee.802_1qau.ready.prio{p}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = tshark(dir.path(), &pcap, &args);
        let vals: Vec<&str> = out.trim_end().split('\t').collect();
        assert_eq!(vals.len(), 16, "{out:?}");
        for p in 0..8 {
            let bit = |v: u8| if v & (1 << p) != 0 { "1" } else { "0" };
            let norm = |s: &str| match s {
                "True" | "1" => "1",
                _ => "0",
            };
            assert_eq!(norm(vals[2 * p]), bit(cnpv), "CNPV priority {p}: {out:?}");
            assert_eq!(
                norm(vals[2 * p + 1]),
                bit(ready),
                "Ready priority {p}: {out:?}"
            );
        }
    }
}

#[test]
fn malformed_cnms_get_an_error_expert_info_and_no_lua_error() {
    if !have_tshark() {
        eprintln!("skipped: tshark is not installed (scripts/install-deps.sh installs it)");
        return;
    }
    let dir = temp_dir("dissector-bad");
    let pcap = dir.path().join("bad.pcap");
    let good = demo::demo_frames()
        .unwrap()
        .into_iter()
        .find(|d| {
            matches!(
                &d.expect,
                Expect::Cnm {
                    vlan: None,
                    rpid: None,
                    ..
                }
            )
        })
        .unwrap();
    // Untagged CNM: PDU starts at 14; the MSDU length field is PDU octets 22..24.
    let mut frames = Vec::new();
    let mut too_long = good.frame.clone();
    too_long[36..38].copy_from_slice(&65u16.to_be_bytes());
    frames.push(("MSDU length 65 > 64", too_long));
    let mut beyond = good.frame.clone();
    let present = beyond.len() - 38;
    beyond[36..38].copy_from_slice(&(present as u16 + 1).to_be_bytes());
    frames.push(("MSDU length > octets present", beyond));
    frames.push(("PDU of 23 octets", good.frame[..14 + 23].to_vec()));
    frames.push(("rate feedback of 25 octets", {
        let mut f = good.frame[..14 + 25].to_vec();
        f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        f
    }));
    frames.push(("CN-TAG of 3 octets", {
        let mut f = good.frame[..14 + 3].to_vec();
        f[12..14].copy_from_slice(&0x22e9u16.to_be_bytes());
        f
    }));
    let demo_frames: Vec<DemoFrame> = frames
        .iter()
        .map(|(label, f)| DemoFrame {
            label,
            src: good.src,
            dst: good.dst,
            frame: f.clone(),
            expect: Expect::MalformedCnm,
        })
        .collect();
    demo::write_pcap(&pcap, &demo_frames).unwrap();

    let out = tshark(
        dir.path(),
        &pcap,
        &[
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-e",
            "frame.number",
            "-e",
            "_ws.expert.severity",
            "-e",
            "_ws.expert.group",
            "-e",
            "_ws.expert.message",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), frames.len());
    // Wireshark's PI_ERROR severity and PI_MALFORMED group (epan/proto.h).
    const PI_ERROR: &str = "8388608";
    const PI_MALFORMED: &str = "117440512";
    for (line, (label, _)) in lines.iter().zip(&frames) {
        let cols: Vec<&str> = line.split('\t').collect();
        assert!(
            cols[1].split(',').any(|s| s == PI_ERROR),
            "{label}: no error-severity expert info: {line:?}"
        );
        assert!(
            cols[2].split(',').any(|s| s == PI_MALFORMED),
            "{label}: not in the malformed group: {line:?}"
        );
        assert!(!line.contains("Lua"), "{label}: {line:?}");
    }
    // And the full tree of each one renders without a Lua error.
    let verbose = tshark(dir.path(), &pcap, &["-V"]);
    assert!(!verbose.contains("Lua Error"), "{verbose}");
}

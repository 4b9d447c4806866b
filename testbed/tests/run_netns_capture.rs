//! `testbed run --mode netns --capture all` (root only): one readable pcap per link of the
//! scenario, on the link's switch port, whose frames' times meet the trace's through the
//! summary's `trace_clock` (pcap time = trace time + `realtime_offset_ns`); `--capture cnms`:
//! the CNMs towards the first flow's source alone.
#![allow(clippy::unwrap_used)]

mod common;

use common::netns::{assert_clean, out_dir, prefix_of, summary, testbed};
use std::process::Stdio;

/// The records of a classic pcap file: (epoch ns of each frame). `None` when it is not one.
fn pcap_times(bytes: &[u8]) -> Option<Vec<i128>> {
    Some(pcap_records(bytes)?.into_iter().map(|(t, _)| t).collect())
}

/// The records of a classic pcap file: (epoch ns, captured octets) of each frame. `None` when
/// it is not one.
fn pcap_records(bytes: &[u8]) -> Option<Vec<(i128, &[u8])>> {
    let magic = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let unit: i128 = match magic {
        0xa1b2_c3d4 => 1_000,
        0xa1b2_3c4d => 1,
        _ => return None,
    };
    // Ethernet link type.
    if u32::from_le_bytes(bytes.get(20..24)?.try_into().ok()?) != 1 {
        return None;
    }
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let w = |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
        let (sec, frac, incl) = (w(0), w(4), w(8) as usize);
        let Some(frame) = bytes.get(at + 16..at + 16 + incl) else {
            break;
        };
        out.push((
            i128::from(sec) * 1_000_000_000 + i128::from(frac) * unit,
            frame,
        ));
        at += 16 + incl;
    }
    // A capture stopped by a signal may end in a partial record; every whole one was read.
    Some(out)
}

/// Runs the dumbbell for 3 s at S = 100 (captures of every link of a 1 Gb/s run would be ten
/// times larger) with `--capture WHAT` into `dir`, checks that it succeeded and left nothing
/// behind, and returns what it printed.
fn run_dumbbell(dir: &std::path::Path, what: &str) -> String {
    let out = testbed()
        .args(["dumbbell", "--quiet", "--no-plots", "--capture", what])
        .args(["--set", "scenario.scale=100"])
        .args(["--set", "scenario.netns.duration=3s", "--out"])
        .arg(dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}\n{stdout}", out.status);
    if let Some(prefix) = prefix_of(dir) {
        assert_clean(&prefix);
    }
    stdout
}

#[test]
fn netns_capture_all_writes_one_pcap_per_link() {
    if !testbed::netns::can_run_network_tests("netns_capture_all_writes_one_pcap_per_link") {
        return;
    }
    let dir = out_dir("run-netns-capture", "all");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = run_dumbbell(&dir, "all");
    let sc = testbed::scenario::load("dumbbell", &[]).unwrap();
    let graph = sc.topo.graph();
    let s = summary(&dir);
    let clock = &s["trace_clock"];
    assert_eq!(clock["clock"], "monotonic", "{s}");
    let t0 = i128::from(clock["t0_ns"].as_u64().unwrap());
    let offset = i128::from(clock["realtime_offset_ns"].as_i64().unwrap());
    // The run's t = 0 in the captures' clock.
    let start_epoch = t0 + offset;
    let pcaps = common::pcaps_under(&dir);
    assert_eq!(pcaps.len(), graph.links.len(), "{pcaps:?}");
    for l in &graph.links {
        let p = testbed::run::capture::link_file(&dir, &l.name);
        assert!(stdout.contains(&p.display().to_string()), "{stdout}");
        let times = pcap_times(&std::fs::read(&p).unwrap())
            .unwrap_or_else(|| panic!("{} is not a pcap", p.display()));
        assert!(!times.is_empty(), "{} holds no frame", p.display());
        // Every frame was captured during the run: from the lab's setup (before t = 0) to its
        // end (3 s of schedule). The bound is loose, the conversion is what is checked: a
        // wrong offset is off by the machine's uptime or by decades.
        for t in [times[0], *times.last().unwrap()] {
            let rel = (t - start_epoch) as f64 / 1e9;
            assert!(
                (-60.0..60.0).contains(&rel),
                "{}: a frame {rel} s from the run's start",
                p.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--capture cnms` writes `cnms.pcap` alone, and it holds CNMs (EtherType 0x22E7, after up to
/// two tags): what the switch sent towards h0, without the bottleneck's traffic.
#[test]
fn netns_capture_cnms_writes_the_cnms_alone() {
    if !testbed::netns::can_run_network_tests("netns_capture_cnms_writes_the_cnms_alone") {
        return;
    }
    let dir = out_dir("run-netns-capture", "cnms");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = run_dumbbell(&dir, "cnms");
    let cnms = dir.join("cnms.pcap");
    assert_eq!(common::pcaps_under(&dir), vec![cnms.clone()]);
    assert!(stdout.contains(&cnms.display().to_string()), "{stdout}");
    let bytes = std::fs::read(&cnms).unwrap();
    let records = pcap_records(&bytes).expect("cnms.pcap is a pcap");
    let ethertype =
        |f: &[u8], at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let n = records
        .iter()
        .filter(|(_, f)| {
            [12, 16, 20]
                .iter()
                .any(|&at| ethertype(f, at) == Some(0x22e7))
        })
        .count();
    let cnms_sent: u64 = summary(&dir)["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"] == "f0")
        .map(|f| f["cnm_rx"].as_u64().unwrap())
        .sum();
    eprintln!(
        "netns_capture_cnms: {n} CNMs of {} frames captured, f0 counted {cnms_sent}",
        records.len()
    );
    assert!(
        n > 0 && cnms_sent > 0,
        "{n} CNMs captured, f0 counted {cnms_sent}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! Scenario files: parse errors name file, line and field; `--set` overrides.
#![allow(clippy::unwrap_used)]

use testbed::scenario::{self, Scenario};

const MINI: &str = r#"seed = 1
duration = "10ms"

[scenario]
description = "two hosts"
window = ["5ms", "10ms"]

[switch.sw0]
[host.a]
[host.b]

[[link]]
a = "a"
b = "sw0"
rate = "10gbit"
[[link]]
name = "bottleneck"
a = "sw0"
b = "b"
rate = "1gbit"

[[flow]]
src = "a"
dst = "b"
pattern = "greedy"
"#;

fn write(text: &str, tag: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("run-scenario-{}-{tag}.toml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

fn load_err(text: &str, tag: &str) -> (String, std::path::PathBuf) {
    let p = write(text, tag);
    let e = scenario::load(p.to_str().unwrap(), &[]).unwrap_err();
    let _ = std::fs::remove_file(&p);
    (e.to_string(), p)
}

#[test]
fn good_file_loads() {
    let p = write(MINI, "good");
    let sc: Scenario = scenario::load(p.to_str().unwrap(), &[]).unwrap();
    let _ = std::fs::remove_file(&p);
    assert_eq!(sc.description(), "two hosts");
    assert_eq!(sc.window_s(), (0.005, 0.01));
    assert_eq!(sc.topo.link.len(), 2);
}

#[test]
fn type_error_names_file_line_and_field() {
    let text = MINI.replace("rate = \"1gbit\"", "rate = \"fast\"");
    let (e, p) = load_err(&text, "type");
    assert!(e.starts_with(&p.display().to_string()), "{e}");
    assert!(e.contains("line 20"), "{e}");
    assert!(e.contains("link[1].rate"), "{e}");
}

#[test]
fn unknown_scenario_key_names_line_and_field() {
    let text = MINI.replace("window = ", "windw = ");
    let (e, _) = load_err(&text, "key");
    assert!(e.contains("line 6"), "{e}");
    assert!(e.contains("scenario.windw"), "{e}");
}

#[test]
fn reference_error_names_line_and_field() {
    let text = MINI.replace("dst = \"b\"", "dst = \"nobody\"");
    let (e, _) = load_err(&text, "ref");
    assert!(e.contains("flow[0].dst"), "{e}");
    assert!(e.contains("line 24"), "{e}");
    assert!(e.contains("nobody"), "{e}");
}

#[test]
fn syntax_error_names_line() {
    let text = MINI.replace("seed = 1", "seed = = 1");
    let (e, _) = load_err(&text, "syntax");
    assert!(e.contains("line 1"), "{e}");
}

#[test]
fn set_overrides_by_index_name_and_table() {
    let p = write(MINI, "set");
    let sets = [
        "duration=2s",
        "links.bottleneck.rate=50mbit",
        "link.0.delay=3us",
        "flows.f0.pattern=cbr:1gbit",
        "scenario.scale=10",
        "switch.sw0.bridge.cp.cp_queue_set_point=20KB",
    ]
    .map(String::from);
    let sc = scenario::load(p.to_str().unwrap(), &sets).unwrap();
    let _ = std::fs::remove_file(&p);
    assert_eq!(sc.topo.duration.as_secs_f64(), 2.0);
    assert_eq!(sc.topo.link[1].rate, cnm_proto::Rate::from_mbps(50));
    assert_eq!(sc.topo.link[0].delay, cnm_proto::Duration::from_micros(3));
    assert_eq!(
        sc.topo.flow[0].kind,
        testbed::sim::topo::FlowKind::Gen(rp_agent::gen::Pattern::Cbr(cnm_proto::Rate::from_gbps(
            1
        )))
    );
    assert_eq!(sc.scale(), 10.0);
    let bridge = sc.topo.switch["sw0"].bridge.clone().unwrap();
    assert_eq!(
        bridge.config.cp.cp_queue_set_point,
        cnm_proto::Bytes::new(20_000)
    );
}

#[test]
fn bad_overrides_are_errors() {
    for (set, want) in [
        ("links.nope.rate=1gbit", "no link named"),
        ("link.7.rate=1gbit", "out of range"),
        ("duration", "KEY=VALUE"),
        ("link.0.rate=fast", "rate"),
        ("scenario.bogus=1", "bogus"),
    ] {
        let e = scenario::load("dumbbell", &[set.to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{set}: {e}");
    }
}

#[test]
fn builtins_are_listed_and_load() {
    let l = scenario::list();
    for name in [
        "dumbbell",
        "parking-lot",
        "mixed-onoff",
        "incast",
        "chain3",
        "fan-in-victim",
    ] {
        assert!(l.iter().any(|(n, d)| n == name && !d.is_empty()), "{name}");
        scenario::load(name, &[]).unwrap();
    }
}

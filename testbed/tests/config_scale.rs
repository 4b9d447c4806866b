//! Time scaling covers every rate and every time of every configuration and patch type: each
//! type is built with every field set (no `None`, no zero time), serialised before and after
//! `scale(S)`, and every leaf compared. A leaf in a rate's text form (`…bit`) must have been
//! divided by S, a leaf in a duration's (`…s`) multiplied by S, and every other leaf must be
//! unchanged. A setting added later without its `Scale` line fails here.
#![allow(clippy::unwrap_used)]

use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Bytes, Duration, Rate, Scale};
use cp_switch::config::{
    BufferConfig, CndDefense, FdbConfig, LosslessConfig, OutputFullPolicy, PriorityPolicy,
    SchedulerConfig, ShaperConfig, StaticEntry,
};
use cp_switch::cp::qcn::SampleTable;
use cp_switch::cp::FlowWeight;
use cp_switch::{BridgeConfig, CpConfig, CpMode, CpPatch, Culprit, LosslessMode, Placement};
use rp_agent::{AgentConfig, ClampTgtRate, FlowKeyMode, Release, RpMode, RpParams, RpPatch};
use serde::Serialize;
use serde_json::Value;
use testbed::scenario::settings::{AgentGiven, AgentSpec, BridgeSpec, LineGiven};

const S: f64 = 4.0;

#[derive(Debug, Default, PartialEq)]
struct Seen {
    rates: usize,
    times: usize,
    other: usize,
}

fn as_rate(v: &Value) -> Option<Rate> {
    v.as_str()
        .filter(|t| t.ends_with("bit"))
        .and_then(|t| t.parse().ok())
}

fn as_time(v: &Value) -> Option<Duration> {
    v.as_str()
        .filter(|t| t.ends_with('s'))
        .and_then(|t| t.parse().ok())
}

/// Compares `before` and `after` leaf by leaf (see the module documentation).
fn walk(path: &str, before: &Value, after: &Value, seen: &mut Seen) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let ka: Vec<_> = a.keys().collect();
            let kb: Vec<_> = b.keys().collect();
            assert_eq!(ka, kb, "{path}: the fields changed");
            for (k, v) in a {
                walk(&format!("{path}.{k}"), v, &b[k], seen);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}[{i}]"), x, y, seen);
            }
        }
        (Value::Null, _) => panic!("{path}: unset in the test's value; set every field"),
        _ => {
            if let Some(r) = as_rate(before) {
                assert_eq!(as_rate(after), Some(r.scale(S)), "{path}: rate not ÷ S");
                assert_ne!(before, after, "{path}: pick a rate that scaling changes");
                seen.rates += 1;
            } else if let Some(d) = as_time(before) {
                assert_ne!(d, Duration::ZERO, "{path}: pick a non-zero time");
                assert_eq!(as_time(after), Some(d.scale(S)), "{path}: time not × S");
                seen.times += 1;
            } else {
                assert_eq!(
                    before, after,
                    "{path}: not a rate or a time, must not change"
                );
                seen.other += 1;
            }
        }
    }
}

fn check<T: Serialize + Scale>(name: &str, value: &T) -> Seen {
    let before = serde_json::to_value(value).unwrap();
    let after = serde_json::to_value(value.scale(S)).unwrap();
    let mut seen = Seen::default();
    walk(name, &before, &after, &mut seen);
    seen
}

fn mac(n: u8) -> EthernetAddress {
    EthernetAddress([2, 0, 0, 0, 0, n])
}

fn full_cp() -> CpConfig {
    CpConfig {
        placement: Placement::Input,
        mode: CpMode::ExplicitRate,
        cnpv: vec![3, 5],
        cp_queue_set_point: Bytes::new(33_000),
        cp_feedback_weight: 4,
        cp_min_sample_base: Bytes::new(120_000),
        cp_sample_table: SampleTable::PseudoCode,
        cnm_priority: 7,
        cp_min_header_octets: 48,
        culprit: Culprit::Arrival,
        max_flows: 77,
        fqcn_weights: vec![FlowWeight {
            mac: Some(mac(9)),
            vid: Some(10),
            priority: Some(3),
            weight: 3,
        }],
        er_interval: Some(Duration::from_micros(30)),
        er_a: 1.1,
        er_b: 1.3,
        er_c: 0.4,
        er_min_rate: Some(Rate::from_mbps(7)),
    }
}

fn full_bridge() -> BridgeConfig {
    let mut port = cp_switch::PortConfig::new("p0")
        .with_rate(Rate::from_mbps(100))
        .with_delay(Duration::from_micros(25));
    port.default_priority = Some(2);
    port.mac = Some(mac(0x10));
    port.cnd_defense = CndDefense::Edge;
    port.alternate_priority = Some(1);
    port.catch_up = Some(Duration::from_micros(300));
    BridgeConfig {
        ports: vec![port],
        default_priority: 1,
        pvid: 5,
        mac: mac(0x20),
        fdb: FdbConfig {
            ageing: Duration::from_secs(30),
            max_entries: 99,
            static_entries: vec![StaticEntry {
                mac: mac(3),
                vid: Some(5),
                port: "p0".into(),
            }],
        },
        buffers: BufferConfig {
            input: Bytes::new(200_000),
            output: Bytes::new(180_000),
            delay_line: Bytes::new(3_000_000),
            control_frames: 32,
            on_output_full: OutputFullPolicy::Drop,
            voq_alpha: 1.5,
        },
        lossless: LosslessConfig {
            mode: LosslessMode::Pfc,
            qhigh: Bytes::new(100_000),
            qlow: Bytes::new(40_000),
            quanta: 1234,
            nominal_rate: Rate::from_gbps(10),
            watchdog: Duration::from_millis(50),
        },
        scheduler: SchedulerConfig {
            policy: PriorityPolicy::Dwrr,
            weights: [1, 2, 3, 4, 5, 6, 7, 8],
        },
        shaper: ShaperConfig {
            wire_overhead: false,
            fcs: false,
            pad: false,
            catch_up: Duration::from_millis(2),
        },
        max_frame: Bytes::new(1600),
        event_capacity: 512,
        cp: full_cp(),
    }
}

fn full_rp() -> RpParams {
    RpParams {
        rpg_byte_reset: Bytes::new(100_000),
        rpg_time_reset: Duration::from_millis(10),
        rpg_threshold: 4,
        rpg_ai_rate: Rate::from_mbps(4),
        rpg_hai_rate: Rate::from_mbps(40),
        rpg_gd: 6,
        rpg_min_dec_fac: 40,
        rpg_min_rate: Rate::from_mbps(3),
        rpg_max_rate: Some(Rate::from_mbps(900)),
        rp_jitter: 0.1,
        rpg_adaptive_k: Duration::from_micros(300),
        rpg_bs_max_cps: 6,
        rp_er_timeout: Duration::from_millis(500),
        rp_clamp_tgt_rate: ClampTgtRate::AfterTimeInc,
        rp_release: Release::LineRate,
    }
}

fn full_agent() -> AgentConfig {
    AgentConfig {
        line_rate: Rate::from_gbps(1),
        priority: 5,
        vid: 10,
        flow_key: FlowKeyMode::FiveTuple,
        mac: Some(mac(1)),
        queue_limit: Bytes::new(300_000),
        host_queue_limit: Bytes::new(2_000_000),
        cn_tag: false,
        max_flows: 100,
        flow_idle_timeout: Duration::from_secs(5),
        catch_up: Duration::from_micros(150),
        wire_overhead: false,
        rp_mode: RpMode::AdaptiveBc,
        rp: full_rp(),
        event_capacity: 1000,
        cnm_bridges: vec![mac(0x20)],
        departure_stamps: true,
    }
}

#[test]
fn every_rate_and_time_of_the_bridge_configuration_is_scaled() {
    let seen = check("bridge", &full_bridge());
    // ports[0].rate, lossless.nominal_rate, cp.er_min_rate; ports[0].delay,
    // ports[0].catch_up, fdb.ageing, lossless.watchdog, shaper.catch_up, cp.er_interval.
    assert_eq!((seen.rates, seen.times), (3, 6), "{seen:?}");
    let seen = check("cp", &full_cp());
    assert_eq!((seen.rates, seen.times), (1, 1), "{seen:?}");
}

#[test]
fn every_rate_and_time_of_the_agent_configuration_is_scaled() {
    let seen = check("agent", &full_agent());
    // line_rate, rpg_ai_rate, rpg_hai_rate, rpg_min_rate, rpg_max_rate; flow_idle_timeout,
    // catch_up, rpg_time_reset, rpg_adaptive_k, rp_er_timeout.
    assert_eq!((seen.rates, seen.times), (5, 5), "{seen:?}");
    let seen = check("rp", &full_rp());
    assert_eq!((seen.rates, seen.times), (4, 3), "{seen:?}");
}

#[test]
fn every_rate_and_time_of_the_scenario_settings_is_scaled() {
    // Struct literals without `..`: a new field does not compile until it is set here.
    let bridge = BridgeSpec {
        config: full_bridge(),
        line: LineGiven {
            wire_overhead: Some(true),
            fcs: Some(false),
            pad: Some(true),
            catch_up: Some(Duration::from_millis(3)),
        },
    };
    let seen = check("bridge_spec", &bridge);
    // The bridge configuration's 3 and 6, and line.catch_up.
    assert_eq!((seen.rates, seen.times), (3, 7), "{seen:?}");
    let agent = AgentSpec {
        config: full_agent(),
        given: AgentGiven {
            line_rate: Some(Rate::from_mbps(2500)),
            mac: Some(mac(4)),
            catch_up: Some(Duration::from_micros(400)),
            wire_overhead: Some(true),
        },
    };
    let seen = check("agent_spec", &agent);
    // The agent configuration's 5 and 5, and given.line_rate, given.catch_up.
    assert_eq!((seen.rates, seen.times), (6, 6), "{seen:?}");
}

#[test]
fn every_rate_and_time_of_the_patches_is_scaled() {
    // Struct literals without `..`: a new patch field does not compile until it is set here.
    let cp = CpPatch {
        placement: Some(Placement::Output),
        mode: Some(CpMode::Fqcn),
        cnpv: Some(vec![4]),
        cp_queue_set_point: Some(Bytes::new(20_000)),
        cp_feedback_weight: Some(8),
        cp_min_sample_base: Some(Bytes::new(3_000)),
        cp_sample_table: Some(SampleTable::FqcnPaper),
        cnm_priority: Some(5),
        cp_min_header_octets: Some(32),
        culprit: Some(Culprit::OccupancyRandom),
        max_flows: Some(64),
        fqcn_weights: Some(vec![FlowWeight {
            mac: Some(mac(7)),
            vid: Some(1),
            priority: Some(2),
            weight: 2,
        }]),
        er_interval: Some(Duration::from_millis(3)),
        er_a: Some(1.2),
        er_b: Some(1.4),
        er_c: Some(0.3),
        er_min_rate: Some(Rate::from_kbps(800)),
    };
    let seen = check("cp_patch", &cp);
    assert_eq!((seen.rates, seen.times), (1, 1), "{seen:?}");
    let rp = RpPatch {
        rp_mode: Some(RpMode::QcnBs),
        rpg_byte_reset: Some(Bytes::new(90_000)),
        rpg_time_reset: Some(Duration::from_millis(1)),
        rpg_threshold: Some(3),
        rpg_ai_rate: Some(Rate::from_mbps(10)),
        rpg_hai_rate: Some(Rate::from_mbps(100)),
        rpg_gd: Some(5),
        rpg_min_dec_fac: Some(30),
        rpg_min_rate: Some(Rate::from_mbps(2)),
        rpg_max_rate: Some(Rate::from_mbps(800)),
        rp_jitter: Some(0.05),
        rpg_adaptive_k: Some(Duration::from_micros(200)),
        rpg_bs_max_cps: Some(4),
        rp_er_timeout: Some(Duration::from_millis(200)),
        rp_clamp_tgt_rate: Some(ClampTgtRate::Always),
        rp_release: Some(Release::LineRate),
    };
    let seen = check("rp_patch", &rp);
    assert_eq!((seen.rates, seen.times), (4, 3), "{seen:?}");
}

/// The patch's `Scale` agrees with the configuration's: patching then scaling is scaling then
/// patching with the scaled patch.
#[test]
fn scaling_commutes_with_patching() {
    let cp_patch = CpPatch {
        er_interval: Some(Duration::from_millis(3)),
        er_min_rate: Some(Rate::from_kbps(800)),
        cp_feedback_weight: Some(8),
        ..CpPatch::default()
    };
    let mut a = full_cp();
    a.apply(&cp_patch);
    let mut b = full_cp().scale(S);
    b.apply(&cp_patch.scale(S));
    assert_eq!(a.scale(S), b);
    let rp_patch = RpPatch {
        rpg_ai_rate: Some(Rate::from_mbps(10)),
        rpg_time_reset: Some(Duration::from_millis(1)),
        rp_mode: Some(RpMode::Qcn),
        ..RpPatch::default()
    };
    let mut a = full_agent();
    a.apply(&rp_patch);
    let mut b = full_agent().scale(S);
    b.apply(&rp_patch.scale(S));
    assert_eq!(
        serde_json::to_value(a.scale(S)).unwrap(),
        serde_json::to_value(b).unwrap()
    );
}

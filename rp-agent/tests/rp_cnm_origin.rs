//! The optional CNM origin check (`cnm_bridges`): QCN authenticates nothing, so by default a
//! CNM naming any congestion point is acted on; with the check on, only CNMs whose CPID names
//! a listed bridge change a rate, and the rest are counted.
#![allow(clippy::unwrap_used)]

use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Instant, Rate};
use rp_agent::{Agent, AgentConfig};

mod support;
use support::cnm;

const HOST: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
/// The bridge on the path.
const SW: EthernetAddress = EthernetAddress([2, 0xee, 0, 0, 0, 1]);
/// Anyone else forging CNMs.
const FORGER: EthernetAddress = EthernetAddress([2, 0xba, 0xd0, 0, 0, 9]);

fn frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&PEER.0);
    f[6..12].copy_from_slice(&HOST.0);
    f[12..14].copy_from_slice(&[0x88, 0xb6]);
    f
}

/// An agent with one flow sent up once; returns it and the frame it sent.
fn agent(bridges: Vec<EthernetAddress>) -> (Agent, Vec<u8>, Instant) {
    let cfg = AgentConfig {
        line_rate: Rate::from_gbps(1),
        mac: Some(HOST),
        cnm_bridges: bridges,
        ..AgentConfig::default()
    };
    let mut a = Agent::new(cfg, Rng::new(3)).unwrap();
    let now = Instant::from_nanos(1_000);
    a.handle_host(now, &frame(1000)).unwrap();
    let mut up = Vec::new();
    a.poll_uplink(now, &mut |f| {
        up.push(f.to_vec());
        true
    });
    (a, up.remove(0), now)
}

#[test]
fn by_default_a_forged_cnm_is_acted_on() {
    // The behaviour the check exists for: any CPID slows the flow.
    let (mut a, sent, now) = agent(Vec::new());
    a.handle_uplink(now, &cnm(&sent, FORGER, 63));
    assert_eq!(a.stats().cnm_rx, 1);
    assert!(a.flows()[0].cr_bps < 600_000_000);
    assert_eq!(a.stats().cnm_unknown_cp, 0);
}

#[test]
fn with_the_check_on_only_listed_bridges_count() {
    let (mut a, sent, now) = agent(vec![SW]);
    let before = a.flows()[0].cr_bps;
    for _ in 0..100 {
        a.handle_uplink(now, &cnm(&sent, FORGER, 63));
    }
    let st = a.stats();
    assert_eq!(st.cnm_unknown_cp, 100);
    assert_eq!(st.cnm_rx, 0);
    assert_eq!(a.flows()[0].cr_bps, before, "a forged CNM changed the rate");
    assert_eq!(st.limiters_created, 0);
    let mut ignored = 0;
    a.drain_events(&mut |e| {
        if matches!(e, rp_agent::Event::CnmIgnored { .. }) {
            ignored += 1;
        }
    });
    assert_eq!(ignored, 100);
    // The listed bridge's CNM is acted on.
    a.handle_uplink(now, &cnm(&sent, SW, 63));
    assert_eq!(a.stats().cnm_rx, 1);
    assert!(a.flows()[0].cr_bps < 600_000_000);
}

#[test]
fn the_list_loads_from_toml_and_is_bounded() {
    let cfg: AgentConfig = toml::from_str("cnm_bridges = [\"02:ee:00:00:00:01\"]").unwrap();
    assert_eq!(cfg.cnm_bridges, vec![SW]);
    assert!(toml::from_str::<AgentConfig>("cnm_bridges = [\"nonsense\"]").is_err());
    let many = AgentConfig {
        cnm_bridges: vec![SW; 257],
        ..AgentConfig::default()
    };
    let e = many.validate().unwrap_err();
    assert_eq!(e.field, "cnm_bridges");
}

//! Reaction-point settings changed while the agent runs: live limiters keep their state and
//! take the new parameters, a mode of another kind releases them, refused changes leave the
//! agent as it was.
#![allow(clippy::unwrap_used)]

use cnm_proto::rng::Rng;
use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Instant, Rate};
use rp_agent::{
    Agent, AgentConfig, ConfigError, Event, RpChange, RpMode, RpParams, RpPatch, RpState,
};

mod support;
use support::cnm;

const HOST: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const SW: EthernetAddress = EthernetAddress([2, 0xee, 0, 0, 0, 1]);

fn frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&PEER.0);
    f[6..12].copy_from_slice(&HOST.0);
    f[12..14].copy_from_slice(&[0x88, 0xb6]);
    f
}

/// An agent at 1 Gb/s with one flow rate-limited by a CNM with QntzFb 63 (CR ≈ 508 Mb/s).
fn limited(mode: RpMode) -> (Agent, Instant) {
    let cfg = AgentConfig {
        line_rate: Rate::from_gbps(1),
        mac: Some(HOST),
        rp_mode: mode,
        wire_overhead: false,
        rp: RpParams {
            rp_jitter: 0.0,
            ..RpParams::default()
        },
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
    a.handle_uplink(now, &cnm(&up[0], SW, 63));
    let rate = a.flows()[0].cr_bps;
    assert!(rate < 600_000_000, "{rate}");
    a.drain_events(&mut |_| {});
    (a, now)
}

/// `ctl set rp` as the daemon reads it: `KEY=VALUE` operands → [`RpPatch`] (a key the patch
/// refuses is named as in the file) → [`Agent::apply_rp_patch`].
fn set(a: &mut Agent, now: Instant, operands: &[&str]) -> Result<RpChange, ConfigError> {
    let patch = daemon_kit::patch::parse_pairs::<RpPatch, _>(operands)
        .map_err(|e| RpPatch::key_error(&e.key, e.reason))?;
    a.apply_rp_patch(now, &patch)
}

#[test]
fn parameters_change_in_place_and_bounds_clamp_the_rate() {
    let (mut a, now) = limited(RpMode::Qcn);
    let before = a.flows()[0].clone();
    let t = now + Duration::from_micros(10);
    let change = set(&mut a, t, &["rpg_ai_rate=10mbit", "rpg_time_reset=1ms"]).unwrap();
    assert_eq!(change, RpChange::Updated { limiters: 1 });
    let after = a.flows()[0].clone();
    assert_eq!(after.cr_bps, before.cr_bps, "state kept");
    assert_eq!(after.state, RpState::Fr);
    assert_eq!(a.config().rp.rpg_ai_rate, Rate::from_mbps(10));
    // The timer period shrank from 15 ms to 1 ms: the next expiry is at most 1 ms away.
    assert!(a.poll_timeout().unwrap() <= t + Duration::from_millis(1));
    // A floor above CR lifts it; the pacer follows and the change is an event.
    set(&mut a, t, &["rpg_min_rate=700mbit"]).unwrap();
    assert_eq!(a.flows()[0].cr_bps, 700_000_000);
    let mut ev = Vec::new();
    a.drain_events(&mut |e| ev.push(*e));
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::RateChange {
                cr_bps: 700_000_000,
                ..
            }
        )),
        "{ev:?}"
    );
}

#[test]
fn a_mode_of_the_same_kind_keeps_the_limiter_another_kind_releases_it() {
    let (mut a, now) = limited(RpMode::Qcn);
    let cr = a.flows()[0].cr_bps;
    let c = set(&mut a, now, &["rp_mode=adaptive-bc"]).unwrap();
    assert_eq!(c, RpChange::Updated { limiters: 1 });
    assert_eq!(a.flows()[0].cr_bps, cr);
    assert_eq!(a.config().rp_mode, RpMode::AdaptiveBc);
    let c = set(&mut a, now, &["rp_mode=explicit-rate"]).unwrap();
    assert_eq!(c, RpChange::Released { limiters: 1 });
    assert_eq!(a.flows()[0].state, RpState::Released);
    assert_eq!(a.flows()[0].cr_bps, 1_000_000_000);
    assert_eq!(a.stats().limiters_released, 1);

    let (mut a, now) = limited(RpMode::QcnBs);
    let c = set(&mut a, now, &["rp_mode=adaptive-bc+qcn-bs", "rpg_gd=6"]).unwrap();
    assert_eq!(c, RpChange::Updated { limiters: 1 });
    assert_eq!(a.flows()[0].cps.len(), 1);
}

#[test]
fn refused_changes_name_the_key_and_change_nothing() {
    let (mut a, now) = limited(RpMode::Qcn);
    let cr = a.flows()[0].cr_bps;
    for (text, field) in [
        ("rp_mode=faster", "rp_mode"),
        ("rpg_gd=40", "rp.rpg_gd"),
        ("r_ai=1mbit", "rp.r_ai"),
        ("line_rate=10mbit", "line_rate"),
        ("rpg_min_dec_fac=half", "rp.rpg_min_dec_fac"),
    ] {
        let e = set(&mut a, now, &[text]).unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
    }
    assert_eq!(a.config().rp_mode, RpMode::Qcn);
    assert_eq!(a.config().rp.rpg_gd, 7);
    assert_eq!(a.flows()[0].cr_bps, cr);
}

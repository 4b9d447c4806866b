//! The bridge and agent settings of a scenario (`[switch.NAME.bridge]`, `[host.NAME.agent]`),
//! typed once, when the file is parsed.
//!
//! A setting table becomes the core's own configuration type ([`BridgeConfig`],
//! [`AgentConfig`]) with every key the file leaves out at the core's default. A few defaults,
//! though, are not the core's to choose but the world's:
//!
//! * a bridge's line emulation (`shaper.wire_overhead`, `fcs`, `pad`, `catch_up`): the
//!   simulator models a real Ethernet line (preamble, FCS and padding counted, the core's 1 ms
//!   catch-up), while a namespace lab runs on veth pairs, which carry a frame's own octets only,
//!   and on a busy machine whose daemons are sometimes descheduled for milliseconds (5 ms
//!   catch-up);
//! * an agent's `line_rate` (its uplink's rate, which in netns is scaled and moved by the
//!   link-rate events before the agent starts) and `mac` (the host's), and its pacing
//!   (`wire_overhead`, `catch_up`) for the same reasons as the bridge's line.
//!
//! So each spec keeps, beside the configuration, which of those keys the file gives
//! ([`LineGiven`], [`AgentGiven`]: one `Option` each, `None` = not in the file). A world turns
//! a spec into the configuration it runs with by supplying its own values for the keys the file
//! does not give ([`BridgeSpec::config_on`], [`AgentSpec::config_in`]).
//!
//! Time scaling (QCN-REFERENCE §5) is a [`Scale`] impl on each spec, which scales the
//! configuration and the given values alike; a world's defaults are its own (the veth line's
//! 5 ms catch-up is a property of the lab, not of the scenario, and is not scaled; the netns
//! agents' catch-up is the agent's default × S, at most those 5 ms).
//!
//! Nothing here validates a configuration against its ports or line rate: the simulator's
//! builder does that once the links are known, and the daemons do it on their files.

use cnm_proto::wire::EthernetAddress;
use cnm_proto::{Duration, Rate, Scale};
use cp_switch::config::ShaperConfig;
use cp_switch::BridgeConfig;
use rp_agent::AgentConfig;

/// A setting table that is not a configuration of its kind: the key (relative to the table,
/// empty for the table as a whole) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The key under the table (`ports`), or empty.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// `[switch.NAME.bridge]`, typed.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct BridgeSpec {
    /// The file's settings over the core's defaults. No ports (the links give them) and no
    /// static FDB entries of the graph (the worlds add those); the shaper's keys the file
    /// leaves out are at the core's defaults here, and at the world's in
    /// [`BridgeSpec::config_on`].
    pub config: BridgeConfig,
    /// The line-emulation settings the file gives.
    pub line: LineGiven,
}

/// The line-emulation settings (`[shaper]`, [`ShaperConfig`]) a file gives; `None` = left to
/// the world.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LineGiven {
    /// `shaper.wire_overhead`.
    pub wire_overhead: Option<bool>,
    /// `shaper.fcs`.
    pub fcs: Option<bool>,
    /// `shaper.pad`.
    pub pad: Option<bool>,
    /// `shaper.catch_up`.
    pub catch_up: Option<Duration>,
}

impl LineGiven {
    /// Each setting given here, `world`'s for the others.
    pub fn over(&self, world: &ShaperConfig) -> ShaperConfig {
        ShaperConfig {
            wire_overhead: self.wire_overhead.unwrap_or(world.wire_overhead),
            fcs: self.fcs.unwrap_or(world.fcs),
            pad: self.pad.unwrap_or(world.pad),
            catch_up: self.catch_up.unwrap_or(world.catch_up),
        }
    }
}

/// Time scaling: the catch-up, as [`ShaperConfig`]'s.
impl Scale for LineGiven {
    fn scale(&self, s: f64) -> Self {
        LineGiven {
            catch_up: self.catch_up.scale(s),
            ..*self
        }
    }
}

/// Time scaling: the configuration ([`BridgeConfig`]'s `Scale`) and the given line settings.
impl Scale for BridgeSpec {
    fn scale(&self, s: f64) -> Self {
        BridgeSpec {
            config: self.config.scale(s),
            line: self.line.scale(s),
        }
    }
}

/// The boolean at `key` of `t`, if it is one (the typed parse has checked the types).
fn given_bool(t: Option<&toml::Table>, key: &str) -> Option<bool> {
    t.and_then(|t| t.get(key)).and_then(toml::Value::as_bool)
}

impl BridgeSpec {
    /// Types a `[switch.NAME.bridge]` table. `ports` is refused (the links give the ports).
    pub fn from_table(t: &toml::Table) -> Result<BridgeSpec, SettingsError> {
        if t.contains_key("ports") {
            return Err(SettingsError {
                key: "ports".into(),
                reason: "ports come from [[link]] entries".into(),
            });
        }
        let config: BridgeConfig =
            t.clone()
                .try_into()
                .map_err(|e: toml::de::Error| SettingsError {
                    key: String::new(),
                    reason: e.message().to_string(),
                })?;
        let shaper = t.get("shaper").and_then(toml::Value::as_table);
        let given = |key: &str| shaper.is_some_and(|s| s.contains_key(key));
        let line = LineGiven {
            wire_overhead: given_bool(shaper, "wire_overhead"),
            fcs: given_bool(shaper, "fcs"),
            pad: given_bool(shaper, "pad"),
            catch_up: given("catch_up").then_some(config.shaper.catch_up),
        };
        Ok(BridgeSpec { config, line })
    }

    /// The bridge's settings in a world whose line emulation is `line` where the file says
    /// nothing.
    pub fn config_on(&self, line: &ShaperConfig) -> BridgeConfig {
        BridgeConfig {
            shaper: self.line.over(line),
            ..self.config.clone()
        }
    }
}

/// `[host.NAME.agent]`, typed.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AgentSpec {
    /// The file's settings over the core's defaults; the world's keys ([`AgentGiven`]) the file
    /// leaves out are at the core's defaults here, and at the world's in
    /// [`AgentSpec::config_in`].
    pub config: AgentConfig,
    /// The settings whose defaults are the world's, as the file gives them.
    pub given: AgentGiven,
}

/// The agent settings whose defaults are the world's, one `Option` each: as a file gives them
/// (`None` = not given) or as a world supplies them (`None` = the core's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct AgentGiven {
    /// `line_rate` (the world's: the host's uplink rate).
    pub line_rate: Option<Rate>,
    /// `mac` (the world's: the host's MAC).
    pub mac: Option<EthernetAddress>,
    /// `catch_up`.
    pub catch_up: Option<Duration>,
    /// `wire_overhead`.
    pub wire_overhead: Option<bool>,
}

impl AgentGiven {
    /// Each setting of `self`, `world`'s for the others.
    pub fn or(self, world: AgentGiven) -> AgentGiven {
        AgentGiven {
            line_rate: self.line_rate.or(world.line_rate),
            mac: self.mac.or(world.mac),
            catch_up: self.catch_up.or(world.catch_up),
            wire_overhead: self.wire_overhead.or(world.wire_overhead),
        }
    }

    /// Writes every setting that is `Some` into `cfg`.
    pub fn apply(&self, cfg: &mut AgentConfig) {
        if let Some(r) = self.line_rate {
            cfg.line_rate = r;
        }
        if let Some(m) = self.mac {
            cfg.mac = Some(m);
        }
        if let Some(c) = self.catch_up {
            cfg.catch_up = c;
        }
        if let Some(w) = self.wire_overhead {
            cfg.wire_overhead = w;
        }
    }
}

/// Time scaling: the line rate ÷ S and the catch-up × S, as [`AgentConfig`]'s.
impl Scale for AgentGiven {
    fn scale(&self, s: f64) -> Self {
        AgentGiven {
            line_rate: self.line_rate.scale(s),
            catch_up: self.catch_up.scale(s),
            ..*self
        }
    }
}

/// Time scaling: the configuration ([`AgentConfig`]'s `Scale`) and the given settings.
impl Scale for AgentSpec {
    fn scale(&self, s: f64) -> Self {
        AgentSpec {
            config: self.config.scale(s),
            given: self.given.scale(s),
        }
    }
}

impl AgentSpec {
    /// Types a `[host.NAME.agent]` table.
    pub fn from_table(t: &toml::Table) -> Result<AgentSpec, SettingsError> {
        let config: AgentConfig =
            t.clone()
                .try_into()
                .map_err(|e: toml::de::Error| SettingsError {
                    key: String::new(),
                    reason: e.message().to_string(),
                })?;
        let given = AgentGiven {
            line_rate: t.contains_key("line_rate").then_some(config.line_rate),
            mac: config.mac.filter(|_| t.contains_key("mac")),
            catch_up: t.contains_key("catch_up").then_some(config.catch_up),
            wire_overhead: given_bool(Some(t), "wire_overhead"),
        };
        Ok(AgentSpec { config, given })
    }

    /// The agent's settings in a world that supplies `world` where the file says nothing.
    pub fn config_in(&self, world: AgentGiven) -> AgentConfig {
        let mut cfg = self.config.clone();
        self.given.or(world).apply(&mut cfg);
        cfg
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn a_bridge_remembers_which_line_settings_the_file_gives() {
        let b = BridgeSpec::from_table(&table(
            "shaper = { fcs = true, catch_up = \"2ms\" }\ncp = { cp_queue_set_point = \"33KB\" }",
        ))
        .unwrap();
        assert_eq!(b.config.cp.cp_queue_set_point.get(), 33_000);
        assert_eq!(
            b.line,
            LineGiven {
                wire_overhead: None,
                fcs: Some(true),
                pad: None,
                catch_up: Some(Duration::from_millis(2)),
            }
        );
        let veth = ShaperConfig {
            wire_overhead: false,
            fcs: false,
            pad: false,
            catch_up: Duration::from_millis(5),
        };
        let on = b.config_on(&veth).shaper;
        assert!(!on.wire_overhead && on.fcs && !on.pad);
        assert_eq!(on.catch_up, Duration::from_millis(2));
        // Scaled, the given catch-up follows; the world's default does not.
        let scaled = b.scale(4.0).config_on(&veth).shaper;
        assert_eq!(scaled.catch_up, Duration::from_millis(8));
        let none = BridgeSpec::from_table(&toml::Table::new()).unwrap();
        assert_eq!(
            none.scale(4.0).config_on(&veth).shaper.catch_up,
            veth.catch_up
        );
        // In a world with the core's line, the spec is the configuration.
        let core = b.config_on(&ShaperConfig::default()).shaper;
        assert!(core.wire_overhead && core.fcs && core.pad);
    }

    #[test]
    fn a_bridge_table_with_ports_or_unknown_keys_is_refused() {
        let e = BridgeSpec::from_table(&table("ports = []")).unwrap_err();
        assert_eq!(e.key, "ports");
        let e = BridgeSpec::from_table(&table("bogus = 1")).unwrap_err();
        assert_eq!(e.key, "");
        assert!(e.reason.contains("bogus"), "{}", e.reason);
    }

    #[test]
    fn an_agent_takes_the_worlds_values_where_the_file_is_silent() {
        let a = AgentSpec::from_table(&table(
            "line_rate = \"2gbit\"\nrp_mode = \"qcn-bs\"\nrp = { rpg_ai_rate = \"8mbit\" }",
        ))
        .unwrap();
        assert_eq!(a.given.line_rate, Some(Rate::from_gbps(2)));
        assert_eq!(
            (a.given.mac, a.given.catch_up, a.given.wire_overhead),
            (None, None, None)
        );
        let mac = EthernetAddress([2, 0, 0, 0, 1, 7]);
        let world = AgentGiven {
            line_rate: Some(Rate::from_gbps(10)),
            mac: Some(mac),
            catch_up: Some(Duration::from_millis(5)),
            wire_overhead: Some(false),
        };
        let cfg = a.config_in(world);
        assert_eq!(
            cfg.line_rate,
            Rate::from_gbps(2),
            "the file's line rate wins"
        );
        assert_eq!(cfg.mac, Some(mac));
        assert_eq!(cfg.catch_up, Duration::from_millis(5));
        assert!(!cfg.wire_overhead);
        assert_eq!(cfg.rp.rpg_ai_rate, Rate::from_mbps(8));
        assert_eq!(cfg.rp_mode, rp_agent::RpMode::QcnBs);
        // A world that supplies nothing leaves the core's defaults.
        let bare = AgentSpec::default().config_in(AgentGiven::default());
        assert_eq!(bare.line_rate, AgentConfig::default().line_rate);
        assert_eq!(bare.mac, None);
        // Scaled: the given line rate ÷ S.
        assert_eq!(
            a.scale(4.0).config_in(world).line_rate,
            Rate::from_mbps(500)
        );
    }

    #[test]
    fn an_agent_table_with_a_wrong_value_is_refused() {
        let e = AgentSpec::from_table(&table("rp_mode = \"fastest\"")).unwrap_err();
        assert_eq!(e.key, "");
        assert!(e.reason.contains("fastest"), "{}", e.reason);
        let mac = AgentSpec::from_table(&table("mac = \"02:00:00:00:01:09\"")).unwrap();
        assert_eq!(mac.given.mac, Some(EthernetAddress([2, 0, 0, 0, 1, 9])));
    }
}

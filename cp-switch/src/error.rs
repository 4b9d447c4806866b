//! What the configuration types share with the congestion points: the priority count and the
//! error of an invalid value. A leaf of the crate, so that [`crate::config`] may hold the
//! congestion points' configuration without the two importing each other.

/// Number of priorities (IEEE 802.1Q-2018 clause 6.9.3: the 3-bit PCP gives 8 priorities).
pub const NUM_PRIORITIES: usize = 8;

/// An invalid configuration value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
pub struct ConfigError {
    /// The field, as a TOML path (`ports[2].rate`, `lossless.qhigh`).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

impl ConfigError {
    /// An error about `field` (a TOML path).
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same error with its field under `section` (`cp` + `cnpv[0]` → `cp.cnpv[0]`).
    pub fn within(self, section: &str) -> Self {
        ConfigError {
            field: format!("{section}.{}", self.field),
            reason: self.reason,
        }
    }
}

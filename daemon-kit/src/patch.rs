//! `KEY=VALUE` operands → a typed configuration patch: the one edge parser of run-time
//! parameter changes (`cp-switch ctl set cp ...`, `rp-agent ctl set rp ...`, the testbed's
//! timed events).
//!
//! # How a value is read
//! A value is read as a TOML value when it parses as one (`4`, `1.5`, `true`, `[3, 5]`,
//! `"x y"`) and as a bare string otherwise (`20KB`, `fqcn`, `3ms`, `10mbit`): the same reading
//! as a scenario's `--set` overrides, so one spelling works on a command line, in a `ctl`
//! command and in a configuration file.
//!
//! # How a patch is built
//! The patch type `P` is any `serde::Deserialize` struct of `Option`s with
//! `#[serde(deny_unknown_fields)]` (`cp_switch::cp::CpPatch`, `rp_agent::config::RpPatch`).
//! Each key is first deserialised on its own, so an unknown key or a value of the wrong kind is
//! reported as a [`PatchError`] naming that key (with serde's message: for an unknown key it
//! lists the keys the patch knows); then all the keys together make the patch. A key given
//! twice keeps its last value, as in a TOML table built key by key.
//!
//! Nothing here knows a particular patch: the cores own their fields, their validation and
//! the mapping of a key to a configuration path (`cp.KEY`, `rp.KEY`).

use serde::de::DeserializeOwned;

/// A `KEY=VALUE` operand that could not be read, or a key the patch refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError {
    /// The key as typed (empty when the operand has none).
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

impl PatchError {
    fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        PatchError {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.key, self.reason)
        }
    }
}

impl std::error::Error for PatchError {}

/// Splits `KEY=VALUE` operands into pairs, in the order given. An operand without `=`, or
/// with an empty key or value, is refused naming the operand.
pub fn split<S: AsRef<str>>(operands: &[S]) -> Result<Vec<(String, String)>, PatchError> {
    if operands.is_empty() {
        return Err(PatchError::new("", "expected KEY=VALUE"));
    }
    operands
        .iter()
        .map(|o| {
            let o = o.as_ref();
            match o.split_once('=') {
                Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                    Ok((k.trim().to_string(), v.trim().to_string()))
                }
                Some((k, _)) if !k.is_empty() => Err(PatchError::new(k, "empty value")),
                _ => Err(PatchError::new("", format!("{o:?}: expected KEY=VALUE"))),
            }
        })
        .collect()
}

/// One typed value (see the module documentation).
pub fn value(text: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

/// The pairs as a table of typed values (what a `ctl set` answer echoes as `set`).
pub fn table(pairs: &[(String, String)]) -> toml::Table {
    pairs.iter().map(|(k, v)| (k.clone(), value(v))).collect()
}

/// A patch from `KEY=VALUE` operands (`["cp_queue_set_point=20KB", "mode=fqcn"]`).
pub fn parse_pairs<P: DeserializeOwned, S: AsRef<str>>(operands: &[S]) -> Result<P, PatchError> {
    from_pairs(&split(operands)?)
}

/// A patch from pairs already split (a `ctl` command's `KEY=VALUE` or `KEY VALUE` operands).
pub fn from_pairs<P: DeserializeOwned>(pairs: &[(String, String)]) -> Result<P, PatchError> {
    from_table(&table(pairs))
}

/// A patch from a table of typed values (a scenario's `set = { ... }`). Each key is checked on
/// its own first, so the error names it.
pub fn from_table<P: DeserializeOwned>(set: &toml::Table) -> Result<P, PatchError> {
    if set.is_empty() {
        return Err(PatchError::new("", "nothing to change"));
    }
    for (k, v) in set {
        let mut one = toml::Table::new();
        one.insert(k.clone(), v.clone());
        one.try_into::<P>()
            .map_err(|e: toml::de::Error| PatchError::new(k.as_str(), e.message()))?;
    }
    set.clone().try_into::<P>().map_err(|e: toml::de::Error| {
        // Every key passed alone: what remains is two spellings of one field.
        let key = set.keys().next_back().cloned().unwrap_or_default();
        PatchError::new(key, e.message())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Demo {
        #[serde(default)]
        weight: Option<u32>,
        #[serde(default)]
        mode: Option<String>,
        #[serde(default)]
        cnpv: Option<Vec<u8>>,
        #[serde(default, alias = "x.ratio")]
        ratio: Option<f64>,
    }

    #[test]
    fn values_are_read_as_toml_or_as_strings() {
        assert_eq!(value("4"), toml::Value::Integer(4));
        assert_eq!(value("1.5"), toml::Value::Float(1.5));
        assert_eq!(value("true"), toml::Value::Boolean(true));
        assert_eq!(value("20KB"), toml::Value::String("20KB".into()));
        assert_eq!(
            value("adaptive-bc"),
            toml::Value::String("adaptive-bc".into())
        );
        assert_eq!(value("\"x y\""), toml::Value::String("x y".into()));
        assert_eq!(
            value("[3,5]"),
            toml::Value::Array(vec![toml::Value::Integer(3), toml::Value::Integer(5)])
        );
    }

    #[test]
    fn operands_make_a_patch() {
        let p: Demo = parse_pairs(&["weight=4", "mode=fqcn", "cnpv=[3,5]", "x.ratio=0.5"]).unwrap();
        assert_eq!(
            p,
            Demo {
                weight: Some(4),
                mode: Some("fqcn".into()),
                cnpv: Some(vec![3, 5]),
                ratio: Some(0.5),
            }
        );
        let p: Demo = parse_pairs(&["weight=4", "weight=8"]).unwrap();
        assert_eq!(p.weight, Some(8), "the last value of a key wins");
    }

    #[test]
    fn errors_name_the_key() {
        let e = parse_pairs::<Demo, _>(&["weight=4", "bogus=1"]).unwrap_err();
        assert_eq!(e.key, "bogus");
        assert!(e.reason.contains("weight"), "{e}");
        let e = parse_pairs::<Demo, _>(&["weight=heavy"]).unwrap_err();
        assert_eq!(e.key, "weight");
        assert!(e.to_string().starts_with("weight: "), "{e}");
        let e = parse_pairs::<Demo, _>(&["weight=-1"]).unwrap_err();
        assert_eq!(e.key, "weight");
        let e = parse_pairs::<Demo, _>(&["ratio=1", "x.ratio=2"]).unwrap_err();
        assert_eq!(e.key, "x.ratio");
        assert!(parse_pairs::<Demo, &str>(&[]).is_err());
        assert_eq!(
            parse_pairs::<Demo, _>(&["weight="]).unwrap_err().key,
            "weight"
        );
        assert!(parse_pairs::<Demo, _>(&["=1"]).unwrap_err().key.is_empty());
        assert!(parse_pairs::<Demo, _>(&["weight"]).is_err());
        assert!(from_table::<Demo>(&toml::Table::new()).is_err());
    }
}

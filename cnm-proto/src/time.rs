//! Time and units shared by every crate of the dataplane.
//!
//! The cores never read a clock (ARCHITECTURE.md, rule 1): time enters as an [`Instant`] chosen by
//! the caller — the daemons read `CLOCK_MONOTONIC`, the simulator advances a virtual clock. All
//! quantities are integers so that the simulator is bit-for-bit deterministic:
//!
//! * [`Instant`] and [`Duration`]: nanoseconds in a `u64` (584 years of range).
//! * [`Rate`]: bits per second in a `u64`.
//! * [`Bytes`]: octets in a `u64`.
//!
//! Text forms follow the Linux `tc` conventions, which network users already type:
//! `100mbit`, `1gbit`, `10gbit`, `500kbit` or plain bit/s for rates (`tc-bandwidth`(8); `tc`
//! reads `bps`, `kbps`, `mbps`, `gbps`, `tbps` and `MB/s` as *octets* per second, which people
//! often mean as bits, so those spellings are refused with both readings spelled out rather
//! than guessed); `25us`, `15ms`, `2s` for
//! durations; `150KB`, `64KiB`, plain octets for sizes. Decimal SI prefixes (k = 1000) are used
//! for rates and for `KB`/`MB` sizes, as in the QCN papers ("150 KB" = 150 000 octets); binary
//! prefixes need the explicit `KiB`/`MiB` spelling.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::str::FromStr;

const NS_PER_SEC: u64 = 1_000_000_000;

/// An error from parsing a rate, a duration or a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The text is empty.
    #[error("empty value")]
    Empty,
    /// The numeric part is not a non-negative decimal number.
    #[error("invalid number in {0:?}")]
    Number(String),
    /// The unit suffix is not one this parser knows.
    #[error("unknown unit {unit:?} in {text:?} (expected one of {expected})")]
    Unit {
        /// The offending text.
        text: String,
        /// The suffix that was not recognised.
        unit: String,
        /// The accepted suffixes.
        expected: &'static str,
    },
    /// The value does not fit in 64 bits of the base unit.
    #[error("value out of range: {0:?}")]
    Range(String),
    /// A rate unit that `tc` reads as octets per second (`mbps` = megabytes/s) but people
    /// often mean as bits: refused rather than guessed.
    #[error(
        "ambiguous rate unit {unit:?} in {text:?}: tc reads it as {bytes_meaning}; write \
         {as_bits} for that many bits per second, or {as_bytes} for {bytes_meaning}"
    )]
    AmbiguousRate {
        /// The offending text.
        text: String,
        /// Its unit.
        unit: String,
        /// What `tc` makes of the unit (`megabytes per second`).
        bytes_meaning: &'static str,
        /// The same number in bits (`100mbit`).
        as_bits: String,
        /// The bit-rate spelling of the number read as octets (`800mbit`).
        as_bytes: String,
    },
}

/// `number` (a decimal text) times `factor`, as short decimal text (`"1.5"` × 8 = `"12"`).
fn trim_decimal(number: &str, factor: u64) -> String {
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let digits = format!("{int_part}{frac_part}");
    let value = digits.parse::<u128>().unwrap_or(0) * u128::from(factor);
    let scale = 10u128.pow(frac_part.len().min(30) as u32);
    let (whole, frac) = (value / scale, value % scale);
    if frac == 0 {
        whole.to_string()
    } else {
        let f = format!("{frac:0width$}", width = frac_part.len());
        format!("{whole}.{}", f.trim_end_matches('0'))
    }
}

/// Splits `"12.5mbit"` into `("12.5", "mbit")` and multiplies the decimal number by `scale`,
/// rounding to the nearest integer. Only ASCII digits and one `.` are accepted.
fn parse_scaled(text: &str, number: &str, scale: u64) -> Result<u64, UnitError> {
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !digits_ok(int_part)
        || !digits_ok(frac_part)
    {
        return Err(UnitError::Number(text.to_string()));
    }
    let range = || UnitError::Range(text.to_string());
    let int: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| range())?
    };
    let mut value = int.checked_mul(u128::from(scale)).ok_or_else(range)?;
    // Fractional part: at most 18 significant digits are kept, which is finer than 1 unit for any
    // scale used here.
    let frac = &frac_part[..frac_part.len().min(18)];
    if !frac.is_empty() {
        let f: u128 = frac.parse().map_err(|_| range())?;
        let denom = 10u128.pow(frac.len() as u32);
        value += (f * u128::from(scale) + denom / 2) / denom;
    }
    u64::try_from(value).map_err(|_| range())
}

/// Splits text into the numeric prefix and the (lower-cased, trimmed) unit suffix.
fn split_unit(text: &str) -> Result<(&str, String), UnitError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(UnitError::Empty);
    }
    let at = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    Ok((&t[..at], t[at..].trim().to_string()))
}

/// A point in time, in nanoseconds since an arbitrary epoch (boot for the daemons, 0 for the
/// simulator).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// The largest representable instant ("never").
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `ns` nanoseconds after the epoch.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time elapsed since `earlier`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// `self + d`, saturating at [`Instant::MAX`].
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
    /// Seconds since the epoch as a float (for reports and plots only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_SEC as f64
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_sub(rhs.0))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}s", self.0 / NS_PER_SEC, self.0 % NS_PER_SEC)
    }
}

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Duration {
    /// Zero length.
    pub const ZERO: Duration = Duration(0);
    /// The largest representable duration.
    pub const MAX: Duration = Duration(u64::MAX);

    /// `ns` nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    /// `us` microseconds (saturating).
    pub const fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(1_000))
    }
    /// `ms` milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    /// `s` seconds (saturating).
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(NS_PER_SEC))
    }
    /// A duration from float seconds (negative and NaN give zero; saturating).
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_nan() || s <= 0.0 {
            Duration(0)
        } else {
            let ns = s * NS_PER_SEC as f64;
            Duration(if ns >= u64::MAX as f64 {
                u64::MAX
            } else {
                ns.round() as u64
            })
        }
    }
    /// Nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Whole microseconds.
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    /// Whole milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// Seconds as a float (for reports only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_SEC as f64
    }
    /// `self * k`, saturating.
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
    /// `self - other`, or zero.
    pub const fn saturating_sub(self, other: Duration) -> Duration {
        Duration(self.0.saturating_sub(other.0))
    }
    /// Converts to the standard library's duration (for sleeping and I/O timeouts).
    pub const fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_add(rhs.0))
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        self.saturating_sub(rhs)
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

impl FromStr for Duration {
    type Err = UnitError;
    /// Parses `25us`, `15ms`, `2s`, `100ns`, `1.5ms`, `1m`/`1min`; a plain number is seconds.
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let (num, unit) = split_unit(s)?;
        let scale = match unit.as_str() {
            "ns" => 1,
            "us" | "µs" | "usec" => 1_000,
            "ms" | "msec" => 1_000_000,
            "" | "s" | "sec" | "secs" => NS_PER_SEC,
            "m" | "min" => 60 * NS_PER_SEC,
            _ => {
                return Err(UnitError::Unit {
                    text: s.to_string(),
                    unit,
                    expected: "ns, us, ms, s, min",
                })
            }
        };
        parse_scaled(s, num, scale).map(Duration)
    }
}

impl fmt::Display for Duration {
    /// Prints the largest unit that keeps the value exact (`25us`, `15ms`, `1500ns`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns == 0 {
            return write!(f, "0s");
        }
        for (div, unit) in [(NS_PER_SEC, "s"), (1_000_000, "ms"), (1_000, "us")] {
            if ns % div == 0 {
                return write!(f, "{}{}", ns / div, unit);
            }
        }
        write!(f, "{ns}ns")
    }
}

/// A data rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    /// Zero bits per second.
    pub const ZERO: Rate = Rate(0);

    /// `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Self {
        Rate(bps)
    }
    /// `k` kilobits (10^3) per second.
    pub const fn from_kbps(k: u64) -> Self {
        Rate(k.saturating_mul(1_000))
    }
    /// `m` megabits (10^6) per second.
    pub const fn from_mbps(m: u64) -> Self {
        Rate(m.saturating_mul(1_000_000))
    }
    /// `g` gigabits (10^9) per second.
    pub const fn from_gbps(g: u64) -> Self {
        Rate(g.saturating_mul(1_000_000_000))
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }
    /// Bits per second as a float (for reports and the rate arithmetic of the algorithms).
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
    /// A rate from float bit/s (negative and NaN give zero; saturating).
    pub fn from_f64(bps: f64) -> Self {
        if bps.is_nan() || bps <= 0.0 {
            Rate(0)
        } else if bps >= u64::MAX as f64 {
            Rate(u64::MAX)
        } else {
            Rate(bps.round() as u64)
        }
    }
    /// Time needed to serialise `bytes` octets at this rate, rounded up to the next nanosecond.
    /// A zero rate never finishes: [`Duration::MAX`].
    pub fn tx_time(self, bytes: Bytes) -> Duration {
        if self.0 == 0 {
            return Duration::MAX;
        }
        let bits = u128::from(bytes.0) * 8 * u128::from(NS_PER_SEC);
        let ns = bits.div_ceil(u128::from(self.0));
        Duration(u64::try_from(ns).unwrap_or(u64::MAX))
    }
    /// Octets that this rate carries in `d` (rounded down).
    pub fn bytes_in(self, d: Duration) -> Bytes {
        let b = u128::from(self.0) * u128::from(d.0) / (8 * u128::from(NS_PER_SEC));
        Bytes(u64::try_from(b).unwrap_or(u64::MAX))
    }
    /// The rate that carries `bytes` in `d` (zero when `d` is zero).
    pub fn from_bytes_per(bytes: Bytes, d: Duration) -> Rate {
        if d.0 == 0 {
            return Rate(0);
        }
        let r = u128::from(bytes.0) * 8 * u128::from(NS_PER_SEC) / u128::from(d.0);
        Rate(u64::try_from(r).unwrap_or(u64::MAX))
    }
    /// The smaller of two rates.
    pub fn min(self, other: Rate) -> Rate {
        Rate(self.0.min(other.0))
    }
    /// The larger of two rates.
    pub fn max(self, other: Rate) -> Rate {
        Rate(self.0.max(other.0))
    }
}

impl Add for Rate {
    type Output = Rate;
    fn add(self, rhs: Rate) -> Rate {
        Rate(self.0.saturating_add(rhs.0))
    }
}
impl Sub for Rate {
    type Output = Rate;
    fn sub(self, rhs: Rate) -> Rate {
        Rate(self.0.saturating_sub(rhs.0))
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    /// Parses `tc`-style rates: `500kbit`, `100mbit`, `1gbit`, `10gbit`, `1.5gbit`, `10Gb/s`, or
    /// a plain number of bit/s; SI prefixes are decimal. The spellings `tc` reads as octets per
    /// second (`bps`, `kbps`, `mbps`, `gbps`, `tbps`, `B/s`, `MB/s`, ...) are refused with
    /// [`UnitError::AmbiguousRate`], which names both bit-rate spellings.
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let (num, unit) = split_unit(s)?;
        let lower = unit.to_ascii_lowercase();
        let prefix = |p: &str| match p {
            "" => Some(("", "bytes per second")),
            "k" => Some(("k", "kilobytes per second")),
            "m" => Some(("m", "megabytes per second")),
            "g" => Some(("g", "gigabytes per second")),
            "t" => Some(("t", "terabytes per second")),
            _ => None,
        };
        // tc's octet units: `...bps` in any case, and `...B/s` with a capital B.
        let octet_prefix = lower
            .strip_suffix("bps")
            .or_else(|| unit.strip_suffix("B/s").map(|_| &lower[..lower.len() - 3]));
        if let Some((p, meaning)) = octet_prefix.and_then(prefix) {
            let bits = parse_scaled(s, num, 1)?;
            let as_bytes = Rate(bits.saturating_mul(8)).to_string();
            let as_bytes = match p {
                // `Display` picks the unit; the number is in `p` units, so rescale by hand.
                "" => as_bytes,
                _ => format!("{}{p}bit", trim_decimal(num, 8)),
            };
            return Err(UnitError::AmbiguousRate {
                text: s.to_string(),
                unit,
                bytes_meaning: meaning,
                as_bits: format!("{num}{p}bit"),
                as_bytes,
            });
        }
        let scale = match lower.as_str() {
            "" | "bit" | "b/s" => 1,
            "k" | "kbit" | "kb/s" => 1_000,
            "m" | "mbit" | "mb/s" => 1_000_000,
            "g" | "gbit" | "gb/s" => 1_000_000_000,
            "t" | "tbit" | "tb/s" => 1_000_000_000_000,
            _ => {
                return Err(UnitError::Unit {
                    text: s.to_string(),
                    unit,
                    expected: "bit, kbit, mbit, gbit, tbit (or b/s, kb/s, Mb/s, Gb/s, Tb/s)",
                })
            }
        };
        parse_scaled(s, num, scale).map(Rate)
    }
}

impl fmt::Display for Rate {
    /// Prints `tc` style: `10gbit`, `100mbit`, `1500kbit`, `12345bit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (div, unit) in [
            (1_000_000_000_000, "tbit"),
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
        ] {
            if b != 0 && b % div == 0 {
                return write!(f, "{}{}", b / div, unit);
            }
        }
        write!(f, "{b}bit")
    }
}

/// A quantity of octets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(u64);

impl Bytes {
    /// Zero octets.
    pub const ZERO: Bytes = Bytes(0);

    /// `n` octets.
    pub const fn new(n: u64) -> Self {
        Bytes(n)
    }
    /// The number of octets.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// `self - other`, or zero.
    pub const fn saturating_sub(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_sub(other.0))
    }
}

impl From<usize> for Bytes {
    fn from(n: usize) -> Self {
        Bytes(n as u64)
    }
}
impl Add for Bytes {
    type Output = Bytes;
    fn add(self, rhs: Bytes) -> Bytes {
        Bytes(self.0.saturating_add(rhs.0))
    }
}
impl AddAssign for Bytes {
    fn add_assign(&mut self, rhs: Bytes) {
        *self = *self + rhs;
    }
}
impl Sub for Bytes {
    type Output = Bytes;
    fn sub(self, rhs: Bytes) -> Bytes {
        self.saturating_sub(rhs)
    }
}
impl SubAssign for Bytes {
    fn sub_assign(&mut self, rhs: Bytes) {
        *self = *self - rhs;
    }
}

impl FromStr for Bytes {
    type Err = UnitError;
    /// Parses `150KB`, `150k`, `1.5MB` (decimal, as in the QCN papers), `64KiB`, `1MiB` (binary),
    /// `1500B` or a plain number of octets.
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let (num, unit) = split_unit(s)?;
        let scale = match unit.to_ascii_lowercase().as_str() {
            "" | "b" | "byte" | "bytes" => 1,
            "k" | "kb" => 1_000,
            "m" | "mb" => 1_000_000,
            "g" | "gb" => 1_000_000_000,
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            _ => {
                return Err(UnitError::Unit {
                    text: s.to_string(),
                    unit,
                    expected: "B, KB, MB, GB, KiB, MiB, GiB",
                })
            }
        };
        parse_scaled(s, num, scale).map(Bytes)
    }
}

impl fmt::Display for Bytes {
    /// Prints `150KB`, `2MB` when exact, else plain octets with `B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (div, unit) in [(1_000_000_000, "GB"), (1_000_000, "MB"), (1_000, "KB")] {
            if b != 0 && b % div == 0 {
                return write!(f, "{}{}", b / div, unit);
            }
        }
        write!(f, "{b}B")
    }
}

/// Serde support: each unit (de)serialises as its text form (`"10gbit"`, `"25us"`, `"150KB"`) and
/// also accepts a plain integer in the base unit, so TOML files can say either.
mod serde_impls {
    use super::{Bytes, Duration, Rate};
    use serde::de::{self, Visitor};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::fmt;
    use std::marker::PhantomData;
    use std::str::FromStr;

    struct UnitVisitor<T>(PhantomData<T>, &'static str);

    impl<T> Visitor<'_> for UnitVisitor<T>
    where
        T: FromStr<Err = super::UnitError> + From<u64Wrap>,
    {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.1)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            T::from_str(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            Ok(T::from(u64Wrap(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            u64::try_from(v)
                .map(|v| T::from(u64Wrap(v)))
                .map_err(|_| E::custom("negative value"))
        }
    }

    #[allow(non_camel_case_types)]
    #[derive(Debug)]
    pub struct u64Wrap(u64);

    macro_rules! unit_serde {
        ($t:ident, $ctor:expr, $what:literal) => {
            impl From<u64Wrap> for $t {
                fn from(v: u64Wrap) -> Self {
                    $ctor(v.0)
                }
            }
            impl Serialize for $t {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.collect_str(self)
                }
            }
            impl<'de> Deserialize<'de> for $t {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    d.deserialize_any(UnitVisitor::<$t>(PhantomData, $what))
                }
            }
        };
    }
    unit_serde!(Rate, Rate::from_bps, "a rate such as \"10gbit\" or bit/s");
    unit_serde!(
        Duration,
        Duration::from_nanos,
        "a duration such as \"25us\" or nanoseconds"
    );
    unit_serde!(Bytes, Bytes::new, "a size such as \"150KB\" or octets");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_tc_style() {
        assert_eq!("100mbit".parse::<Rate>().unwrap(), Rate::from_mbps(100));
        assert_eq!("1gbit".parse::<Rate>().unwrap(), Rate::from_gbps(1));
        assert_eq!("10gbit".parse::<Rate>().unwrap(), Rate::from_gbps(10));
        assert_eq!("500kbit".parse::<Rate>().unwrap(), Rate::from_kbps(500));
        assert_eq!("12345".parse::<Rate>().unwrap(), Rate::from_bps(12345));
        assert_eq!("1.5gbit".parse::<Rate>().unwrap(), Rate::from_mbps(1500));
        assert_eq!("10Gb/s".parse::<Rate>().unwrap(), Rate::from_gbps(10));
        assert_eq!("2.5Mb/s".parse::<Rate>().unwrap(), Rate::from_kbps(2500));
        assert!("10 furlongs".parse::<Rate>().is_err());
        assert!("".parse::<Rate>().is_err());
        assert!("mbit".parse::<Rate>().is_err());
        assert!("1.2.3mbit".parse::<Rate>().is_err());
        assert!("-5mbit".parse::<Rate>().is_err());
        assert!("99999999999999999999tbit".parse::<Rate>().is_err());
    }

    #[test]
    fn octet_rate_units_of_tc_are_refused_with_both_readings() {
        // tc-bandwidth(8): "mbps" is megabytes per second.
        let e = "100mbps".parse::<Rate>().unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("megabytes per second"), "{msg}");
        assert!(msg.contains("100mbit"), "{msg}");
        assert!(msg.contains("800mbit"), "{msg}");
        match e {
            UnitError::AmbiguousRate {
                as_bits, as_bytes, ..
            } => {
                assert_eq!(as_bits, "100mbit");
                assert_eq!(as_bytes, "800mbit");
            }
            other => panic!("{other:?}"),
        }
        for s in [
            "10Gbps", "1kbps", "5tbps", "1500bps", "100MB/s", "3GB/s", "1.5mbps",
        ] {
            assert!(
                matches!(s.parse::<Rate>(), Err(UnitError::AmbiguousRate { .. })),
                "{s}"
            );
        }
        let e = "1.5mbps".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("1.5mbit") && e.contains("12mbit"), "{e}");
        let e = "1500bps".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("1500bit") && e.contains("12kbit"), "{e}");
        // A bad number is still a number error.
        assert!(matches!(
            "1.2.3mbps".parse::<Rate>(),
            Err(UnitError::Number(_))
        ));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(
            "25us".parse::<Duration>().unwrap(),
            Duration::from_micros(25)
        );
        assert_eq!(
            "15ms".parse::<Duration>().unwrap(),
            Duration::from_millis(15)
        );
        assert_eq!("2s".parse::<Duration>().unwrap(), Duration::from_secs(2));
        assert_eq!("2".parse::<Duration>().unwrap(), Duration::from_secs(2));
        assert_eq!(
            "7.5ms".parse::<Duration>().unwrap(),
            Duration::from_micros(7500)
        );
        assert_eq!("100ns".parse::<Duration>().unwrap().as_nanos(), 100);
        assert!("5 parsecs".parse::<Duration>().is_err());
    }

    #[test]
    fn bytes_parse() {
        assert_eq!("150KB".parse::<Bytes>().unwrap(), Bytes::new(150_000));
        assert_eq!("150k".parse::<Bytes>().unwrap(), Bytes::new(150_000));
        assert_eq!("64KiB".parse::<Bytes>().unwrap(), Bytes::new(65_536));
        assert_eq!("1500".parse::<Bytes>().unwrap(), Bytes::new(1500));
        assert_eq!("1500B".parse::<Bytes>().unwrap(), Bytes::new(1500));
        assert!("12 parsecs".parse::<Bytes>().is_err());
    }

    #[test]
    fn display_round_trips() {
        for r in ["10gbit", "100mbit", "500kbit", "12345bit"] {
            assert_eq!(r.parse::<Rate>().unwrap().to_string(), r);
        }
        for d in ["25us", "15ms", "2s", "1500ns"] {
            assert_eq!(d.parse::<Duration>().unwrap().to_string(), d);
        }
        for b in ["150KB", "1501B"] {
            assert_eq!(b.parse::<Bytes>().unwrap().to_string(), b);
        }
    }

    #[test]
    fn serialisation_time_is_exact() {
        // 1500 B at 10 Gb/s = 12000 bit / 1e10 bit/s = 1.2 us.
        assert_eq!(
            Rate::from_gbps(10).tx_time(Bytes::new(1500)),
            Duration::from_nanos(1200)
        );
        // 64 B at 1 Gb/s = 512 ns (one PAUSE quantum is 512 bit times).
        assert_eq!(
            Rate::from_gbps(1).tx_time(Bytes::new(64)),
            Duration::from_nanos(512)
        );
        // Rounds up: 1 B at 3 bit/s = 8/3 s.
        assert_eq!(
            Rate::from_bps(3).tx_time(Bytes::new(1)).as_nanos(),
            2_666_666_667
        );
        assert_eq!(Rate::ZERO.tx_time(Bytes::new(1)), Duration::MAX);
        assert_eq!(
            Rate::from_gbps(10).bytes_in(Duration::from_millis(1)),
            Bytes::new(1_250_000)
        );
        assert_eq!(
            Rate::from_bytes_per(Bytes::new(1_250_000), Duration::from_millis(1)),
            Rate::from_gbps(10)
        );
    }

    #[test]
    fn serde_accepts_text_and_numbers() {
        #[derive(serde::Deserialize, serde::Serialize, Debug, PartialEq)]
        struct C {
            r: Rate,
            d: Duration,
            b: Bytes,
        }
        let c: C = serde_json::from_str(r#"{"r":"1gbit","d":"25us","b":"150KB"}"#).unwrap();
        assert_eq!(
            c,
            C {
                r: Rate::from_gbps(1),
                d: Duration::from_micros(25),
                b: Bytes::new(150_000)
            }
        );
        let c2: C = serde_json::from_str(r#"{"r":1000,"d":5,"b":7}"#).unwrap();
        assert_eq!(c2.r.bps(), 1000);
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"r":"1gbit","d":"25us","b":"150KB"}"#
        );
        assert!(serde_json::from_str::<C>(r#"{"r":-1,"d":5,"b":7}"#).is_err());
    }
}

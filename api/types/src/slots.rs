//! Resource slots: a map from slot name (`cpu`, `mem`, `cuda.device`, `cuda.shares`, …) to a
//! decimal amount, stored as a JSON object of decimal strings exactly like Backend.AI's
//! `ResourceSlot`. `mem` is in bytes; user input accepts binary sizes such as `8g` or `512m`.
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// The slot names this product knows, with their unit (`count` or `bytes`), as served by
/// `GET /config/resource-slots`.
pub const KNOWN_SLOTS: &[(&str, &str)] = &[
    ("cpu", "count"),
    ("mem", "bytes"),
    ("cuda.device", "count"),
    ("cuda.shares", "count"),
];

pub fn is_known_slot(name: &str) -> bool {
    KNOWN_SLOTS.iter().any(|(n, _)| *n == name)
}

fn is_bytes_slot(name: &str) -> bool {
    KNOWN_SLOTS
        .iter()
        .any(|(n, unit)| *n == name && *unit == "bytes")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotError {
    UnknownSlot(String),
    InvalidAmount { slot: String, value: String },
    Negative { slot: String },
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotError::UnknownSlot(s) => write!(
                f,
                "unknown resource slot '{s}' (known: {})",
                KNOWN_SLOTS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            SlotError::InvalidAmount { slot, value } => {
                write!(f, "invalid amount '{value}' for resource slot '{slot}'")
            }
            SlotError::Negative { slot } => {
                write!(f, "resource slot '{slot}' must not be negative")
            }
        }
    }
}

impl std::error::Error for SlotError {}

/// Parses a size with an optional binary suffix (`k`, `m`, `g`, `t`, `p`, optionally followed
/// by `b` or `ib`), case-insensitive: `8g` is 8 GiB. A bare number is bytes.
pub fn parse_binary_size(input: &str) -> Option<Decimal> {
    let s = input.trim().to_ascii_lowercase();
    let s = s
        .strip_suffix("ib")
        .or_else(|| s.strip_suffix('b'))
        .unwrap_or(&s);
    let (num, exp) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1),
        'm' => (&s[..s.len() - 1], 2),
        'g' => (&s[..s.len() - 1], 3),
        't' => (&s[..s.len() - 1], 4),
        'p' => (&s[..s.len() - 1], 5),
        _ => (s, 0),
    };
    let value = Decimal::from_str(num.trim()).ok()?;
    let mut factor = Decimal::ONE;
    for _ in 0..exp {
        factor = factor.checked_mul(Decimal::from(1024))?;
    }
    // Bytes are whole numbers; a fractional result (e.g. "0.3k") is rounded down.
    Some(value.checked_mul(factor)?.trunc())
}

/// Formats bytes the way Backend.AI's `BinarySize` does: the largest unit that divides evenly
/// (`8589934592` → `8g`), else a decimal with two places (`1.5g`).
pub fn format_binary_size(bytes: Decimal) -> String {
    const UNITS: &[(&str, u32)] = &[("p", 5), ("t", 4), ("g", 3), ("m", 2), ("k", 1)];
    if bytes.is_zero() {
        return "0".to_string();
    }
    for (suffix, exp) in UNITS {
        let unit = Decimal::from(1024u64.pow(*exp));
        if bytes >= unit {
            let v = bytes / unit;
            return if v.fract().is_zero() {
                format!("{}{suffix}", v.trunc())
            } else {
                format!("{}{suffix}", v.round_dp(2).normalize())
            };
        }
    }
    bytes.trunc().to_string()
}

/// Parses one slot amount from user input: binary sizes for byte slots, decimals otherwise.
pub fn parse_amount(slot: &str, value: &str) -> Result<Decimal, SlotError> {
    if !is_known_slot(slot) {
        return Err(SlotError::UnknownSlot(slot.to_string()));
    }
    let parsed = if is_bytes_slot(slot) {
        parse_binary_size(value)
    } else {
        Decimal::from_str(value.trim()).ok()
    };
    let amount = parsed.ok_or_else(|| SlotError::InvalidAmount {
        slot: slot.to_string(),
        value: value.to_string(),
    })?;
    if amount.is_sign_negative() && !amount.is_zero() {
        return Err(SlotError::Negative {
            slot: slot.to_string(),
        });
    }
    Ok(amount.normalize())
}

/// Formats one slot amount for people: `8g` for memory, `2` or `0.5` for counts.
pub fn format_amount(slot: &str, amount: Decimal) -> String {
    if is_bytes_slot(slot) {
        format_binary_size(amount)
    } else {
        amount.normalize().to_string()
    }
}

/// A set of resource amounts. Missing slots count as zero; zero amounts are dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "db", derive(sea_orm::FromJsonQueryResult))]
#[serde(transparent)]
pub struct ResourceSlots(pub BTreeMap<String, Decimal>);

impl ResourceSlots {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds slots from user input such as `{"cpu": "2", "mem": "4g"}`. Unknown slots,
    /// malformed or negative amounts are errors; zero amounts are dropped.
    pub fn parse_input<'a, I>(pairs: I) -> Result<Self, SlotError>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut map = BTreeMap::new();
        for (slot, value) in pairs {
            let amount = parse_amount(slot, value)?;
            if !amount.is_zero() {
                map.insert(slot.to_string(), amount);
            }
        }
        Ok(Self(map))
    }

    /// Parses a JSON object whose values are strings or numbers.
    pub fn parse_json(value: &serde_json::Value) -> Result<Self, SlotError> {
        let obj = value.as_object().ok_or_else(|| SlotError::InvalidAmount {
            slot: "*".into(),
            value: value.to_string(),
        })?;
        let mut pairs = Vec::with_capacity(obj.len());
        for (k, v) in obj {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                other => {
                    return Err(SlotError::InvalidAmount {
                        slot: k.clone(),
                        value: other.to_string(),
                    });
                }
            };
            pairs.push((k.clone(), s));
        }
        Self::parse_input(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    pub fn with(mut self, slot: &str, amount: Decimal) -> Self {
        self.set(slot, amount);
        self
    }

    pub fn get(&self, slot: &str) -> Decimal {
        self.0.get(slot).copied().unwrap_or(Decimal::ZERO)
    }

    pub fn set(&mut self, slot: &str, amount: Decimal) {
        if amount.is_zero() {
            self.0.remove(slot);
        } else {
            self.0.insert(slot.to_string(), amount);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.values().all(|v| v.is_zero())
    }

    pub fn add(&self, other: &ResourceSlots) -> ResourceSlots {
        let mut out = self.clone();
        for (k, v) in &other.0 {
            out.set(k, out.get(k) + *v);
        }
        out
    }

    /// Subtraction that may go negative: callers compare the result to see a shortage.
    pub fn sub(&self, other: &ResourceSlots) -> ResourceSlots {
        let mut out = self.clone();
        for (k, v) in &other.0 {
            out.set(k, out.get(k) - *v);
        }
        out
    }

    /// True when every slot of `self` is at most the same slot of `other` (missing = 0).
    pub fn le(&self, other: &ResourceSlots) -> bool {
        self.0.iter().all(|(k, v)| *v <= other.get(k))
    }

    /// The slots where `self` exceeds `other`, for "why not" messages.
    pub fn exceeding(&self, other: &ResourceSlots) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| **v > other.get(k))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Human form: `cpu=2 mem=4g`.
    pub fn humanize(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={}", format_amount(k, *v)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl fmt::Display for ResourceSlots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.humanize())
    }
}

/// A limit on one slot: a decimal or unlimited (`"Infinity"` on the wire, as Backend.AI writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotLimit {
    Limited(Decimal),
    Unlimited,
}

impl Serialize for SlotLimit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SlotLimit::Limited(d) => s.serialize_str(&d.normalize().to_string()),
            SlotLimit::Unlimited => s.serialize_str("Infinity"),
        }
    }
}

impl<'de> Deserialize<'de> for SlotLimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if is_unlimited_word(&s) {
            Ok(SlotLimit::Unlimited)
        } else {
            Decimal::from_str(&s)
                .map(SlotLimit::Limited)
                .map_err(serde::de::Error::custom)
        }
    }
}

fn is_unlimited_word(s: &str) -> bool {
    matches!(
        s.trim().to_ascii_lowercase().as_str(),
        "infinity" | "inf" | "unlimited" | "∞"
    )
}

/// Per-slot limits of a resource policy, domain or group. Slots not listed follow the policy's
/// `default_for_unspecified` (LIMITED = 0, UNLIMITED = no limit).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "db", derive(sea_orm::FromJsonQueryResult))]
#[serde(transparent)]
pub struct ResourceLimits(pub BTreeMap<String, SlotLimit>);

impl ResourceLimits {
    /// Parses `{"cpu": "4", "mem": "16g", "cuda.shares": "Infinity"}`.
    pub fn parse_json(value: &serde_json::Value) -> Result<Self, SlotError> {
        let obj = value.as_object().ok_or_else(|| SlotError::InvalidAmount {
            slot: "*".into(),
            value: value.to_string(),
        })?;
        let mut map = BTreeMap::new();
        for (k, v) in obj {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Null => "Infinity".to_string(),
                other => {
                    return Err(SlotError::InvalidAmount {
                        slot: k.clone(),
                        value: other.to_string(),
                    });
                }
            };
            let limit = if is_unlimited_word(&s) {
                if !is_known_slot(k) {
                    return Err(SlotError::UnknownSlot(k.clone()));
                }
                SlotLimit::Unlimited
            } else {
                SlotLimit::Limited(parse_amount(k, &s)?)
            };
            map.insert(k.clone(), limit);
        }
        Ok(Self(map))
    }

    /// The limit for `slot`, falling back to `unspecified` for slots not listed.
    pub fn limit(&self, slot: &str, unspecified: SlotLimit) -> SlotLimit {
        self.0.get(slot).copied().unwrap_or(unspecified)
    }

    /// Slots of `wanted` that would exceed these limits.
    pub fn exceeded_by(&self, wanted: &ResourceSlots, unspecified: SlotLimit) -> Vec<String> {
        wanted
            .0
            .iter()
            .filter(|(k, v)| match self.limit(k, unspecified) {
                SlotLimit::Limited(max) => **v > max,
                SlotLimit::Unlimited => false,
            })
            .map(|(k, _)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn binary_sizes_round_trip() {
        assert_eq!(parse_binary_size("8g"), Some(d("8589934592")));
        assert_eq!(parse_binary_size("512m"), Some(d("536870912")));
        assert_eq!(parse_binary_size("512MiB"), Some(d("536870912")));
        assert_eq!(parse_binary_size("1.5G"), Some(d("1610612736")));
        assert_eq!(parse_binary_size("1024"), Some(d("1024")));
        assert_eq!(parse_binary_size("abc"), None);
        assert_eq!(parse_binary_size(""), None);
        assert_eq!(format_binary_size(d("8589934592")), "8g");
        assert_eq!(format_binary_size(d("536870912")), "512m");
        assert_eq!(format_binary_size(d("1610612736")), "1.5g");
        assert_eq!(format_binary_size(d("100")), "100");
    }

    #[test]
    fn parse_input_validates() {
        let s = ResourceSlots::parse_input([("cpu", "2"), ("mem", "4g"), ("cuda.shares", "0")])
            .unwrap();
        assert_eq!(s.get("cpu"), d("2"));
        assert_eq!(s.get("mem"), d("4294967296"));
        assert!(!s.0.contains_key("cuda.shares"), "zero dropped");
        assert!(matches!(
            ResourceSlots::parse_input([("tpu", "1")]),
            Err(SlotError::UnknownSlot(_))
        ));
        assert!(matches!(
            ResourceSlots::parse_input([("cpu", "-1")]),
            Err(SlotError::Negative { .. })
        ));
        assert!(matches!(
            ResourceSlots::parse_input([("cpu", "two")]),
            Err(SlotError::InvalidAmount { .. })
        ));
    }

    #[test]
    fn arithmetic_and_comparison() {
        let a = ResourceSlots::parse_input([("cpu", "2"), ("mem", "4g")]).unwrap();
        let b = ResourceSlots::parse_input([("cpu", "1"), ("cuda.shares", "0.5")]).unwrap();
        let sum = a.add(&b);
        assert_eq!(sum.get("cpu"), d("3"));
        assert_eq!(sum.get("cuda.shares"), d("0.5"));
        assert_eq!(sum.sub(&b), a);
        assert!(b.le(&sum));
        assert!(!sum.le(&a));
        assert_eq!(
            sum.exceeding(&a),
            vec!["cpu".to_string(), "cuda.shares".to_string()]
        );
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json, serde_json::json!({"cpu": "2", "mem": "4294967296"}));
        assert_eq!(serde_json::from_value::<ResourceSlots>(json).unwrap(), a);
        assert_eq!(a.humanize(), "cpu=2 mem=4g");
    }

    #[test]
    fn limits_with_infinity() {
        let l = ResourceLimits::parse_json(&serde_json::json!({"cpu": "Infinity", "mem": "16g"}))
            .unwrap();
        assert_eq!(
            l.limit("cpu", SlotLimit::Limited(Decimal::ZERO)),
            SlotLimit::Unlimited
        );
        let want = ResourceSlots::parse_input([("cpu", "100"), ("mem", "32g")]).unwrap();
        assert_eq!(
            l.exceeded_by(&want, SlotLimit::Unlimited),
            vec!["mem".to_string()]
        );
        let json = serde_json::to_value(&l).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"cpu": "Infinity", "mem": "17179869184"})
        );
        assert!(ResourceLimits::parse_json(&serde_json::json!({"gpu": "1"})).is_err());
    }
}

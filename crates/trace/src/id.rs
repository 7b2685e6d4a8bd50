//! Request ids: time-ordered 128-bit ids printed like UUIDs.
//!
//! The high 48 bits are Unix milliseconds, so ids sort by start time in a
//! store's index; the low 80 bits are random. Generating one is a clock read
//! and a thread-local PRNG step, cheap enough for the request path.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Identifies one request across its record, its spans and every store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u128);

impl RequestId {
    /// A new id for a request starting now.
    pub fn new() -> RequestId {
        let millis = (crate::unix_micros_now() / 1000) as u128 & ((1u128 << 48) - 1);
        let random = (u128::from(fastrand::u64(..)) << 16 | u128::from(fastrand::u16(..)))
            & ((1u128 << 80) - 1);
        RequestId(millis << 80 | random)
    }
}

impl Default for RequestId {
    fn default() -> Self {
        RequestId::new()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            (v >> 96) as u32,
            (v >> 80) as u16,
            (v >> 64) as u16,
            (v >> 48) as u16,
            v & 0xffff_ffff_ffff
        )
    }
}

/// The text was not a 32-digit hexadecimal id (dashes allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequestId;

impl fmt::Display for BadRequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a request id (expected 32 hexadecimal digits, dashes allowed)")
    }
}

impl std::error::Error for BadRequestId {}

impl FromStr for RequestId {
    type Err = BadRequestId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex: String = s.chars().filter(|c| *c != '-').collect();
        if hex.len() != 32 {
            return Err(BadRequestId);
        }
        u128::from_str_radix(&hex, 16)
            .map(RequestId)
            .map_err(|_| BadRequestId)
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_sorts_by_time() {
        let a = RequestId::new();
        let text = a.to_string();
        assert_eq!(text.len(), 36);
        assert_eq!(text.parse::<RequestId>(), Ok(a));
        assert!("xyz".parse::<RequestId>().is_err());
        let later = RequestId(a.0 + (1u128 << 80));
        assert!(later > a);
    }
}

//! How hard the coordinator may press a connection's product: `limits` (at
//! most so many requests in flight and so many per second, for the whole
//! deployment) and `breaker` (when it stops sending but a probe), as
//! runtime.yaml writes them (docs/reference/runtime.md#a-connection). The rules
//! that apply them are [`crate::pace`].

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// `limits:` of a connection: at least one of `concurrency` and `ratePerSecond`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionLimits {
    /// At most this many requests in flight, counted over every process of the deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency: Option<u32>,
    /// At most this many requests per second on average (a token bucket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_second: Option<Rate>,
    /// How many may go at once after a quiet spell (the bucket's size);
    /// default one second's worth, at least 1. Only with `ratePerSecond`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub burst: Option<u32>,
}

impl ConnectionLimits {
    /// The pure rules' limits.
    pub fn limits(&self) -> crate::pace::Limits {
        crate::pace::Limits {
            concurrency: self.concurrency,
            rate_per_second: self.rate_per_second.map(Rate::get),
            burst: self.burst,
        }
    }
}

/// Requests per second: a finite number above 0, at most 1 000 000.
/// Equality compares the bits, which is sound because NaN is refused.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Rate(f64);

/// A number that is not a usable rate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a rate must be a number above 0 and at most 1000000")]
pub struct NotARate;

impl Rate {
    /// The most requests per second a rate may say.
    pub const MAX: f64 = 1_000_000.0;

    /// Checks the range.
    ///
    /// # Errors
    /// [`NotARate`] for NaN, infinities, 0, negative numbers and numbers over [`Rate::MAX`].
    pub fn new(value: f64) -> Result<Rate, NotARate> {
        if value.is_nan() || value <= 0.0 || value > Rate::MAX {
            return Err(NotARate);
        }
        Ok(Rate(value))
    }

    /// Requests per second.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl PartialEq for Rate {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Rate {}

impl TryFrom<f64> for Rate {
    type Error = NotARate;

    fn try_from(value: f64) -> Result<Self, Self::Error> {
        Rate::new(value)
    }
}

impl From<Rate> for f64 {
    fn from(rate: Rate) -> f64 {
        rate.0
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> Cow<'static, str> {
        "Rate".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1_000_000,
            "description": "Requests per second, on average (0.5: one every two seconds)."
        })
    }
}

/// `breaker:` of a connection (docs/reference/runtime.md#a-connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BreakerConfig {
    /// Definite failures in a row (429, 503, no connection, a timeout, a 5xx)
    /// that open the breaker.
    #[schemars(range(min = 1))]
    pub open_after_failures: u32,
    /// While open, one real request is sent as a probe this often.
    #[schemars(range(min = 1))]
    pub probe_every_seconds: u64,
}

impl BreakerConfig {
    /// Failures in a row when the connection sets none.
    pub const DEFAULT_OPEN_AFTER_FAILURES: u32 = crate::pace::DEFAULT_OPEN_AFTER_FAILURES;
    /// Seconds between probes when the connection sets none.
    pub const DEFAULT_PROBE_EVERY_SECONDS: u64 = 30;

    /// The pure rules' settings.
    pub fn settings(&self) -> crate::pace::BreakerSettings {
        crate::pace::BreakerSettings {
            open_after_failures: self.open_after_failures.max(1),
            probe_every_ms: i64::try_from(self.probe_every_seconds.saturating_mul(1000)).unwrap_or(i64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_finite_numbers_above_zero() {
        for ok in [0.001, 0.5, 1.0, 200.0, Rate::MAX] {
            assert_eq!(Rate::new(ok).map(Rate::get), Ok(ok), "{ok}");
        }
        for bad in [0.0, -0.0, -1.0, f64::NAN, f64::INFINITY, Rate::MAX * 2.0] {
            assert_eq!(Rate::new(bad), Err(NotARate), "{bad}");
        }
    }
}

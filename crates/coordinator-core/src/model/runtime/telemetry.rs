//! `telemetry:` of `runtime.yaml`: where the service exports its traces
//! (OpenTelemetry, OTLP) and how many it keeps.
//!
//! Plain data and the range check of the sample ratio. Building an exporter
//! belongs to the service; this module must not reach the network.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// `telemetry:` — traces are exported only when it is present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Telemetry {
    /// The OTLP collector traces are sent to.
    pub otlp: Otlp,
    /// The `service.name` resource attribute; without it, `coordinator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub service_name: Option<String>,
    /// The share of traces kept, from 0 (none) to 1 (all); without it, 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_ratio: Option<SampleRatio>,
}

impl Telemetry {
    /// The `service.name` when `serviceName` is not set.
    pub const DEFAULT_SERVICE_NAME: &'static str = "coordinator";

    /// The service name in force: the configured one or `coordinator`.
    pub fn effective_service_name(&self) -> &str {
        self.service_name.as_deref().unwrap_or(Self::DEFAULT_SERVICE_NAME)
    }

    /// The sample ratio in force: the configured one or 1 (every trace).
    pub fn effective_sample_ratio(&self) -> SampleRatio {
        self.sample_ratio.unwrap_or_default()
    }
}

/// `telemetry.otlp:` — the collector and the protocol spoken to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Otlp {
    /// The collector's base address, an http:// or https:// URL without
    /// credentials: `http://collector:4317` for grpc, `http://collector:4318`
    /// for http/protobuf (the base, not the `/v1/traces` path).
    #[schemars(url)]
    pub endpoint: String,
    /// The OTLP transport; without it, `grpc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<OtlpProtocol>,
}

impl Otlp {
    /// The protocol in force: the configured one or `grpc`.
    pub fn effective_protocol(&self) -> OtlpProtocol {
        self.protocol.unwrap_or_default()
    }
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum OtlpProtocol {
    /// OTLP over gRPC (the collector's port 4317 by convention).
    #[default]
    #[serde(rename = "grpc")]
    Grpc,
    /// OTLP as protobuf over HTTP (port 4318 by convention).
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The YAML spelling (also `OTEL_EXPORTER_OTLP_PROTOCOL`'s).
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }
}

/// The share of traces kept: a finite number from 0 to 1, both included.
/// Equality compares the bits, which is sound because NaN is refused and
/// `-0` is stored as `0`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct SampleRatio(f64);

/// A number that is not finite or not from 0 to 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a sample ratio must be a number from 0 to 1")]
pub struct NotASampleRatio;

impl SampleRatio {
    /// Every trace kept (the default).
    pub const ALL: SampleRatio = SampleRatio(1.0);

    /// Checks the range.
    ///
    /// # Errors
    /// [`NotASampleRatio`] for NaN, infinities and numbers outside 0 ..= 1.
    pub fn new(value: f64) -> Result<SampleRatio, NotASampleRatio> {
        if !(0.0..=1.0).contains(&value) {
            return Err(NotASampleRatio);
        }
        // `-0.0` has other bits than `0.0`; one representation keeps `Eq` consistent with `==`.
        Ok(SampleRatio(if value == 0.0 { 0.0 } else { value }))
    }

    /// The ratio, from 0 to 1.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Default for SampleRatio {
    fn default() -> Self {
        SampleRatio::ALL
    }
}

impl PartialEq for SampleRatio {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for SampleRatio {}

impl TryFrom<f64> for SampleRatio {
    type Error = NotASampleRatio;

    fn try_from(value: f64) -> Result<Self, Self::Error> {
        SampleRatio::new(value)
    }
}

impl From<SampleRatio> for f64 {
    fn from(ratio: SampleRatio) -> f64 {
        ratio.0
    }
}

impl JsonSchema for SampleRatio {
    fn schema_name() -> Cow<'static, str> {
        "SampleRatio".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "The share of traces kept, from 0 (none) to 1 (all)."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sample_ratios_are_finite_numbers_from_zero_to_one() {
        for ok in [0.0, -0.0, 0.1, 0.5, 1.0] {
            assert_eq!(SampleRatio::new(ok).map(SampleRatio::get), Ok(ok), "{ok}");
        }
        for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -f64::MIN_POSITIVE] {
            assert_eq!(SampleRatio::new(bad), Err(NotASampleRatio), "{bad}");
        }
    }

    #[test]
    fn equal_ratios_are_equal_whatever_the_sign_of_zero() {
        assert_eq!(SampleRatio::new(0.0), SampleRatio::new(-0.0));
        assert_eq!(SampleRatio::new(-0.0).map(|r| r.get().is_sign_positive()), Ok(true));
        assert_eq!(SampleRatio::new(0.25), SampleRatio::new(0.25));
        assert_ne!(SampleRatio::new(0.25), SampleRatio::new(0.5));
    }

    #[test]
    fn serde_reads_integers_and_refuses_out_of_range() {
        let read = |v: serde_json::Value| serde_json::from_value::<SampleRatio>(v).ok().map(SampleRatio::get);
        assert_eq!(read(json!(1)), Some(1.0));
        assert_eq!(read(json!(0)), Some(0.0));
        assert_eq!(read(json!(0.25)), Some(0.25));
        assert_eq!(read(json!(1.5)), None);
        assert_eq!(read(json!("0.5")), None);
    }

    #[test]
    fn defaults_are_grpc_coordinator_and_every_trace() {
        let telemetry: Result<Telemetry, _> = serde_json::from_value(json!({"otlp": {"endpoint": "http://c:4317"}}));
        let Ok(telemetry) = telemetry else { panic!("{telemetry:?}") };
        assert_eq!(telemetry.otlp.effective_protocol(), OtlpProtocol::Grpc);
        assert_eq!(telemetry.effective_service_name(), "coordinator");
        assert_eq!(telemetry.effective_sample_ratio().get(), 1.0);
        let protocol: Result<OtlpProtocol, _> = serde_json::from_value(json!("http/protobuf"));
        assert_eq!(protocol.ok().map(OtlpProtocol::as_str), Some("http/protobuf"));
    }
}

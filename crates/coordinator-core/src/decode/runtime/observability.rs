//! Decodes the `logging:` and `telemetry:` sections of `runtime.yaml`.
//!
//! Checks the filter's syntax ([`LogFilter::parse`]), the format, the OTLP
//! endpoint (an http or https URL without credentials, as every URL of the
//! file), the protocol, the service name and the sample ratio's range. Never
//! installs a logger or reaches a collector.

use crate::diagnostic::Span;
use crate::model::runtime::{LogFilter, LogFormat, Logging, Otlp, OtlpProtocol, SampleRatio, Telemetry};
use crate::yaml::Node;

use super::{text, url_with};
use crate::decode::{Decoder, optional};

/// The fields of `logging`.
const LOGGING_FIELDS: &[&str] = &["filter", "format"];
/// The fields of `telemetry`.
const TELEMETRY_FIELDS: &[&str] = &["otlp", "serviceName", "sampleRatio"];
/// The fields of `telemetry.otlp`.
const OTLP_FIELDS: &[&str] = &["endpoint", "protocol"];
/// `logging.format` as written.
const LOG_FORMATS: &[(&str, LogFormat)] = &[("human", LogFormat::Human), ("json", LogFormat::Json)];
/// `telemetry.otlp.protocol` as written.
const OTLP_PROTOCOLS: &[(&str, OtlpProtocol)] =
    &[("grpc", OtlpProtocol::Grpc), ("http/protobuf", OtlpProtocol::HttpProtobuf)];

/// `logging:`; `owner` is its key, where a problem with the mapping as a whole is reported.
pub(super) fn logging(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<Logging> {
    let f = d.object(node, "`logging`", owner, LOGGING_FIELDS, &[])?;
    let filter = optional(f.get("filter"), |n| log_filter(d, n));
    let format = optional(f.get("format"), |n| d.one_of(n, "logging.format", LOG_FORMATS));
    Some(Logging { filter: filter?, format: format? })
}

/// A filter in the `RUST_LOG` subset [`LogFilter`] accepts. The message names
/// the wrong directive, as [`LogFilterError`](crate::model::runtime::LogFilterError) does.
fn log_filter(d: &mut Decoder<'_>, node: &Node) -> Option<LogFilter> {
    let text = d.string(node, "logging.filter")?;
    match LogFilter::parse(&text) {
        Ok(filter) => Some(filter),
        Err(why) => {
            d.invalid(
                node.span,
                format!("logging.filter is not a log filter: {why}"),
                "write comma-separated `LEVEL` or `TARGET=LEVEL` directives, e.g. `info,coordinator=debug,sqlx=warn`; \
                 a level is trace, debug, info, warn, error or off, a target a module path such as `coordinator::dispatch::worker`",
            );
            None
        }
    }
}

/// `telemetry:`; `owner` is its key.
pub(super) fn telemetry(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<Telemetry> {
    let f = d.object(node, "`telemetry`", owner, TELEMETRY_FIELDS, &["otlp"])?;
    let otlp = f.get("otlp").and_then(|n| otlp(d, n, f.key_span("otlp")));
    let service_name = optional(f.get("serviceName"), |n| text(d, n, "telemetry.serviceName"));
    let sample_ratio = optional(f.get("sampleRatio"), |n| sample_ratio(d, n));
    Some(Telemetry { otlp: otlp?, service_name: service_name?, sample_ratio: sample_ratio? })
}

/// `telemetry.otlp:`; `owner` is its key. The endpoint is checked as every URL of the file.
fn otlp(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<Otlp> {
    let f = d.object(node, "`telemetry.otlp`", owner, OTLP_FIELDS, &["endpoint"])?;
    let endpoint = f.get("endpoint").and_then(|n| {
        url_with(
            d,
            n,
            "telemetry.otlp.endpoint",
            "write the collector's base address as an http:// or https:// URL without credentials, \
             e.g. `http://otel-collector:4317` for grpc or `http://otel-collector:4318` for http/protobuf",
        )
    });
    let protocol = optional(f.get("protocol"), |n| d.one_of(n, "telemetry.otlp.protocol", OTLP_PROTOCOLS));
    Some(Otlp { endpoint: endpoint?, protocol: protocol? })
}

/// `telemetry.sampleRatio`: a number (whole or not) from 0 to 1.
fn sample_ratio(d: &mut Decoder<'_>, node: &Node) -> Option<SampleRatio> {
    let value = d.float(node, "telemetry.sampleRatio")?;
    match SampleRatio::new(value) {
        Ok(ratio) => Some(ratio),
        Err(_) => {
            d.invalid(
                node.span,
                "telemetry.sampleRatio is not from 0 to 1",
                "write the share of traces to keep, from 0 (none) to 1 (all), e.g. `0.1` for one in ten",
            );
            None
        }
    }
}

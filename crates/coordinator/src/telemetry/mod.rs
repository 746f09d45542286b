//! What the service tells operators about itself: [`logging`] (the one
//! `tracing` subscriber, human or JSON lines), [`metrics`] (the Prometheus
//! metrics of one engine, served at `GET /metrics`), [`transitions`] (the
//! after-commit lines of a run's transitions) and [`traces`] (OpenTelemetry
//! spans over OTLP, one trace per run).

pub mod logging;
pub mod metrics;
pub mod traces;
pub(crate) mod transitions;

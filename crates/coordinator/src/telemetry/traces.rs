//! Distributed traces: OpenTelemetry spans exported over OTLP (gRPC or
//! HTTP/protobuf) when runtime.yaml has `telemetry`, nothing otherwise.
//!
//! A run's whole life is one trace, whichever process decides it and however
//! many days its waits take: the trace id is the run id's 16 bytes (a UUIDv7
//! is exactly a trace id's size), or the caller's trace id when the
//! admission carried a `traceparent` (kept with the run, `runs.trace_parent`).
//! Every decision, product attempt, receipt lookup and observation is a child
//! of the run's root span, whose id is derived from the run id; the root span
//! itself is exported once, when the run ends, from its admission to its end
//! (its id is handed to the SDK by [`RunIds`]). Sampling is decided once per
//! trace from its id (`sampleRatio`, parent-based), so a run is kept or
//! dropped whole. API requests and claim rounds are traces of their own.
//!
//! Spans are made with the OpenTelemetry API directly, not through `tracing`:
//! their parents and their start instants are explicit (a batch's decisions
//! start together; a claim round is exported only when it claimed something),
//! and turning log lines down never turns traces off. **Invariant:** span
//! attributes are ids, names, kinds, numbers and codes — never an input, a
//! command, a product response, a token or a secret.

use std::borrow::Cow;
use std::cell::Cell;
use std::time::{Duration, SystemTime};

use coordinator_core::model::runtime::{OtlpProtocol, Telemetry};
use coordinator_products::Traceparent;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, Sampler, SdkTracer, SdkTracerProvider, ShouldSample,
    span_processor_with_async_runtime::BatchSpanProcessor,
};
use sha2::{Digest, Sha256};

/// How long one export may take before it is given up (the collector is down: spans are dropped, runs are not).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The span exporter of a process, or nothing.
pub struct Traces {
    on: Option<Exporting>,
}

struct Exporting {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    ratio: f64,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces").field("on", &self.on.is_some()).finish()
    }
}

/// Why traces cannot be exported as configured.
#[derive(Debug, thiserror::Error)]
#[error("telemetry.otlp: the exporter cannot be built: {0}")]
pub struct TelemetryError(String);

impl Traces {
    /// No traces.
    pub fn off() -> Traces {
        Traces { on: None }
    }

    /// Exports to the OTLP collector `telemetry` names. Must be called on a
    /// tokio runtime (the exporter's batches are sent from it).
    ///
    /// # Errors
    /// [`TelemetryError`] when the exporter cannot be built from the endpoint.
    pub fn otlp(telemetry: &Telemetry) -> Result<Traces, TelemetryError> {
        let endpoint = telemetry.otlp.endpoint.trim_end_matches('/');
        let exporter = match telemetry.otlp.effective_protocol() {
            OtlpProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .with_timeout(EXPORT_TIMEOUT)
                .build(),
            OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(format!("{endpoint}/v1/traces"))
                .with_timeout(EXPORT_TIMEOUT)
                .build(),
        }
        .map_err(|e| TelemetryError(e.to_string()))?;
        let ratio = telemetry.effective_sample_ratio().get();
        let processor = BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
        let resource = Resource::builder().with_service_name(telemetry.effective_service_name().to_owned()).build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))))
            .with_id_generator(RunIds::default())
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("coordinator");
        Ok(Traces { on: Some(Exporting { provider, tracer, ratio }) })
    }

    /// Whether spans are exported.
    pub fn is_on(&self) -> bool {
        self.on.is_some()
    }

    /// Exports what is buffered and stops (at the end of a drain). Blocks: run it off the runtime's workers.
    pub fn shutdown(&self) {
        if let Some(on) = &self.on
            && let Err(e) = on.provider.shutdown()
        {
            tracing::warn!(error = %e, "the last spans could not be exported");
        }
    }

    /// The trace of a run: its own (from its id), or the caller's it continues.
    pub(crate) fn run(&self, run_id: &str, trace_parent: Option<&str>) -> RunTrace {
        let root = SpanId::from_bytes(derived::<8>("coordinator.run-span", run_id));
        match trace_parent.and_then(Traceparent::parse) {
            Some(caller) => RunTrace {
                trace_id: TraceId::from_bytes(caller.trace_id),
                root,
                caller: Some(SpanId::from_bytes(caller.parent_id)),
                sampled: caller.sampled(),
            },
            None => {
                let trace_id = TraceId::from_bytes(
                    uuid::Uuid::parse_str(run_id)
                        .map_or_else(|_| derived::<16>("coordinator.run-trace", run_id), |u| *u.as_bytes()),
                );
                let sampled = self.on.as_ref().is_some_and(|on| sampled_by_ratio(on.ratio, trace_id));
                RunTrace { trace_id, root, caller: None, sampled }
            }
        }
    }

    /// Starts a span under `parent` (a run's trace, or none: a trace of its own).
    pub(crate) fn start(&self, name: impl Into<Cow<'static, str>>, kind: SpanKind, parent: Option<&RunTrace>) -> Live {
        self.start_at(name, kind, parent, SystemTime::now())
    }

    /// [`Traces::start`] with an explicit start instant.
    pub(crate) fn start_at(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        parent: Option<&RunTrace>,
        at: SystemTime,
    ) -> Live {
        let Some(on) = &self.on else { return Live(None) };
        let cx = parent.map_or_else(Context::new, RunTrace::context);
        let builder = on.tracer.span_builder(name).with_kind(kind).with_start_time(at);
        Live(Some(on.tracer.build_with_context(builder, &cx)))
    }

    /// Starts a server span for an API request continuing `caller`'s trace, if it sent one.
    pub(crate) fn request(&self, name: String, caller: Option<Traceparent>) -> Live {
        let Some(on) = &self.on else { return Live(None) };
        let cx = caller.map_or_else(Context::new, |c| {
            let flags = if c.sampled() { TraceFlags::SAMPLED } else { TraceFlags::default() };
            let parent = SpanContext::new(
                TraceId::from_bytes(c.trace_id),
                SpanId::from_bytes(c.parent_id),
                flags,
                true,
                TraceState::default(),
            );
            Context::new().with_remote_span_context(parent)
        });
        let builder = on.tracer.span_builder(name).with_kind(SpanKind::Server);
        Live(Some(on.tracer.build_with_context(builder, &cx)))
    }

    /// Exports a run's root span, from `admitted_at` to now, once the run ended.
    pub(crate) fn run_ended(&self, run: &RunTrace, admitted_at: SystemTime, attributes: Vec<KeyValue>) {
        let Some(on) = &self.on else { return };
        let cx = match run.caller {
            Some(caller) => {
                let flags = if run.sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
                let parent = SpanContext::new(run.trace_id, caller, flags, true, TraceState::default());
                Context::new().with_remote_span_context(parent)
            }
            None => Context::new(),
        };
        let builder = on
            .tracer
            .span_builder("run")
            .with_kind(SpanKind::Internal)
            .with_start_time(admitted_at)
            .with_attributes(attributes);
        // The SDK draws ids from its generator: this span's come from the run.
        NEXT_IDS.with(|next| next.set(Some((run.trace_id, run.root))));
        let mut span = on.tracer.build_with_context(builder, &cx);
        NEXT_IDS.with(|next| next.set(None));
        span.end();
    }
}

/// A run's trace: its id, the root span every span of the run hangs from,
/// the caller's span the root continues (if any), and whether it is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunTrace {
    trace_id: TraceId,
    root: SpanId,
    caller: Option<SpanId>,
    sampled: bool,
}

impl RunTrace {
    /// The parent context of a span of the run.
    fn context(&self) -> Context {
        let flags = if self.sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
        Context::new().with_remote_span_context(SpanContext::new(
            self.trace_id,
            self.root,
            flags,
            true,
            TraceState::default(),
        ))
    }

    /// The trace id as 32 hex digits (for log lines).
    pub(crate) fn trace_id(&self) -> String {
        self.trace_id.to_string()
    }

    /// The `traceparent` of a request made from `span` (or from the run's root, when it is not recorded).
    pub(crate) fn traceparent(&self, span: &Live) -> Traceparent {
        let parent = span.span_id().unwrap_or(self.root);
        Traceparent {
            trace_id: self.trace_id.to_bytes(),
            parent_id: parent.to_bytes(),
            flags: u8::from(self.sampled && span.is_recording()),
        }
    }
}

/// A span being recorded (or nothing, when traces are off or it was not sampled).
#[derive(Debug)]
pub(crate) struct Live(Option<opentelemetry_sdk::trace::Span>);

impl Live {
    /// A span that records nothing.
    #[cfg(test)]
    pub(crate) fn none() -> Live {
        Live(None)
    }

    /// Sets attributes (ids, names, kinds, numbers, codes only), made only when
    /// the span records them: a process without traces builds none.
    pub(crate) fn set<I: IntoIterator<Item = KeyValue>>(&mut self, attributes: impl FnOnce() -> I) {
        if let Some(span) = &mut self.0 {
            span.set_attributes(attributes());
        }
    }

    /// Marks the span failed, with a description that carries no value.
    pub(crate) fn error(&mut self, description: &'static str) {
        if let Some(span) = &mut self.0 {
            span.set_status(opentelemetry::trace::Status::error(description));
        }
    }

    /// Ends the span now.
    pub(crate) fn end(mut self) {
        if let Some(span) = &mut self.0 {
            span.end();
        }
    }

    fn is_recording(&self) -> bool {
        self.0.as_ref().is_some_and(opentelemetry::trace::Span::is_recording)
    }

    fn span_id(&self) -> Option<SpanId> {
        self.0.as_ref().filter(|s| s.is_recording()).map(|s| s.span_context().span_id())
    }
}

/// The ratio sampler's decision on a trace id, as the SDK makes it for a root span.
fn sampled_by_ratio(ratio: f64, trace_id: TraceId) -> bool {
    let decision =
        Sampler::TraceIdRatioBased(ratio).should_sample(None, trace_id, "run", &SpanKind::Internal, &[], &[]);
    matches!(decision.decision, opentelemetry_sdk::trace::SamplingDecision::RecordAndSample)
}

/// `N` bytes of SHA-256 over a purpose and a run id, never all zero.
fn derived<const N: usize>(purpose: &str, run_id: &str) -> [u8; N] {
    let digest = Sha256::digest(format!("{purpose}\n{run_id}").as_bytes());
    let mut out = [0u8; N];
    out.copy_from_slice(&digest[..N]);
    if out.iter().all(|b| *b == 0) {
        out[N - 1] = 1;
    }
    out
}

thread_local! {
    /// The ids the next span built on this thread takes (a run's root span).
    static NEXT_IDS: Cell<Option<(TraceId, SpanId)>> = const { Cell::new(None) };
}

/// Random ids, except for a run's root span, whose ids come from the run
/// (set on the building thread just before, see [`Traces::run_ended`]).
#[derive(Debug, Default)]
struct RunIds(RandomIdGenerator);

impl IdGenerator for RunIds {
    fn new_trace_id(&self) -> TraceId {
        NEXT_IDS.with(Cell::get).map_or_else(|| self.0.new_trace_id(), |(trace, _)| trace)
    }

    fn new_span_id(&self) -> SpanId {
        NEXT_IDS.with(Cell::get).map_or_else(|| self.0.new_span_id(), |(_, span)| span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_its_own_trace_unless_a_caller_started_one() {
        let traces = Traces::off();
        let id = "01a2311f-8bf9-77e5-b5ee-9c292a4a1dfa";
        let own = traces.run(id, None);
        assert_eq!(own.trace_id(), "01a2311f8bf977e5b5ee9c292a4a1dfa");
        assert_eq!(own, traces.run(id, Some("not a traceparent")), "an invalid header is ignored");
        let caller = traces.run(id, Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        assert_eq!(caller.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(caller.root, own.root, "the root span is the run's either way");
        assert!(caller.sampled);
        let header = caller.traceparent(&Live::none());
        assert_eq!(header.trace_id, caller.trace_id.to_bytes());
        assert_eq!(header.parent_id, own.root.to_bytes());
        assert_eq!(header.flags, 0, "nothing recorded here: not sampled by this process");
    }

    #[test]
    fn the_sampling_decision_follows_the_trace_id_and_the_ratio() {
        let id = TraceId::from_bytes([0x11; 16]);
        assert!(sampled_by_ratio(1.0, id));
        assert!(!sampled_by_ratio(0.0, id));
    }
}

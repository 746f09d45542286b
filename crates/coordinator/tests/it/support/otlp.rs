//! An OTLP trace receiver in the test process, on
//! `127.0.0.1:0`, speaking gRPC (the collector's `TraceService/Export`) or
//! HTTP/protobuf (`POST /v1/traces`), keeping every span it was sent with
//! its attributes flattened to text.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message as _;

/// One span as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// `service.name` of its resource.
    pub service: String,
    /// Its name.
    pub name: String,
    /// Trace id, 32 hex digits.
    pub trace_id: String,
    /// Span id, 16 hex digits.
    pub span_id: String,
    /// Parent span id, 16 hex digits (empty for a root).
    pub parent_id: String,
    /// Attributes, every value as text.
    pub attributes: BTreeMap<String, String>,
    /// Whether its status is an error.
    pub error: bool,
}

type Spans = Arc<Mutex<Vec<Received>>>;

/// A running receiver.
pub struct Receiver {
    /// Its base address (what runtime.yaml's `telemetry.otlp.endpoint` takes).
    pub endpoint: String,
    spans: Spans,
    _task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self._task.abort();
    }
}

impl Receiver {
    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// A gRPC receiver.
    pub async fn grpc() -> Receiver {
        let spans = Spans::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let service = TraceServiceServer::new(Collector(Arc::clone(&spans)));
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await;
        });
        Receiver { endpoint: format!("http://{addr}"), spans, _task: task }
    }

    /// An HTTP/protobuf receiver.
    pub async fn http() -> Receiver {
        let spans = Spans::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let kept = Arc::clone(&spans);
        let router = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: Bytes| {
                let kept = Arc::clone(&kept);
                async move {
                    match ExportTraceServiceRequest::decode(body) {
                        Ok(request) => {
                            keep(&kept, request);
                            (axum::http::StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
                        }
                        Err(_) => (axum::http::StatusCode::BAD_REQUEST, Vec::new()),
                    }
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Receiver { endpoint: format!("http://{addr}"), spans, _task: task }
    }
}

struct Collector(Spans);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        keep(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn keep(spans: &Spans, request: ExportTraceServiceRequest) {
    let mut kept = spans.lock().unwrap_or_else(PoisonError::into_inner);
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|r| text_attributes(&r.attributes)).unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                kept.push(Received {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_id: hex::encode(&span.parent_span_id),
                    attributes: text_attributes(&span.attributes),
                    error: span.status.is_some_and(|s| s.code == 2),
                });
            }
        }
    }
}

fn text_attributes(attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> BTreeMap<String, String> {
    attributes
        .iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                Some(other) => format!("{other:?}"),
                None => String::new(),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

//! Decodes `worker.yaml` into [`WorkerFile`], field by field.
//!
//! Checks the shape of one worker's configuration: known and required
//! fields, the coordinator's address (an http or https URL without
//! credentials or path; a `caCertificate` only with https), every secret as a
//! reference (refused without being repeated, as in `runtime.yaml`), the
//! concurrency's range, and the connections, through the same decoder as
//! `runtime.yaml`'s ([`runtime::connection`](super::runtime::connection)): each has the product's address
//! and credentials, never `dispatch`, `workers` or `eventSigningSecret`.
//! Never resolves a reference and never reaches the coordinator.

use crate::diagnostic::{Code, Span};
use crate::model::worker::{CoordinatorEndpoint, WorkerFile, WorkerKind};
use crate::model::{API_VERSION, ApiVersion};
use crate::yaml::Node;

use super::runtime::connection::{self, Place};
use super::runtime::{secret, url_with};
use super::{Decoder, optional};

const TOP: &[&str] = &["apiVersion", "kind", "coordinator", "connections", "concurrency"];
const TOP_REQUIRED: &[&str] = &["apiVersion", "kind", "coordinator", "connections"];
/// The fields of `coordinator`.
const COORDINATOR_FIELDS: &[&str] = &["address", "token", "caCertificate"];

/// Decodes a parsed `worker.yaml`. `None` when a value is wrong or missing; an
/// unknown field is reported without making the result `None`, so any error
/// diagnostic refuses the file.
pub fn decode(d: &mut Decoder<'_>, root: &Node) -> Option<WorkerFile> {
    let f = d.object(root, "the worker file", Span::at(1, 1), TOP, TOP_REQUIRED)?;
    let api_version = f.get("apiVersion").and_then(|n| d.one_of(n, "apiVersion", &[(API_VERSION, ApiVersion::V1)]));
    let kind = f.get("kind").and_then(|n| d.one_of(n, "kind", &[("Worker", WorkerKind::Worker)]));
    let coordinator = f.get("coordinator").and_then(|n| coordinator(d, n, f.key_span("coordinator")));
    let connections = f.get("connections").and_then(|n| {
        let connections =
            d.map_of(n, "connection", true, |d, key, node| connection::connection(d, Place::Worker, key, node))?;
        if connections.is_empty() {
            d.invalid(
                n.span,
                "the worker file serves no connection",
                "add the remote connections of the coordinator's runtime.yaml this worker serves, each with \
                 the product's baseUrl and authorization",
            );
            return None;
        }
        Some(connections)
    });
    let concurrency = optional(f.get("concurrency"), |n| {
        let value = d.uint(n, "concurrency", 1)?;
        match u32::try_from(value) {
            Ok(value) if value <= WorkerFile::MAX_CONCURRENCY => Some(value),
            _ => {
                d.invalid(
                    n.span,
                    format!("concurrency is {value}, more than {}", WorkerFile::MAX_CONCURRENCY),
                    format!(
                        "write how many product requests may be in flight at once, from 1 to {} (default {})",
                        WorkerFile::MAX_CONCURRENCY,
                        WorkerFile::DEFAULT_CONCURRENCY
                    ),
                );
                None
            }
        }
    });
    Some(WorkerFile {
        api_version: api_version?,
        kind: kind?,
        coordinator: coordinator?,
        connections: connections?,
        concurrency: concurrency?,
    })
}

/// `coordinator:`; `owner` is its key.
fn coordinator(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<CoordinatorEndpoint> {
    let f = d.object(node, "`coordinator`", owner, COORDINATOR_FIELDS, &["address", "token"])?;
    let address = f.get("address").and_then(|n| address(d, n));
    let token = f.get("token").and_then(|n| secret(d, n, "the coordinator token"));
    let ca_certificate = optional(f.get("caCertificate"), |n| secret(d, n, "coordinator.caCertificate"));
    if let (Some(address), Some((key, _))) = (&address, node.entry("caCertificate"))
        && address.starts_with("http://")
    {
        d.report(
            Code::SchemaUnknownField,
            key.span,
            "coordinator.caCertificate is only used with an https:// address",
            "remove it, or give the coordinator's gRPC listener `grpc.tls` and write its https:// address here",
        );
    }
    Some(CoordinatorEndpoint { address: address?, token: token?, ca_certificate: ca_certificate? })
}

/// The coordinator's gRPC address: an http or https URL with a host, without
/// credentials, path, query or fragment.
fn address(d: &mut Decoder<'_>, node: &Node) -> Option<String> {
    let help = "write the address of the coordinator's `grpc.listen`, e.g. \
                `https://coordinator.internal.example:7401` (http:// only without `grpc.tls`)";
    let address = url_with(d, node, "coordinator.address", help)?;
    let rest = address.split_once("://").map_or("", |(_, rest)| rest);
    let beyond = rest.find(['/', '?', '#']).map_or("", |at| &rest[at..]);
    if !beyond.is_empty() && beyond != "/" {
        d.invalid(node.span, "coordinator.address has a path, query or fragment: a gRPC address has none", help);
        return None;
    }
    Some(address)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::NodeValue;

    #[test]
    fn an_address_may_end_in_a_slash_but_have_no_path() {
        let mut d = Decoder::new("worker.yaml");
        let node = |text: &str| Node { value: NodeValue::String(text.to_owned()), span: Span::at(1, 1) };
        assert_eq!(address(&mut d, &node("https://c.example:7401/")).as_deref(), Some("https://c.example:7401/"));
        assert_eq!(address(&mut d, &node("http://[::1]:7401")).as_deref(), Some("http://[::1]:7401"));
        assert!(d.diagnostics.is_empty());
        for bad in ["https://c.example/grpc", "https://c.example?x=1", "grpc://c.example", "https://u:p@c.example"] {
            assert_eq!(address(&mut d, &node(bad)), None, "{bad}");
        }
        assert_eq!(d.diagnostics.len(), 4);
    }
}

//! `worker.yaml`: how one `coordinator worker` process is wired — the
//! coordinator it serves, the token it authenticates with, and the product
//! connections it calls on the coordinator's behalf (the `remote` connections
//! of the deployment's `runtime.yaml`).
//!
//! Plain data only. The product's address and credentials live here, next to
//! the product, and nowhere in the coordinator's file; as there, every secret
//! is a [`SecretRef`]. Decoding with diagnostics is [`decode::worker`](crate::decode::worker); this
//! module must not read the environment or the file system.

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ApiVersion;
use super::runtime::{Connection, SecretRef};

/// `kind: Worker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum WorkerKind {
    /// The only kind of `worker.yaml`.
    #[default]
    Worker,
}

/// A whole `worker.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Coordinator worker configuration (worker.yaml)")]
pub struct WorkerFile {
    /// Always `coordinator/v1`.
    pub api_version: ApiVersion,
    /// Always `Worker`.
    pub kind: WorkerKind,
    /// The coordinator this worker serves.
    pub coordinator: CoordinatorEndpoint,
    /// Logical connection name (as the coordinator's `runtime.yaml` names it,
    /// with `dispatch: remote`) -> product endpoint and credentials. Each has
    /// `product`, `baseUrl`, `authorization` and optionally `timeouts`, as an
    /// in-process connection of `runtime.yaml`, and optionally `limits` of
    /// its own; never `dispatch`, `workers`, `eventSigningSecret` or `breaker`.
    #[schemars(schema_with = "worker_connections")]
    pub connections: BTreeMap<String, Connection>,
    /// How many product requests may be in flight at once, 1 to 1024
    /// (default 16, `DEFAULT_CONCURRENCY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub concurrency: Option<u32>,
}

impl WorkerFile {
    /// Requests in flight at once when the file sets no `concurrency`.
    pub const DEFAULT_CONCURRENCY: u32 = 16;
    /// The largest `concurrency`.
    pub const MAX_CONCURRENCY: u32 = 1024;

    /// The concurrency in force: the configured one or the default.
    pub fn effective_concurrency(&self) -> u32 {
        self.concurrency.unwrap_or(Self::DEFAULT_CONCURRENCY)
    }
}

/// `coordinator:` — where the coordinator's gRPC listener is and how this
/// worker proves who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoordinatorEndpoint {
    /// The `http://` or `https://` URL of the coordinator's `grpc.listen`
    /// (`https://coordinator.internal.example:7401`), without a path.
    #[schemars(url)]
    pub address: String,
    /// The bearer token (a static token of the coordinator's `access.tokens`
    /// or an OIDC JWT) of a subject holding the role `worker`.
    pub token: SecretRef,
    /// The PEM certificate of the authority that signed the coordinator's
    /// certificate, when it is a private one; `https://` addresses only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_certificate: Option<SecretRef>,
}

/// The fields of a runtime connection a worker's connection never has.
const RUNTIME_ONLY: &[&str] = &["dispatch", "workers", "eventSigningSecret", "breaker"];

/// The schema of `connections`: [`Connection`]'s without the runtime-only
/// fields, `baseUrl` and `authorization` required.
fn worker_connections(generator: &mut SchemaGenerator) -> Schema {
    let mut connection = Connection::json_schema(generator).to_value();
    if let Some(fields) = connection.as_object_mut() {
        for rule in ["if", "then", "else"] {
            fields.remove(rule);
        }
        if let Some(Value::Object(properties)) = fields.get_mut("properties") {
            for field in RUNTIME_ONLY {
                properties.remove(*field);
            }
        }
        fields.insert("required".to_owned(), json!(["product", "baseUrl", "authorization"]));
        fields.insert(
            "description".to_owned(),
            json!("A product endpoint and the credentials this worker calls it with."),
        );
    }
    let mut map = serde_json::Map::new();
    map.insert("type".to_owned(), json!("object"));
    map.insert("additionalProperties".to_owned(), connection);
    Schema::from(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_defaults_to_sixteen() {
        let file: Result<WorkerFile, _> = serde_json::from_value(json!({
            "apiVersion": "coordinator/v1",
            "kind": "Worker",
            "coordinator": {"address": "https://c.example:7401", "token": "env:WORKER_TOKEN"},
            "connections": {},
        }));
        assert_eq!(file.map(|f| f.effective_concurrency()).ok(), Some(WorkerFile::DEFAULT_CONCURRENCY));
    }

    #[test]
    fn the_schema_of_connections_has_no_runtime_only_field() {
        let schema = schemars::schema_for!(WorkerFile).to_value();
        let connection = &schema["properties"]["connections"]["additionalProperties"];
        for field in RUNTIME_ONLY {
            assert!(connection["properties"].get(*field).is_none(), "{field}");
        }
        assert_eq!(connection["required"], json!(["product", "baseUrl", "authorization"]));
    }
}

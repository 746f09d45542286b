//! `runtime.yaml`: how one deployment of the service is wired — database,
//! payload keys, listen addresses (the HTTP API and, for remote workers, gRPC),
//! Redis dispatch hints, pinned package, product connections, access, shutdown,
//! logging and telemetry (docs/reference/runtime.md,
//! docs/reference/protection.md).
//!
//! Plain data only. Secrets are never values in this file: every credential,
//! key and database URL is a [`SecretRef`] (`env:NAME` or `file:PATH`) that the
//! service resolves at start-up. Resolving them, and decoding this file with
//! diagnostics, belong elsewhere; this module must not read the environment or
//! the file system.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::ApiVersion;

mod limits;
mod logging;
mod telemetry;

pub use limits::{BreakerConfig, ConnectionLimits, NotARate, Rate};
pub use logging::{LogFilter, LogFilterError, LogFormat, Logging};
pub use telemetry::{NotASampleRatio, Otlp, OtlpProtocol, SampleRatio, Telemetry};

/// `kind: Runtime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum RuntimeKind {
    /// The only kind of `runtime.yaml`.
    #[default]
    Runtime,
}

/// A whole `runtime.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Coordinator runtime configuration (runtime.yaml)")]
pub struct RuntimeFile {
    /// Always `coordinator/v1`.
    pub api_version: ApiVersion,
    /// Always `Runtime`.
    pub kind: RuntimeKind,
    /// Where runs, commands, waits and the audit journal are kept.
    pub database: Database,
    /// The keys that seal protected payloads at rest.
    pub payload_keys: PayloadKeys,
    /// The address the HTTP API listens on, `host:port` (`127.0.0.1:7400`).
    #[schemars(regex(pattern = r"^.+:[0-9]{1,5}$"))]
    pub listen: String,
    /// Where remote workers reach the coordinator (gRPC); required when a
    /// connection is `dispatch: remote`, unused otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<Grpc>,
    /// How due work is announced besides the database (Redis Streams); without
    /// it, dispatchers and remote workers' polls learn of new work from the
    /// database alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<DispatchHints>,
    /// The package this deployment runs, pinned by digest.
    pub package: PackageRef,
    /// Logical connection name (as workflows name it) -> product endpoint and credentials.
    pub connections: BTreeMap<String, Connection>,
    /// The shortest interval between two observations of a `wait-for`, in seconds
    /// (default 30, `DEFAULT_OBSERVE_FLOOR_SECONDS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observe_floor_seconds: Option<u64>,
    /// The shortest time between two firings of one schedule this deployment
    /// fires, in seconds (default and least 10): a package with a schedule
    /// firing more often is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10))]
    pub schedule_floor_seconds: Option<u64>,
    /// How long a stopping service (SIGTERM or SIGINT) waits, in seconds, for
    /// the product requests it has already sent to be answered and their
    /// answers committed before it exits. Without it: long enough for the
    /// slowest connection's token request and call plus a margin (the same as
    /// the claim lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub shutdown_grace_seconds: Option<u64>,
    /// Who may call the API, and with which roles.
    pub access: Access,
    /// Which log lines the service writes, and how; without it, `info` lines, `human`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<Logging>,
    /// Where traces are exported (OTLP); without it, none are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<Telemetry>,
    /// How long ended runs are kept; without it, forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
}

/// `grpc:` — the listener `coordinator worker` processes connect to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grpc {
    /// `host:port`, as `listen`, and not the same address (`0.0.0.0:7401`).
    #[schemars(regex(pattern = r"^.+:[0-9]{1,5}$"))]
    pub listen: String,
    /// The server's certificate and key; without them the listener speaks
    /// plain HTTP/2 (for a private network or a TLS-terminating proxy only:
    /// worker tokens cross it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<GrpcTls>,
}

/// `grpc.tls:` — the server's identity, PEM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcTls {
    /// The PEM certificate chain, leaf first.
    pub certificate: SecretRef,
    /// The PEM private key of the leaf certificate.
    pub private_key: SecretRef,
}

/// `dispatch:` — an accelerator for dispatch, never its authority: the
/// database stays the only source of truth, and losing what is configured here
/// costs latency, never a run (docs/workers.md, "Redis dispatch hints").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DispatchHints {
    /// The Redis server due work is announced on, one stream per lane.
    pub redis: RedisHints,
}

/// `dispatch.redis:` — where the hints go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedisHints {
    /// The server's URL (`redis://[:password@]host:port[/db]`); it may carry a
    /// password, so it is a reference.
    pub url: SecretRef,
}

/// `retention:` — what the service removes, and when (docs/operations.md, "Retention").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Retention {
    /// Days after a run ended (finished, failed, cancelled, expired) before it
    /// may be removed with its journal entries. Removal goes day by day from
    /// the oldest: a day holding a run that has not ended is kept, and so is
    /// every day after it.
    #[schemars(range(min = 1))]
    pub ended_runs_days: u32,
}

/// A reference to a secret: `env:NAME` (an environment variable) or `file:PATH`
/// (a file's contents; a relative path is relative to the directory of the
/// file that holds the reference, `runtime.yaml` or `worker.yaml`). The
/// configuration never holds the secret itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SecretRef(String);

/// Where a [`SecretRef`] points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretSource<'a> {
    /// The value of this environment variable.
    Env(&'a str),
    /// The contents of this file.
    File(&'a str),
}

/// A string that is not `env:NAME` or `file:PATH`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a secret reference must be `env:NAME` or `file:PATH`")]
pub struct NotASecretRef;

impl SecretRef {
    /// The pattern every reference matches (also the JSON Schema `pattern`).
    pub const PATTERN: &'static str = "^(env|file):.+$";

    /// Checks the shape of a reference.
    ///
    /// # Errors
    /// [`NotASecretRef`] unless the text is `env:` or `file:` followed by at least one character.
    pub fn parse(text: &str) -> Result<SecretRef, NotASecretRef> {
        let rest = text.strip_prefix("env:").or_else(|| text.strip_prefix("file:"));
        match rest {
            Some(rest) if !rest.is_empty() => Ok(SecretRef(text.to_owned())),
            _ => Err(NotASecretRef),
        }
    }

    /// The reference as written (`env:DATABASE_URL`). Safe to show: it is not the secret.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Where the secret is read from.
    pub fn source(&self) -> SecretSource<'_> {
        match self.0.strip_prefix("env:") {
            Some(name) => SecretSource::Env(name),
            None => SecretSource::File(self.0.strip_prefix("file:").unwrap_or(&self.0)),
        }
    }
}

impl TryFrom<String> for SecretRef {
    type Error = NotASecretRef;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        SecretRef::parse(&text)
    }
}

impl From<SecretRef> for String {
    fn from(reference: SecretRef) -> String {
        reference.0
    }
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for SecretRef {
    fn schema_name() -> Cow<'static, str> {
        "SecretRef".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": SecretRef::PATTERN,
            "description": "A secret reference: `env:NAME` or `file:PATH`; never the secret itself."
        })
    }
}

/// `database:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Database {
    /// The database URL (`postgres://…` or `sqlite://…`); it may carry a password, so it is a reference.
    pub url: SecretRef,
}

/// `payloadKeys:` — AES-256-GCM keys by id, so that keys can be rotated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PayloadKeys {
    /// The key id new seals use; one of `keys`.
    pub active: String,
    /// Key id -> reference to the 32-byte key. Older ids stay to open what they sealed.
    pub keys: BTreeMap<String, SecretRef>,
}

/// `package:` — the package to run and the digest it must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackageRef {
    /// The package file, relative to `runtime.yaml` or absolute.
    pub path: String,
    /// `sha256:<hex>` of the package bytes; a package with another digest is refused.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub digest: String,
}

/// One logical connection: a product endpoint and the service identity used
/// on it. An `in-process` connection (the default) carries the product's
/// `baseUrl` and `authorization`, and the coordinator calls the product
/// itself; a `remote` one carries neither (nor `timeouts`): its requests are
/// made by the `coordinator worker` processes whose subjects `workers` lists,
/// and the product's address and credentials live only in their
/// `worker.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = dispatch_rules)]
pub struct Connection {
    /// The product this connection reaches (`casework`); its operations must be in the catalog.
    pub product: String,
    /// Who makes the product requests: the coordinator (`in-process`, the default) or remote workers.
    #[serde(default, skip_serializing_if = "Dispatch::is_in_process")]
    pub dispatch: Dispatch,
    /// The product's base URL; operations are `POST {baseUrl}/v1/operations/…` (docs/reference/products.md).
    /// Required for an in-process connection, refused for a remote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(url)]
    pub base_url: Option<String>,
    /// How a fresh credential is acquired for every attempt. Required for an
    /// in-process connection, refused for a remote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<Authorization>,
    /// The subjects (static token subjects or OIDC `sub`s, holding the role
    /// `worker`) allowed to serve a remote connection; at least one. Refused
    /// for an in-process connection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub workers: Vec<String>,
    /// Verifies the HMAC signature of product events that triggers admit runs
    /// from (the coordinator verifies them, whatever the dispatch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_signing_secret: Option<SecretRef>,
    /// Network timeouts; without them, 5 s to connect and 30 s for the
    /// request. Refused for a remote connection (its worker sets them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Timeouts>,
    /// When the connection's breaker opens and how often it then probes;
    /// without it, after 5 failures in a row, a probe every 30 s. One breaker
    /// per connection for the whole deployment, remote ones included: refused
    /// in worker.yaml.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerConfig>,
    /// At most so many requests in flight and per second, for the whole
    /// deployment. A remote worker's own (worker.yaml) apply with the
    /// deployment's: the stricter bound of each holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ConnectionLimits>,
}

impl Connection {
    /// The timeouts in force: the configured ones or the defaults.
    pub fn effective_timeouts(&self) -> Timeouts {
        self.timeouts.unwrap_or_default()
    }

    /// Whether remote workers make this connection's product requests.
    pub fn is_remote(&self) -> bool {
        self.dispatch == Dispatch::Remote
    }
}

/// The JSON Schema's form of the rules decoding enforces: a remote connection
/// has `workers` and no `baseUrl`, `authorization` or `timeouts`; any other
/// has `baseUrl` and `authorization` and no `workers`.
fn dispatch_rules(schema: &mut Schema) {
    schema.insert("if".to_owned(), json!({"properties": {"dispatch": {"const": "remote"}}, "required": ["dispatch"]}));
    schema.insert(
        "then".to_owned(),
        json!({
            "required": ["workers"],
            "not": {"anyOf": [{"required": ["baseUrl"]}, {"required": ["authorization"]}, {"required": ["timeouts"]}]}
        }),
    );
    schema
        .insert("else".to_owned(), json!({"required": ["baseUrl", "authorization"], "not": {"required": ["workers"]}}));
}

/// `dispatch:` of a connection — who makes its product requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Dispatch {
    /// The coordinator calls the product itself, with the connection's `baseUrl` and `authorization`.
    #[default]
    InProcess,
    /// `coordinator worker` processes call the product and report the answers over gRPC.
    Remote,
}

impl Dispatch {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Dispatch::InProcess => "in-process",
            Dispatch::Remote => "remote",
        }
    }

    /// Whether this is the default, [`Dispatch::InProcess`] (left out when serialised).
    pub fn is_in_process(&self) -> bool {
        *self == Dispatch::InProcess
    }
}

/// An OAuth 2.0 client-credentials grant. The token is acquired fresh for every
/// attempt and never stored or logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Authorization {
    /// Authenticates to the token endpoint with a client secret.
    ClientSecret(ClientSecretGrant),
    /// Authenticates to the token endpoint with a signed JWT (`private_key_jwt`).
    PrivateKeyJwt(PrivateKeyJwtGrant),
}

/// `type: client-secret`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientSecretGrant {
    /// The OAuth 2.0 token endpoint.
    #[schemars(url)]
    pub token_endpoint: String,
    /// The client id of this connection's service identity.
    pub client_id: String,
    /// The client secret.
    pub client_secret: SecretRef,
    /// The scope requested, if the product wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// `type: private-key-jwt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrivateKeyJwtGrant {
    /// The OAuth 2.0 token endpoint (also the assertion's audience).
    #[schemars(url)]
    pub token_endpoint: String,
    /// The client id of this connection's service identity (the assertion's issuer and subject).
    pub client_id: String,
    /// The PEM private key that signs the client assertion.
    pub private_key: SecretRef,
    /// The `kid` the token endpoint knows the matching public key by.
    pub key_id: String,
    /// The scope requested, if the product wants one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// `timeouts:` of a connection, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeouts {
    /// Establishing the connection. A failure here is a definite "not done".
    #[schemars(range(min = 1))]
    pub connect_seconds: u64,
    /// The whole request once sent. A timeout here leaves the effect `unknown`.
    #[schemars(range(min = 1))]
    pub request_seconds: u64,
}

impl Timeouts {
    /// Connect timeout when the connection sets none.
    pub const DEFAULT_CONNECT_SECONDS: u64 = 5;
    /// Request timeout when the connection sets none.
    pub const DEFAULT_REQUEST_SECONDS: u64 = 30;
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { connect_seconds: Self::DEFAULT_CONNECT_SECONDS, request_seconds: Self::DEFAULT_REQUEST_SECONDS }
    }
}

/// `access:` — how callers authenticate and what they may do. Nothing is allowed
/// unless granted.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Access {
    /// Static bearer tokens (for automation and small deployments).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<StaticToken>,
    /// OIDC issuers whose JWTs are accepted as bearer tokens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oidc: Vec<OidcIssuer>,
    /// Roles granted to subjects per workflow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
}

/// A static bearer token and the subject it authenticates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticToken {
    /// The subject the token authenticates (runs it admits are owned by it).
    pub subject: String,
    /// The token.
    pub token: SecretRef,
    /// Roles the subject holds for every workflow (as a grant with workflow `*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<Role>,
}

/// An OIDC issuer whose signed JWTs authenticate callers (the subject is the `sub` claim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcIssuer {
    /// The `iss` claim a token must carry.
    pub issuer: String,
    /// The `aud` claim a token must carry.
    pub audience: String,
    /// Where the issuer's signing keys are: an `https://` URL or a `file:PATH` JWKS document.
    pub jwks: String,
}

/// Roles a subject holds for one workflow or for all of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grant {
    /// The subject (a static token's subject or an OIDC `sub`).
    pub subject: String,
    /// A workflow id, or `*` for every workflow.
    pub workflow: String,
    /// The roles granted.
    pub roles: Vec<Role>,
}

impl Grant {
    /// The `workflow` value that grants the roles for every workflow.
    pub const ANY_WORKFLOW: &'static str = "*";

    /// Whether this grant covers `workflow`.
    pub fn covers(&self, workflow: &str) -> bool {
        self.workflow == Self::ANY_WORKFLOW || self.workflow == workflow
    }
}

/// What a caller may do (docs/reference/protection.md). `admit`, `read` and `operate` are rights
/// on the HTTP API, per workflow. `worker` is not: a principal holding it may
/// serve (over gRPC) the remote connections whose `workers` list its subject,
/// and nothing else; it grants no right on the HTTP API, and the workflow of
/// a grant does not narrow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Start runs of a workflow.
    Admit,
    /// Read the caller's own runs.
    Read,
    /// Inspect, cancel, retry-same, reconcile, place and release restore holds, activate packages.
    Operate,
    /// Serve the remote connections that list the subject in `workers` (a `coordinator worker` process).
    Worker,
}

impl Role {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admit => "admit",
            Role::Read => "read",
            Role::Operate => "operate",
            Role::Worker => "worker",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_references_are_env_or_file() {
        assert_eq!(
            SecretRef::parse("env:DATABASE_URL").map(|r| r.source() == SecretSource::Env("DATABASE_URL")),
            Ok(true)
        );
        assert_eq!(
            SecretRef::parse("file:/run/keys/k1").map(|r| r.source() == SecretSource::File("/run/keys/k1")),
            Ok(true)
        );
        for bad in ["env:", "file:", "hunter2", "postgres://u:p@h/db", "ENV:X"] {
            assert_eq!(SecretRef::parse(bad), Err(NotASecretRef), "{bad}");
        }
        let literal: Result<Database, _> = serde_json::from_value(json!({"url": "postgres://u:p@h/db"}));
        assert!(literal.is_err());
    }

    #[test]
    fn authorization_is_tagged_by_type() {
        let auth: Result<Authorization, _> = serde_json::from_value(json!({
            "type": "private-key-jwt",
            "tokenEndpoint": "https://id.example/token",
            "clientId": "coordinator",
            "privateKey": "file:/run/keys/casework.pem",
            "keyId": "k1",
        }));
        assert!(matches!(auth, Ok(Authorization::PrivateKeyJwt(ref g)) if g.key_id == "k1"), "{auth:?}");
        let unknown: Result<Authorization, _> = serde_json::from_value(json!({
            "type": "client-secret", "tokenEndpoint": "x", "clientId": "c", "clientSecret": "env:S", "secret": "x"
        }));
        assert!(unknown.is_err());
    }

    #[test]
    fn grants_cover_their_workflow_or_all() {
        let grant =
            |workflow: &str| Grant { subject: "ops".into(), workflow: workflow.into(), roles: vec![Role::Operate] };
        assert!(grant("*").covers("reviewed-notice"));
        assert!(grant("reviewed-notice").covers("reviewed-notice"));
        assert!(!grant("permit-check").covers("reviewed-notice"));
    }
}

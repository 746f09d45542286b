//! Decodes one product connection, as `runtime.yaml` and `worker.yaml` write it.
//!
//! One decoder for both files, so a connection means the same in each: the
//! fields it may have depend on where it is written ([`Place`]) and, in
//! `runtime.yaml`, on its `dispatch`. An in-process connection (and every
//! connection of a worker) has `baseUrl` and `authorization`; a remote one has
//! `workers` and none of the product's address, credentials or timeouts,
//! which belong in the workers' `worker.yaml`; a worker's connection has no
//! `dispatch`, `workers`, `eventSigningSecret` or `breaker` (the breaker is
//! the deployment's, in runtime.yaml), and may have `limits` of its own. A field refused where it
//! is written is `schema.unknown-field` at its key, saying where it belongs.

use std::collections::BTreeSet;

use crate::decode::{Decoder, closest, optional};
use crate::diagnostic::{Code, Span};
use crate::model::runtime::{
    Authorization, BreakerConfig, ClientSecretGrant, Connection, ConnectionLimits, Dispatch, PrivateKeyJwtGrant, Rate,
    Timeouts,
};
use crate::yaml::{Key, Node, NodeValue};

use super::{secret, text, url};

/// Every field a connection has somewhere.
const FIELDS: &[&str] = &[
    "product",
    "dispatch",
    "baseUrl",
    "authorization",
    "workers",
    "eventSigningSecret",
    "timeouts",
    "breaker",
    "limits",
];
/// `dispatch` as written.
const DISPATCHES: &[(&str, Dispatch)] = &[("in-process", Dispatch::InProcess), ("remote", Dispatch::Remote)];
/// The fields of an authorization, whatever its type.
const AUTHORIZATION_FIELDS: &[&str] =
    &["type", "tokenEndpoint", "clientId", "clientSecret", "privateKey", "keyId", "scope"];

/// The `type` of an authorization, before its fields are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GrantType {
    ClientSecret,
    PrivateKeyJwt,
}

const GRANT_TYPES: &[(&str, GrantType)] =
    &[("client-secret", GrantType::ClientSecret), ("private-key-jwt", GrantType::PrivateKeyJwt)];

/// The file a connection is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::decode) enum Place {
    /// The coordinator's `runtime.yaml`: in-process or remote.
    Runtime,
    /// A worker's `worker.yaml`: always the product's address and credentials.
    Worker,
}

/// A connection named `key`. `None` when a value is wrong or a field its
/// dispatch requires is missing; a field refused where it is written is
/// reported without making the result `None`.
pub(in crate::decode) fn connection(d: &mut Decoder<'_>, place: Place, key: &Key, node: &Node) -> Option<Connection> {
    let what = format!("connection `{}`", key.text);
    // The dispatch decides which other fields belong; with a wrong one, only
    // `product` is required, so that one mistake is not reported three times.
    let dispatch = match (place, node.get("dispatch")) {
        (Place::Runtime, Some(n)) => d.one_of(n, &format!("the dispatch of {what}"), DISPATCHES),
        _ => Some(Dispatch::InProcess),
    };
    let f = d.object(node, &what, key.span, FIELDS, &["product"])?;
    let (required, refused): (&[&str], &[&str]) = match (place, dispatch) {
        (Place::Worker, _) => {
            (&["baseUrl", "authorization"], &["dispatch", "workers", "eventSigningSecret", "breaker"])
        }
        (Place::Runtime, Some(Dispatch::InProcess)) => (&["baseUrl", "authorization"], &["workers"]),
        (Place::Runtime, Some(Dispatch::Remote)) => (&["workers"], &["baseUrl", "authorization", "timeouts"]),
        (Place::Runtime, None) => (&[], &[]),
    };
    let complete = required.iter().all(|field| node.get(field).is_some());
    for field in required {
        if node.get(field).is_none() && !misspelled(node, field) {
            let (message, help) = missing(place, &what, field);
            d.report(Code::SchemaMissingField, key.span, message, help);
        }
    }
    for field in refused {
        if let Some((k, _)) = node.entry(field) {
            let (message, help) = misplaced(place, &what, field);
            d.report(Code::SchemaUnknownField, k.span, message, help);
        }
    }
    let present = |field: &str| f.get(field).filter(|_| !refused.contains(&field));
    let product = f.get("product").and_then(|n| product(d, n));
    let base_url = optional(present("baseUrl"), |n| url(d, n, &format!("the baseUrl of {what}")));
    let authorization = optional(present("authorization"), |n| authorization(d, n, f.key_span("authorization"), &what));
    let workers = optional(present("workers"), |n| workers(d, n, &what));
    let event_signing_secret =
        optional(present("eventSigningSecret"), |n| secret(d, n, &format!("the eventSigningSecret of {what}")));
    let timeouts = optional(present("timeouts"), |n| {
        let fields = ["connectSeconds", "requestSeconds"];
        let t = d.object(n, &format!("the timeouts of {what}"), f.key_span("timeouts"), &fields, &fields)?;
        let connect = t.get("connectSeconds").and_then(|n| d.uint(n, "connectSeconds", 1));
        let request = t.get("requestSeconds").and_then(|n| d.uint(n, "requestSeconds", 1));
        Some(Timeouts { connect_seconds: connect?, request_seconds: request? })
    });
    let breaker = optional(present("breaker"), |n| {
        let fields = ["openAfterFailures", "probeEverySeconds"];
        let b = d.object(n, &format!("the breaker of {what}"), f.key_span("breaker"), &fields, &[])?;
        let failures = optional(b.get("openAfterFailures"), |n| {
            d.uint(n, "openAfterFailures", 1).map(|v| u32::try_from(v).unwrap_or(u32::MAX))
        });
        let probe = optional(b.get("probeEverySeconds"), |n| d.uint(n, "probeEverySeconds", 1));
        Some(BreakerConfig {
            open_after_failures: failures?.unwrap_or(BreakerConfig::DEFAULT_OPEN_AFTER_FAILURES),
            probe_every_seconds: probe?.unwrap_or(BreakerConfig::DEFAULT_PROBE_EVERY_SECONDS),
        })
    });
    let limits = optional(present("limits"), |n| limits(d, n, f.key_span("limits"), &what));
    if !complete {
        return None;
    }
    Some(Connection {
        product: product?,
        dispatch: dispatch?,
        base_url: base_url?,
        authorization: authorization?,
        workers: workers?.unwrap_or_default(),
        event_signing_secret: event_signing_secret?,
        timeouts: timeouts?,
        breaker: breaker?,
        limits: limits?,
    })
}

/// A connection's `limits`: `concurrency` and `ratePerSecond`, at least one;
/// `burst` only with `ratePerSecond`.
fn limits(d: &mut Decoder<'_>, node: &Node, key: Span, what: &str) -> Option<ConnectionLimits> {
    let fields = ["concurrency", "ratePerSecond", "burst"];
    let l = d.object(node, &format!("the limits of {what}"), key, &fields, &[])?;
    if let (Some(burst), None) = (l.get("burst"), l.get("ratePerSecond")) {
        d.invalid(
            burst.span,
            format!("the limits of {what} have a `burst` but no `ratePerSecond`"),
            "a burst is the size of the rate's bucket: add `ratePerSecond`, or remove `burst`",
        );
        return None;
    }
    if l.get("concurrency").is_none() && l.get("ratePerSecond").is_none() {
        d.report(
            Code::SchemaMissingField,
            key,
            format!("the limits of {what} limit nothing"),
            "write `concurrency` (requests in flight at once), `ratePerSecond` (requests per second), or both, \
             e.g. `limits: {concurrency: 4}`",
        );
        return None;
    }
    let concurrency =
        optional(l.get("concurrency"), |n| d.uint(n, "concurrency", 1).map(|v| u32::try_from(v).unwrap_or(u32::MAX)));
    let rate = optional(l.get("ratePerSecond"), |n| {
        let value = d.number(n, "ratePerSecond", 0.0)?;
        match Rate::new(value) {
            Ok(rate) => Some(rate),
            Err(_) => {
                d.invalid(
                    n.span,
                    format!("ratePerSecond must be above 0 and at most 1000000, found {value}"),
                    "write requests per second, e.g. `ratePerSecond: 25` (or `0.5` for one every two seconds)",
                );
                None
            }
        }
    });
    let burst = optional(l.get("burst"), |n| d.uint(n, "burst", 1).map(|v| u32::try_from(v).unwrap_or(u32::MAX)));
    Some(ConnectionLimits { concurrency: concurrency?, rate_per_second: rate?, burst: burst? })
}

/// Whether a key of `node` that is no field is a misspelling of `field`
/// (reported as such already: saying `field` is missing too would report one
/// mistake twice).
fn misspelled(node: &Node, field: &str) -> bool {
    let NodeValue::Map(entries) = &node.value else { return false };
    entries.iter().any(|(k, _)| !FIELDS.contains(&k.text.as_str()) && closest(&k.text, FIELDS) == Some(field))
}

/// The message and help for a required `field` that `connection` lacks.
fn missing(place: Place, connection: &str, field: &str) -> (String, String) {
    match place {
        Place::Runtime if field == "workers" => (
            format!("{connection} is remote but has no `workers`"),
            "list the subjects allowed to serve it, e.g. `workers: [casework-worker]`: \
             each a static token's subject or an OIDC `sub` holding the role `worker`"
                .to_owned(),
        ),
        Place::Runtime => (
            format!("{connection} has no `{field}`"),
            format!(
                "add the required field `{field}`; or, if `coordinator worker` processes call this product, \
                 write `dispatch: remote` and `workers` here and the product's baseUrl and authorization in their worker.yaml"
            ),
        ),
        Place::Worker => (format!("{connection} has no `{field}`"), format!("add the required field `{field}`")),
    }
}

/// The message and help for a `field` that `connection` must not have where it is written.
fn misplaced(place: Place, connection: &str, field: &str) -> (String, String) {
    match (place, field) {
        (Place::Runtime, "workers") => (
            format!("{connection} is in-process: `workers` is only for a connection with `dispatch: remote`"),
            "remove `workers`, or write `dispatch: remote` and move the product's baseUrl and authorization \
             to the worker.yaml of the workers that serve it"
                .to_owned(),
        ),
        (Place::Worker, "breaker") => (
            format!("{connection} has a `breaker`, which the coordinator keeps for the whole deployment"),
            "remove it here and write it in the coordinator's runtime.yaml, under the same connection: \
             every worker and process shares one breaker per connection (docs/reference/runtime.md#a-connection)"
                .to_owned(),
        ),
        (Place::Runtime, _) => (
            format!(
                "{connection} is remote: its `{field}` belongs in the worker.yaml of the workers that serve it, \
                 not in runtime.yaml"
            ),
            format!(
                "remove `{field}` here and write it in the worker's worker.yaml, next to the product: \
                 the coordinator never holds a remote connection's product address, credentials or timeouts"
            ),
        ),
        (Place::Worker, "eventSigningSecret") => (
            format!("{connection} has an `eventSigningSecret`, which a worker never uses"),
            "remove it here: the coordinator verifies signed product events, so the secret belongs \
             in the coordinator's runtime.yaml, under the same connection"
                .to_owned(),
        ),
        (Place::Worker, _) => (
            format!("{connection} has `{field}`, which only the coordinator's runtime.yaml says"),
            format!(
                "remove `{field}` here: a worker always calls the product itself, and the coordinator's \
                 runtime.yaml says which workers serve the connection (`dispatch: remote`, `workers`)"
            ),
        ),
    }
}

/// A product name: lowercase letters, digits and `-` (as in catalog files).
fn product(d: &mut Decoder<'_>, node: &Node) -> Option<String> {
    let name = d.string(node, "product")?;
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        d.invalid(
            node.span,
            format!("the product `{}` is not a product name", name.escape_default()),
            "write the catalog's product name: lowercase letters, digits and `-`, e.g. `casework`",
        );
        return None;
    }
    Some(name)
}

/// `workers:` of a remote connection: at least one subject, each once.
fn workers(d: &mut Decoder<'_>, node: &Node, connection: &str) -> Option<Vec<String>> {
    let subjects = d.seq_of(node, &format!("the workers of {connection}"), |d, _, n| text(d, n, "a worker subject"))?;
    if subjects.is_empty() {
        d.invalid(
            node.span,
            format!("{connection} lists no worker"),
            "list the subjects allowed to serve it, e.g. `workers: [casework-worker]`",
        );
        return None;
    }
    let mut seen = BTreeSet::new();
    let mut ok = true;
    if let NodeValue::Seq(items) = &node.value {
        for (subject, item) in subjects.iter().zip(items) {
            if !seen.insert(subject.as_str()) {
                d.invalid(
                    item.span,
                    format!("the worker `{}` is listed twice in {connection}", subject.escape_default()),
                    "list each subject once",
                );
                ok = false;
            }
        }
    }
    ok.then_some(subjects)
}

fn authorization(d: &mut Decoder<'_>, node: &Node, owner: Span, connection: &str) -> Option<Authorization> {
    let what = format!("the authorization of {connection}");
    let kind = match node.get("type") {
        Some(t) => d.one_of(t, "the authorization type", GRANT_TYPES)?,
        None => {
            d.object(node, &what, owner, AUTHORIZATION_FIELDS, &["type"]);
            return None;
        }
    };
    let secret_field = if kind == GrantType::ClientSecret { "clientSecret" } else { "privateKey" };
    let mut known = vec!["type", "tokenEndpoint", "clientId", secret_field, "scope"];
    let mut required = vec!["tokenEndpoint", "clientId", secret_field];
    if kind == GrantType::PrivateKeyJwt {
        known.push("keyId");
        required.push("keyId");
    }
    let f = d.object(node, &what, owner, &known, &required)?;
    let token_endpoint = f.get("tokenEndpoint").and_then(|n| url(d, n, &format!("the tokenEndpoint of {connection}")));
    let client_id = f.get("clientId").and_then(|n| text(d, n, "clientId"));
    let secret = f.get(secret_field).and_then(|n| secret(d, n, &format!("the {secret_field} of {connection}")));
    let scope = optional(f.get("scope"), |n| text(d, n, "scope"));
    match kind {
        GrantType::ClientSecret => Some(Authorization::ClientSecret(ClientSecretGrant {
            token_endpoint: token_endpoint?,
            client_id: client_id?,
            client_secret: secret?,
            scope: scope?,
        })),
        GrantType::PrivateKeyJwt => {
            let key_id = f.get("keyId").and_then(|n| text(d, n, "keyId"));
            Some(Authorization::PrivateKeyJwt(PrivateKeyJwtGrant {
                token_endpoint: token_endpoint?,
                client_id: client_id?,
                private_key: secret?,
                key_id: key_id?,
                scope: scope?,
            }))
        }
    }
}

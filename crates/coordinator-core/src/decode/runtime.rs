//! Decodes `runtime.yaml` into [`RuntimeFile`], field by field.
//!
//! Checks the shape of one deployment's configuration: known and required
//! fields, types, the listen addresses ([`listen`], `grpc.listen`), the package
//! digest, URLs (http or https, never with credentials in them), that the
//! active payload key is one of the keys, roles and names, the connections
//! ([`connection`], shared with `worker.yaml`; a remote one needs `grpc`),
//! `dispatch.redis`, and the `logging` and `telemetry` sections ([`observability`]). Every secret must be a reference (`env:NAME` or
//! `file:PATH`); a literal is refused with a message that never repeats it, and
//! [`redact()`] masks it in the text shown in excerpts. Does not check the file
//! against a project ([`check::runtime`](crate::check::runtime)) and never resolves a reference.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::diagnostic::{Code, Span};
use crate::model::runtime::{
    Access, Database, DispatchHints, Grant, Grpc, GrpcTls, OidcIssuer, PackageRef, PayloadKeys, RedisHints, Retention,
    Role, RuntimeFile, RuntimeKind, SecretRef, SecretSource, StaticToken,
};
use crate::model::{API_VERSION, ApiVersion};
use crate::yaml::{Key, Node, NodeValue};

use super::{Decoder, optional};

pub(super) mod connection;
mod observability;
mod redact;

use connection::Place;

pub use redact::redact;

const TOP: &[&str] = &[
    "apiVersion",
    "kind",
    "database",
    "payloadKeys",
    "listen",
    "grpc",
    "dispatch",
    "package",
    "connections",
    "observeFloorSeconds",
    "scheduleFloorSeconds",
    "shutdownGraceSeconds",
    "access",
    "logging",
    "telemetry",
    "retention",
];
const TOP_REQUIRED: &[&str] =
    &["apiVersion", "kind", "database", "payloadKeys", "listen", "package", "connections", "access"];
/// The longest retention, days.
const MAX_RETENTION_DAYS: u32 = 36_500;
const ROLES: &[(&str, Role)] =
    &[("admit", Role::Admit), ("read", Role::Read), ("operate", Role::Operate), ("worker", Role::Worker)];
/// The fields of `grpc`.
const GRPC_FIELDS: &[&str] = &["listen", "tls"];
/// The fields of `grpc.tls`.
const TLS_FIELDS: &[&str] = &["certificate", "privateKey"];

/// Decodes a parsed `runtime.yaml`. `None` when a value is wrong or missing; an
/// unknown field is reported without making the result `None`, so any error
/// diagnostic refuses the file.
pub fn decode(d: &mut Decoder<'_>, root: &Node) -> Option<RuntimeFile> {
    let f = d.object(root, "the runtime file", Span::at(1, 1), TOP, TOP_REQUIRED)?;
    let api_version = f.get("apiVersion").and_then(|n| d.one_of(n, "apiVersion", &[(API_VERSION, ApiVersion::V1)]));
    let kind = f.get("kind").and_then(|n| d.one_of(n, "kind", &[("Runtime", RuntimeKind::Runtime)]));
    let database = f.get("database").and_then(|n| {
        let db = d.object(n, "`database`", f.key_span("database"), &["url"], &["url"])?;
        db.get("url").and_then(|n| secret(d, n, "the database `url`")).map(|url| Database { url })
    });
    let payload_keys = f.get("payloadKeys").and_then(|n| payload_keys(d, n, f.key_span("payloadKeys")));
    let listen = f.get("listen").and_then(|n| listen(d, n, "listen"));
    let grpc = optional(f.get("grpc"), |n| grpc(d, n, f.key_span("grpc"), f.get("listen")));
    let dispatch = optional(f.get("dispatch"), |n| dispatch(d, n, f.key_span("dispatch")));
    let package = f.get("package").and_then(|n| package(d, n, f.key_span("package")));
    let connections = f.get("connections").and_then(|n| {
        d.map_of(n, "connection", true, |d, key, node| connection::connection(d, Place::Runtime, key, node))
    });
    let listener = match (f.get("grpc"), f.get("connections").map(|n| &n.value)) {
        (None, Some(NodeValue::Map(entries))) => remote_without_grpc(d, entries),
        _ => Some(()),
    };
    let observe_floor_seconds = optional(f.get("observeFloorSeconds"), |n| d.uint(n, "observeFloorSeconds", 1));
    let schedule_floor_seconds = optional(f.get("scheduleFloorSeconds"), |n| {
        d.uint(n, "scheduleFloorSeconds", crate::schedule::MIN_SPACING_SECONDS)
    });
    let shutdown_grace_seconds = optional(f.get("shutdownGraceSeconds"), |n| d.uint(n, "shutdownGraceSeconds", 1));
    let access = f.get("access").and_then(|n| access(d, n, f.key_span("access")));
    let logging = optional(f.get("logging"), |n| observability::logging(d, n, f.key_span("logging")));
    let telemetry = optional(f.get("telemetry"), |n| observability::telemetry(d, n, f.key_span("telemetry")));
    let retention = optional(f.get("retention"), |n| retention(d, n, f.key_span("retention")));
    listener?;
    Some(RuntimeFile {
        api_version: api_version?,
        kind: kind?,
        database: database?,
        payload_keys: payload_keys?,
        listen: listen?,
        grpc: grpc?,
        dispatch: dispatch?,
        package: package?,
        connections: connections?,
        observe_floor_seconds: observe_floor_seconds?,
        schedule_floor_seconds: schedule_floor_seconds?,
        shutdown_grace_seconds: shutdown_grace_seconds?,
        access: access?,
        logging: logging?,
        telemetry: telemetry?,
        retention: retention?,
    })
}

/// `retention:`; `owner` is its key.
fn retention(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<Retention> {
    let f = d.object(node, "`retention`", owner, &["endedRunsDays"], &["endedRunsDays"])?;
    let days = f.get("endedRunsDays").and_then(|n| {
        let days = d.uint(n, "retention.endedRunsDays", 1)?;
        match u32::try_from(days) {
            Ok(days) if days <= MAX_RETENTION_DAYS => Some(days),
            _ => {
                d.invalid(
                    n.span,
                    format!("retention.endedRunsDays is {days}, more than {MAX_RETENTION_DAYS} (100 years)"),
                    "write a number of days from 1 to 36500, or leave `retention` out to keep ended runs forever",
                );
                None
            }
        }
    })?;
    Some(Retention { ended_runs_days: days })
}

/// A secret reference. Anything else is refused without repeating it: it may be the secret.
pub(super) fn secret(d: &mut Decoder<'_>, node: &Node, what: &str) -> Option<SecretRef> {
    let reference = match &node.value {
        NodeValue::String(text) => SecretRef::parse(text).ok(),
        _ => None,
    };
    let Some(reference) = reference else {
        d.invalid(
            node.span,
            format!("{what} is not `env:NAME` or `file:PATH`: a secret must be a reference"),
            "write env:NAME or file:PATH; the secret itself stays in the environment or the file, never in runtime.yaml",
        );
        return None;
    };
    if let SecretSource::Env(name) = reference.source()
        && !is_env_name(name)
    {
        d.invalid(
            node.span,
            format!("{what}: `env:` is not followed by an environment variable name"),
            "write env:NAME, with NAME made of letters, digits and `_`, not starting with a digit",
        );
        return None;
    }
    Some(reference)
}

/// Whether `name` can name an environment variable (`[A-Za-z_][A-Za-z0-9_]*`).
fn is_env_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A string that is not empty.
pub(super) fn text(d: &mut Decoder<'_>, node: &Node, what: &str) -> Option<String> {
    let text = d.string(node, what)?;
    if text.trim().is_empty() {
        d.invalid(node.span, format!("{what} is empty"), format!("give {what} a value"));
        return None;
    }
    Some(text)
}

fn payload_keys(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<PayloadKeys> {
    let f = d.object(node, "`payloadKeys`", owner, &["active", "keys"], &["active", "keys"])?;
    let keys = f.get("keys").and_then(|n| {
        let keys =
            d.map_of(n, "payload key id", true, |d, key, v| secret(d, v, &format!("payload key `{}`", key.text)))?;
        if keys.is_empty() {
            d.invalid(n.span, "`payloadKeys.keys` is empty", "add a key, e.g. `k1: file:/run/secrets/payload-key-1`");
            return None;
        }
        Some(keys)
    });
    let active = f.get("active").and_then(|n| {
        let active = d.name(n, "the active payload key")?;
        // Checked against the ids as written, so that a bad key value elsewhere
        // does not hide a wrong `active`.
        let ids: Vec<&str> = match f.get("keys").map(|k| &k.value) {
            Some(NodeValue::Map(entries)) => entries.iter().map(|(k, _)| k.text.as_str()).collect(),
            _ => return Some(active),
        };
        if !ids.contains(&active.as_str()) {
            d.invalid(
                n.span,
                format!("the active payload key `{active}` is not one of `keys`"),
                format!("name one of the key ids: {}", ids.join(", ")),
            );
            return None;
        }
        Some(active)
    });
    Some(PayloadKeys { active: active?, keys: keys? })
}

/// `host:port`: an IPv4 address, a host name or a bracketed IPv6 address, and
/// a port from 1 to 65535. `what` names the field (`listen`, `grpc.listen`).
fn listen(d: &mut Decoder<'_>, node: &Node, what: &str) -> Option<String> {
    let text = d.string(node, what)?;
    if !is_listen_address(&text) {
        d.invalid(
            node.span,
            format!("{what} `{}` is not `host:port`", text.escape_default()),
            "write a host and a port from 1 to 65535, e.g. `127.0.0.1:7400`, `0.0.0.0:7400` or `[::1]:7400`",
        );
        return None;
    }
    Some(text)
}

/// `grpc:`; `owner` is its key, `api` the value of `listen` (the two cannot share an address).
fn grpc(d: &mut Decoder<'_>, node: &Node, owner: Span, api: Option<&Node>) -> Option<Grpc> {
    let f = d.object(node, "`grpc`", owner, GRPC_FIELDS, &["listen"])?;
    let listen = f.get("listen").and_then(|n| {
        let address = listen(d, n, "grpc.listen")?;
        if api.is_some_and(|api| matches!(&api.value, NodeValue::String(s) if *s == address)) {
            d.invalid(
                n.span,
                format!("grpc.listen `{}` is the address of the HTTP API (`listen`)", address.escape_default()),
                "give the gRPC listener a port of its own, e.g. `0.0.0.0:7401`",
            );
            return None;
        }
        Some(address)
    });
    let tls = optional(f.get("tls"), |n| {
        let t = d.object(n, "`grpc.tls`", f.key_span("tls"), TLS_FIELDS, TLS_FIELDS)?;
        let certificate = t.get("certificate").and_then(|n| secret(d, n, "grpc.tls.certificate"));
        let private_key = t.get("privateKey").and_then(|n| secret(d, n, "grpc.tls.privateKey"));
        Some(GrpcTls { certificate: certificate?, private_key: private_key? })
    });
    Some(Grpc { listen: listen?, tls: tls? })
}

/// `dispatch:`; `owner` is its key. The Redis URL is a reference: it may carry a password.
fn dispatch(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<DispatchHints> {
    let f = d.object(node, "`dispatch`", owner, &["redis"], &["redis"])?;
    let redis = f.get("redis").and_then(|n| {
        let r = d.object(n, "`dispatch.redis`", f.key_span("redis"), &["url"], &["url"])?;
        r.get("url").and_then(|n| secret(d, n, "dispatch.redis.url")).map(|url| RedisHints { url })
    })?;
    Some(DispatchHints { redis })
}

/// Reports every remote connection of a file without `grpc`, at its
/// `dispatch` (read from the nodes, so another mistake in the connection does
/// not hide this one): its workers would have nothing to connect to. `None`
/// when there is one.
fn remote_without_grpc(d: &mut Decoder<'_>, connections: &[(Key, Node)]) -> Option<()> {
    let mut ok = Some(());
    for (key, node) in connections {
        let Some(dispatch) = node.get("dispatch") else { continue };
        if matches!(&dispatch.value, NodeValue::String(s) if s == "remote") {
            d.report(
                Code::SchemaMissingField,
                dispatch.span,
                format!("connection `{}` is remote, but the file has no `grpc` listener for its workers", key.text),
                "add `grpc: {listen: 0.0.0.0:7401}` (and `tls` unless the network between the coordinator and its \
                 workers is private), or remove `dispatch: remote`",
            );
            ok = None;
        }
    }
    ok
}

fn is_listen_address(text: &str) -> bool {
    let Some((host, port)) = text.rsplit_once(':') else { return false };
    port_ok(port) && host_ok(host)
}

fn port_ok(port: &str) -> bool {
    port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p > 0)
}

fn host_ok(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<Ipv6Addr>().is_ok();
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return host.parse::<Ipv4Addr>().is_ok();
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    host.len() <= 253 && host.split('.').all(label_ok)
}

fn package(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<PackageRef> {
    let f = d.object(node, "`package`", owner, &["path", "digest"], &["path", "digest"])?;
    let path = f.get("path").and_then(|n| text(d, n, "package.path"));
    let digest = f.get("digest").and_then(|n| {
        let digest = d.string(n, "package.digest")?;
        let hex = digest.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            d.invalid(
                n.span,
                "package.digest is not `sha256:` followed by 64 lowercase hexadecimal digits",
                "copy the digest that `coordinatorctl package` printed for the package",
            );
            return None;
        }
        Some(digest)
    });
    Some(PackageRef { path: path?, digest: digest? })
}

/// An `http://` or `https://` URL of a product or identity provider (see [`url_with`]).
pub(super) fn url(d: &mut Decoder<'_>, node: &Node, what: &str) -> Option<String> {
    url_with(
        d,
        node,
        what,
        "write an http:// or https:// URL such as `https://casework.internal.example`; \
         credentials belong in `authorization`, as references",
    )
}

/// An `http://` or `https://` URL with a host and no credentials; `help` says
/// what to write instead. The message never repeats the URL: a wrong one may
/// carry a password.
pub(super) fn url_with(d: &mut Decoder<'_>, node: &Node, what: &str, help: &str) -> Option<String> {
    let text = d.string(node, what)?;
    if let Err(why) = check_url(&text, &["http://", "https://"]) {
        d.invalid(node.span, format!("{what} {why}"), help);
        return None;
    }
    Some(text)
}

/// Why `text` is not a URL with one of `schemes`, a host, and no credentials.
pub(super) fn check_url(text: &str, schemes: &[&str]) -> Result<(), &'static str> {
    let rest = schemes.iter().find_map(|s| text.strip_prefix(s)).ok_or("is not an http:// or https:// URL")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("carries credentials (`user:password@`)");
    }
    if text.chars().any(char::is_whitespace) {
        return Err("contains white space");
    }
    match authority.rsplit_once(':') {
        _ if authority.is_empty() => Err("has no host"),
        Some((host, port)) if !host.ends_with(':') && !port.contains(']') => {
            if host_ok(host) && port_ok(port) {
                Ok(())
            } else {
                Err("does not have a valid host and port")
            }
        }
        _ if host_ok(authority) => Ok(()),
        _ => Err("does not have a valid host"),
    }
}

fn access(d: &mut Decoder<'_>, node: &Node, owner: Span) -> Option<Access> {
    let f = d.object(node, "`access`", owner, &["tokens", "oidc", "grants"], &[])?;
    let tokens = optional(f.get("tokens"), |n| d.seq_of(n, "`access.tokens`", token));
    let oidc = optional(f.get("oidc"), |n| d.seq_of(n, "`access.oidc`", issuer));
    let grants = optional(f.get("grants"), |n| d.seq_of(n, "`access.grants`", grant));
    Some(Access {
        tokens: tokens?.unwrap_or_default(),
        oidc: oidc?.unwrap_or_default(),
        grants: grants?.unwrap_or_default(),
    })
}

fn token(d: &mut Decoder<'_>, index: usize, node: &Node) -> Option<StaticToken> {
    let what = format!("`access.tokens` entry {}", index + 1);
    let f = d.object(node, &what, node.span, &["subject", "token", "roles"], &["subject", "token"])?;
    let subject = f.get("subject").and_then(|n| text(d, n, "subject"));
    let token = f.get("token").and_then(|n| secret(d, n, &format!("the token of {what}")));
    let roles = optional(f.get("roles"), |n| roles(d, n));
    Some(StaticToken { subject: subject?, token: token?, roles: roles?.unwrap_or_default() })
}

fn issuer(d: &mut Decoder<'_>, index: usize, node: &Node) -> Option<OidcIssuer> {
    let what = format!("`access.oidc` entry {}", index + 1);
    let fields = ["issuer", "audience", "jwks"];
    let f = d.object(node, &what, node.span, &fields, &fields)?;
    let issuer = f.get("issuer").and_then(|n| url(d, n, &format!("the issuer of {what}")));
    let audience = f.get("audience").and_then(|n| text(d, n, "audience"));
    let jwks = f.get("jwks").and_then(|n| {
        let jwks = d.string(n, "jwks")?;
        let file = jwks.strip_prefix("file:").is_some_and(|path| !path.is_empty());
        if !file && check_url(&jwks, &["https://"]).is_err() {
            d.invalid(
                n.span,
                format!("the jwks of {what} is neither an https:// URL without credentials nor `file:PATH`"),
                "write the issuer's JWKS URL (`https://…/.well-known/jwks.json`) or `file:PATH` of a JWKS document",
            );
            return None;
        }
        Some(jwks)
    });
    Some(OidcIssuer { issuer: issuer?, audience: audience?, jwks: jwks? })
}

fn grant(d: &mut Decoder<'_>, index: usize, node: &Node) -> Option<Grant> {
    let what = format!("`access.grants` entry {}", index + 1);
    let fields = ["subject", "workflow", "roles"];
    let f = d.object(node, &what, node.span, &fields, &fields)?;
    let subject = f.get("subject").and_then(|n| text(d, n, "subject"));
    let workflow = f.get("workflow").and_then(|n| {
        let workflow = d.string(n, "workflow")?;
        (workflow == Grant::ANY_WORKFLOW || d.check_name(&workflow, n.span, "the workflow")).then_some(workflow)
    });
    let roles = f.get("roles").and_then(|n| {
        let roles = roles(d, n)?;
        if roles.is_empty() {
            d.invalid(n.span, format!("{what} grants no role"), "list at least one of admit, read, operate, worker");
            return None;
        }
        Some(roles)
    });
    Some(Grant { subject: subject?, workflow: workflow?, roles: roles? })
}

fn roles(d: &mut Decoder<'_>, node: &Node) -> Option<Vec<Role>> {
    d.seq_of(node, "`roles`", |d, _, n| d.one_of(n, "the role", ROLES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_are_host_and_port() {
        for ok in ["127.0.0.1:7400", "0.0.0.0:1", "[::1]:7400", "localhost:65535", "coordinator.internal:80"] {
            assert!(is_listen_address(ok), "{ok}");
        }
        for bad in ["7400", ":7400", "127.0.0.1:", "127.0.0.1:0", "h:65536", "999.1.1.1:80", "::1:80", "a b:80"] {
            assert!(!is_listen_address(bad), "{bad}");
        }
    }

    #[test]
    fn urls_are_http_with_a_host_and_no_credentials() {
        let schemes = ["http://", "https://"];
        for ok in ["https://breg.example/api", "http://127.0.0.1:7400/sim/breg", "https://[::1]:8443", "https://h?x=1"]
        {
            assert_eq!(check_url(ok, &schemes), Ok(()), "{ok}");
        }
        for bad in ["ftp://h", "https://", "https://u:p@h/x", "https://h:0", "https://h x", "breg.example"] {
            assert!(check_url(bad, &schemes).is_err(), "{bad}");
        }
    }
}

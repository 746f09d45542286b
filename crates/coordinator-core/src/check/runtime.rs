//! Runtime proofs: a project checked against one deployment's `runtime.yaml`
//! (`coordinatorctl check --runtime`).
//!
//! Every connection the workflow names exists in the runtime file and reaches
//! the product of the operations and events bound to it; a trigger's connection
//! has an event-signing secret; every connection is used (a warning otherwise);
//! every subject a remote connection lists in `workers` can authenticate
//! holding the role `worker` (whatever the project: [`load`] checks it); no
//! schedule fires more often than the file's `scheduleFloorSeconds`; and,
//! when the caller can tell (`--environment`), every secret reference can be
//! read and the pinned package file has the pinned digest (and holds the
//! project's revision: a warning otherwise). Must not read anything itself:
//! the caller hands over the text, whether a secret can be read comes through
//! [`SecretProbe`] and the package's bytes through [`PackageSource`], which
//! the binary implements. No diagnostic shows a secret: only references are
//! named.

use std::collections::{BTreeMap, BTreeSet};

use crate::decode::{self, Decoder, qualified};
use crate::diagnostic::{Code, Diagnostic};
use crate::model::runtime::{Access, Authorization, Connection, Role, RuntimeFile, SecretRef, SecretSource};
use crate::yaml::{self, Node, Part, Path};

use super::context::Ctx;

/// The `runtime.yaml` a project is checked against.
pub struct RuntimeInput<'a> {
    /// The file name used in diagnostics: the path as the user gave it.
    pub file: &'a str,
    /// Its text.
    pub text: &'a str,
    /// Tells whether each secret reference can be read (`--environment`); `None`
    /// checks the file offline, without looking at any secret.
    pub secrets: Option<&'a dyn SecretProbe>,
    /// Reads the package file the runtime pins (`--environment`); `None` does
    /// not look at it.
    pub package: Option<&'a dyn PackageSource>,
}

/// Reads the package file a runtime file pins.
pub trait PackageSource {
    /// The bytes of the file at `path`, as the runtime file writes it
    /// (relative to its directory, or absolute).
    ///
    /// # Errors
    /// Why the file cannot be read (the operating system's reason).
    fn read_package(&self, path: &str) -> Result<Vec<u8>, String>;
}

/// Tells whether the secret behind a reference is available, without handing it over.
pub trait SecretProbe {
    /// `Ok(())` when the environment variable is set, or the file can be read, and is not empty.
    ///
    /// # Errors
    /// Why the secret cannot be read; never the secret itself.
    fn probe(&self, reference: &SecretRef) -> Result<(), SecretProblem>;
}

/// Why a secret reference cannot be resolved. Carries no secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretProblem {
    /// The environment variable is not set (or is not valid Unicode).
    NotSet,
    /// The environment variable or the file is empty.
    Empty,
    /// The file cannot be read: the operating system's reason.
    Unreadable(String),
}

/// A decoded `runtime.yaml` with its node tree, for positions.
pub struct LoadedRuntime {
    /// The file name used in diagnostics.
    pub file: String,
    /// Its node tree.
    pub root: Node,
    /// Its content.
    pub runtime: RuntimeFile,
    /// The revision of the pinned package, when it was read and has the pinned digest.
    pub package_revision: Option<String>,
}

impl LoadedRuntime {
    /// A diagnostic at `path` (its key or value) of the runtime file.
    fn diagnostic(&self, code: Code, path: &Path, part: Part, message: String, help: String) -> Diagnostic {
        Diagnostic::error(code, &self.file, self.root.span_of(path, part), message, help)
    }
}

/// Parses and decodes the runtime file, and probes its secrets when the input
/// has a probe. Diagnostics go to `out`. Returns the decoded file (when it has
/// no error) and the text to show in excerpts: masked by
/// [`decode::runtime::redact`], and `None` when the YAML does not parse (then
/// nothing is known about where a secret might be written).
pub fn load(input: &RuntimeInput<'_>, out: &mut Vec<Diagnostic>) -> (Option<LoadedRuntime>, Option<String>) {
    let root = match yaml::parse(input.file, input.text) {
        Ok(root) => root,
        Err(d) => {
            out.push(d);
            return (None, None);
        }
    };
    let shown = decode::runtime::redact(&root, input.text);
    let mut decoder = Decoder::new(input.file);
    let runtime = decode::runtime::decode(&mut decoder, &root);
    let errors = decoder.diagnostics.iter().any(Diagnostic::is_error);
    out.append(&mut decoder.diagnostics);
    let loaded = match runtime {
        Some(runtime) if !errors => {
            LoadedRuntime { file: input.file.to_owned(), root, runtime, package_revision: None }
        }
        _ => return (None, Some(shown)),
    };
    let mut loaded = loaded;
    check_workers(&loaded, out);
    if let Some(probe) = input.secrets {
        check_secrets(&loaded, probe, out);
    }
    if let Some(source) = input.package {
        loaded.package_revision = check_package(&loaded, source, out);
    }
    (Some(loaded), Some(shown))
}

/// Checks the workflow's connections against the runtime file.
pub fn check(cx: &mut Ctx<'_>, rt: &LoadedRuntime) {
    let wf = cx.wf;
    let connections = &rt.runtime.connections;
    let names: Vec<&str> = connections.keys().map(String::as_str).collect();
    let mut used = BTreeSet::new();
    // Connection -> the triggers that need its event-signing secret.
    let mut signed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (alias, binding) in &wf.operations {
        used.insert(binding.connection.as_str());
        let path = Path::root().key("operations").key(alias).key("connection");
        let Some(connection) = connections.get(&binding.connection) else {
            let message = format!(
                "the operation alias `{alias}` uses the connection `{}`, which {} does not have",
                binding.connection, rt.file
            );
            cx.error(
                Code::RuntimeUnknownConnection,
                &path,
                Part::Value,
                message,
                missing_help(&binding.connection, &names),
            );
            continue;
        };
        let product = qualified(&binding.operation).map_or("", |(product, _)| product);
        if connection.product != product {
            cx.error(
                Code::RuntimeProductMismatch,
                &path,
                Part::Value,
                format!(
                    "`{}` is a {product} operation, but the connection `{}` reaches the product `{}` in {}",
                    binding.operation, binding.connection, connection.product, rt.file
                ),
                format!(
                    "bind the alias to a connection of the product `{product}`, or correct the connection's `product`"
                ),
            );
        }
    }
    for (name, trigger) in &wf.triggers {
        used.insert(trigger.connection.as_str());
        let path = Path::root().key("triggers").key(name).key("connection");
        let Some((connection_name, connection)) = connections.get_key_value(&trigger.connection) else {
            let message = format!(
                "the trigger `{name}` uses the connection `{}`, which {} does not have",
                trigger.connection, rt.file
            );
            cx.error(
                Code::TriggerUnknownConnection,
                &path,
                Part::Value,
                message,
                missing_help(&trigger.connection, &names),
            );
            continue;
        };
        let product = qualified(&trigger.event).map_or("", |(product, _)| product);
        if connection.product != product {
            cx.error(
                Code::RuntimeProductMismatch,
                &path,
                Part::Value,
                format!(
                    "`{}` is a {product} event, but the connection `{}` reaches the product `{}` in {}",
                    trigger.event, trigger.connection, connection.product, rt.file
                ),
                format!("name a connection of the product `{product}`, or correct the connection's `product`"),
            );
        }
        if connection.event_signing_secret.is_none() {
            signed.entry(connection_name).or_default().push(name);
        }
    }
    for (connection, triggers) in signed {
        let list = triggers.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ");
        cx.diagnostics.push(rt.diagnostic(
            Code::RuntimeMissingSigningSecret,
            &Path::root().key("connections").key(connection),
            Part::Key,
            format!("the connection `{connection}` has no `eventSigningSecret`, but the trigger(s) {list} admit runs from its signed events"),
            "add `eventSigningSecret: env:NAME` (or `file:PATH`) to the connection: unsigned events cannot be verified".to_owned(),
        ));
    }
    for name in names.iter().filter(|name| !used.contains(*name)) {
        let unused = rt.diagnostic(
            Code::RuntimeUnusedConnection,
            &Path::root().key("connections").key(name),
            Part::Key,
            format!("the connection `{name}` is not used by any operation alias or trigger of `{}`", wf.workflow.id),
            "remove it, or bind an operation alias or trigger to it (a deployment runs one package)".to_owned(),
        );
        cx.diagnostics.push(unused.warning());
    }
    schedule_floor(cx, rt);
}

/// No schedule fires closer together than the deployment's `scheduleFloorSeconds`.
fn schedule_floor(cx: &mut Ctx<'_>, rt: &LoadedRuntime) {
    let Some(floor) = rt.runtime.schedule_floor_seconds else { return };
    let wf = cx.wf;
    for (i, schedule) in wf.schedules.iter().enumerate() {
        let Some(gap) = crate::schedule::under_floor(schedule, floor) else { continue };
        let field = if schedule.cron.is_some() { "cron" } else { "intervalSeconds" };
        cx.error(
            Code::ScheduleTooFrequent,
            &Path::root().key("schedules").index(i).key(field),
            Part::Value,
            format!(
                "schedule `{}` fires {gap} ms apart, more often than `scheduleFloorSeconds: {floor}` of {} allows",
                schedule.id, rt.file
            ),
            format!("fire every {floor} seconds or less often, or lower `scheduleFloorSeconds` in {}", rt.file),
        );
    }
}

fn missing_help(connection: &str, names: &[&str]) -> String {
    match decode::closest(connection, names) {
        Some(near) => format!("did you mean `{near}`?"),
        None if names.is_empty() => {
            format!("add the connection `{connection}` under `connections` in the runtime file")
        }
        None => format!(
            "add the connection `{connection}` under `connections` in the runtime file, or name one of: {}",
            names.join(", ")
        ),
    }
}

/// Every secret reference of the file with its path and what it is for.
/// A remote connection has no authorization to probe: its workers hold it.
fn secrets(runtime: &RuntimeFile) -> Vec<(Path, &SecretRef, String)> {
    let mut out = vec![(Path::root().key("database").key("url"), &runtime.database.url, "the database URL".to_owned())];
    for (id, key) in &runtime.payload_keys.keys {
        out.push((Path::root().key("payloadKeys").key("keys").key(id), key, format!("the payload key `{id}`")));
    }
    if let Some(tls) = runtime.grpc.as_ref().and_then(|grpc| grpc.tls.as_ref()) {
        let base = Path::root().key("grpc").key("tls");
        out.push((base.key("certificate"), &tls.certificate, "the gRPC certificate".to_owned()));
        out.push((base.key("privateKey"), &tls.private_key, "the gRPC private key".to_owned()));
    }
    if let Some(hints) = &runtime.dispatch {
        let path = Path::root().key("dispatch").key("redis").key("url");
        out.push((path, &hints.redis.url, "the Redis URL of the dispatch hints".to_owned()));
    }
    for (name, connection) in &runtime.connections {
        let base = Path::root().key("connections").key(name);
        connection_secrets(&base, name, connection, &mut out);
        if let Some(reference) = &connection.event_signing_secret {
            out.push((
                base.key("eventSigningSecret"),
                reference,
                format!("the eventSigningSecret of connection `{name}`"),
            ));
        }
    }
    for (i, token) in runtime.access.tokens.iter().enumerate() {
        let path = Path::root().key("access").key("tokens").index(i).key("token");
        out.push((path, &token.token, format!("the token of `{}`", token.subject)));
    }
    out
}

/// The authorization's secret of `connection` (written at `base`), if it has one.
pub(super) fn connection_secrets<'c>(
    base: &Path,
    name: &str,
    connection: &'c Connection,
    out: &mut Vec<(Path, &'c SecretRef, String)>,
) {
    let Some(authorization) = &connection.authorization else { return };
    let (field, reference) = match authorization {
        Authorization::ClientSecret(grant) => ("clientSecret", &grant.client_secret),
        Authorization::PrivateKeyJwt(grant) => ("privateKey", &grant.private_key),
    };
    out.push((base.key("authorization").key(field), reference, format!("the {field} of connection `{name}`")));
}

/// The subjects that can authenticate holding the role `worker`: a static
/// token's subject whose entry lists it, or the subject of a grant listing it
/// when a static token or (with an OIDC issuer) a JWT can authenticate that
/// subject.
fn worker_subjects(access: &Access) -> BTreeSet<&str> {
    let tokens: BTreeSet<&str> = access.tokens.iter().map(|t| t.subject.as_str()).collect();
    let mut out: BTreeSet<&str> =
        access.tokens.iter().filter(|t| t.roles.contains(&Role::Worker)).map(|t| t.subject.as_str()).collect();
    for grant in access.grants.iter().filter(|g| g.roles.contains(&Role::Worker)) {
        if tokens.contains(grant.subject.as_str()) || !access.oidc.is_empty() {
            out.insert(&grant.subject);
        }
    }
    out
}

/// Every subject of a remote connection's `workers` can authenticate as a
/// worker (`runtime.unknown-worker`): an error when none of the connection's
/// subjects can (it would never be served), a warning otherwise.
fn check_workers(rt: &LoadedRuntime, out: &mut Vec<Diagnostic>) {
    let workers = worker_subjects(&rt.runtime.access);
    for (name, connection) in rt.runtime.connections.iter().filter(|(_, c)| c.is_remote()) {
        let served = connection.workers.iter().any(|s| workers.contains(s.as_str()));
        for (i, subject) in connection.workers.iter().enumerate() {
            if workers.contains(subject.as_str()) {
                continue;
            }
            let consequence = if served { "" } else { ": no worker can serve the connection" };
            let diagnostic = rt.diagnostic(
                Code::RuntimeUnknownWorker,
                &Path::root().key("connections").key(name).key("workers").index(i),
                Part::Value,
                format!(
                    "the worker `{}` of connection `{name}` holds the role `worker` through no static token and no grant{consequence}",
                    subject.escape_default()
                ),
                format!(
                    "add `worker` to the roles of its `access.tokens` entry, or (for an OIDC `sub`) a grant \
                     `{{subject: {}, workflow: \"*\", roles: [worker]}}`; or correct the subject",
                    subject.escape_default()
                ),
            );
            out.push(if served { diagnostic.warning() } else { diagnostic });
        }
    }
}

/// Reads the pinned package and checks it against its digest
/// (`runtime.package-unavailable`); returns its revision when it is the one pinned.
fn check_package(rt: &LoadedRuntime, source: &dyn PackageSource, out: &mut Vec<Diagnostic>) -> Option<String> {
    let pinned = &rt.runtime.package;
    let at = Path::root().key("package");
    let refuse = |field: &str, message: String, help: &str| {
        rt.diagnostic(Code::RuntimePackageUnavailable, &at.key(field), Part::Value, message, help.to_owned())
    };
    let bytes = match source.read_package(&pinned.path) {
        Ok(bytes) => bytes,
        Err(reason) => {
            out.push(refuse(
                "path",
                format!("the package file `{}` cannot be read: {reason}", pinned.path),
                "write the package there (`coordinatorctl package --output …`); a relative path is relative to the runtime file's directory",
            ));
            return None;
        }
    };
    match crate::package::read(&bytes, Some(&pinned.digest)) {
        Ok(package) => Some(package.manifest.revision),
        Err(crate::package::PackageError::Digest { actual, .. }) => {
            out.push(refuse(
                "digest",
                format!("the package file `{}` has digest {actual}, not the pinned one", pinned.path),
                "pin the digest `coordinatorctl package` printed for the package you mean to run, or put that package at `package.path`",
            ));
            None
        }
        Err(e) => {
            out.push(refuse(
                "path",
                format!("the package file `{}` cannot be used: {e}", pinned.path),
                "package the project again with `coordinatorctl package`",
            ));
            None
        }
    }
}

/// Reports every secret reference the probe cannot resolve (`runtime.secret-unavailable`).
pub fn check_secrets(rt: &LoadedRuntime, probe: &dyn SecretProbe, out: &mut Vec<Diagnostic>) {
    probe_secrets(&rt.file, &rt.root, secrets(&rt.runtime), Reader::Service, probe, out);
}

/// Who reads a file's secrets, for the repair hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reader {
    /// `coordinator serve`, from `runtime.yaml`.
    Service,
    /// `coordinator worker`, from `worker.yaml`.
    Worker,
}

impl Reader {
    /// The process, as in "the service's environment".
    fn process(self) -> &'static str {
        match self {
            Reader::Service => "service",
            Reader::Worker => "worker",
        }
    }

    /// The file, as in "the runtime file's directory".
    fn file(self) -> &'static str {
        match self {
            Reader::Service => "runtime file",
            Reader::Worker => "worker file",
        }
    }
}

/// Reports every one of `references` (in the file `file`, whose node tree is
/// `root`) the probe cannot resolve (`runtime.secret-unavailable`). A
/// reference written twice is probed once.
pub(super) fn probe_secrets(
    file: &str,
    root: &Node,
    references: Vec<(Path, &SecretRef, String)>,
    reader: Reader,
    probe: &dyn SecretProbe,
    out: &mut Vec<Diagnostic>,
) {
    let (process, file_kind) = (reader.process(), reader.file());
    let mut probed: BTreeMap<&SecretRef, Result<(), SecretProblem>> = BTreeMap::new();
    for (path, reference, what) in references {
        let result = probed.entry(reference).or_insert_with(|| probe.probe(reference));
        let Err(problem) = result else { continue };
        let (message, help) = match (reference.source(), problem) {
            (SecretSource::Env(name), SecretProblem::Empty) => {
                (format!("the environment variable `{name}` ({what}) is empty"), format!("set `{name}` to the secret"))
            }
            (SecretSource::Env(name), _) => (
                format!("the environment variable `{name}` ({what}) is not set"),
                format!("set `{name}` in the {process}'s environment, or point {what} at another reference"),
            ),
            (SecretSource::File(path), SecretProblem::Empty) => {
                (format!("the file `{path}` ({what}) is empty"), format!("write the secret into `{path}`"))
            }
            (SecretSource::File(path), SecretProblem::Unreadable(reason)) => (
                format!("the file `{path}` ({what}) cannot be read: {reason}"),
                format!(
                    "create the file, or give the {process}'s user permission to read it (a relative path is relative to the {file_kind}'s directory)"
                ),
            ),
            (SecretSource::File(path), SecretProblem::NotSet) => {
                (format!("the file `{path}` ({what}) cannot be read"), "create the file".to_owned())
            }
        };
        out.push(Diagnostic::error(
            Code::RuntimeSecretUnavailable,
            file,
            root.span_of(&path, Part::Value),
            message,
            help,
        ));
    }
}

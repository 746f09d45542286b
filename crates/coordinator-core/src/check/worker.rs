//! A worker's `worker.yaml` checked on its own: its structure (decoded with
//! the same diagnostics as `runtime.yaml`, connections by the same decoder)
//! and, when the caller can tell, whether each of its secret references can
//! be read ([`SecretProbe`]).
//!
//! Must not read anything itself: the caller hands over the text and the
//! probe. Nothing here reaches the coordinator, so whether the coordinator's
//! `runtime.yaml` has these connections as remote ones, and lists this
//! worker's subject, is the coordinator's check ([`check::runtime`](crate::check::runtime)) and the
//! coordinator's answer when the worker connects. No diagnostic shows a
//! secret: only references are named.

use crate::decode::{self, Decoder};
use crate::diagnostic::{self, Diagnostic};
use crate::model::runtime::SecretRef;
use crate::model::worker::WorkerFile;
use crate::yaml::{self, Node, Path};

use super::runtime::{Reader, SecretProbe, connection_secrets, probe_secrets};

/// The `worker.yaml` to check.
pub struct WorkerInput<'a> {
    /// The file name used in diagnostics: the path as the user gave it.
    pub file: &'a str,
    /// Its text.
    pub text: &'a str,
    /// Tells whether each secret reference can be read; `None` checks the
    /// file offline, without looking at any secret.
    pub secrets: Option<&'a dyn SecretProbe>,
}

/// A decoded `worker.yaml` with its node tree, for positions.
pub struct LoadedWorker {
    /// The file name used in diagnostics.
    pub file: String,
    /// Its node tree.
    pub root: Node,
    /// Its content.
    pub worker: WorkerFile,
}

/// The result of checking a worker file.
#[derive(Debug)]
pub struct WorkerReport {
    /// The decoded file, when there is no error.
    pub worker: Option<WorkerFile>,
    /// Every finding, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
    /// The file with its text for excerpts, every value that might be a secret
    /// masked; empty when the YAML does not parse.
    pub files: Vec<(String, String)>,
}

impl WorkerReport {
    /// Whether the file is accepted (no error; warnings allowed).
    pub fn ok(&self) -> bool {
        self.worker.is_some()
    }
}

/// Checks a worker file: [`load`], with the diagnostics sorted.
pub fn check_worker(input: &WorkerInput<'_>) -> WorkerReport {
    let mut diagnostics = Vec::new();
    let (loaded, shown) = load(input, &mut diagnostics);
    diagnostic::sort(&mut diagnostics);
    let worker = loaded.map(|loaded| loaded.worker).filter(|_| !diagnostics.iter().any(Diagnostic::is_error));
    WorkerReport { worker, diagnostics, files: shown.map(|text| (input.file.to_owned(), text)).into_iter().collect() }
}

/// Parses and decodes the worker file, and probes its secrets when the input
/// has a probe. Diagnostics go to `out`. Returns the decoded file (when it has
/// no structural error; an unavailable secret is in `out`) and the text to
/// show in excerpts: masked by [`decode::runtime::redact`], and `None` when
/// the YAML does not parse.
pub fn load(input: &WorkerInput<'_>, out: &mut Vec<Diagnostic>) -> (Option<LoadedWorker>, Option<String>) {
    let root = match yaml::parse(input.file, input.text) {
        Ok(root) => root,
        Err(d) => {
            out.push(d);
            return (None, None);
        }
    };
    let shown = decode::runtime::redact(&root, input.text);
    let mut decoder = Decoder::new(input.file);
    let worker = decode::worker::decode(&mut decoder, &root);
    let errors = decoder.diagnostics.iter().any(Diagnostic::is_error);
    out.append(&mut decoder.diagnostics);
    let loaded = match worker {
        Some(worker) if !errors => LoadedWorker { file: input.file.to_owned(), root, worker },
        _ => return (None, Some(shown)),
    };
    if let Some(probe) = input.secrets {
        probe_secrets(&loaded.file, &loaded.root, secrets(&loaded.worker), Reader::Worker, probe, out);
    }
    (Some(loaded), Some(shown))
}

/// Every secret reference of the file with its path and what it is for.
fn secrets(worker: &WorkerFile) -> Vec<(Path, &SecretRef, String)> {
    let base = Path::root().key("coordinator");
    let mut out = vec![(base.key("token"), &worker.coordinator.token, "the coordinator token".to_owned())];
    if let Some(ca) = &worker.coordinator.ca_certificate {
        out.push((base.key("caCertificate"), ca, "the coordinator's CA certificate".to_owned()));
    }
    for (name, connection) in &worker.connections {
        connection_secrets(&Path::root().key("connections").key(name), name, connection, &mut out);
    }
    out
}

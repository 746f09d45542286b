//! A running `coordinator serve` deployment (SQLite in a temporary directory,
//! runtime.yaml written as an operator would) against the simulators on their
//! own listener, driven only over HTTP — the service's API, the simulators'
//! control API (`/v1/faults`, `/v1/effects`, casework decisions) — and the
//! readers of a run's inspection.

use std::time::Duration;

use coordinator::process::serve::Service;
use serde_json::{Value, json};

use super::deploy::{ClosedPort, SimServer, deployment, migrated, sqlite_url, variant};
use super::{TOKEN, admission, admit, admit_as, fault, get, inspection_until, lose_notices, moving, post, tempdir};

/// How a stack is set up.
pub struct StackOptions {
    /// Edits of the flagship's workflow.yaml, each `(from, to)` replaced once
    /// (none: the flagship as it is; see [`EAGER`](super::deploy::EAGER)).
    pub edits: Vec<(&'static str, &'static str)>,
    /// Casework decides each review request by itself this long after it was made.
    pub auto_decide: Option<Duration>,
    /// Casework announces decisions to the service (`POST /v1/completions/casework`).
    pub notify: bool,
    /// `requestSeconds` of every connection.
    pub request_seconds: u64,
    /// A subject `reader` besides the operator: its token and roles (flow YAML, e.g. `[read]`).
    pub reader: Option<(&'static str, &'static str)>,
    /// An edit of the written runtime.yaml (e.g. a connection pointed elsewhere).
    pub edit_runtime: Option<Box<dyn FnOnce(String) -> String>>,
}

impl Default for StackOptions {
    /// The flagship as it is, reviews decided by hand, decisions announced, 5 s requests.
    fn default() -> Self {
        StackOptions {
            edits: Vec::new(),
            auto_decide: None,
            notify: true,
            request_seconds: 5,
            reader: None,
            edit_runtime: None,
        }
    }
}

/// A running service and its simulators.
pub struct Stack {
    /// The service's base URL.
    pub url: String,
    /// The revision activated.
    pub revision: String,
    /// The simulators (their base URL and handles).
    pub sims: SimServer,
    /// The service (dropped: stopped).
    pub service: Service,
    /// Its runtime.yaml (to start the deployment again).
    pub runtime: std::path::PathBuf,
    /// The deployment directory (database, runtime.yaml, the project copy), removed with the stack.
    _dir: tempfile::TempDir,
}

/// Replaces `from` by `to` inside one connection's block of a runtime.yaml.
pub fn in_connection(yaml: &str, connection: &str, from: &str, to: &str) -> String {
    let header = format!("\n  {connection}:\n");
    let start = yaml.find(&header).unwrap_or_else(|| panic!("no connection {connection}: {yaml}")) + 1;
    let body = start + header.len() - 1;
    // The block ends at the next line indented by two spaces or less.
    let end = yaml[body..]
        .match_indices('\n')
        .map(|(i, _)| body + i + 1)
        .find(|&i| !yaml[i..].starts_with("    "))
        .unwrap_or(yaml.len());
    let block = &yaml[start..end];
    assert!(block.contains(from), "`{from}` is not in connection {connection}: {block}");
    format!("{}{}{}", &yaml[..start], block.replace(from, to), &yaml[end..])
}

/// `yaml` (a runtime.yaml or worker.yaml) with `field`, one line such as
/// `limits: {concurrency: 4}`, added to connection `connection`.
pub fn with_field(yaml: &str, connection: &str, field: &str) -> String {
    in_connection(yaml, connection, "    product: ", &format!("    {field}\n    product: "))
}

/// Adds `field` to connection `connection` of the runtime.yaml or worker.yaml at `path` ([`with_field`]).
pub fn add_field(path: &std::path::Path, connection: &str, field: &str) {
    let yaml = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::write(path, with_field(&yaml, connection, field)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

impl Stack {
    /// Starts simulators and a migrated, served deployment of the flagship as `options` say.
    pub async fn start(options: StackOptions) -> Stack {
        let dir = tempdir();
        let (mut spec, sims) = deployment(&sqlite_url(dir.path()), options.auto_decide, options.notify).await;
        spec.connect_seconds = 1;
        spec.request_seconds = options.request_seconds;
        if !options.edits.is_empty() {
            spec.project = variant(dir.path(), "project", &options.edits);
        }
        if let Some((token, roles)) = options.reader {
            spec.access = spec.access.replacen(
                "{tokens: [",
                &format!("{{tokens: [{{subject: reader, token: file:reader-token, roles: {roles}}}, "),
                1,
            );
            spec.files.push(("reader-token".to_owned(), token.to_owned()));
        }
        let file = spec.write(dir.path());
        if let Some(edit) = options.edit_runtime {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("runtime.yaml: {e}"));
            std::fs::write(&file, edit(text)).unwrap_or_else(|e| panic!("runtime.yaml: {e}"));
        }
        let service = migrated(&file).await;
        Stack { url: service.url(), revision: service.revision.clone(), sims, service, runtime: file, _dir: dir }
    }

    /// Admits `input` under `key`; returns the run id.
    pub async fn admit_input(&self, key: &str, input: Value) -> String {
        let mut body = admission(&self.revision, key);
        body["input"] = input;
        admit_as(&self.url, TOKEN, &body).await
    }

    /// Admits the sample input under `key`; returns the run id.
    pub async fn admit(&self, key: &str) -> String {
        admit(&self.url, &self.revision, key).await
    }

    /// The run's inspection.
    pub async fn inspect(&self, run: &str) -> Value {
        let (status, inspection) = get(&format!("{}/v1/runs/{run}/inspection", self.url)).await;
        assert_eq!(status, 200, "{inspection}");
        inspection
    }

    /// `GET /v1/runs/{id}` (state, outcome, published output, failure).
    pub async fn view(&self, run: &str) -> Value {
        let (status, view) = get(&format!("{}/v1/runs/{run}", self.url)).await;
        assert_eq!(status, 200, "{view}");
        view
    }

    /// Polls the inspection until `done` holds.
    pub async fn until(&self, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        inspection_until(&self.url, run, what, done).await
    }

    /// Polls until the run is terminal or needs an operator.
    pub async fn settled(&self, run: &str) -> Value {
        self.until(run, "ended or in attention", |i| !moving(i)).await
    }

    /// `POST /v1/runs/{run}/steps/{step}/{action}` (reconcile, retry-same): (status, body).
    pub async fn operate(&self, run: &str, step: &str, action: &str) -> (u16, Value) {
        post(&format!("{}/v1/runs/{run}/steps/{step}/{action}", self.url), &json!({})).await
    }

    /// `POST /v1/runs/{run}/cancel`: (status, body).
    pub async fn cancel(&self, run: &str) -> (u16, Value) {
        post(&format!("{}/v1/runs/{run}/cancel", self.url), &json!({})).await
    }

    /// `POST /v1/completions/casework` for `reference` (a nudge); answered 202.
    pub async fn nudge(&self, reference: &str) {
        let (status, answer) =
            post(&format!("{}/v1/completions/casework", self.url), &json!({"reference": reference})).await;
        assert_eq!(status, 202, "{answer}");
    }

    /// Messaging acts on the next `count` notices and loses their answers.
    pub async fn lose_notices(&self, count: u32) {
        lose_notices(&self.sims.base, count).await;
    }

    /// `POST {sim}/{product}/v1/faults` with `fault` (accepted or the test is wrong).
    pub async fn fault(&self, product: &str, body: Value) {
        fault(&self.sims.base, product, body).await;
    }

    /// The reviewer decides `reference` by hand: (status, body).
    pub async fn decide(&self, reference: &str, decision: &str) -> (u16, Value) {
        let url = format!("{}/sim/casework/v1/reviews/{reference}/decision", self.sims.base);
        post(&url, &json!({"decision": decision})).await
    }

    /// `GET {sim}/{product}/v1/effects`: every (operation, key) entry.
    pub async fn effects(&self, product: &str) -> Vec<Value> {
        let (status, body) = get(&format!("{}/sim/{product}/v1/effects", self.sims.base)).await;
        assert_eq!(status, 200, "{body}");
        body["effects"].as_array().cloned().unwrap_or_else(|| panic!("no effects: {body}"))
    }

    /// `(requests, effects)` of `operation` under `key` (`None`: reads, sent without a key); (0, 0) if never called.
    pub async fn count(&self, product: &str, operation: &str, key: Option<&str>) -> (u64, u64) {
        let effects = self.effects(product).await;
        let entry = effects.iter().find(|e| e["operation"] == operation && e["idempotencyKey"].as_str() == key);
        entry.map_or((0, 0), |e| (e["requests"].as_u64().unwrap_or(0), e["effects"].as_u64().unwrap_or(0)))
    }

    /// `(requests, effects)` of `operation` under the key of `run`'s `step` (`<run>:<step>`).
    pub async fn count_of(&self, product: &str, operation: &str, run: &str, step: &str) -> (u64, u64) {
        self.count(product, operation, Some(&format!("{run}:{step}"))).await
    }

    /// Serves these same simulators (same state, same tokens) on `port` too, from now on.
    pub async fn open_port(&self, port: ClosedPort) -> tokio::task::JoinHandle<()> {
        let listener = port.open();
        let router = coordinator_sim::app(&self.sims.sims);
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        })
    }
}

/// The inspection of step `name`, when the run entered it.
fn entered<'a>(inspection: &'a Value, name: &str) -> Option<&'a Value> {
    inspection["steps"].as_array()?.iter().find(|s| s["step"] == name)
}

/// The inspection of one step.
pub fn step<'a>(inspection: &'a Value, name: &str) -> &'a Value {
    entered(inspection, name).unwrap_or_else(|| panic!("no step {name}: {inspection}"))
}

/// The steps the run entered, in order.
pub fn path(inspection: &Value) -> Vec<String> {
    let steps = inspection["steps"].as_array().into_iter().flatten();
    steps.filter_map(|s| s["step"].as_str().map(str::to_owned)).collect()
}

/// The effect of a call step (`none` when it was never entered).
pub fn effect(inspection: &Value, name: &str) -> String {
    entered(inspection, name).and_then(|s| s["call"]["effect"].as_str()).unwrap_or("none").to_owned()
}

/// Attempts made of a call step (0 when it was never entered).
pub fn attempts(inspection: &Value, name: &str) -> u64 {
    entered(inspection, name).and_then(|s| s["call"]["attempts"].as_u64()).unwrap_or(0)
}

/// Whether the run is in `name` now.
pub fn at(inspection: &Value, name: &str) -> bool {
    inspection["currentStep"] == name
}

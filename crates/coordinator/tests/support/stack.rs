//! Test support for the fault and parity tests: a running `coordinator serve`
//! deployment (SQLite in a temporary directory, runtime.yaml written as an
//! operator would) against the simulators on their own listener, driven only
//! over HTTP — the service's API, the simulators' control API (`/v1/faults`,
//! `/v1/effects`, casework decisions) — plus polling helpers whose bounds are
//! failure guards, never speed claims.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use coordinator::process::deployment::RuntimeConfig;
use coordinator::process::serve::{self, Service};
use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use serde_json::{Value, json};

use crate::deploy::{DeploymentSpec, SimServer, free_port, sim_server};
use crate::support::{get, post, repo, sample_input};

/// The failure guard of every wait below.
pub const GUARD: Duration = Duration::from_secs(60);

/// How a stack is set up.
pub struct StackOptions {
    /// The project served (default: examples/reviewed-notice itself).
    pub project: Option<PathBuf>,
    /// Casework decides each review request by itself this long after it was made.
    pub auto_decide: Option<Duration>,
    /// Casework announces decisions to the service (`POST /v1/completions/casework`).
    pub notify: bool,
    /// `requestSeconds` of every connection.
    pub request_seconds: u64,
    /// An edit of the written runtime.yaml (e.g. a connection pointed elsewhere).
    pub edit_runtime: Option<Box<dyn FnOnce(String) -> String>>,
}

impl Default for StackOptions {
    /// The flagship as it is, reviews decided by hand, decisions announced, 5 s requests.
    fn default() -> Self {
        StackOptions { project: None, auto_decide: None, notify: true, request_seconds: 5, edit_runtime: None }
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
    /// The deployment directory (database, runtime.yaml); also a place for project copies.
    pub dir: tempfile::TempDir,
}

/// A temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// A copy of reviewed-notice in `dir/name` with each `(from, to)` replaced once in workflow.yaml.
pub fn variant(dir: &Path, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let project = dir.join(name);
    std::fs::create_dir_all(&project).unwrap_or_else(|e| panic!("{e}"));
    let source = repo().join("examples/reviewed-notice");
    for file in ["functions.rhai", "input.json"] {
        std::fs::copy(source.join(file), project.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let mut workflow = std::fs::read_to_string(source.join("workflow.yaml")).unwrap_or_else(|e| panic!("{e}"));
    for (from, to) in edits {
        assert_eq!(workflow.matches(from).count(), 1, "`{from}` is not in workflow.yaml exactly once");
        workflow = workflow.replacen(from, to, 1);
    }
    std::fs::write(project.join("workflow.yaml"), workflow).unwrap_or_else(|e| panic!("{e}"));
    project
}

/// The review wait observes every second (instead of casework's 900 s).
pub const EAGER: (&str, &str) =
    ("    timeoutSeconds: 1209600", "    observeEverySeconds: 1\n    timeoutSeconds: 1209600");

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

impl Stack {
    /// Starts simulators and a migrated, served deployment of `options.project`.
    pub async fn start(options: StackOptions) -> Stack {
        let dir = tempdir();
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let sims = sim_server(SimConfig {
            casework: CaseworkConfig {
                auto_decide_after: options.auto_decide,
                notify_url: options.notify.then(|| format!("{url}/v1/completions/casework")),
                ..CaseworkConfig::default()
            },
            ..SimConfig::default()
        })
        .await;
        let database = format!("sqlite://{}?mode=rwc", dir.path().join("c.db").display());
        let mut spec = DeploymentSpec::new(&database, &sims.base);
        spec.listen = format!("127.0.0.1:{port}");
        spec.connect_seconds = 1;
        spec.request_seconds = options.request_seconds;
        if let Some(project) = options.project {
            spec.project = project;
        }
        let file = spec.write(dir.path());
        if let Some(edit) = options.edit_runtime {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("runtime.yaml: {e}"));
            std::fs::write(&file, edit(text)).unwrap_or_else(|e| panic!("runtime.yaml: {e}"));
        }
        let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("runtime.yaml: {e}"));
        serve::migrate(&config).await.unwrap_or_else(|e| panic!("migrate: {e}"));
        let deployment = config.resolve().unwrap_or_else(|e| panic!("resolve: {e}"));
        let service = serve::start(deployment).await.unwrap_or_else(|e| panic!("serve: {e}"));
        Stack { url: service.url(), revision: service.revision.clone(), sims, service, dir }
    }

    /// Admits `input` (default: the sample input) under `key`; returns the run id.
    pub async fn admit_input(&self, key: &str, input: Value) -> String {
        let body =
            json!({"workflow": "reviewed-notice", "revision": self.revision, "input": input, "idempotencyKey": key});
        let (status, admitted) = post(&format!("{}/v1/runs", self.url), &body).await;
        assert_eq!(status, 201, "{admitted}");
        admitted["runId"].as_str().unwrap_or_else(|| panic!("no runId: {admitted}")).to_owned()
    }

    /// Admits the sample input under `key`; returns the run id.
    pub async fn admit(&self, key: &str) -> String {
        self.admit_input(key, sample_input()).await
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

    /// Polls the inspection until `done` holds; panics naming `what` after [`GUARD`].
    pub async fn until(&self, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let inspection = self.inspect(run).await;
            if done(&inspection) {
                return inspection;
            }
            assert!(started.elapsed() < GUARD, "{what}: not after {GUARD:?}: {inspection}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls until the run is terminal or needs an operator.
    pub async fn settled(&self, run: &str) -> Value {
        self.until(run, "terminal or attention", |i| {
            !matches!(i["state"].as_str(), Some("running" | "cancel-requested"))
        })
        .await
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

    /// `POST {sim}/{product}/v1/faults` with `fault` (accepted or the test is wrong).
    pub async fn fault(&self, product: &str, fault: Value) {
        let (status, answer) = post(&format!("{}/sim/{product}/v1/faults", self.sims.base), &fault).await;
        assert!((200..300).contains(&status), "fault {fault} not accepted: {status} {answer}");
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
    pub async fn open_port(&self, port: crate::deploy::ClosedPort) -> tokio::task::JoinHandle<()> {
        let listener = port.open();
        let router = coordinator_sim::app(&self.sims.sims);
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        })
    }
}

/// The inspection of one step.
pub fn step<'a>(inspection: &'a Value, name: &str) -> &'a Value {
    let steps = inspection["steps"].as_array().unwrap_or_else(|| panic!("no steps: {inspection}"));
    steps.iter().find(|s| s["step"] == name).unwrap_or_else(|| panic!("no step {name}: {inspection}"))
}

/// The steps the run entered, in order.
pub fn path(inspection: &Value) -> Vec<String> {
    let steps = inspection["steps"].as_array().into_iter().flatten();
    steps.filter_map(|s| s["step"].as_str().map(str::to_owned)).collect()
}

/// The effect of a call step (`none` when it was never entered).
pub fn effect(inspection: &Value, name: &str) -> String {
    let steps = inspection["steps"].as_array().into_iter().flatten();
    let found = steps.into_iter().find(|s| s["step"] == name);
    found.and_then(|s| s["call"]["effect"].as_str()).unwrap_or("none").to_owned()
}

/// Attempts made of a call step (0 when it was never entered).
pub fn attempts(inspection: &Value, name: &str) -> u64 {
    let steps = inspection["steps"].as_array().into_iter().flatten();
    let found = steps.into_iter().find(|s| s["step"] == name);
    found.and_then(|s| s["call"]["attempts"].as_u64()).unwrap_or(0)
}

/// Whether the run is in `name` now.
pub fn at(inspection: &Value, name: &str) -> bool {
    inspection["currentStep"] == name
}

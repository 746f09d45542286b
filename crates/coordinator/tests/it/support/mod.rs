//! Test support shared by the modules of this binary: the dev stack in this
//! process ([`start`]), HTTP helpers that send the operator token
//! ([`TOKEN`]), waiting for a run ([`poll`] and the functions built on it:
//! every bound is a failure guard, never a speed claim), and what the
//! tests read back (metrics, the audit journal, strings of a value).
//!
//! - [`deploy`]: a deployment directory as an operator sets it up
//!   (runtime.yaml, the packaged project, secrets in files), the simulators
//!   on their own listener, copies of the flagship, `serve` in this process.
//! - [`stack`]: such a deployment running, driven only over HTTP, and the
//!   readers of an inspection.
//! - [`process`]: `coordinator serve`, `dev` and `worker` as child processes.
//! - [`kills`]: runs carried through processes killed and started again.
//! - [`effects`]: what the simulators counted, per idempotency key.
//! - [`pg`] and [`cluster`]: PostgreSQL databases and clusters of a test's own
//!   (a `redis-server` of a test's own is `coordinator_testdb::redis`).
//! - [`drill`]: the recovery drills' runs up to the review, and the release.
//! - [`otlp`]: an OTLP trace receiver; [`workers`]: remote workers' files and a raw gRPC client.

pub mod cluster;
pub mod deploy;
pub mod drill;
pub mod effects;
pub mod kills;
pub mod otlp;
pub mod pg;
pub mod process;
pub mod stack;
pub mod workers;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use coordinator::process::dev::{self, Dev, DevOptions};
use coordinator_core::audit::{Entry, Head};
use coordinator_sim::{ReceiptLookup, Simulators};
use serde_json::{Value, json};

/// The operator token: the dev stack's `--token`, and the token of subject
/// `operator` (every role) in the deployments [`deploy`] writes.
pub const TOKEN: &str = "test-token";

/// How long any wait of these tests may take before it says it hung (a
/// failure guard, never a speed claim).
pub const GUARD: Duration = Duration::from_secs(300);

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// examples/reviewed-notice, the flagship.
pub fn flagship() -> PathBuf {
    repo().join("examples/reviewed-notice")
}

/// The sample input of the flagship example.
pub fn sample_input() -> Value {
    let text = std::fs::read_to_string(flagship().join("input.json")).unwrap_or_else(|e| panic!("input.json: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("input.json: {e}"))
}

/// A temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// Runs `test` on the service's runtime (worker threads with room for function calls).
pub fn on_runtime<F: Future<Output = ()>>(test: F) {
    let runtime = coordinator::runtime().unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(test);
}

/// The dev stack on reviewed-notice, its data in a temporary directory of its own.
pub async fn start() -> Dev {
    start_project(flagship(), None).await
}

/// The dev stack on `project` with the operator token [`TOKEN`], its data in
/// `data` (default: a temporary directory of its own, removed with it).
pub async fn start_project(project: PathBuf, data: Option<PathBuf>) -> Dev {
    let options = DevOptions {
        project,
        listen: "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")),
        data,
        token: Some(TOKEN.into()),
    };
    dev::start(options).await.unwrap_or_else(|e| panic!("dev stack: {e}"))
}

/// A client that sends `Authorization: Bearer` [`TOKEN`] with every request.
pub fn authorized_client(timeout: Duration) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap_or_else(|e| panic!("{e}"));
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder().timeout(timeout).default_headers(headers).build().unwrap_or_else(|e| panic!("{e}"))
}

/// `POST url` with a JSON body and the operator token: (status, body).
pub async fn post(url: &str, body: &Value) -> (u16, Value) {
    post_as(url, Some(TOKEN), body).await
}

/// `GET url` with the operator token: (status, body).
pub async fn get(url: &str) -> (u16, Value) {
    get_as(url, Some(TOKEN)).await
}

/// `POST url` with a JSON body and `token` (none: no Authorization header): (status, body).
pub async fn post_as(url: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    answer(url, token, reqwest::Client::new().post(url).json(body)).await
}

/// `GET url` with `token` (none: no Authorization header): (status, body).
pub async fn get_as(url: &str, token: Option<&str>) -> (u16, Value) {
    answer(url, token, reqwest::Client::new().get(url)).await
}

/// Sends `request` with `token`: (status, body, `Null` when it is not JSON).
async fn answer(url: &str, token: Option<&str>, request: reqwest::RequestBuilder) -> (u16, Value) {
    let request = match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    let response = request.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The body of an admission of the flagship's sample input under `key`.
pub fn admission(revision: &str, key: &str) -> Value {
    json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": key, "input": sample_input()})
}

/// Admits the flagship's sample input under `key` at the service at `url`; the run id.
pub async fn admit(url: &str, revision: &str, key: &str) -> String {
    admit_as(url, TOKEN, &admission(revision, key)).await
}

/// Admits `body` at the service at `url` with `token` (`POST /v1/runs`, answered `201`); the run id.
pub async fn admit_as(url: &str, token: &str, body: &Value) -> String {
    let (status, admitted) = post_as(&format!("{url}/v1/runs"), Some(token), body).await;
    assert_eq!(status, 201, "{admitted}");
    admitted["runId"].as_str().unwrap_or_else(|| panic!("no runId: {admitted}")).to_owned()
}

/// Admissions sent as load by concurrent clients.
pub struct Load {
    /// Runs admitted in all.
    pub runs: usize,
    /// Clients admitting at once.
    pub clients: usize,
    /// Each client's pause after each admission.
    pub pace: Duration,
    /// Run `i` is admitted under the key `{key}-{i}`.
    pub key: &'static str,
}

impl Load {
    /// Starts the clients: run `i` goes to `urls[i % urls.len()]` (each
    /// answered `201`); `admitted` counts the runs admitted so far.
    pub fn start(
        &self,
        client: &reqwest::Client,
        urls: &[String],
        revision: &str,
        admitted: &Arc<AtomicUsize>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let next = Arc::new(AtomicUsize::new(0));
        let (runs, pace, key) = (self.runs, self.pace, self.key);
        (0..self.clients)
            .map(|_| {
                let (client, urls, revision) = (client.clone(), urls.to_vec(), revision.to_owned());
                let (next, admitted) = (Arc::clone(&next), Arc::clone(admitted));
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= runs {
                            return;
                        }
                        let body = admission(&revision, &format!("{key}-{i}"));
                        let r = client.post(format!("{}/v1/runs", urls[i % urls.len()])).json(&body).send().await;
                        let status = r.map(|r| r.status().as_u16()).unwrap_or_else(|e| panic!("admission {i}: {e}"));
                        assert_eq!(status, 201, "admission {i}");
                        admitted.fetch_add(1, Ordering::SeqCst);
                        if !pace.is_zero() {
                            tokio::time::sleep(pace).await;
                        }
                    }
                })
            })
            .collect()
    }
}

/// Polls `GET url` with `token` until `done` holds for the body; panics naming
/// `what` after [`GUARD`], or at once when the request is refused (a `4xx`
/// does not go away). A transport error or a `5xx` is looked at again.
pub async fn poll_as(url: &str, token: Option<&str>, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        let mut request = client.get(url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let (status, body) = match request.send().await {
            Ok(response) => (response.status().as_u16(), response.json().await.unwrap_or(Value::Null)),
            Err(_) => (0, Value::Null),
        };
        assert!(!(400..500).contains(&status), "{what}: {url} answered {status}: {body}");
        if status == 200 && done(&body) {
            return body;
        }
        assert!(started.elapsed() < GUARD, "{what}: not after {GUARD:?}: {body}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// [`poll_as`] with the operator token.
pub async fn poll(url: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    poll_as(url, Some(TOKEN), what, done).await
}

/// Polls the run (`GET /v1/runs/{run}` of the service at `url`) until `done` holds.
pub async fn run_until(url: &str, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    poll(&format!("{url}/v1/runs/{run}"), &format!("run {run}: {what}"), done).await
}

/// Polls the run until its state is `state`.
pub async fn until_state(url: &str, run: &str, state: &str) -> Value {
    run_until(url, run, state, |v| v["state"] == state).await
}

/// Whether a run (its view or its inspection) is still moving by itself: `running` or `cancel-requested`.
pub fn moving(run: &Value) -> bool {
    matches!(run["state"].as_str(), Some("running" | "cancel-requested"))
}

/// Polls the run until it no longer moves by itself: ended, or waiting for an operator.
pub async fn settled(url: &str, run: &str) -> Value {
    run_until(url, run, "ended or in attention", |v| !moving(v)).await
}

/// Polls the run's inspection (`GET /v1/runs/{run}/inspection`) until `done` holds.
pub async fn inspection_until(url: &str, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    poll(&format!("{url}/v1/runs/{run}/inspection"), &format!("run {run}: {what}"), done).await
}

/// `POST {base}/sim/{product}/v1/faults` with `fault` (accepted, or the test is wrong).
/// `base` is the simulators' listener, or the dev stack, which serves them too.
pub async fn fault(base: &str, product: &str, fault: Value) {
    let (status, answer) = post(&format!("{base}/sim/{product}/v1/faults"), &fault).await;
    assert!((200..300).contains(&status), "fault {fault} not accepted: {status} {answer}");
}

/// Messaging acts on the next `count` notices and loses their answers
/// (`drop-response-after-effect`): their effects become unknown. `base` as for [`fault`].
pub async fn lose_notices(base: &str, count: u32) {
    let lost = json!({"operation": "submit-message/v1", "fault": "drop-response-after-effect", "count": count});
    fault(base, "messaging", lost).await;
}

/// At the service at `url` (its simulators at `sims`): the flagship run to
/// its end, then a run whose notice's answer is lost and which an operator
/// settles by `reconcile`, to its end too. Both run ids.
pub async fn finished_and_reconciled(url: &str, sims: &str, revision: &str) -> [String; 2] {
    let flagship = admit(url, revision, "flagship").await;
    until_state(url, &flagship, "finished").await;
    lose_notices(sims, 1).await;
    let faulted = admit(url, revision, "faulted").await;
    until_state(url, &faulted, "attention").await;
    let (status, answer) = post(&format!("{url}/v1/runs/{faulted}/steps/send-notice/reconcile"), &json!({})).await;
    assert_eq!(status, 202, "{answer}");
    until_state(url, &faulted, "finished").await;
    [flagship, faulted]
}

/// `GET /metrics` of the service at `url`, with the operator token.
pub async fn metrics(url: &str) -> String {
    let response = authorized_client(Duration::from_secs(30)).get(format!("{url}/metrics")).send().await;
    response.unwrap_or_else(|e| panic!("{url}/metrics: {e}")).text().await.unwrap_or_default()
}

/// The value of the sample `series` (`name{labels}`, the labels exactly as rendered) in a Prometheus text.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The journal's entries (of `run`, when given), as JSON: the first 1 000, enough for one test.
pub async fn journal(url: &str, run: Option<&str>) -> Vec<Value> {
    let filter = run.map(|r| format!("&run={r}")).unwrap_or_default();
    let (status, page) = get(&format!("{url}/v1/audit?limit=1000{filter}")).await;
    assert_eq!(status, 200, "{page}");
    page["entries"].as_array().cloned().unwrap_or_default()
}

/// The whole journal, page by page (`limit` entries each), and the last page's
/// head; `page` answers the page at the path and query it is given (`/v1/audit?after=…`).
pub async fn whole_journal<F: Future<Output = Value>>(limit: usize, page: impl Fn(String) -> F) -> (Vec<Entry>, Head) {
    let mut entries = Vec::new();
    let mut after = 0;
    loop {
        let page = page(format!("/v1/audit?after={after}&limit={limit}")).await;
        let found: Vec<Entry> =
            serde_json::from_value(page["entries"].clone()).unwrap_or_else(|e| panic!("entries: {e}: {page}"));
        entries.extend(found);
        match page["next"].as_i64() {
            Some(next) => after = next,
            None => {
                let head = serde_json::from_value(page["head"].clone()).unwrap_or_else(|e| panic!("head: {e}: {page}"));
                return (entries, head);
            }
        }
    }
}

/// Every string in a JSON value.
pub fn strings_of(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(s) => found.push(s.clone()),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    found
}

/// Every string Messaging answered for `run`'s notice: its receipt's output and completion references.
pub fn notice_strings(sims: &Simulators, run: &str) -> Vec<String> {
    let key = format!("{run}:send-notice");
    let ReceiptLookup::Found(accepted) = sims.messaging.receipt(&key) else { panic!("no receipt for {key}") };
    let mut found = strings_of(&accepted.output);
    found.extend(accepted.completions.into_values());
    found
}

/// Seconds since the Unix epoch, now.
pub fn unix_seconds() -> i64 {
    let elapsed = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_else(|e| panic!("clock: {e}"));
    i64::try_from(elapsed.as_secs()).unwrap_or_else(|e| panic!("{e}"))
}

/// Posts an event `body` to the trigger at `url` (`…/v1/events/{workflow}/{trigger}`) with
/// `signature` as its `Coordinator-Signature` (none: no header): (status, body).
pub async fn post_event(url: &str, signature: Option<&str>, body: &[u8]) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(url).header("content-type", "application/json").body(body.to_vec());
    if let Some(signature) = signature {
        request = request.header("Coordinator-Signature", signature);
    }
    let response = request.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The files of `dir` whose names start with `prefix` (a database and its WAL),
/// with their bytes; a file removed meanwhile is left out.
pub fn files_starting(dir: &Path, prefix: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)) {
            continue;
        }
        match std::fs::read(&path) {
            Ok(bytes) => files.push((path, bytes)),
            // SQLite removes its WAL and shared-memory files when the last connection closes.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
    files
}

/// Whether `text` occurs in `bytes`.
pub fn contains(bytes: &[u8], text: &str) -> bool {
    bytes.windows(text.len()).any(|w| w == text.as_bytes())
}

/// Signs in to the console with the operator token; the session cookie.
pub async fn console_cookie(base: &str) -> String {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build();
    let http = http.unwrap_or_else(|e| panic!("{e}"));
    let response = http
        .post(format!("{base}/console/sign-in"))
        .form(&[("token", TOKEN), ("next", "/console/runs")])
        .send()
        .await
        .unwrap_or_else(|e| panic!("sign in: {e}"));
    assert_eq!(response.status().as_u16(), 303);
    let set = response.headers().get("set-cookie").and_then(|v| v.to_str().ok()).unwrap_or_default();
    set.split(';').next().unwrap_or_default().to_owned()
}

/// A console page with the session `cookie`: (status, HTML).
pub async fn console_page(base: &str, cookie: &str, path: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    (response.status().as_u16(), response.text().await.unwrap_or_default())
}

//! The in-process `coordinator dev` stack on `127.0.0.1:0` (reviewed-notice,
//! its data in a temporary directory, the operator token [`TOKEN`] in a file)
//! that the operating commands are run against.

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use coordinator::process::dev::{self, Dev, DevOptions};
use serde_json::{Value, json};

use super::{TOKEN, code, ctl, json, read, repo, stderr, tempdir, write};

/// A running dev stack and a token file for it.
pub struct Stack {
    /// The stack.
    pub dev: Dev,
    /// The runtime it runs on (the tests' own requests block on it).
    pub runtime: tokio::runtime::Runtime,
    /// Its directory: the data directory `data/`, the token file, whatever a test adds.
    pub dir: tempfile::TempDir,
    /// The file holding [`TOKEN`].
    pub token_file: PathBuf,
}

impl Stack {
    /// Starts the stack on reviewed-notice.
    pub fn start() -> Stack {
        Stack::start_on("reviewed-notice")
    }

    /// Starts the stack on `examples/EXAMPLE`.
    pub fn start_on(example: &str) -> Stack {
        let runtime = coordinator::runtime().unwrap_or_else(|e| panic!("runtime: {e}"));
        let dir = tempdir();
        let options = DevOptions {
            project: repo().join("examples").join(example),
            listen: "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")),
            data: Some(dir.path().join("data")),
            token: Some(TOKEN.into()),
        };
        let dev = runtime.block_on(dev::start(options)).unwrap_or_else(|e| panic!("dev stack: {e}"));
        let token_file = dir.path().join("token");
        write(&token_file, &format!("{TOKEN}\n"));
        Stack { dev, runtime, dir, token_file }
    }

    /// The stack's SQLite database.
    pub fn database(&self) -> PathBuf {
        self.dir.path().join("data/coordinator.db")
    }

    /// Runs `coordinatorctl ARGS --url … --token-file …`.
    pub fn ctl(&self, args: &[&str]) -> Output {
        let (url, token_file) = (self.url(), self.token_file.display().to_string());
        let mut all = args.to_vec();
        all.extend(["--url", &url, "--token-file", &token_file]);
        ctl(&all)
    }

    /// The stack's base URL.
    pub fn url(&self) -> String {
        self.dev.url()
    }

    /// `POST path` with a JSON body and the token, over plain HTTP: (status, body).
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let url = format!("{}{path}", self.url());
        self.runtime.block_on(async {
            let response = reqwest::Client::new()
                .post(&url)
                .bearer_auth(TOKEN)
                .json(body)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        })
    }

    /// Admits the flagship's sample input; the run id.
    pub fn admit(&self, key: &str) -> String {
        let input = read(&repo().join("examples/reviewed-notice/input.json"));
        let input: Value = serde_json::from_str(&input).unwrap_or_else(|e| panic!("input.json: {e}"));
        let body = json!({"workflow": "reviewed-notice", "revision": self.dev.revision, "input": input, "idempotencyKey": key});
        let (status, admitted) = self.post("/v1/runs", &body);
        assert_eq!(status, 201, "{admitted}");
        admitted["runId"].as_str().unwrap_or_else(|| panic!("no runId: {admitted}")).to_owned()
    }

    /// Loses the answer to the next notice after Messaging acted on it.
    pub fn lose_next_notice(&self) {
        let fault = json!({"operation": "submit-message/v1", "fault": "drop-response-after-effect", "count": 1});
        let (status, answer) = self.post("/sim/messaging/v1/faults", &fault);
        assert!((200..300).contains(&status), "fault not accepted: {status} {answer}");
    }

    /// Polls `coordinatorctl status --format json` until the run is in one of `states`.
    pub fn wait_for(&self, run: &str, states: &[&str]) -> Value {
        let started = Instant::now();
        loop {
            let out = self.ctl(&["status", run, "--format", "json"]);
            assert_eq!(code(&out), 0, "{}", stderr(&out));
            let status = json(&out);
            if states.iter().any(|s| status["state"] == *s) {
                return status;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "not in {states:?} after 30 s: {status}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

//! `coordinator dev --data DIR` stopped (SIGKILL, then SIGTERM) and started
//! again on the same directory: it keeps its generated payload key, operator
//! token and event secret there, so every earlier run still opens (with a
//! new key per start they answered `500 internal`), the same token is
//! accepted, and work goes on.

#[path = "support/deploy.rs"]
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod deploy;
#[path = "support/process.rs"]
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use process::{read, ready};
use serde_json::{Value, json};
use support::{on_runtime, repo, sample_input};

/// A failure guard, never a speed claim.
const GUARD: Duration = Duration::from_secs(300);

struct Dev {
    child: Child,
    url: String,
    log: std::path::PathBuf,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start(data: &Path, port: u16, n: u32) -> Dev {
    let log = data.join(format!("dev-{n}.log"));
    let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
    let err = out.try_clone().unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .args(["dev", "--log-format", "json", "--listen", &format!("127.0.0.1:{port}"), "--data"])
        .arg(data)
        .arg("--project")
        .arg(repo().join("examples/reviewed-notice"))
        .env_remove("RUST_LOG")
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn coordinator dev: {e}"));
    let dev = Dev { child, url: format!("http://127.0.0.1:{port}"), log };
    assert!(ready(&reqwest::Client::new(), &dev.url).await, "{}", read(&dev.log));
    dev
}

async fn stop(mut dev: Dev, signal: &str) {
    let sent = Command::new("kill").args([&format!("-{signal}"), &dev.child.id().to_string()]).status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -{signal}");
    let started = Instant::now();
    while !matches!(dev.child.try_wait(), Ok(Some(_))) {
        assert!(started.elapsed() < GUARD, "coordinator dev did not stop:\n{}", read(&dev.log));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get(url: &str, token: &str) -> (u16, Value) {
    let response = reqwest::Client::new().get(url).bearer_auth(token).send().await.unwrap_or_else(|e| panic!("{e}"));
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The revision of the `serving` line. The listener answers `/readyz` a
/// moment before that line is written, so it is waited for, not assumed.
async fn serving_revision(dev: &Dev) -> String {
    let started = Instant::now();
    loop {
        let revision = process::json_lines(&dev.log)
            .iter()
            .find(|line| line["message"] == "serving")
            .and_then(|line| line["revision"].as_str().map(str::to_owned));
        if let Some(revision) = revision {
            return revision;
        }
        assert!(started.elapsed() < GUARD, "no serving line:\n{}", read(&dev.log));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn admit(dev: &Dev, token: &str, key: &str) -> String {
    let revision = serving_revision(dev).await;
    let body =
        json!({"workflow": "reviewed-notice", "revision": revision, "input": sample_input(), "idempotencyKey": key});
    let response = reqwest::Client::new()
        .post(format!("{}/v1/runs", dev.url))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.status().as_u16(), 201);
    let body: Value = response.json().await.unwrap_or(Value::Null);
    body["runId"].as_str().unwrap_or_else(|| panic!("no runId: {body}")).to_owned()
}

async fn finished(dev: &Dev, token: &str, run: &str) {
    let started = Instant::now();
    loop {
        let (status, view) = get(&format!("{}/v1/runs/{run}", dev.url), token).await;
        assert_eq!(status, 200, "{view}");
        if view["state"] == "finished" {
            return;
        }
        assert!(started.elapsed() < GUARD, "{run} did not finish: {view}\n{}", read(&dev.log));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn dev_restarted_on_its_data_directory_keeps_every_run() {
    on_runtime(async {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let port = deploy::free_port();
        let dev = start(data.path(), port, 1).await;
        let token = std::fs::read_to_string(data.path().join("dev-operator-token")).unwrap_or_default();
        let token = token.trim().to_owned();
        assert_eq!(token.len(), 64, "the generated operator token is kept in the data directory");
        let first = admit(&dev, &token, "before-kill").await;
        finished(&dev, &token, &first).await;
        let waiting = admit(&dev, &token, "killed-mid-run").await;

        stop(dev, "KILL").await;
        let dev = start(data.path(), port, 2).await;
        // The same token; every earlier run opens (a new key would make these 500).
        let (status, view) = get(&format!("{}/v1/runs/{first}", dev.url), &token).await;
        assert_eq!((status, view["state"].as_str()), (200, Some("finished")), "{view}");
        let (status, view) = get(&format!("{}/v1/runs/{waiting}/inspection", dev.url), &token).await;
        assert_eq!(status, 200, "{view}");
        let second = admit(&dev, &token, "after-kill").await;
        finished(&dev, &token, &second).await;

        stop(dev, "TERM").await;
        let dev = start(data.path(), port, 3).await;
        for run in [&first, &second] {
            let (status, view) = get(&format!("{}/v1/runs/{run}", dev.url), &token).await;
            assert_eq!((status, view["state"].as_str()), (200, Some("finished")), "{view}");
        }
        let third = admit(&dev, &token, "after-term").await;
        finished(&dev, &token, &third).await;
    });
}

//! Crash test (issue: the durable service): the `coordinator serve` process is
//! killed with SIGKILL at many different points of many runs and started
//! again, while runs are being admitted. Every run must still reach the state
//! its journey says (reviewed-notice → `notice-sent`), with every mutation
//! performed exactly once per idempotency key, as the simulators count it.
//!
//! A kill can land after a mutation was sent and before its answer was
//! committed. The service then cannot know whether the product acted: the run
//! goes to `attention` with the effect `unknown`, never a silent resend. The
//! test settles such runs the way an operator would (`reconcile` where the
//! operation has a receipt, `retry-same` otherwise — the simulators deduplicate
//! by key), and still demands one effect per key.
//!
//! The simulators live in the test process, so they outlive every kill.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/process.rs"]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use deploy::{DeploymentSpec, eager_reviewed_notice, free_port, sim_server};
use serde_json::{Value, json};
use support::{authorized_client, on_runtime, sample_input};

/// Runs admitted in all.
const RUNS: usize = 40;
/// Times the process is killed.
const KILLS: usize = 12;

/// A small deterministic generator (xorshift), so a failing schedule can be replayed.
struct Schedule(u64);

impl Schedule {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

async fn wait_healthy(client: &reqwest::Client, url: &str) {
    assert!(process::ready(client, url).await, "coordinator serve did not become ready at {url}");
}

/// Admits run `i`, retrying through kills; the same key always gives the same run.
async fn admit(client: reqwest::Client, url: String, revision: String, i: usize) -> String {
    let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": format!("crash-{i}"), "input": sample_input()});
    loop {
        if let Ok(r) = client.post(format!("{url}/v1/runs")).json(&body).send().await {
            let status = r.status().as_u16();
            let answer: Value = r.json().await.unwrap_or(Value::Null);
            if matches!(status, 200 | 201) {
                return answer["runId"].as_str().unwrap_or_else(|| panic!("no runId: {answer}")).to_owned();
            }
            assert!(status >= 500, "admission {i} refused: {status} {answer}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn state_of(client: &reqwest::Client, url: &str, run: &str) -> Option<Value> {
    let r = client.get(format!("{url}/v1/runs/{run}")).send().await.ok()?;
    r.json().await.ok()
}

/// Settles a run in `attention` as an operator would, from its inspection:
/// `reconcile` where the operation has a receipt and none was looked up yet;
/// `retry-same` when there is no receipt, or the receipt did not settle it
/// (a process killed after claiming an attempt but before sending it leaves a
/// receipt `not-found`: nothing proves the product did not act, so the saved
/// command is resent with its original key).
async fn settle(client: &reqwest::Client, url: &str, run: &str) {
    let Ok(response) = client.get(format!("{url}/v1/runs/{run}/inspection")).send().await else { return };
    let view: Value = response.json().await.unwrap_or(Value::Null);
    let Some(step) = view["attention"]["step"].as_str() else { return };
    let Some(record) = view["steps"].as_array().and_then(|s| s.iter().find(|s| s["step"] == step)) else { return };
    let offers = |action: &str| record["recoveryActions"].as_array().is_some_and(|a| a.iter().any(|x| x == action));
    let looked_up = !record["call"]["lastReceipt"].is_null();
    let command = if offers("reconcile") && !looked_up {
        "reconcile"
    } else if offers("retry-same") {
        "retry-same"
    } else {
        return;
    };
    let _ = client.post(format!("{url}/v1/runs/{run}/steps/{step}/{command}")).send().await;
}

#[test]
fn killed_at_many_points_every_run_still_ends_as_its_journey_says_with_one_effect_per_key() {
    on_runtime(async {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let port = free_port();
        let sims = sim_server(SimConfig {
            casework: CaseworkConfig {
                auto_decide_after: Some(Duration::from_millis(100)),
                notify_url: Some(format!("http://127.0.0.1:{port}/v1/completions/casework")),
                ..CaseworkConfig::default()
            },
            ..SimConfig::default()
        })
        .await;
        let db = format!("sqlite://{}?mode=rwc", dir.path().join("coordinator.db").display());
        let mut spec = DeploymentSpec::new(&db, &sims.base);
        spec.listen = format!("127.0.0.1:{port}");
        spec.project = eager_reviewed_notice(dir.path());
        spec.connect_seconds = 1;
        spec.request_seconds = 1;
        let runtime = spec.write(dir.path());
        let revision = deploy::package_of(&spec.project);
        let revision =
            coordinator_core::package::read(&revision.0, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision;
        let log = dir.path().join("coordinator.log");
        process::migrate(&runtime);

        let url = format!("http://127.0.0.1:{port}");
        let client = authorized_client(Duration::from_secs(5));
        let mut schedule = Schedule(0x9e37_79b9_7f4a_7c15);
        let mut child = process::spawn_child(&runtime, &log);
        wait_healthy(&client, &url).await;
        let mut admissions = Vec::new();
        let per_round = RUNS.div_ceil(KILLS);
        for round in 0..KILLS {
            for i in round * per_round..((round + 1) * per_round).min(RUNS) {
                admissions.push(tokio::spawn(admit(client.clone(), url.clone(), revision.clone(), i)));
            }
            tokio::time::sleep(Duration::from_millis(50 + schedule.next(700))).await;
            child.kill().unwrap_or_else(|e| panic!("SIGKILL: {e}"));
            let _ = child.wait();
            child = process::spawn_child(&runtime, &log);
            wait_healthy(&client, &url).await;
        }
        let mut runs = Vec::new();
        for admission in admissions {
            runs.push(admission.await.unwrap_or_else(|e| panic!("admission task: {e}")));
        }
        runs.sort();
        runs.dedup();
        assert_eq!(runs.len(), RUNS, "one run per idempotency key");

        // Let every run end; settle the ones a kill left with an unknown effect.
        let mut states: BTreeMap<String, Value> = BTreeMap::new();
        for _ in 0..1200 {
            states.clear();
            for run in &runs {
                if let Some(v) = state_of(&client, &url, run).await {
                    if v["state"] == "attention" {
                        settle(&client, &url, run).await;
                    }
                    states.insert(run.clone(), v);
                }
            }
            if states.len() == RUNS && states.values().all(|v| v["state"] != "running" && v["state"] != "attention") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        let unfinished: Vec<&Value> = states.values().filter(|v| v["outcome"] != "notice-sent").collect();
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            unfinished.is_empty(),
            "{} runs did not reach notice-sent: {unfinished:?}\nlog:\n{log_text}",
            unfinished.len()
        );
        for (product, effects) in
            [("casework", sims.sims.casework.effects()), ("messaging", sims.sims.messaging.effects())]
        {
            let mutations: Vec<_> = effects.iter().filter(|e| e.idempotency_key.is_some()).collect();
            assert_eq!(mutations.len(), RUNS, "{product}: one key per run: {mutations:?}");
            assert!(mutations.iter().all(|e| e.effects == 1), "{product}: one effect per key: {mutations:?}");
        }
    });
}

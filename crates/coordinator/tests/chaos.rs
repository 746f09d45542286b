//! Chaos, sized for CI: two `coordinator serve` processes on one PostgreSQL
//! database, [`RUNS`] runs admitted through either, [`KILLS`] SIGKILLs of one
//! or the other at points a deterministic schedule picks (each process started
//! again at once), and product faults queued before every kill — `503`s,
//! answers lost after the effect, requests lost, answers too late — on the
//! flagship's two mutations. Checked only from the outside, as an operator
//! would: every idempotency key admitted exactly one run; once the runs a kill
//! or a fault left in `attention` are settled (`reconcile` where a receipt can
//! tell, else `retry-same`), every run reached `notice-sent`; each product saw
//! exactly one effect per key; nothing is left running; the audit journal
//! verifies from end to end.
//!
//! The simulators live in the test process, so they outlive every kill.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[path = "support/pg.rs"]
mod pg;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use coordinator_core::audit::{self, Entry, Head};
use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use deploy::{DeploymentSpec, eager_reviewed_notice, free_ports, sim_server};
use serde_json::{Value, json};
use support::{authorized_client, on_runtime, sample_input};

/// Runs admitted in all.
const RUNS: usize = 200;
/// Times a process is killed.
const KILLS: usize = 12;
/// The faults queued before each kill, on one of the two mutations.
const FAULTS: [&str; 4] = ["unavailable", "drop-response-after-effect", "drop-request", "timeout"];
const MUTATIONS: [(&str, &str); 2] = [("casework", "submit-review-request/v1"), ("messaging", "submit-message/v1")];

/// A small deterministic generator (xorshift), so a failing schedule can be replayed.
struct Schedule(u64);

impl Schedule {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }

    fn pick(&mut self, below: usize) -> usize {
        usize::try_from(self.next(u64::try_from(below).unwrap_or(1))).unwrap_or(0)
    }
}

/// One of the two processes: its runtime file, URL, log and child.
struct Process {
    runtime: PathBuf,
    url: String,
    log: PathBuf,
    child: Child,
}

impl Process {
    fn start(runtime: PathBuf, url: String, log: PathBuf) -> Process {
        let child = spawn(&runtime, &log);
        Process { runtime, url, log, child }
    }

    fn kill_and_restart(&mut self) {
        self.child.kill().unwrap_or_else(|e| panic!("SIGKILL: {e}"));
        let _ = self.child.wait();
        self.child = spawn(&self.runtime, &self.log);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(runtime: &Path, log: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap_or_else(|e| panic!("log: {e}"));
    let err = log.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
    Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .args(["serve", "--runtime"])
        .arg(runtime)
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn coordinator serve: {e}"))
}

async fn wait_healthy(client: &reqwest::Client, url: &str) {
    for _ in 0..600 {
        if let Ok(r) = client.get(format!("{url}/healthz")).send().await
            && r.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("coordinator serve did not become healthy at {url}");
}

/// Admits run `i` through one process, then the other, until one answers; the same key always gives the same run.
async fn admit(client: reqwest::Client, urls: [String; 2], revision: String, i: usize) -> String {
    let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": format!("chaos-{i}"), "input": sample_input()});
    let mut attempt = 0_usize;
    loop {
        let url = &urls[(i + attempt) % 2];
        attempt += 1;
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

/// GET `path` from whichever process answers.
async fn get_any(client: &reqwest::Client, urls: &[String; 2], path: &str) -> Option<Value> {
    for url in urls {
        if let Ok(r) = client.get(format!("{url}{path}")).send().await
            && r.status().is_success()
        {
            return r.json().await.ok();
        }
    }
    None
}

/// Settles a run in `attention` as an operator would (`reconcile` where a
/// receipt can tell and none was looked up yet, else `retry-same`); returns
/// whether a command was sent.
async fn settle(client: &reqwest::Client, urls: &[String; 2], run: &str) -> bool {
    let Some(view) = get_any(client, urls, &format!("/v1/runs/{run}/inspection")).await else { return false };
    let Some(step) = view["attention"]["step"].as_str() else { return false };
    let Some(record) = view["steps"].as_array().and_then(|s| s.iter().find(|s| s["step"] == step)) else {
        return false;
    };
    let offers = |action: &str| record["recoveryActions"].as_array().is_some_and(|a| a.iter().any(|x| x == action));
    let looked_up = !record["call"]["lastReceipt"].is_null();
    let command = if offers("reconcile") && !looked_up {
        "reconcile"
    } else if offers("retry-same") {
        "retry-same"
    } else {
        return false;
    };
    for url in urls {
        if client.post(format!("{url}/v1/runs/{run}/steps/{step}/{command}")).send().await.is_ok() {
            return true;
        }
    }
    false
}

/// The whole journal, page by page, and the head of the last page.
async fn journal(client: &reqwest::Client, urls: &[String; 2]) -> (Vec<Entry>, Head) {
    let mut entries = Vec::new();
    let mut after = 0;
    loop {
        let page = get_any(client, urls, &format!("/v1/audit?after={after}&limit=1000")).await;
        let page = page.unwrap_or_else(|| panic!("no process answered GET /v1/audit"));
        let parsed: Vec<Entry> =
            serde_json::from_value(page["entries"].clone()).unwrap_or_else(|e| panic!("entries: {e}: {page}"));
        entries.extend(parsed);
        match page["next"].as_i64() {
            Some(next) => after = next,
            None => {
                let head = Head {
                    position: page["head"]["position"].as_i64().unwrap_or(0),
                    hash: page["head"]["hash"].as_str().unwrap_or_default().to_owned(),
                };
                return (entries, head);
            }
        }
    }
}

#[test]
fn two_processes_killed_and_faulted_lose_nothing_and_repeat_no_effect() {
    on_runtime(async {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let db = pg::database().await;
        let ports = free_ports::<2>();
        let urls = ports.map(|p| format!("http://127.0.0.1:{p}"));
        let sims = sim_server(SimConfig {
            casework: CaseworkConfig {
                auto_decide_after: Some(Duration::from_millis(100)),
                notify_url: Some(format!("{}/v1/completions/casework", urls[0])),
                ..CaseworkConfig::default()
            },
            ..SimConfig::default()
        })
        .await;
        let project = eager_reviewed_notice(dir.path());
        let mut runtimes = Vec::new();
        for (n, port) in ports.iter().enumerate() {
            let own = dir.path().join(format!("process-{n}"));
            std::fs::create_dir_all(&own).unwrap_or_else(|e| panic!("{e}"));
            let mut spec = DeploymentSpec::new(&db.url, &sims.base);
            spec.listen = format!("127.0.0.1:{port}");
            spec.project = project.clone();
            spec.connect_seconds = 1;
            spec.request_seconds = 1;
            runtimes.push(spec.write(&own));
        }
        let revision = deploy::package_of(&project);
        let revision =
            coordinator_core::package::read(&revision.0, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision;
        let migrated = Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .args(["migrate", "--runtime"])
            .arg(&runtimes[0])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));

        let client = authorized_client(Duration::from_secs(5));
        let mut processes: Vec<Process> = runtimes
            .iter()
            .zip(&urls)
            .enumerate()
            .map(|(n, (runtime, url))| {
                Process::start(runtime.clone(), url.clone(), dir.path().join(format!("process-{n}.log")))
            })
            .collect();
        for url in &urls {
            wait_healthy(&client, url).await;
        }
        let mut schedule = Schedule(0x2545_f491_4f6c_dd1d);
        let mut admissions = Vec::new();
        let per_round = RUNS.div_ceil(KILLS);
        for round in 0..KILLS {
            for i in round * per_round..((round + 1) * per_round).min(RUNS) {
                admissions.push(tokio::spawn(admit(client.clone(), urls.clone(), revision.clone(), i)));
            }
            let (product, operation) = MUTATIONS[schedule.pick(MUTATIONS.len())];
            let fault = FAULTS[schedule.pick(FAULTS.len())];
            let body = json!({"operation": operation, "fault": fault, "count": 1 + schedule.next(3)});
            let (status, answer) = support::post(&format!("{}/sim/{product}/v1/faults", sims.base), &body).await;
            assert_eq!(status, 200, "{answer}");
            tokio::time::sleep(Duration::from_millis(50 + schedule.next(700))).await;
            let victim = &mut processes[schedule.pick(2)];
            victim.kill_and_restart();
            let url = victim.url.clone();
            wait_healthy(&client, &url).await;
        }
        let mut runs = Vec::new();
        for admission in admissions {
            runs.push(admission.await.unwrap_or_else(|e| panic!("admission task: {e}")));
        }
        runs.sort();
        runs.dedup();
        assert_eq!(runs.len(), RUNS, "one run per idempotency key");

        // Let every run end; settle the ones a kill or a fault left with an unknown effect.
        let mut states: BTreeMap<String, Value> = BTreeMap::new();
        let mut settled = 0_usize;
        for _ in 0..1200 {
            states.clear();
            for run in &runs {
                if let Some(v) = get_any(&client, &urls, &format!("/v1/runs/{run}")).await {
                    if v["state"] == "attention" && settle(&client, &urls, run).await {
                        settled += 1;
                    }
                    states.insert(run.clone(), v);
                }
            }
            if states.len() == RUNS && states.values().all(|v| v["state"] != "running" && v["state"] != "attention") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let unfinished: Vec<&Value> = states.values().filter(|v| v["outcome"] != "notice-sent").collect();
        let logs: String = processes.iter().map(|p| std::fs::read_to_string(&p.log).unwrap_or_default()).collect();
        assert!(unfinished.is_empty(), "{} runs did not reach notice-sent: {unfinished:?}\n{logs}", unfinished.len());
        for (product, effects) in
            [("casework", sims.sims.casework.effects()), ("messaging", sims.sims.messaging.effects())]
        {
            let mutations: Vec<_> = effects.iter().filter(|e| e.idempotency_key.is_some()).collect();
            assert_eq!(mutations.len(), RUNS, "{product}: one key per run: {mutations:?}");
            assert!(mutations.iter().all(|e| e.effects == 1), "{product}: one effect per key: {mutations:?}");
        }
        // The faults (an answer lost after the effect, at the least) left runs for an operator.
        assert!(settled > 0, "the chaos left nothing to settle: it tested nothing uncertain");
        let (entries, head) = journal(&client, &urls).await;
        let verified = audit::verify(&entries, &head).unwrap_or_else(|e| panic!("the journal does not verify: {e}"));
        assert!(verified.checked >= u64::try_from(RUNS * 10).unwrap_or(0), "{} entries checked", verified.checked);
        drop(processes);
        drop(db);
    });
}

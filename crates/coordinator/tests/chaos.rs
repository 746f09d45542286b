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
//!
//! The bench mode is the same test, larger, by environment variables:
//! `CHAOS_RUNS=10000 CHAOS_KILLS=100 CHAOS_FAULTS=500 CHAOS_PG_RESTARTS=5
//! cargo test --release -p coordinator --test chaos -- --nocapture`
//! (`CHAOS_PG_RESTARTS` restarts the local PostgreSQL cluster with
//! `pg_ctlcluster`, spread over the kills); it prints what it did.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[path = "support/pg.rs"]
mod pg;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/process.rs"]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use coordinator_core::audit::{self, Entry, Head};
use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use deploy::{DeploymentSpec, eager_reviewed_notice, free_ports, sim_server};
use serde_json::{Value, json};
use support::{authorized_client, on_runtime, sample_input};

/// Runs admitted in all (CI size; `CHAOS_RUNS`).
const RUNS: usize = 200;
/// Times a process is killed (`CHAOS_KILLS`).
const KILLS: usize = 12;
/// Product faults queued in all, spread over the kills (`CHAOS_FAULTS`).
const FAULT_COUNT: usize = 24;

/// How large a run of the test is.
struct Sizes {
    runs: usize,
    kills: usize,
    faults: usize,
    pg_restarts: usize,
}

impl Sizes {
    fn from_env() -> Sizes {
        let var = |name: &str, default: usize| {
            std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|e| panic!("{name}={v}: {e}")))
        };
        Sizes {
            runs: var("CHAOS_RUNS", RUNS),
            kills: var("CHAOS_KILLS", KILLS).max(1),
            faults: var("CHAOS_FAULTS", FAULT_COUNT),
            pg_restarts: var("CHAOS_PG_RESTARTS", 0),
        }
    }
}

/// Restarts the local PostgreSQL cluster (bench mode) and waits until it answers.
fn restart_postgres() {
    let version = std::fs::read_dir("/etc/postgresql")
        .unwrap_or_else(|e| panic!("/etc/postgresql: {e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .max()
        .unwrap_or_else(|| panic!("no PostgreSQL cluster in /etc/postgresql"));
    let restarted = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .unwrap_or_else(|e| panic!("pg_ctlcluster: {e}"));
    assert!(restarted.success(), "pg_ctlcluster restart failed");
    for _ in 0..600 {
        let ready = Command::new("pg_isready").args(["-h", "127.0.0.1", "-p", "5432", "-q"]).status();
        if ready.is_ok_and(|s| s.success()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("PostgreSQL did not come back after a restart");
}
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
        let child = process::spawn_child(&runtime, &log);
        Process { runtime, url, log, child }
    }

    fn kill_and_restart(&mut self) {
        self.child.kill().unwrap_or_else(|e| panic!("SIGKILL: {e}"));
        let _ = self.child.wait();
        self.child = process::spawn_child(&self.runtime, &self.log);
    }

    /// Waits until the process answers `/healthz`, starting it again if it
    /// exited meanwhile (a start while the database restarts gives up, as a
    /// supervisor would see it do).
    async fn healthy(&mut self, client: &reqwest::Client) {
        for _ in 0..1200 {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.child = process::spawn_child(&self.runtime, &self.log);
            }
            if let Ok(r) = client.get(format!("{}/healthz", self.url)).send().await
                && r.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "coordinator serve did not become healthy at {}:\n{}",
            self.url,
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
        process::migrate(&runtimes[0]);

        let client = authorized_client(Duration::from_secs(5));
        let mut processes: Vec<Process> = runtimes
            .iter()
            .zip(&urls)
            .enumerate()
            .map(|(n, (runtime, url))| {
                Process::start(runtime.clone(), url.clone(), dir.path().join(format!("process-{n}.log")))
            })
            .collect();
        for process in &mut processes {
            process.healthy(&client).await;
        }
        let sizes = Sizes::from_env();
        let started = std::time::Instant::now();
        let mut schedule = Schedule(0x2545_f491_4f6c_dd1d);
        let mut admissions = Vec::new();
        let per_round = sizes.runs.div_ceil(sizes.kills);
        let (mut faults_queued, mut pg_restarted) = (0_usize, 0_usize);
        for round in 0..sizes.kills {
            for i in round * per_round..((round + 1) * per_round).min(sizes.runs) {
                admissions.push(tokio::spawn(admit(client.clone(), urls.clone(), revision.clone(), i)));
            }
            // This round's share of the faults (each queued for one call, or a few).
            let due = (round + 1) * sizes.faults / sizes.kills;
            while faults_queued < due {
                let (product, operation) = MUTATIONS[schedule.pick(MUTATIONS.len())];
                let fault = FAULTS[schedule.pick(FAULTS.len())];
                let count = (1 + schedule.pick(3)).min(due - faults_queued);
                let body = json!({"operation": operation, "fault": fault, "count": count});
                let (status, answer) = support::post(&format!("{}/sim/{product}/v1/faults", sims.base), &body).await;
                assert_eq!(status, 200, "{answer}");
                faults_queued += count;
            }
            if pg_restarted < (round + 1) * sizes.pg_restarts / sizes.kills {
                tokio::task::spawn_blocking(restart_postgres).await.unwrap_or_else(|e| panic!("restart: {e}"));
                pg_restarted += 1;
            }
            tokio::time::sleep(Duration::from_millis(50 + schedule.next(700))).await;
            processes[schedule.pick(2)].kill_and_restart();
            for process in &mut processes {
                process.healthy(&client).await;
            }
        }
        let mut runs = Vec::new();
        for admission in admissions {
            runs.push(admission.await.unwrap_or_else(|e| panic!("admission task: {e}")));
        }
        runs.sort();
        runs.dedup();
        assert_eq!(runs.len(), sizes.runs, "one run per idempotency key");

        // Let every run end; settle the ones a kill or a fault left with an
        // unknown effect. Only runs not ended yet are looked at again.
        let mut states: BTreeMap<String, Value> = BTreeMap::new();
        let mut pending: Vec<String> = runs.clone();
        let mut settled = 0_usize;
        for _ in 0..1200 + sizes.runs / 2 {
            let mut still = Vec::new();
            for run in pending {
                match get_any(&client, &urls, &format!("/v1/runs/{run}")).await {
                    Some(v) if v["state"] != "running" && v["state"] != "attention" => {
                        states.insert(run, v);
                    }
                    Some(v) => {
                        if v["state"] == "attention" && settle(&client, &urls, &run).await {
                            settled += 1;
                        }
                        states.insert(run.clone(), v);
                        still.push(run);
                    }
                    None => still.push(run),
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(pending.is_empty(), "{} runs never ended: {pending:?}", pending.len());
        let unfinished: Vec<&Value> = states.values().filter(|v| v["outcome"] != "notice-sent").collect();
        let logs: String = processes.iter().map(|p| std::fs::read_to_string(&p.log).unwrap_or_default()).collect();
        assert!(unfinished.is_empty(), "{} runs did not reach notice-sent: {unfinished:?}\n{logs}", unfinished.len());
        for (product, effects) in
            [("casework", sims.sims.casework.effects()), ("messaging", sims.sims.messaging.effects())]
        {
            let mutations: Vec<_> = effects.iter().filter(|e| e.idempotency_key.is_some()).collect();
            assert_eq!(mutations.len(), sizes.runs, "{product}: one key per run: {mutations:?}");
            assert!(mutations.iter().all(|e| e.effects == 1), "{product}: one effect per key: {mutations:?}");
        }
        // The faults (an answer lost after the effect, at the least) left runs for an operator.
        assert!(settled > 0, "the chaos left nothing to settle: it tested nothing uncertain");
        let (entries, head) = journal(&client, &urls).await;
        let verified = audit::verify(&entries, &head).unwrap_or_else(|e| panic!("the journal does not verify: {e}"));
        assert!(
            verified.checked >= u64::try_from(sizes.runs * 10).unwrap_or(0),
            "{} entries checked",
            verified.checked
        );
        println!(
            "chaos: {} runs, {} kills, {faults_queued} faults, {pg_restarted} PostgreSQL restarts, {settled} operator commands \
             sent, {} journal entries verified, in {:.0} s",
            sizes.runs,
            sizes.kills,
            verified.checked,
            started.elapsed().as_secs_f64()
        );
        drop(processes);
        drop(db);
    });
}

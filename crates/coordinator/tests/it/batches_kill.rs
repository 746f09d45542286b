//! A durable batch outlives the processes working it, on both stores:
//! `serve` processes (two on PostgreSQL, one on SQLite) are SIGKILLed twice
//! and SIGTERMed once while a batch cancels hundreds of runs waiting for
//! their reviews, each time restarted; the batch ends with every run acted
//! on exactly once (one journaled batch command per run, one withdrawal per
//! review at Casework), its progress never going backwards. Each stop comes while runs remain, after the batch moved since
//! the stop before (a killed lease is taken over once it runs out).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::deploy::{DeploymentSpec, free_ports, package_of, sim_config, sim_server, sqlite_url};
use crate::support::process::{self, Process, ready};
use crate::support::{GUARD, Load, authorized_client, inspection_until, on_runtime, pg, tempdir};

/// Runs the batch acts on: 300, or `COORDINATOR_BATCH_RUNS` (the 10 000-run
/// drill in bench/RESULTS.md sets it; CI keeps the default).
fn runs() -> usize {
    std::env::var("COORDINATOR_BATCH_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(300)
}

/// How long a wait may take for `runs` runs: the guard per 300 runs.
fn guard(runs: usize) -> std::time::Duration {
    GUARD * u32::try_from(runs.div_ceil(300)).unwrap_or(1)
}

async fn batch(client: &reqwest::Client, url: &str, id: &str) -> Value {
    let response = client.get(format!("{url}/v1/batches/{id}")).send().await;
    let response = response.unwrap_or_else(|e| panic!("{e}"));
    response.json().await.unwrap_or(Value::Null)
}

fn acted(b: &Value) -> u64 {
    b["done"].as_u64().unwrap_or(0)
        + b["refused"].as_object().into_iter().flatten().filter_map(|(_, n)| n.as_u64()).sum::<u64>()
}

/// Starts each process of `runtimes` anew (logging to `p{i}-{round}.log`), ready.
async fn start_all(runtimes: &[PathBuf], urls: &[String], dir: &std::path::Path, round: usize) -> Vec<Process> {
    let mut processes = Vec::new();
    for (i, (runtime, url)) in runtimes.iter().zip(urls).enumerate() {
        let p = Process::serve(runtime, &dir.join(format!("p{i}-{round}.log")));
        ready(url, &p.log).await;
        processes.push(p);
    }
    processes
}

async fn survives(database_url: &str, processes: usize) {
    let (count, dir) = (runs(), tempdir());
    let patience = guard(count);
    // Nobody decides the reviews: every run waits for its own.
    let sims = sim_server(sim_config(None, None)).await;
    let ports = free_ports::<2>();
    let urls: Vec<String> = ports[..processes].iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    let spec = DeploymentSpec::new(database_url, &sims.base);
    let runtimes = spec.write_each(dir.path(), &ports[..processes]);
    process::migrate(&runtimes[0]);
    let mut running = start_all(&runtimes, &urls, dir.path(), 0).await;
    let client = authorized_client(Duration::from_secs(30));
    let revision = package_of(&spec.project).revision;

    let load = Load { runs: count, clients: 8, pace: Duration::ZERO, key: "batched" };
    for c in load.start(&client, &urls, &revision, &Arc::new(AtomicUsize::new(0))) {
        c.await.unwrap_or_else(|e| panic!("{e}"));
    }
    // Each run waits at its review, its request's acceptance recorded: a run
    // cancelled while its request is still in flight ends without a
    // withdrawal (the cancel route belongs to the wait), which is not what
    // this test counts.
    let admitted = crate::support::deploy::listed(&client, &urls[0], "").await;
    assert_eq!(admitted.len(), count);
    for run in admitted {
        let id = run["runId"].as_str().unwrap_or_default();
        inspection_until(&urls[0], id, "the review wait", |v| v["currentStep"] == "await-review").await;
    }

    let body = json!({"action": "cancel", "filter": {"workflow": "reviewed-notice", "state": "running"}, "reason": "incident 42"});
    let response = client.post(format!("{}/v1/batches", urls[0])).json(&body).send().await;
    let started: Value = response.unwrap_or_else(|e| panic!("{e}")).json().await.unwrap_or(Value::Null);
    assert_eq!(started["matched"], json!(count), "{started}");
    let id = started["batchId"].as_str().unwrap_or_default().to_owned();

    // Kill, kill, terminate: each while runs remain and after the batch moved.
    let (mut seen, mut stops) = (0, 0);
    let watch = Instant::now();
    for (round, signal) in [(1, "KILL"), (2, "KILL"), (3, "TERM")] {
        loop {
            let b = batch(&client, &urls[0], &id).await;
            let now = acted(&b);
            assert!(now >= seen, "progress went backwards: {b}");
            assert_ne!(b["state"], "done", "the batch ended before stop {round}: {b}");
            if now > seen {
                seen = now;
                break;
            }
            assert!(watch.elapsed() < patience, "the batch did not move before stop {round}: {b}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for p in &mut running {
            p.signal(signal);
        }
        for p in &mut running {
            p.exited().await;
        }
        stops += 1;
        running = start_all(&runtimes, &urls, dir.path(), round).await;
    }
    assert_eq!(stops, 3);

    let finished = loop {
        let b = batch(&client, &urls[0], &id).await;
        assert!(acted(&b) >= seen, "progress went backwards: {b}");
        seen = acted(&b);
        if b["state"] == "done" {
            break b;
        }
        assert!(watch.elapsed() < patience * 2, "the batch did not end: {b}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (finished["done"].as_u64(), finished["remaining"].as_u64()),
        (Some(count as u64), Some(0)),
        "{finished}"
    );

    // Once each: one journaled batch command per run. Each run follows its
    // cancel route to the end; a withdrawal in flight when a process was
    // killed is an unknown effect, left to an operator (attention).
    let watch = Instant::now();
    let settled = |r: &Value| r["state"] != "running" && r["state"] != "cancel-requested";
    let runs = loop {
        let runs = crate::support::deploy::listed(&client, &urls[0], "").await;
        if runs.iter().all(settled) {
            break runs;
        }
        assert!(watch.elapsed() < patience, "not every cancelled run settled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let ended = runs.iter().filter(|r| r["state"] != "attention").count();
    let mut by_state = std::collections::BTreeMap::new();
    for r in &runs {
        *by_state.entry(format!("{}/{}", r["state"], r["reason"])).or_insert(0) += 1;
    }
    let withdrawals = sims.sims.casework.effects().into_iter().filter(|e| e.operation.starts_with("withdraw"));
    let withdrawals: Vec<u64> = withdrawals.map(|e| e.effects).collect();
    assert!(
        withdrawals.len() >= ended && withdrawals.len() <= count,
        "{} withdrawals, {ended} ended: {by_state:?}",
        withdrawals.len()
    );
    assert!(withdrawals.iter().all(|n| *n == 1), "each withdrawal's effect once");
    for run in runs {
        let id_text = run["runId"].as_str().unwrap_or_default();
        let page = client.get(format!("{}/v1/audit?limit=1000&run={id_text}", urls[0])).send().await;
        let page: Value = page.unwrap_or_else(|e| panic!("{e}")).json().await.unwrap_or(Value::Null);
        let commands = page["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["detail"].as_str().is_some_and(|d| d.contains(&format!("batch {id}: incident 42"))))
            .count();
        assert_eq!(commands, 1, "run {id_text} was acted on {commands} times");
    }
    drop(running);
}

#[test]
fn a_batch_outlives_two_kills_and_a_stop_on_postgres() {
    on_runtime(async {
        let db = pg::database().await;
        survives(&db.url, 2).await;
    });
}

#[test]
fn a_batch_outlives_two_kills_and_a_stop_on_sqlite() {
    on_runtime(async {
        let data = tempdir();
        survives(&sqlite_url(data.path()), 1).await;
    });
}

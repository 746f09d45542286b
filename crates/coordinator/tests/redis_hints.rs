//! Redis dispatch hints lost in every way while two `coordinator serve`
//! processes on one PostgreSQL database run a few hundred flagship runs:
//! their private `redis-server` is SIGKILLed, started again empty, and
//! `FLUSHALL`ed, each while runs are in flight. None is lost (every run
//! reaches `notice-sent`) and none is duplicated (every mutation key reached
//! its product exactly once, the registry was read once per run): the
//! database is the authority, a hint only says "look again". The hints were
//! really in play: both processes sent some, hints were dropped (and counted)
//! while Redis was gone, another process's hints woke workers, the group
//! missing after the restart and the flush was created again, and both
//! processes reach Redis again at the end.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[path = "support/pg.rs"]
mod pg;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/process.rs"]
mod process;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/redis.rs"]
mod redis;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use coordinator_sim::SimConfig;
use coordinator_sim::casework::CaseworkConfig;
use deploy::{DeploymentSpec, eager_reviewed_notice, free_ports, runs_in_state, sim_server};
use serde_json::json;
use support::{authorized_client, on_runtime, sample_input};

const RUNS: usize = 300;
/// Admissions in flight at once.
const CLIENTS: usize = 8;
/// The pause of each client between two admissions (about 60 admissions/s in all).
const PACE: Duration = Duration::from_millis(120);

/// The value of the sample `name` (with its labels, as Prometheus writes them) in `url/metrics`.
async fn sample(client: &reqwest::Client, url: &str, name: &str) -> f64 {
    let text = match client.get(format!("{url}/metrics")).send().await {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(e) => panic!("{url}/metrics: {e}"),
    };
    text.lines()
        .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in {url}/metrics:\n{text}"))
}

/// Waits until `admitted` reaches `n`.
async fn admitted_at_least(admitted: &AtomicUsize, n: usize) {
    while admitted.load(Ordering::SeqCst) < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn redis_killed_restarted_empty_and_flushed_mid_load_loses_and_duplicates_nothing() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let mut redis = redis::RedisServer::start();
        let ports = free_ports::<2>();
        let sims = sim_server(SimConfig {
            casework: CaseworkConfig {
                auto_decide_after: Some(Duration::from_millis(100)),
                notify_url: Some(format!("http://127.0.0.1:{}/v1/completions/casework", ports[1])),
                ..CaseworkConfig::default()
            },
            ..SimConfig::default()
        })
        .await;
        let project = eager_reviewed_notice(dir.path());
        let mut runtimes = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let place = dir.path().join(format!("p{i}"));
            std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
            let mut spec = DeploymentSpec::new(&db.url, &sims.base);
            spec.listen = format!("127.0.0.1:{port}");
            spec.project = project.clone();
            spec.extra.push_str("dispatch: {redis: {url: file:redis-url}}\n");
            spec.files.push(("redis-url".to_owned(), format!("{}\n", redis.url())));
            runtimes.push(spec.write(&place));
        }
        process::migrate(&runtimes[0]);
        let logs = [dir.path().join("p0.log"), dir.path().join("p1.log")];
        let _first = process::Serve::spawn(&runtimes[0], &logs[0]);
        let _second = process::Serve::spawn(&runtimes[1], &logs[1]);
        let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let client = authorized_client(Duration::from_secs(30));
        for (url, log) in urls.iter().zip(&logs) {
            if !process::ready(&client, url).await {
                panic!("coordinator serve did not become healthy at {url}:\n{}", process::read(log));
            }
        }
        for url in &urls {
            let mut up = false;
            for _ in 0..200 {
                up = sample(&client, url, "coordinator_dispatch_hints_redis_up").await == 1.0;
                if up {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(up, "{url} never reached Redis");
        }
        let revision = {
            let (bytes, _) = deploy::package_of(&project);
            coordinator_core::package::read(&bytes, None).unwrap_or_else(|e| panic!("{e}")).manifest.revision
        };

        let next = Arc::new(AtomicUsize::new(0));
        let admitted = Arc::new(AtomicUsize::new(0));
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            let (client, urls, revision) = (client.clone(), urls.clone(), revision.clone());
            let (next, admitted) = (Arc::clone(&next), Arc::clone(&admitted));
            clients.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= RUNS {
                        return;
                    }
                    let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": format!("hint-{i}"), "input": sample_input()});
                    let r = client.post(format!("{}/v1/runs", urls[i % 2])).json(&body).send().await;
                    let status = r.map(|r| r.status().as_u16()).unwrap_or_else(|e| panic!("admission {i}: {e}"));
                    assert_eq!(status, 201, "admission {i}");
                    admitted.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(PACE).await;
                }
            }));
        }

        // Mid-load: Redis killed, started again empty, then flushed.
        admitted_at_least(&admitted, RUNS / 4).await;
        let port = redis.port;
        redis.kill();
        admitted_at_least(&admitted, RUNS / 2).await;
        let redis = redis::RedisServer::start_on(port);
        admitted_at_least(&admitted, 3 * RUNS / 4).await;
        assert_eq!(redis.cli(&["FLUSHALL"]).as_deref(), Some("OK"));
        for c in clients {
            c.await.unwrap_or_else(|e| panic!("{e}"));
        }

        let mut finished = 0;
        for _ in 0..1200 {
            finished = runs_in_state(&client, &urls[0], "finished").await;
            if finished == RUNS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let texts: Vec<String> = logs.iter().map(|l| process::read(l)).collect();
        assert_eq!(finished, RUNS, "runs lost; logs:\n{}\n---\n{}", texts[0], texts[1]);
        for (product, effects) in
            [("casework", sims.sims.casework.effects()), ("messaging", sims.sims.messaging.effects())]
        {
            let keyed: Vec<_> = effects.iter().filter(|e| e.idempotency_key.is_some()).collect();
            assert_eq!(keyed.len(), RUNS, "{product}: one key per run");
            let twice: Vec<_> = keyed.iter().filter(|e| e.requests != 1 || e.effects != 1).collect();
            assert!(twice.is_empty(), "{product}: dispatched more than once: {twice:?}");
        }
        let reads: u64 = sims.sims.breg.effects().iter().map(|e| e.requests).sum();
        assert_eq!(reads, RUNS as u64, "the registry is read once per run");

        // The hints were in play, and were lost as the test meant them to be.
        let mut dropped = 0.0;
        let mut woke = 0.0;
        for url in &urls {
            assert!(sample(&client, url, "coordinator_dispatch_hints_sent_total").await > 0.0, "{url} sent no hint");
            dropped += sample(&client, url, "coordinator_dispatch_hints_dropped_total{reason=\"unavailable\"}").await;
            woke += sample(&client, url, "coordinator_dispatch_hint_wakeups_total{path=\"in-process\"}").await;
            let mut up = false;
            for _ in 0..200 {
                up = sample(&client, url, "coordinator_dispatch_hints_redis_up").await == 1.0;
                if up {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(up, "{url} did not reach Redis again");
        }
        assert!(dropped > 0.0, "no hint was dropped while Redis was gone");
        assert!(woke > 0.0, "no worker was woken by the other process's hints");
        let texts: Vec<String> = logs.iter().map(|l| process::read(l)).collect();
        let recreated = texts.iter().map(|t| t.matches("the consumer group was missing").count()).sum::<usize>();
        let unreachable = texts.iter().map(|t| t.matches("Redis unreachable").count()).sum::<usize>();
        eprintln!(
            "hints dropped {dropped}, wake-ups {woke}, groups created again {recreated}, unreachable told {unreachable}"
        );
        assert!(recreated > 0, "no consumer group was created again after the restart or the flush");
        // Told once per part and loss, not per hint: 2 processes × (announcer + reader) × 1 loss.
        assert!((1..=8).contains(&unreachable), "Redis lost was told {unreachable} times");
        for text in &texts {
            assert!(!text.contains("redis://"), "a log line shows the Redis URL");
        }
    });
}

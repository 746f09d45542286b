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

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use coordinator_testdb::redis::RedisServer;

use crate::support::deploy::{DeploymentSpec, eager_flagship, free_ports, package_of, sims, until_finished};
use crate::support::effects::sent_once_per_key;
use crate::support::process;
use crate::support::{Load, authorized_client, metric, metrics, on_runtime, pg, tempdir};

const RUNS: usize = 300;
/// Admissions in flight at once.
const CLIENTS: usize = 8;
/// The pause of each client between two admissions (about 60 admissions/s in all).
const PACE: Duration = Duration::from_millis(120);

/// The value of the sample `series` (with its labels, as Prometheus writes them) in `url/metrics`.
async fn sample(url: &str, series: &str) -> f64 {
    let text = metrics(url).await;
    metric(&text, series).unwrap_or_else(|| panic!("{series} not in {url}/metrics:\n{text}"))
}

/// Waits until the process at `url` says it reaches Redis.
async fn redis_up(url: &str) -> bool {
    for _ in 0..200 {
        if sample(url, "coordinator_dispatch_hints_redis_up").await == 1.0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
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
        let dir = tempdir();
        let mut redis = RedisServer::start();
        let ports = free_ports::<2>();
        let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let sims = sims(Some(Duration::from_millis(100)), Some(&urls[1])).await;
        let mut spec = DeploymentSpec::new(&db.url, &sims.base);
        spec.project = eager_flagship(dir.path());
        spec.extra.push_str("dispatch: {redis: {url: file:redis-url}}\n");
        spec.files.push(("redis-url".to_owned(), format!("{}\n", redis.url())));
        let runtimes = spec.write_each(dir.path(), &ports);
        let processes = process::serve_each(&runtimes, &urls, dir.path()).await;
        let logs: Vec<_> = processes.iter().map(|p| p.log.clone()).collect();
        let client = authorized_client(Duration::from_secs(30));
        for url in &urls {
            assert!(redis_up(url).await, "{url} never reached Redis");
        }
        let revision = package_of(&spec.project).revision;

        let admitted = Arc::new(AtomicUsize::new(0));
        let load = Load { runs: RUNS, clients: CLIENTS, pace: PACE, key: "hint" };
        let clients = load.start(&client, &urls, &revision, &admitted);

        // Mid-load: Redis killed, started again empty, then flushed.
        admitted_at_least(&admitted, RUNS / 4).await;
        let port = redis.port;
        redis.kill();
        admitted_at_least(&admitted, RUNS / 2).await;
        let redis = RedisServer::start_on(port);
        admitted_at_least(&admitted, 3 * RUNS / 4).await;
        assert_eq!(redis.cli(&["FLUSHALL"]).as_deref(), Some("OK"));
        for c in clients {
            c.await.unwrap_or_else(|e| panic!("{e}"));
        }

        until_finished(&client, &urls[0], RUNS, &logs).await;
        sent_once_per_key(&sims.sims, RUNS);

        // The hints were in play, and were lost as the test meant them to be.
        let mut dropped = 0.0;
        let mut woke = 0.0;
        for url in &urls {
            assert!(sample(url, "coordinator_dispatch_hints_sent_total").await > 0.0, "{url} sent no hint");
            dropped += sample(url, "coordinator_dispatch_hints_dropped_total{reason=\"unavailable\"}").await;
            woke += sample(url, "coordinator_dispatch_hint_wakeups_total{path=\"in-process\"}").await;
            assert!(redis_up(url).await, "{url} did not reach Redis again");
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

//! One run per instant across `coordinator serve` processes killed at
//! firing instants: two processes on one PostgreSQL database, and one on
//! SQLite. They follow one test clock (`COORDINATOR_TEST_CLOCK_FILE`), which
//! the test moves 30 s at a time; at every other instant a process is
//! SIGKILLed a moment after the clock moved (while it may be firing) and
//! started again. Afterwards every instant from the first to the last fired
//! has exactly one run, and the workflow has no other run.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::schedules::{runs_at, schedule, scheduled_project};
use crate::support::deploy::{DeploymentSpec, free_ports, sims, sqlite_url};
use crate::support::process::{Process, migrate, ready};
use crate::support::{authorized_client, on_runtime, pg, poll, tempdir};

const EVERY: i64 = 30_000;
/// How many instants the test moves the clock to.
const INSTANTS: i64 = 8;

const SCHEDULE: &str = "schedules:
  - {id: every-30s, intervalSeconds: 30, input: {function: scheduled_input}, overlap: allow}
";

/// Moves both processes' clocks so that it reads `now` (ms).
fn set_clock(file: &Path, now: i64) {
    let offset = now - coordinator::engine::now_ms();
    std::fs::write(file, offset.to_string()).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}

fn serve(runtime: &Path, log: &Path, clock: &Path) -> Process {
    let clock = clock.display().to_string();
    Process::serve_with(runtime, log, "json", &[(coordinator::process::test_clock::VARIABLE, &clock)])
}

#[test]
fn a_schedule_fires_once_per_instant_across_two_processes_killed_at_firings() {
    on_runtime(async {
        let db = pg::database().await;
        once_per_instant(&db.url, 2).await;
    });
}

#[test]
fn a_schedule_fires_once_per_instant_on_sqlite_killed_at_firings() {
    on_runtime(async {
        let data = tempdir();
        once_per_instant(&sqlite_url(data.path()), 1).await;
    });
}

async fn once_per_instant(database_url: &str, count: usize) {
    let dir = tempdir();
    let clock = dir.path().join("clock");
    std::fs::write(&clock, "0").unwrap_or_else(|e| panic!("{e}"));
    let sims = sims(None, None).await;
    let ports = &free_ports::<2>()[..count];
    let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    let mut spec = DeploymentSpec::new(database_url, &sims.base);
    spec.project = scheduled_project(dir.path(), SCHEDULE);
    let runtimes = spec.write_each(dir.path(), ports);
    migrate(&runtimes[0]);
    let mut processes = Vec::new();
    for (i, (runtime, url)) in runtimes.iter().zip(&urls).enumerate() {
        let process = serve(runtime, &dir.path().join(format!("p{i}.log")), &clock);
        ready(url, &process.log).await;
        processes.push(process);
    }
    let first =
        poll(&format!("{}/v1/schedules", urls[0]), "the schedule", |l| l["schedules"][0]["nextAt"].is_i64()).await;
    let t0 = first["schedules"][0]["nextAt"].as_i64().unwrap_or_default();

    for k in 0..INSTANTS {
        let at = t0 + k * EVERY;
        set_clock(&clock, at + 500);
        if k % 2 == 1 {
            let victim = usize::try_from(k / 2).unwrap_or(0) % count;
            // Somewhere in the first round after the move: before, during or after the firing.
            let delay = u64::try_from((k * 137) % 600).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            processes[victim].kill();
            let log = dir.path().join(format!("p{victim}.log"));
            processes[victim] = serve(&runtimes[victim], &log, &clock);
            ready(&urls[victim], &log).await;
        }
        let url = &urls[usize::try_from(k).unwrap_or(0) % count];
        poll(&format!("{url}/v1/schedules"), "the instant to fire", |l| {
            l["schedules"][0]["last"]["at"].as_i64().is_some_and(|last| last >= at)
        })
        .await;
    }

    // Every instant of the grid from the first to the last fired: exactly one run each.
    let last = schedule(&urls[count - 1], "every-30s").await["last"]["at"].as_i64().unwrap_or_default();
    let mut instants = 0;
    let mut at = t0;
    while at <= last {
        let runs = runs_at(&urls[0], "every-30s", at).await;
        assert_eq!(runs.len(), 1, "instant {at}: {runs:?}");
        instants += 1;
        at += EVERY;
    }
    assert!(instants >= INSTANTS as usize, "{instants} instants");
    let client = authorized_client(Duration::from_secs(30));
    let all = crate::support::deploy::listed(&client, &urls[0], "workflow=reviewed-notice").await;
    let ids: std::collections::BTreeSet<&str> = all.iter().filter_map(|r| r["runId"].as_str()).collect();
    assert_eq!(
        ids.len(),
        instants,
        "runs besides one per instant: {:?}",
        all.iter().map(Value::to_string).collect::<Vec<_>>()
    );
}

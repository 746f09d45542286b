//! Crash test (docs/internals/engine.md): the `coordinator serve` process is
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

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::support::deploy::{deployment, eager_flagship, package_of, sqlite_url};
use crate::support::effects::one_effect_per_key;
use crate::support::kills::{Schedule, admit_through, get_any, settle};
use crate::support::process::{self, Process};
use crate::support::{authorized_client, on_runtime, tempdir};

/// Runs admitted in all.
const RUNS: usize = 40;
/// Times the process is killed.
const KILLS: usize = 12;

#[test]
fn killed_at_many_points_every_run_still_ends_as_its_journey_says_with_one_effect_per_key() {
    on_runtime(async {
        let dir = tempdir();
        let (mut spec, sims) = deployment(&sqlite_url(dir.path()), Some(Duration::from_millis(100)), true).await;
        let url = spec.url();
        spec.project = eager_flagship(dir.path());
        spec.connect_seconds = 1;
        spec.request_seconds = 1;
        let runtime = spec.write(dir.path());
        let revision = package_of(&spec.project).revision;
        let log = dir.path().join("coordinator.log");
        process::migrate(&runtime);

        let client = authorized_client(Duration::from_secs(5));
        let urls = vec![url.clone()];
        let mut schedule = Schedule(0x9e37_79b9_7f4a_7c15);
        let mut serve = Process::serve(&runtime, &log);
        process::ready(&url, &log).await;
        let mut admissions = Vec::new();
        let per_round = RUNS.div_ceil(KILLS);
        for round in 0..KILLS {
            for i in round * per_round..((round + 1) * per_round).min(RUNS) {
                let admission = admit_through(client.clone(), urls.clone(), revision.clone(), format!("crash-{i}"));
                admissions.push(tokio::spawn(admission));
            }
            tokio::time::sleep(Duration::from_millis(50 + schedule.next(700))).await;
            serve.kill();
            serve = Process::serve(&runtime, &log);
            process::ready(&url, &log).await;
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
                if let Some(v) = get_any(&client, &urls, &format!("/v1/runs/{run}")).await {
                    if v["state"] == "attention" {
                        settle(&client, &urls, run).await;
                    }
                    states.insert(run.clone(), v);
                }
            }
            if states.len() == RUNS && states.values().all(|v| v["state"] != "running" && v["state"] != "attention") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        serve.kill();
        let unfinished: Vec<&Value> = states.values().filter(|v| v["outcome"] != "notice-sent").collect();
        assert!(
            unfinished.is_empty(),
            "{} runs did not reach notice-sent: {unfinished:?}\nlog:\n{}",
            unfinished.len(),
            process::read(&log)
        );
        one_effect_per_key(&sims.sims, RUNS);
    });
}

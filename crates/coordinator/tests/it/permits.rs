//! A permit is the lease: `coordinator serve` is SIGKILLed while it holds the
//! only permit of messaging (`limits: {concurrency: 1}`), its notice sent and
//! the answer held back by the product. Started again, the process sends no
//! other notice while the dead process's lease lives, and once it ran out
//! every other run's notice goes: the permit came back, none leaked.

use std::time::Duration;

use serde_json::json;

use crate::support::deploy::{deployment, eager_flagship, package_of, sqlite_url};
use crate::support::process::{self, Process};
use crate::support::stack::add_field;
use crate::support::{admit, fault, on_runtime, tempdir, until_state};

/// The connections' timeouts (s): the lease is 2 × (1 + 5) + 10 = 22 s.
const CONNECT: u64 = 1;
const REQUEST: u64 = 5;
const LEASE_MS: u64 = 2 * (CONNECT + REQUEST) * 1000 + 10_000;

#[test]
fn a_process_killed_holding_a_permit_holds_it_no_longer_than_its_lease() {
    on_runtime(async {
        let dir = tempdir();
        let (mut spec, sims) = deployment(&sqlite_url(dir.path()), Some(Duration::from_millis(100)), true).await;
        spec.project = eager_flagship(dir.path());
        (spec.connect_seconds, spec.request_seconds) = (CONNECT, REQUEST);
        let runtime = spec.write(dir.path());
        add_field(&runtime, "messaging", "limits: {concurrency: 1}");
        let (url, revision) = (spec.url(), package_of(&spec.project).revision);
        let log = dir.path().join("coordinator.log");
        process::migrate(&runtime);
        let mut serve = Process::serve(&runtime, &log);
        process::ready(&url, &log).await;

        // The first notice is acted on and its answer held far longer than the request timeout.
        fault(
            &sims.base,
            "messaging",
            json!({"operation": "submit-message/v1", "fault": "timeout", "delaySeconds": 60, "count": 1}),
        )
        .await;
        admit(&url, &revision, "held").await;
        let arrivals = || sims.sims.messaging.load().arrivals;
        let deadline = tokio::time::Instant::now() + crate::support::GUARD;
        while arrivals().is_empty() {
            assert!(tokio::time::Instant::now() < deadline, "the notice never arrived:\n{}", process::read(&log));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Well within the request timeout: the permit is still held.
        serve.kill();
        let held_at = arrivals()[0];

        let mut serve = Process::serve(&runtime, &log);
        process::ready(&url, &log).await;
        let mut others = Vec::new();
        for n in 0..3 {
            others.push(admit(&url, &revision, &format!("after-{n}")).await);
        }
        for run in &others {
            until_state(&url, run, "finished").await;
        }
        serve.kill();
        let seen = arrivals();
        assert_eq!(seen.len(), 4, "the held notice, then each other run's once: {seen:?}");
        // The dead process's lease began before its notice arrived; allow 5 s between its claim and the arrival.
        let earliest = held_at + LEASE_MS - 5_000;
        assert!(
            seen[1..].iter().all(|&at| at >= earliest),
            "a notice went while the killed process's lease still held the permit: held at {held_at}, then {seen:?}"
        );
    });
}

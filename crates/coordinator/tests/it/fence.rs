//! The restore and failover fence's drills
//! (docs/reference/recovery.md#the-fence), each on PostgreSQL clusters of its
//! own made with the server's tools (`support/cluster.rs`):
//!
//! - **Restore from a base backup** taken mid-run (`pg_basebackup`): the
//!   original goes on (a notice is sent), crashes, and the backup comes up in
//!   its place. `serve`, still running, reconnects and finds the commit epoch
//!   went back: it places the restore hold itself, with the evidence in the
//!   journal, says `fenced` in readiness and metrics, and dispatches nothing
//!   until an operator releases the hold.
//! - **Promotion of a lagging standby**: a streaming standby is cut off, the
//!   primary sends a notice and crashes, the standby is promoted and takes the
//!   primary's port. The running `serve` and a fresh start on it both find
//!   the timeline changed.
//! - **A URL naming both servers** (`target_session_attrs=read-write`): the
//!   standby promoted where it is, `serve` follows it by itself, fenced.
//! - **Routine restarts** — of PostgreSQL (fast and immediate) and of `serve` —
//!   never place the fence.
//!
//! After each release, every run finishes with one effect per notice key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use coordinator::process::serve::{Mode, Service};
use serde_json::Value;

use crate::support::cluster::{Cluster, Clusters};
use crate::support::deploy::{DeploymentSpec, SimServer, eager_flagship, free_port, migrated, sims, start};
use crate::support::drill::{admit_to_review, release};
use crate::support::effects::{Counts, commands, counts};
use crate::support::{admission, get, inspection_until, journal, metric, metrics, on_runtime, post, tempdir};

/// A deployment of the eager reviewed-notice on `url`, written under `dir/name`.
fn deployment(dir: &Path, name: &str, url: &str, sims: &SimServer) -> PathBuf {
    let place = dir.join(name);
    std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
    let mut spec = DeploymentSpec::new(url, &sims.base);
    spec.project = eager_flagship(dir);
    spec.write(&place)
}

/// Decides the review `reference` and waits until one of `runs` finished
/// with its notice sent; puts that run first.
async fn review_to_notice(service: &Service, sims: &SimServer, reference: &str, runs: &mut [String]) {
    sims.sims.casework.decide(reference, None).unwrap_or_else(|e| panic!("{e:?}"));
    for _ in 0..1200 {
        for i in 0..runs.len() {
            let (_, view) = get(&format!("{}/v1/runs/{}", service.url(), runs[i])).await;
            if view["state"] == "finished" {
                assert_eq!(view["outcome"], "notice-sent", "{view}");
                runs.swap(0, i);
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no run sent its notice after {reference} was decided");
}

/// Makes sure the fence has read the database after everything committed so far
/// (the watch does every second; the test does not wait on the clock for it).
async fn read_now(service: &Service) {
    let engine = &service.engine;
    engine.store().check_fence(engine.now()).await.unwrap_or_else(|e| panic!("reading for the fence: {e}"));
}

/// `GET /readyz`'s status word.
async fn readiness(url: &str) -> String {
    let (_, body) = get(&format!("{url}/readyz")).await;
    body["status"].as_str().unwrap_or_default().to_owned()
}

/// Waits until `/readyz` says `status` (a failure guard: reconnecting takes what it takes).
async fn wait_readiness(url: &str, status: &str) {
    let mut last = String::new();
    for _ in 0..1200 {
        last = readiness(url).await;
        if last == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/readyz never said {status} (last: {last})");
}

/// The `coordinator_fenced` gauge of a service.
async fn fenced_gauge(url: &str) -> Option<f64> {
    metric(&metrics(url).await, "coordinator_fenced")
}

/// A primary and its streaming standby (on a port of its own), both started.
fn primary_and_standby(clusters: &Clusters) -> (Cluster, Cluster) {
    let primary = clusters.primary("primary");
    let mut standby = clusters.base_backup(&primary, "standby", true);
    standby.port = free_port();
    clusters.start(&standby);
    (primary, standby)
}

/// The journal's entries of `kind`.
async fn journal_of(url: &str, kind: &str) -> Vec<Value> {
    journal(url, None).await.into_iter().filter(|e| e["kind"] == kind).collect()
}

/// What a fenced service shows, and that it dispatches and admits nothing;
/// returns the hold's reason.
async fn assert_fenced(service: &Service, sims: &SimServer, runs: &[String], before: &Counts) -> String {
    let url = service.url();
    wait_readiness(&url, "fenced").await;
    let mut hold = Value::Null;
    for _ in 0..1200 {
        let (status, now) = get(&format!("{url}/v1/restore-hold")).await;
        assert_eq!(status, 200, "{now}");
        hold = now;
        if hold["placed"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!((hold["placed"].as_bool(), hold["placedBy"].as_str()), (Some(true), Some("coordinator")), "{hold}");
    let reason = hold["reason"].as_str().unwrap_or_default().to_owned();
    let fences = journal_of(&url, "fence").await;
    assert!(
        fences.iter().any(|e| e["detail"].as_str().is_some_and(|d| d.contains(&reason) && e["actor"].is_null())),
        "the evidence is journaled, as the coordinator's: {fences:?}"
    );
    assert_eq!(fenced_gauge(&url).await, Some(1.0));
    for run in runs {
        let view = inspection_until(&url, run, "the hold", |v| v["attention"]["reason"] == "restore-hold").await;
        assert_eq!(view["state"], "attention", "{view}");
    }
    let (status, refused) = post(&format!("{url}/v1/runs"), &admission(&service.revision, "new")).await;
    assert_eq!((status, refused["code"].as_str()), (409, Some("restore-hold.placed")), "{refused}");
    // A normal worker would send the forgotten notices again within a second or two.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(commands(counts(&sims.sims)), commands(before.clone()), "a command reached a product while fenced");
    reason
}

/// After the release: the remaining reviews decided, every run finishes
/// with one effect per notice key.
async fn finish_all(service: &Service, sims: &SimServer, runs: &[String], reviews: &[&str]) {
    let url = service.url();
    wait_readiness(&url, "ready").await;
    assert_eq!(fenced_gauge(&url).await, Some(0.0));
    for reference in reviews {
        sims.sims.casework.decide(reference, None).unwrap_or_else(|e| panic!("{e:?}"));
    }
    for run in runs {
        let view = inspection_until(&url, run, "the end after the release", |v| v["state"] == "finished").await;
        assert_eq!(view["outcome"], "notice-sent", "{view}");
    }
    let notices: Vec<_> = counts(&sims.sims).into_iter().filter(|r| r.0 == "submit-message/v1").collect();
    assert_eq!(notices.len(), runs.len(), "{notices:?}");
    assert!(notices.iter().all(|r| r.3 == 1), "one effect per notice key: {notices:?}");
}

#[test]
fn a_restore_from_a_base_backup_taken_mid_run_is_fenced_until_released() {
    on_runtime(async {
        let clusters = Clusters::new();
        let original = clusters.primary("original");
        let dir = tempdir();
        let sims = sims(None, None).await;
        let runtime = deployment(dir.path(), "deploy", &original.url(), &sims);
        let service = migrated(&runtime).await;
        let mut runs = admit_to_review(&service, &["a", "b"]).await;
        read_now(&service).await;

        // Mid-run: the backup. Then the original sends A's notice; those commits are not in the backup.
        let backup = clusters.base_backup(&original, "backup", false);
        review_to_notice(&service, &sims, "review-1", &mut runs).await;
        read_now(&service).await;
        let before = counts(&sims.sims);

        // The original crashes; the backup comes up in its place. `serve` goes on running.
        clusters.stop(&original, "immediate");
        clusters.start(&backup);
        let reason = assert_fenced(&service, &sims, &runs, &before).await;
        assert!(reason.contains("commit epoch went back"), "{reason}");

        // The operator reviews and releases: A's notice goes out again with its key (the product
        // deduplicates); B goes on to its own.
        release(&service.url()).await;
        finish_all(&service, &sims, &runs, &["review-2"]).await;
        let resent =
            counts(&sims.sims).into_iter().find(|r| r.1.as_deref() == Some(&format!("{}:send-notice", runs[0])));
        assert_eq!(resent.map(|r| (r.2, r.3)), Some((2, 1)), "A's notice: sent again once, one effect");
    });
}

#[test]
fn a_promoted_standby_that_lagged_is_fenced_and_so_is_a_fresh_start_on_it() {
    on_runtime(async {
        let clusters = Clusters::new();
        let (primary, standby) = primary_and_standby(&clusters);
        let dir = tempdir();
        let sims = sims(None, None).await;
        let runtime = deployment(dir.path(), "deploy", &primary.url(), &sims);
        let service = migrated(&runtime).await;
        let mut runs = admit_to_review(&service, &["a", "b"]).await;
        primary.wait_replayed(&standby).await;

        // The standby falls behind; the primary sends A's notice, then crashes.
        standby.detach().await;
        review_to_notice(&service, &sims, "review-1", &mut runs).await;
        read_now(&service).await;
        let before = counts(&sims.sims);
        clusters.stop(&primary, "immediate");

        // Failover: the standby is promoted and takes the primary's address.
        standby.promote();
        clusters.stop(&standby, "fast");
        let promoted = Cluster { port: primary.port, ..standby.clone() };
        clusters.start(&promoted);
        let reason = assert_fenced(&service, &sims, &runs, &before).await;
        assert!(reason.contains("timeline changed from 1 to 2"), "{reason}");

        // A process started now finds it at once: the recorded identity is not the promoted one.
        let fresh_runtime = deployment(dir.path(), "fresh", &promoted.url(), &sims);
        let fresh = start(&fresh_runtime, Mode::Normal).await;
        assert_eq!(readiness(&fresh.url()).await, "fenced");
        let fences = journal_of(&fresh.url(), "fence").await;
        assert!(
            fences.iter().any(|e| e["detail"].as_str().is_some_and(|d| d.contains("timeline 1 → 2"))),
            "a fresh start names what differs from the recorded identity: {fences:?}"
        );

        // One release lifts the fence of every process.
        release(&service.url()).await;
        wait_readiness(&fresh.url(), "ready").await;
        finish_all(&service, &sims, &runs, &["review-2"]).await;
    });
}

/// A URL naming both servers (`target_session_attrs=read-write`): when the
/// primary crashes and its standby is promoted where it is, the running
/// `serve` finds the new primary by itself — no address moved, no process
/// restarted — and the fence judges the promotion (its timeline changed:
/// fenced until an operator releases the hold), after which every run ends.
#[test]
fn a_url_naming_both_servers_follows_the_promoted_standby() {
    on_runtime(async {
        let clusters = Clusters::new();
        let (primary, standby) = primary_and_standby(&clusters);
        let dir = tempdir();
        let sims = sims(None, None).await;
        let url = format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/coordinator?target_session_attrs=read-write",
            primary.port, standby.port
        );
        let runtime = deployment(dir.path(), "deploy", &url, &sims);
        let service = migrated(&runtime).await;
        let runs = admit_to_review(&service, &["a", "b"]).await;
        read_now(&service).await;
        primary.wait_replayed(&standby).await;

        let before = counts(&sims.sims);
        clusters.stop(&primary, "immediate");
        standby.promote();
        let reason = assert_fenced(&service, &sims, &runs, &before).await;
        assert!(reason.contains("timeline changed from 1 to 2"), "{reason}");
        release(&service.url()).await;
        finish_all(&service, &sims, &runs, &["review-1", "review-2"]).await;
    });
}

#[test]
fn routine_restarts_of_postgres_and_of_the_service_never_fence() {
    on_runtime(async {
        let clusters = Clusters::new();
        let cluster = clusters.primary("main");
        let dir = tempdir();
        let sims = sims(None, None).await;
        let runtime = deployment(dir.path(), "deploy", &cluster.url(), &sims);
        let service = migrated(&runtime).await;
        let mut runs = admit_to_review(&service, &["a"]).await;
        read_now(&service).await;

        for mode in ["fast", "immediate"] {
            clusters.stop(&cluster, mode);
            clusters.start(&cluster);
            // Reading on a new connection: the database is the one the process knew.
            read_now(&service).await;
            assert_eq!(readiness(&service.url()).await, "ready", "after a {mode} restart of PostgreSQL");
        }
        runs.extend(admit_to_review(&service, &["b"]).await);
        drop(service);
        let service = start(&runtime, Mode::Normal).await;
        read_now(&service).await;
        assert_eq!(readiness(&service.url()).await, "ready", "after a restart of serve");
        let (_, hold) = get(&format!("{}/v1/restore-hold", service.url())).await;
        assert_eq!(hold["placed"], false, "{hold}");
        finish_all(&service, &sims, &runs, &["review-1", "review-2"]).await;
        assert!(journal_of(&service.url(), "fence").await.is_empty(), "no fence entry");
    });
}

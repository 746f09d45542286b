//! The restore drill (docs/reference/recovery.md#recovery-after-a-database-restore), on PostgreSQL:
//!
//! 1. `serve` runs three runs of reviewed-notice up to the review; one of them
//!    (C) is decided and its notice's answer is lost, so it waits in
//!    `attention` with the effect unknown. A backup is taken (`pg_dump`).
//! 2. The original goes on: C is reconciled, A and B are decided, every notice
//!    is accepted by the product. The original stops.
//! 3. The backup is restored into a new database (`pg_restore`) and started with
//!    `--recovery-only`: it admits nothing; the operator places the restore
//!    hold (every unfinished run to `attention`, reason `restore-hold`), inspects,
//!    and reconciles C (a receipt lookup only reads).
//! 4. A normal start while the hold is placed dispatches nothing and admits nothing.
//! 5. The release resumes A and B (their notices go out again with their
//!    original keys: the product deduplicates) and C (settled by its receipt:
//!    never resent).
//!
//! Before the release, no command reached any product (the simulators' request
//! counts do not move); after it, every notice key has exactly one effect.

use std::process::Command;
use std::time::Duration;

use coordinator::process::serve::Mode;
use serde_json::{Value, json};

use crate::support::deploy::{DeploymentSpec, eager_flagship, migrate, sims, start};
use crate::support::drill::{admit_to_review, release};
use crate::support::effects::{commands, counts};
use crate::support::{admission, get, inspection_until, lose_notices, on_runtime, pg, post, tempdir};

fn pg_tool(tool: &str, args: &[&str]) {
    let out = Command::new(tool).args(args).output().unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert!(out.status.success(), "{tool}: {}", String::from_utf8_lossy(&out.stderr));
}

fn database_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or_default()
}

#[test]
fn a_restored_database_resends_nothing_before_the_hold_is_released() {
    on_runtime(async {
        let original_db = pg::database().await;
        let restored_db = pg::database().await;
        let dir = tempdir();
        // Reviews are decided by the test, never by themselves.
        let sims = sims(None, None).await;
        let project = eager_flagship(dir.path());
        let runtime_of = |place: &str, db: &str| {
            let place = dir.path().join(place);
            std::fs::create_dir_all(&place).unwrap_or_else(|e| panic!("{e}"));
            let mut spec = DeploymentSpec::new(db, &sims.base);
            spec.project = project.clone();
            spec.write(&place)
        };
        let original_runtime = runtime_of("original", &original_db.url);
        let restored_runtime = runtime_of("restored", &restored_db.url);
        migrate(&original_runtime).await;

        // 1. Three runs up to the review; C's notice answer is lost.
        let original = start(&original_runtime, Mode::Normal).await;
        let url = original.url();
        let runs = admit_to_review(&original, &["a", "b", "c"]).await;
        lose_notices(&sims.base, 1).await;
        sims.sims.casework.decide("review-1", None).unwrap_or_else(|e| panic!("{e:?}"));
        let mut c = None;
        for _ in 0..400 {
            for run in &runs {
                let (_, view) = get(&format!("{url}/v1/runs/{run}")).await;
                if view["state"] == "attention" {
                    c = Some(run.clone());
                }
            }
            if c.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let c = c.unwrap_or_else(|| panic!("no run reached attention"));
        let others: Vec<String> = runs.iter().filter(|r| **r != c).cloned().collect();
        let dump = dir.path().join("backup.dump");
        let dump_arg = dump.display().to_string();
        pg_tool(
            "pg_dump",
            &["-Fc", "-h", "127.0.0.1", "-U", "postgres", "-f", &dump_arg, database_name(&original_db.url)],
        );

        // 2. The original goes on to the end.
        let (status, answer) = post(&format!("{url}/v1/runs/{c}/steps/send-notice/reconcile"), &json!({})).await;
        assert_eq!(status, 202, "{answer}");
        for reference in ["review-2", "review-3"] {
            sims.sims.casework.decide(reference, None).unwrap_or_else(|e| panic!("{e:?}"));
        }
        for run in &runs {
            inspection_until(&url, run, "the end", |v| v["state"] == "finished").await;
        }
        drop(original);
        let after_original = counts(&sims.sims);

        // 3. The backup, restored, in recovery-only mode.
        pg_tool("pg_restore", &["-h", "127.0.0.1", "-U", "postgres", "-d", database_name(&restored_db.url), &dump_arg]);
        let recovery = start(&restored_runtime, Mode::RecoveryOnly).await;
        let url = recovery.url();
        let body = admission(&recovery.revision, "new");
        let (status, refused) = post(&format!("{url}/v1/runs"), &body).await;
        assert_eq!((status, refused["code"].as_str()), (503, Some("service.recovery-only")), "{refused}");
        // Recovery-only alone, before any hold, dispatches nothing (A and B's reviews are decided: a normal
        // worker would observe them and send their notices within a second or two).
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            commands(counts(&sims.sims)),
            commands(after_original.clone()),
            "recovery-only dispatched a command"
        );
        let (status, hold) = post(&format!("{url}/v1/restore-hold"), &json!({})).await;
        assert_eq!((status, hold["placed"].as_bool(), hold["heldRuns"].as_u64()), (200, Some(true), Some(3)), "{hold}");
        for run in &runs {
            let (_, view) = get(&format!("{url}/v1/runs/{run}/inspection")).await;
            assert_eq!(view["attention"]["reason"], "restore-hold", "{view}");
        }
        // Review: C's notice is unknown; its receipt settles it (a read).
        let (status, answer) = post(&format!("{url}/v1/runs/{c}/steps/send-notice/reconcile"), &json!({})).await;
        assert_eq!(status, 202, "{answer}");
        let settled = |v: &Value| {
            v["steps"].as_array().is_some_and(|steps| {
                steps.iter().any(|s| s["step"] == "send-notice" && s["call"]["effect"] == "accepted")
            })
        };
        inspection_until(&url, &c, "its notice settled by the receipt", settled).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (status, retry) =
            post(&format!("{url}/v1/runs/{}/steps/send-notice/retry-same", others[0]), &json!({})).await;
        assert_eq!(status, 409, "{retry}");
        drop(recovery);

        // 4. A normal start while the hold is placed: nothing dispatched, nothing admitted.
        let normal = start(&restored_runtime, Mode::Normal).await;
        let url = normal.url();
        let (status, refused) = post(&format!("{url}/v1/runs"), &body).await;
        assert_eq!((status, refused["code"].as_str()), (409, Some("restore-hold.placed")), "{refused}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            commands(counts(&sims.sims)),
            commands(after_original),
            "a command reached a product before the release"
        );
        let (status, hold) = get(&format!("{url}/v1/restore-hold")).await;
        assert_eq!((status, hold["placed"].as_bool()), (200, Some(true)), "{hold}");

        // 5. Release: A and B resend their notices with the original keys; C goes on without resending.
        release(&url).await;
        for run in &runs {
            let view = inspection_until(&url, run, "the end after release", |v| v["state"] == "finished").await;
            assert_eq!(view["outcome"], "notice-sent", "{view}");
        }
        let notices: Vec<_> = counts(&sims.sims).into_iter().filter(|r| r.0 == "submit-message/v1").collect();
        assert_eq!(notices.len(), 3, "{notices:?}");
        assert!(notices.iter().all(|r| r.3 == 1), "one effect per key: {notices:?}");
        let c_key = format!("{c}:send-notice");
        let c_requests = notices.iter().find(|r| r.1.as_deref() == Some(c_key.as_str())).map(|r| r.2);
        assert_eq!(c_requests, Some(1), "C's notice was never resent: {notices:?}");
        let reviews: Vec<_> = counts(&sims.sims).into_iter().filter(|r| r.0 == "submit-review-request/v1").collect();
        assert!(reviews.iter().all(|r| (r.2, r.3) == (1, 1)), "review requests were never resent: {reviews:?}");
    });
}

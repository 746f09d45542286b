//! `coordinator migrate` and `coordinator serve --runtime`: a deployment set up
//! as an operator would (runtime.yaml, a pinned package, secrets in files),
//! against simulators on their own listener, on SQLite and on PostgreSQL; and
//! every way a deployment is refused, naming what is wrong and never a secret.

use std::time::Duration;

use coordinator::process::deployment::{DeploymentError, RuntimeConfig};
use coordinator::process::serve::{self, ServeError};
use coordinator_core::audit::{Entry, Head, Verifier};

use crate::support::deploy::{DeploymentSpec, deployment, eager_flagship, migrate, migrated, package_of, sqlite_url};
use crate::support::{admission, flagship, get, on_runtime, pg, post, repo, settled, tempdir};

/// Migrates and serves `database_url` keeping ended runs one day, admits the
/// sample input, waits for `notice-sent`, then three days on removes the run
/// (`retention`) and checks that the journal verifies from its checkpoint.
async fn serve_to_notice_sent(database_url: &str) {
    let (mut spec, sims) = deployment(database_url, Some(Duration::from_millis(300)), true).await;
    let url = spec.url();
    let dir = tempdir();
    // The review wait observes every second: a decision announced before the run entered
    // its wait (a notification only brings an open wait's observation forward) costs a second.
    spec.project = eager_flagship(dir.path());
    spec.extra.push_str("retention:\n  endedRunsDays: 1\n");
    let file = spec.write(dir.path());
    migrate(&file).await;
    // Migrating again changes nothing (`coordinator migrate` is idempotent).
    let service = migrated(&file).await;

    let body = admission(&service.revision, "serve-1");
    let (status, admitted) = post(&format!("{url}/v1/runs"), &body).await;
    assert_eq!(status, 201, "{admitted}");
    let run_id = admitted["runId"].as_str().unwrap_or_else(|| panic!("no runId: {admitted}")).to_owned();
    let last = settled(&url, &run_id).await;
    assert_eq!((last["state"].as_str(), last["outcome"].as_str()), (Some("finished"), Some("notice-sent")), "{last}");
    for effects in [sims.sims.casework.effects(), sims.sims.messaging.effects()] {
        assert_eq!(effects.iter().map(|e| e.effects).collect::<Vec<_>>(), vec![1], "{effects:?}");
    }

    // Three days on, the janitor's round removes the run ended two days before.
    service.engine.advance_clock(Duration::from_secs(3 * 86_400));
    coordinator::process::janitor::keep_house(&service.engine).await;
    let (status, gone) = get(&format!("{url}/v1/runs/{run_id}")).await;
    assert_eq!((status, gone["code"].as_str()), (404, Some("run.unknown")), "{gone}");
    let (status, page) = get(&format!("{url}/v1/audit?limit=1000")).await;
    assert_eq!(status, 200, "{page}");
    let checkpoint: Option<Head> = serde_json::from_value(page["checkpoint"].clone()).unwrap_or(None);
    let Some(checkpoint) = checkpoint else { panic!("no checkpoint after the cut: {page}") };
    let entries: Vec<Entry> = serde_json::from_value(page["entries"].clone()).unwrap_or_default();
    let head: Head = serde_json::from_value(page["head"].clone()).unwrap_or_else(|e| panic!("head: {e}"));
    assert!(entries.iter().all(|e| e.run_id.as_deref() != Some(run_id.as_str())), "{page}");
    assert_eq!(entries.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), ["retention"], "{page}");
    let mut verifier = Verifier::after(Some(checkpoint));
    for entry in &entries {
        verifier.feed(entry).unwrap_or_else(|t| panic!("the journal breaks after the cut: {t}"));
    }
    verifier.finish(&head).unwrap_or_else(|t| panic!("{t}"));
    // The run's idempotency key went with it: the same request admits a new run.
    let (status, again) = post(&format!("{url}/v1/runs"), &body).await;
    assert_eq!(status, 201, "{again}");
    assert_ne!(again["runId"].as_str(), Some(run_id.as_str()));
}

#[test]
fn serve_runs_the_flagship_to_notice_sent_on_sqlite() {
    on_runtime(async {
        let data = tempdir();
        serve_to_notice_sent(&sqlite_url(data.path())).await;
    });
}

#[test]
fn serve_runs_the_flagship_to_notice_sent_on_postgres() {
    on_runtime(async {
        let db = pg::database().await;
        serve_to_notice_sent(&db.url).await;
    });
}

/// A deployment directory against simulators that are never called.
fn idle_deployment(dir: &std::path::Path) -> std::path::PathBuf {
    DeploymentSpec::new(&sqlite_url(dir), "http://127.0.0.1:9").write(dir)
}

#[test]
fn serve_refuses_a_database_that_is_not_migrated() {
    on_runtime(async {
        let db = pg::database().await;
        let dir = tempdir();
        let file = DeploymentSpec::new(&db.url, "http://127.0.0.1:9").write(dir.path());
        let deployment = RuntimeConfig::read(&file).and_then(RuntimeConfig::resolve);
        let deployment = deployment.unwrap_or_else(|e| panic!("resolve: {e}"));
        match serve::start(deployment).await {
            Err(e @ ServeError::NotMigrated(_)) => {
                assert!(e.to_string().contains("coordinator migrate --runtime"), "{e}");
                assert!(e.is_unavailable());
            }
            Err(other) => panic!("expected NotMigrated, got {other}"),
            Ok(_) => panic!("served an unmigrated database"),
        }
    });
}

/// The schema must be exactly this version's: a migration a newer version
/// applied is refused (this one would misread what it wrote), and one not
/// applied yet is named with the command that applies it.
#[test]
fn serve_refuses_a_schema_from_another_version_naming_the_migrations() {
    on_runtime(async {
        let dir = tempdir();
        let url = sqlite_url(dir.path());
        let file = DeploymentSpec::new(&url, "http://127.0.0.1:9").write(dir.path());
        let resolved = || RuntimeConfig::read(&file).and_then(RuntimeConfig::resolve);
        migrate(&file).await;
        let raw = |sql: &'static str| {
            let url = url.clone();
            async move {
                let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
                    .await
                    .unwrap_or_else(|e| panic!("connect: {e}"));
                sqlx::raw_sql(sql).execute(&mut conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        };
        raw("INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (9999, 'from the future', 1, x'00', 0)")
        .await;
        let deployment = resolved().unwrap_or_else(|e| panic!("resolve: {e}"));
        match serve::start(deployment).await {
            Err(e @ ServeError::SchemaNewer(_)) => {
                let text = e.to_string();
                assert!(text.contains("migration 9999 unknown") && text.contains("newer version"), "{text}");
                assert!(!e.is_unavailable(), "not a matter of waiting");
            }
            Err(other) => panic!("expected SchemaNewer, got {other}"),
            Ok(_) => panic!("served a database a newer version migrated"),
        }

        raw("DELETE FROM _sqlx_migrations WHERE version = 9999").await;
        let latest: i64 = {
            let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("connect: {e}"));
            sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
                .fetch_one(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("latest: {e}"))
        };
        raw("DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)").await;
        let deployment = resolved().unwrap_or_else(|e| panic!("resolve: {e}"));
        match serve::start(deployment).await {
            Err(e @ ServeError::NotMigrated(_)) => {
                let text = e.to_string();
                assert!(text.contains(&format!("migrations not applied: {latest} ")), "{text}");
                assert!(text.contains("coordinator migrate --runtime"), "{text}");
            }
            Err(other) => panic!("expected NotMigrated, got {other}"),
            Ok(_) => panic!("served a database missing a migration"),
        }
    });
}

#[test]
fn a_runtime_file_with_an_unknown_field_is_refused_with_its_position() {
    let dir = tempdir();
    let file = idle_deployment(dir.path());
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    std::fs::write(&file, text.replace("listen:", "listne: x\nlisten:")).unwrap_or_else(|e| panic!("{e}"));
    match RuntimeConfig::read(&file) {
        Err(DeploymentError::Refused { diagnostics, .. }) => {
            let codes: Vec<&str> = diagnostics.iter().map(|d| d.code.as_str()).collect();
            assert!(codes.contains(&"schema.unknown-field"), "{codes:?}");
            assert!(diagnostics.iter().all(|d| d.line > 0));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_package_with_another_digest_is_refused() {
    let dir = tempdir();
    let file = idle_deployment(dir.path());
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let pinned = text.find("sha256:").map(|i| text[i..i + 71].to_owned()).unwrap_or_default();
    let other = format!("sha256:{}", "0".repeat(64));
    std::fs::write(&file, text.replace(&pinned, &other)).unwrap_or_else(|e| panic!("{e}"));
    let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
    match config.resolve() {
        Err(e @ DeploymentError::Package { .. }) => {
            assert!(e.to_string().contains("digest"), "{e}");
            assert!(!e.is_unavailable());
        }
        other => panic!("expected a package refusal, got {other:?}"),
    }
}

#[test]
fn a_missing_secret_is_named_by_its_reference_and_a_bad_key_without_its_value() {
    let dir = tempdir();
    let file = idle_deployment(dir.path());
    std::fs::remove_file(dir.path().join("client-secret")).unwrap_or_else(|e| panic!("{e}"));
    let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
    match config.clone().resolve() {
        Err(e @ DeploymentError::Secret { .. }) => {
            let text = e.to_string();
            assert!(text.contains("file:client-secret") && text.contains("clientSecret"), "{text}");
            assert!(e.is_unavailable());
        }
        other => panic!("expected a secret error, got {other:?}"),
    }
    std::fs::write(dir.path().join("client-secret"), "s").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("payload-key"), "not-a-key-but-secret-text").unwrap_or_else(|e| panic!("{e}"));
    match config.resolve() {
        Err(e @ DeploymentError::Secret { .. }) => {
            let text = e.to_string();
            assert!(text.contains("64 hex digits") && !text.contains("secret-text"), "{text}");
        }
        other => panic!("expected a key error, got {other:?}"),
    }
}

#[test]
fn the_binary_exits_3_when_the_runtime_file_is_missing_and_1_when_it_is_refused() {
    let exe = env!("CARGO_BIN_EXE_coordinator");
    let dir = tempdir();
    let missing = std::process::Command::new(exe)
        .args(["serve", "--runtime"])
        .arg(dir.path().join("nope.yaml"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(missing.status.code(), Some(3), "{}", String::from_utf8_lossy(&missing.stderr));
    let file = idle_deployment(dir.path());
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    std::fs::write(&file, text.replace("kind: Runtime", "kind: Runtim")).unwrap_or_else(|e| panic!("{e}"));
    let refused = std::process::Command::new(exe)
        .args(["migrate", "--runtime"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("runtime.yaml:2:"), "{stderr}");
}

#[test]
fn the_deployment_example_pins_the_package_of_the_flagship_as_it_is_now() {
    let file = repo().join("examples/deployment/runtime.yaml");
    let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
    let digest = package_of(&flagship()).digest;
    assert_eq!(
        config.runtime.package.digest, digest,
        "examples/deployment/runtime.yaml pins another package than `coordinatorctl package --project \
         examples/reviewed-notice` writes; put {digest} into it"
    );
}

#[test]
fn a_private_key_jwt_connection_reads_its_key_and_refuses_one_that_is_not_a_key() {
    let dir = tempdir();
    let file = idle_deployment(dir.path());
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let jwt = text.replacen(
        "      type: client-secret\n      tokenEndpoint: http://127.0.0.1:9/sim/token\n      clientId: coordinator\n      clientSecret: file:client-secret\n",
        "      type: private-key-jwt\n      tokenEndpoint: http://127.0.0.1:9/sim/token\n      clientId: coordinator-jwt\n      privateKey: file:client-key.pem\n      keyId: k1\n",
        1,
    );
    assert_ne!(jwt, text);
    std::fs::write(&file, jwt).unwrap_or_else(|e| panic!("{e}"));
    let key = repo().join("crates/coordinator-products/tests/keys/client-es256.pem");
    std::fs::copy(key, dir.path().join("client-key.pem")).unwrap_or_else(|e| panic!("{e}"));
    let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.clone().resolve().is_ok());
    std::fs::write(dir.path().join("client-key.pem"), "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n")
        .unwrap_or_default();
    match config.resolve() {
        Err(e @ DeploymentError::Secret { .. }) => {
            let text = e.to_string();
            assert!(text.contains("privateKey") && text.contains("file:client-key.pem"), "{text}");
            assert!(!text.contains("bm90IGEga2V5"), "{text}");
        }
        other => panic!("expected a key error, got {other:?}"),
    }
}

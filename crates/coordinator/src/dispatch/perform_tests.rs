//! The worker's drain rule on a real (SQLite) store: a claim whose request
//! was not sent when draining began is given back, so the next claim takes
//! the row at once and not as `reclaimed` (which would make a mutation
//! uncertain); the same claim outside a drain is acted on.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use coordinator_core::check::check_project;
use coordinator_core::machine::Settings;
use coordinator_core::package;
use coordinator_products::{Connection, HttpUrl, Secret, TokenSource};
use coordinator_seal::Keyring;
use coordinator_store::{ClaimLimits, ClaimedRun, Package, Store, WorkItem, WorkScope};

use super::perform;
use crate::dispatch::committer;
use crate::engine::{AdmitRequest, Engine};
use crate::process::project_dir::ProjectDir;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// An engine on a fresh SQLite store with the flagship active and one run
/// admitted; every connection points at a closed port (a request sent would
/// be refused).
async fn engine(dir: &std::path::Path) -> Arc<Engine> {
    engine_at(dir, "http://127.0.0.1:9", 1).await
}

/// Checks the project at `dir`, stores its package and activates it on `store`.
pub(crate) async fn install(store: &Store, dir: &std::path::Path) -> (coordinator_core::check::Checked, String) {
    let checked = match check_project(&ProjectDir::new(dir.to_path_buf())).map(|r| r.checked) {
        Ok(Some(checked)) => checked,
        other => panic!("{} does not check: {other:?}", dir.display()),
    };
    let built = package::build(&checked, "test").unwrap_or_else(|e| panic!("package: {e}"));
    let workflow = checked.definition.workflow.clone();
    let stored = Package {
        revision: checked.revision.clone(),
        workflow: workflow.clone(),
        digest: built.digest,
        bytes: built.bytes,
    };
    assert!(store.put_package(&stored).await.is_ok());
    assert!(store.activate(&workflow, &checked.revision, crate::engine::now_ms(), None).await.is_ok());
    (checked, workflow)
}

/// An engine on a fresh SQLite store with the flagship active and `runs`
/// runs admitted; every connection (token endpoint and product) is on `base`.
pub(crate) async fn engine_at(dir: &std::path::Path, base: &str, runs: usize) -> Arc<Engine> {
    let store = match Store::connect(&format!("sqlite://{}?mode=rwc", dir.join("c.db").display())).await {
        Ok(store) => store,
        Err(e) => panic!("store: {e}"),
    };
    assert!(store.migrate().await.is_ok());
    let (checked, workflow) = install(&store, &repo().join("examples/reviewed-notice")).await;
    let url = |path: &str| match HttpUrl::parse(&format!("{base}/{path}")) {
        Ok(url) => url,
        Err(e) => panic!("url: {e}"),
    };
    let connections: HashMap<String, Connection> = checked
        .definition
        .operations
        .values()
        .map(|op| {
            let token = TokenSource::ClientSecret {
                token_endpoint: url("token"),
                client_id: "c".into(),
                client_secret: Secret::new("s"),
                scope: None,
            };
            (op.connection.clone(), Connection::new(url("product"), token))
        })
        .collect();
    let keyring = match Keyring::new("k1", [("k1".to_owned(), vec![7u8; 32])]) {
        Ok(keyring) => keyring,
        Err(e) => panic!("keyring: {e}"),
    };
    let engine = Arc::new(Engine::new(store, keyring, connections, Settings::default()));
    let input = match std::fs::read_to_string(repo().join("examples/reviewed-notice/input.json"))
        .map(|t| serde_json::from_str(&t))
    {
        Ok(Ok(input)) => input,
        other => panic!("input.json: {other:?}"),
    };
    for n in 0..runs {
        let request = AdmitRequest {
            workflow: workflow.clone(),
            revision: checked.revision.clone(),
            input: serde_json::Value::clone(&input),
            idempotency_key: Some(format!("run-{n}")),
            run_id: None,
            trace_parent: None,
        };
        if let Err(e) = engine.admit(request, "tester").await {
            panic!("admit: {e}");
        }
    }
    engine
}

async fn claim(engine: &Engine) -> Vec<(WorkItem, ClaimedRun)> {
    let limits = ClaimLimits { timers: 0, work: 8 };
    match engine.store.claim_due(WorkScope::All, engine.now(), &engine.owner, 60_000, limits).await {
        Ok(due) => due.work,
        Err(e) => panic!("claim: {e}"),
    }
}

#[tokio::test]
async fn a_claim_not_yet_sent_when_draining_begins_is_given_back_and_taken_again_at_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine(dir.path()).await;
    let (reports, committer) = committer::start(Arc::clone(&engine), None);
    let mut claimed = claim(&engine).await;
    assert_eq!(claimed.len(), 1, "the first read is due");
    let (item, run) = claimed.remove(0);
    engine.drain.begin();
    assert!(perform(&engine, &reports, item.clone(), run, None).await.is_ok());
    assert_eq!(engine.drain.in_flight(), 0);
    // Given back: claimable at once (its lease has not run out), and not as a reclaimed row.
    let again = claim(&engine).await;
    assert_eq!(again.len(), 1, "the row was given back");
    assert_eq!((again[0].0.step.as_str(), again[0].0.attempt), (item.step.as_str(), item.attempt));
    assert!(!again[0].0.reclaimed, "a given-back claim does not count as one that ran out");
    committer.abort();
}

#[tokio::test]
async fn outside_a_drain_the_same_claim_is_acted_on_and_its_answer_applied() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine(dir.path()).await;
    let (reports, committer) = committer::start(Arc::clone(&engine), None);
    let mut claimed = claim(&engine).await;
    let (item, run) = claimed.remove(0);
    assert!(perform(&engine, &reports, item, run, None).await.is_ok());
    // Nothing was listening on the port: the token request was refused, so
    // nothing was sent and the read is queued again for later (retryable).
    let again = claim(&engine).await;
    assert!(again.is_empty(), "the retry waits for its backoff, and the claim was finished, not given back");
    committer.abort();
}

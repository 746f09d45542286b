//! A report's place in hand goes to the work its decision queues
//! ([`crate::dispatch::capacity`], `committer`): on PostgreSQL (eager dispatch) a
//! worker whose every place is taken carries a run under way on to its next
//! step at once, instead of leaving that step for a claim round that takes
//! older queued work first.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use coordinator_core::machine::Settings;
use coordinator_core::model::run::RunState;
use coordinator_seal::Keyring;
use coordinator_sim::{SimConfig, Simulators};
use coordinator_store::Store;
use coordinator_testdb::ScratchDb;

use crate::dispatch::worker::{WorkerOptions, run_with};
use crate::engine::{AdmitRequest, Engine};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// An engine on `url` with the bench's three-calls project active, its
/// connections on simulators served here.
async fn engine_on(url: &str) -> (Arc<Engine>, String, String) {
    let store = Store::connect(url).await.unwrap_or_else(|e| panic!("store: {e}"));
    assert!(store.migrate().await.is_ok());
    let (checked, workflow) =
        crate::dispatch::perform::drain_tests::install(&store, &repo().join("bench/fixtures/three-calls")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
    let base = format!("http://{}", listener.local_addr().unwrap_or_else(|e| panic!("address: {e}")));
    let sims = Simulators::new(SimConfig::default());
    tokio::spawn(async move { coordinator_sim::serve(listener, &sims).await });
    let connections: HashMap<_, _> = checked
        .definition
        .operations
        .values()
        .map(|op| {
            let product = op.operation.split_once('.').map_or(op.operation.as_str(), |(p, _)| p);
            let connection =
                crate::process::dev::connection(&base, product).unwrap_or_else(|e| panic!("connection: {e}"));
            (op.connection.clone(), connection)
        })
        .collect();
    let keyring = Keyring::new("k1", [("k1".to_owned(), vec![7u8; 32])]).unwrap_or_else(|e| panic!("keyring: {e}"));
    (Arc::new(Engine::new(store, keyring, connections, Settings::default())), workflow, checked.revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_place_taken_a_run_under_way_goes_on_in_its_reports_place() {
    let db = ScratchDb::create("coordinator_handoff").await.unwrap_or_else(|e| panic!("{e}"));
    let (engine, workflow, revision) = engine_on(&db.url).await;
    assert!(engine.store.eager_dispatch(), "PostgreSQL leases eagerly");
    let input = std::fs::read_to_string(repo().join("bench/fixtures/three-calls/input.json"))
        .map(|text| serde_json::from_str::<serde_json::Value>(&text));
    let Ok(Ok(input)) = input else { panic!("input.json: {input:?}") };
    // Two runs queued before the worker starts: A, then B.
    let mut runs = Vec::new();
    for key in ["a", "b"] {
        let request = AdmitRequest {
            workflow: workflow.clone(),
            revision: revision.clone(),
            input: input.clone(),
            idempotency_key: Some(key.to_owned()),
            run_id: None,
            trace_parent: None,
        };
        runs.push(engine.admit(request, "tester").await.unwrap_or_else(|e| panic!("admit: {e}")).run_id);
    }
    // One place: A's first call takes it; B's first call is queued, older
    // than A's next steps will be.
    let options = WorkerOptions { in_hand: 1, ..WorkerOptions::for_engine(&engine) };
    let worker = tokio::spawn(run_with(Arc::clone(&engine), options));
    for run in &runs {
        let mut state = None;
        for _ in 0..1200 {
            state = engine.store.load(run).await.ok().flatten().map(|r| r.state);
            if state == Some(RunState::Finished) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(state, Some(RunState::Finished), "run {run}");
    }
    worker.abort();
    assert!(engine.store.seal_audit(1000).await.is_ok());
    let page = engine.store.audit(None, 0, 1000).await.unwrap_or_else(|e| panic!("audit: {e}"));
    let answered = |run: &str| -> Vec<i64> {
        let of_run = page.entries.iter().filter(|e| e.run_id.as_deref() == Some(run) && e.kind == "classification");
        of_run.map(|e| e.position).collect()
    };
    let (a, b) = (answered(&runs[0]), answered(&runs[1]));
    assert_eq!((a.len(), b.len()), (3, 3), "three answers each: {a:?} {b:?}");
    assert!(
        a.iter().max() < b.iter().min(),
        "A's next steps went on in its reports' place before B started: A {a:?}, B {b:?}"
    );
}

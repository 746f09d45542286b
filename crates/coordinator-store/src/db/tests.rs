//! The dialect adapter's tests: SQLite's writer gates, and how a PostgreSQL
//! connection lost under a handle is reported.

use std::sync::Arc;
use std::time::Duration;

use crate::StoreError;
use crate::db::{NoCheck, Pool, Tx, Writer};

/// How long the test lets its waiting writers queue up (a failure guard: the
/// order is decided by the gates, not by timing, once both are queued).
const QUEUE_UP: Duration = Duration::from_millis(100);

/// Has the server end the backend `pid` (as a restart does), and waits until it has.
async fn terminate(pid: i32) {
    use sqlx::Connection as _;
    let mut admin = sqlx::PgConnection::connect(coordinator_testdb::MAINTENANCE_URL)
        .await
        .unwrap_or_else(|e| panic!("connect to the maintenance database: {e}"));
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("terminate: {e}"));
    // A failure guard: the server ends it at once, the test waits until it has.
    for _ in 0..500 {
        let (left,): (i64,) = sqlx::query_as("SELECT count(*) FROM pg_stat_activity WHERE pid = $1")
            .bind(pid)
            .fetch_one(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("count: {e}"));
        if left == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("backend {pid} never ended");
}

/// Has the server end the process behind `handle`, then runs a statement on it.
async fn lost_under(handle: &mut Tx) -> Result<u64, StoreError> {
    let row = handle.fetch_optional("SELECT pg_backend_pid()", Vec::new()).await.unwrap_or_else(|e| panic!("{e}"));
    terminate(row.unwrap_or_else(|| panic!("no row")).get::<i32>(0).unwrap_or_else(|e| panic!("{e}"))).await;
    handle.execute("SELECT 1", Vec::new()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_before_commit_did_nothing_and_one_lost_outside_a_transaction_is_not_known() {
    let scratch = coordinator_testdb::ScratchDb::create("coordinator_db").await.unwrap_or_else(|e| panic!("{e}"));
    let pool = Pool::connect(&scratch.url, Arc::new(NoCheck)).await.unwrap_or_else(|e| panic!("connect: {e}"));

    let mut tx = pool.begin().await.unwrap_or_else(|e| panic!("begin: {e}"));
    let lost = lost_under(&mut tx).await;
    assert!(matches!(lost, Err(StoreError::Unavailable(_))), "inside a transaction: {lost:?}");
    drop(tx);

    let mut read = pool.begin_read().await.unwrap_or_else(|e| panic!("a read after the hang-up: {e}"));
    let lost = lost_under(&mut read).await;
    assert!(matches!(lost, Err(StoreError::Database(_))), "outside a transaction: {lost:?}");
    drop(read);
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_writer_waits_for_at_most_one_background_writer() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("gates.db").display());
    let pool = Pool::connect(&url, Arc::new(NoCheck)).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let first = pool.begin_for(Writer::Background).await.unwrap_or_else(|e| panic!("first: {e}"));
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let writer = |who: &'static str, kind: Writer| {
        let (pool, order) = (pool.clone(), Arc::clone(&order));
        tokio::spawn(async move {
            let tx = pool.begin_for(kind).await.unwrap_or_else(|e| panic!("{who}: {e}"));
            order.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(who);
            tx.commit().await.unwrap_or_else(|e| panic!("{who} commit: {e}"));
        })
    };
    // The second background writer comes before the request, yet waits in its lane.
    let background = writer("background", Writer::Background);
    tokio::time::sleep(QUEUE_UP).await;
    let request = writer("request", Writer::Request);
    tokio::time::sleep(QUEUE_UP).await;
    first.commit().await.unwrap_or_else(|e| panic!("first commit: {e}"));
    for task in [background, request] {
        task.await.unwrap_or_else(|e| panic!("writer task: {e}"));
    }
    let order = order.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    assert_eq!(order, vec!["request", "background"]);
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    listener.local_addr().map(|a| a.port()).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_naming_several_hosts_connects_to_the_first_that_accepts_writes() {
    let scratch = coordinator_testdb::ScratchDb::create("coordinator_db").await.unwrap_or_else(|e| panic!("{e}"));
    let server = "127.0.0.1:5432";
    assert!(scratch.url.contains(server), "the scratch database is on {server}: {}", scratch.url);
    let join = if scratch.url.contains('?') { '&' } else { '?' };
    let with = |hosts: &str| format!("{}{join}target_session_attrs=read-write", scratch.url.replacen(server, hosts, 1));
    let url = with(&format!("127.0.0.1:{},{server}", closed_port()));
    let pool = Pool::connect(&url, Arc::new(NoCheck)).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let mut read = pool.begin_read().await.unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(read.execute("SELECT 1", Vec::new()).await.ok(), Some(1));
    drop(read);
    pool.close().await;

    let nowhere = with(&format!("127.0.0.1:{},127.0.0.1:{}", closed_port(), closed_port()));
    let refused = Pool::connect(&nowhere, Arc::new(NoCheck)).await.err();
    assert!(
        matches!(&refused, Some(StoreError::Unavailable(m)) if m.contains("no host of the database URL accepts writes")),
        "{refused:?}"
    );
}

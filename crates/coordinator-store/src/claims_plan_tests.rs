//! The plans PostgreSQL makes of the claims: the locking read that picks a
//! claim's rows must run once per statement. Named by `IN (SELECT … LIMIT n
//! FOR UPDATE SKIP LOCKED)`, a plan made while the queue was empty (a worker
//! idle for 30 s, its statement's generic plan cached on the connection) ran
//! that read again for every row of the join around it: seconds per claim,
//! more than `n` rows leased among concurrent claimers, and a negative
//! `LIMIT` failing the claim (bench/RESULTS.md, tenth sitting). These tests
//! plan each claim as the service's connections do — generic, from the
//! statistics of an empty queue — and look where the plan's row locks are:
//! none may sit where the plan runs it again per row.

use serde_json::Value;
use sqlx::{Connection as _, Row as _};

use crate::Store;

/// Whether each `LockRows` node of the plan can run more than once per
/// statement, in plan order. An `InitPlan` (a CTE, an uncorrelated `ARRAY(…)`)
/// runs once; a `SubPlan` runs per row; the inner side of a join other than a
/// hash join runs again for each outer row — except a nested loop over a
/// function's rows (an offer's lanes, `unnest($5)`), which reads each lane
/// once by design.
fn lock_reruns(node: &Value, rerun: bool, found: &mut Vec<bool>) {
    if node.get("Node Type").and_then(Value::as_str) == Some("LockRows") {
        found.push(rerun);
    }
    let children: Vec<&Value> = node.get("Plans").and_then(Value::as_array).into_iter().flatten().collect();
    let kind = node.get("Node Type").and_then(Value::as_str).unwrap_or_default();
    let outer = children.iter().find(|c| c.get("Parent Relationship").and_then(Value::as_str) == Some("Outer"));
    let over_function = outer.and_then(|o| o.get("Node Type")).and_then(Value::as_str) == Some("Function Scan");
    for child in &children {
        let rerun = match child.get("Parent Relationship").and_then(Value::as_str) {
            Some("InitPlan") => false,
            Some("SubPlan") => true,
            Some("Inner") => rerun || !(kind == "Hash Join" || (kind == "Nested Loop" && over_function)),
            _ => rerun,
        };
        lock_reruns(child, rerun, found);
    }
}

/// The generic plan of `sql` (prepared with PostgreSQL's own parameter
/// types) executed with `args` (SQL literals), after `settings` (statements
/// run first in the same transaction), as `EXPLAIN (FORMAT JSON)` gives it.
async fn generic_plan(url: &str, settings: &[&str], sql: &str, args: &str) -> Value {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap_or_else(|e| panic!("connect: {e}"));
    // The queue's tables as autovacuum leaves them after an idle spell: analysed while empty.
    sqlx::raw_sql("ANALYZE outbox, timers, runs").execute(&mut conn).await.unwrap_or_else(|e| panic!("{e}"));
    let mut tx = conn.begin().await.unwrap_or_else(|e| panic!("begin: {e}"));
    for setting in settings {
        sqlx::raw_sql(setting).execute(&mut *tx).await.unwrap_or_else(|e| panic!("{setting}: {e}"));
    }
    sqlx::raw_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        .execute(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("plan_cache_mode: {e}"));
    sqlx::raw_sql(&format!("PREPARE claim AS {sql}")).execute(&mut *tx).await.unwrap_or_else(|e| panic!("{e}"));
    let row = sqlx::query(&format!("EXPLAIN (FORMAT JSON) EXECUTE claim({args})"))
        .fetch_one(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("explain: {e}"));
    // `json`, whose text is what a `String` decodes.
    let plan: String = row.try_get_unchecked(0).unwrap_or_else(|e| panic!("the plan: {e}"));
    serde_json::from_str(&plan).unwrap_or_else(|e| panic!("the plan's JSON: {e}"))
}

/// Asserts that the plan has `expected` row locks and that none of them can
/// run more than once per statement ([`lock_reruns`]).
fn assert_locks_read_once(plan: &Value, expected: usize, what: &str) {
    let root = plan.get(0).and_then(|p| p.get("Plan")).unwrap_or_else(|| panic!("{what}: no plan in {plan}"));
    let mut found = Vec::new();
    lock_reruns(root, false, &mut found);
    assert_eq!(found.len(), expected, "{what}: {} row locks\n{plan:#}", found.len());
    assert!(
        found.iter().all(|rerun| !rerun),
        "{what}: a locking read runs again for every row it is joined to ({found:?})\n{plan:#}"
    );
}

/// A scratch database with the store's schema, and the store on it.
async fn migrated(prefix: &str) -> (coordinator_testdb::ScratchDb, Store) {
    let scratch = coordinator_testdb::ScratchDb::create(prefix).await.unwrap_or_else(|e| panic!("{e}"));
    let store = Store::connect(&scratch.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
    store.migrate().await.unwrap_or_else(|e| panic!("migrate: {e}"));
    (scratch, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_planned_on_an_empty_queue_reads_and_locks_its_rows_once() {
    let (scratch, store) = migrated("coordinator_claim_plan").await;
    // Owner, lease end, now, work limit, receipts only, timer limit, limited lanes.
    let args = "'claimer', 2000, 1000, 32, 0, 32, ARRAY['limited']";
    let plan = generic_plan(&scratch.url, &[super::CLAIM_PLAN_PG], super::CLAIM_DUE_PG, args).await;
    // Fresh work, work whose lease ran out, timers.
    assert_locks_read_once(&plan, 3, "claim_due");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offer_planned_on_an_empty_queue_reads_and_locks_its_rows_once() {
    let (scratch, store) = migrated("coordinator_offer_plan").await;
    // Offered to, window end, now, limit, lanes.
    let args = "'worker', 2000, 1000, 32, ARRAY['lane-a', 'lane-b']";
    let plan = generic_plan(&scratch.url, &[], crate::remote::OFFER_PG, args).await;
    // Fresh rows of each lane, rows whose window or lease ran out.
    assert_locks_read_once(&plan, 2, "offer");
    store.close().await;
}

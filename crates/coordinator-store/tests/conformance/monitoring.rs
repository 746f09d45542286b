//! What the service's probes and scrapes read: `Store::ping` (readiness: it
//! answers beside a writer, fails rather than hangs once the database is
//! gone, and answers on a new connection after the server dropped the pooled
//! ones), `Store::queue_heads` (the oldest claimable due work and timer) and
//! `Store::attention_by_reason` (runs waiting for an operator).

use std::time::Duration;

use coordinator_core::machine::action::Action;
use coordinator_core::machine::event::{CallAnswer, Event};
use coordinator_core::model::run::RunState;
use coordinator_store::{AttentionCount, AttentionReason, Decision, NewRun, QueueHeads, Store, StoreError, WorkKind};
use sqlx::{Connection, PgConnection};

use super::support::{T0, TestDb, admit, deciding, decode, first, new_run, raw, run_id, with_actions, workflow};
use super::{LEASE_MS, accepted_read, ok};

/// A failure guard: a ping answers or fails at once; a hang would last until
/// the pool's acquire timeout (30 s) or for ever.
const GUARD: Duration = Duration::from_secs(10);

pub(crate) async fn ping_answers_while_a_writer_holds_the_database(store: &Store) {
    ok(store.ping().await, "ping");
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let (entered, in_decision) = tokio::sync::oneshot::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            // The decision holds the run's transaction (and SQLite's writer gate) until released,
            // handing this worker's other duties (PostgreSQL's sockets) to another thread meanwhile.
            let hold_on = move |snapshot: &[u8]| {
                let _ = entered.send(());
                tokio::task::block_in_place(|| released.recv_timeout(GUARD))
                    .map_err(|e| format!("never released: {e}"))?;
                let (state, held, outcome, attention_step) = (RunState::Running, false, None, None);
                let snapshot = snapshot.to_vec();
                Ok::<_, String>(Decision {
                    actions: Vec::new(),
                    snapshot,
                    state,
                    held,
                    outcome,
                    attention_step,
                    lanes: Vec::new(),
                    connections: Vec::new(),
                })
            };
            store.apply(&id, T0 + 1, hold_on).await
        })
    };
    assert!(matches!(tokio::time::timeout(GUARD, in_decision).await, Ok(Ok(()))), "the writer decides");
    let pinged = tokio::time::timeout(GUARD, store.ping()).await;
    assert!(matches!(pinged, Ok(Ok(()))), "a ping does not wait for the writer: {pinged:?}");
    release.send(()).unwrap_or_else(|e| panic!("release: {e}"));
    ok(writer.await.unwrap_or_else(|e| panic!("writer task: {e}")), "the writer commits");
}

/// On PostgreSQL the database is dropped under the store (its connections
/// terminated): the ping fails at once. A SQLite file cannot go away so.
pub(crate) async fn ping_fails_once_the_database_is_gone(db: &TestDb) {
    ok(db.ping().await, "ping");
    let Some((mut admin, name)) = pg_admin(db).await else { return };
    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("drop {name}: {e}"));
    let pinged = tokio::time::timeout(GUARD, db.ping()).await;
    assert!(matches!(pinged, Ok(Err(StoreError::Database(_)))), "an error, not a hang: {pinged:?}");
}

/// On PostgreSQL the server terminates every connection of the store while
/// they sit in its pool, moments after their last use (as a restart of the
/// server does): the next transaction is begun on a new connection; and
/// once a hang-up was seen (here by a read that fails on its dead
/// connection: whether a statement ran is never guessed), the other
/// connections put back before it are replaced before their next use
/// instead of failing more reads.
pub(crate) async fn connections_the_server_dropped_are_replaced(db: &TestDb) {
    ok(db.ping().await, "ping");
    let Some((mut admin, name)) = pg_admin(db).await else { return };

    let pooled = fill_and_terminate(db, &mut admin, &name).await;
    ok(db.check_fence(T0).await, "a transaction begun after the server hung up");

    let pooled = fill_and_terminate(db, &mut admin, &name).await.max(pooled);
    let _ = db.ping().await;
    for n in 0..pooled {
        ok(db.ping().await, &format!("read {n} after the hang-up was seen"));
    }
}

/// Puts several connections in the store's pool, has the server terminate
/// them all, and waits until it has; returns how many there were.
async fn fill_and_terminate(db: &TestDb, admin: &mut PgConnection, name: &str) -> i64 {
    // Each call takes a connection of its own while the others wait on the network.
    let (a, b, c, d) = tokio::join!(db.check_fence(T0), db.check_fence(T0), db.check_fence(T0), db.check_fence(T0));
    for (n, read) in [a, b, c, d].into_iter().enumerate() {
        ok(read, &format!("fence read {n}"));
    }
    let pooled = backends(admin, name).await;
    assert!(pooled >= 2, "the store holds several connections: {pooled}");
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
        .bind(name)
        .execute(&mut *admin)
        .await
        .unwrap_or_else(|e| panic!("terminate: {e}"));
    // A failure guard: the server ends them at once, the test waits until it has.
    for _ in 0..500 {
        if backends(admin, name).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(backends(admin, name).await, 0, "every connection of the store terminated");
    pooled
}

/// On PostgreSQL, a connection to the maintenance database and the name of
/// the test's database; nothing on SQLite.
async fn pg_admin(db: &TestDb) -> Option<(PgConnection, String)> {
    if !db.is_postgres() {
        return None;
    }
    let name = db.url.rsplit('/').next().unwrap_or_else(|| panic!("no database in {}", db.url));
    let admin = PgConnection::connect(coordinator_testdb::MAINTENANCE_URL)
        .await
        .unwrap_or_else(|e| panic!("connect to the maintenance database: {e}"));
    Some((admin, name.to_owned()))
}

/// How many server processes serve database `name`.
async fn backends(admin: &mut PgConnection, name: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = $1")
        .bind(name)
        .fetch_one(admin)
        .await
        .unwrap_or_else(|e| panic!("count backends: {e}"))
}

async fn heads(store: &Store, now: i64) -> QueueHeads {
    ok(store.queue_heads(now).await, "queue heads")
}

fn work_head(at: i64) -> QueueHeads {
    QueueHeads { oldest_due_work: Some(at), oldest_due_timer: None }
}

pub(crate) async fn queue_heads_are_the_oldest_claimable_due_rows(store: &Store) {
    let wf = workflow();
    let deadline_ms = i64::try_from(wf.definition.deadline_seconds).unwrap_or(0) * 1000;
    assert_eq!(heads(store, T0).await, QueueHeads::default(), "nothing queued");
    for n in 1..=3 {
        admit(store, &wf, &run_id(n), T0 + i64::from(n)).await;
    }
    assert_eq!(heads(store, T0).await, QueueHeads::default(), "nothing due yet");
    let now = T0 + 10;
    assert_eq!(heads(store, now).await, work_head(T0 + 1));

    // Run 1 under a restore hold: its attempt does not count, a receipt lookup of it does.
    ok(store.apply(&run_id(1), T0 + 4, deciding(&wf, &Event::RestoreHoldPlaced, T0 + 4)).await, "hold");
    assert_eq!(heads(store, now).await, work_head(T0 + 2));
    let ask = |snapshot: &[u8]| -> Result<Decision, String> {
        let run = decode(snapshot)?;
        let actions = vec![Action::RequestReceipt { step: "send-notice".into() }];
        Ok(with_actions(&run, actions))
    };
    ok(store.apply(&run_id(1), T0 + 5, ask).await, "receipt requested");
    // Leased rows do not count while their lease lasts, then by their due time.
    let claimed = ok(store.claim_work(now, "w1", LEASE_MS, 2).await, "claim");
    let kinds: Vec<_> = claimed.iter().map(|w| (w.run_id.clone(), w.kind)).collect();
    assert_eq!(kinds, vec![(run_id(2), WorkKind::Attempt), (run_id(3), WorkKind::Attempt)]);
    assert_eq!(heads(store, now).await, work_head(T0 + 5), "the held run's receipt lookup");
    let expired = now + LEASE_MS + 1;
    assert_eq!(heads(store, expired).await, work_head(T0 + 2), "run 2's lease ran out");

    // Timers: run 1's deadline is held, run 2's is the oldest once due.
    let deadline = |n: i64| T0 + n + deadline_ms;
    assert_eq!(heads(store, deadline(2) - 1).await.oldest_due_timer, None, "run 1's is held");
    assert_eq!(heads(store, deadline(3)).await.oldest_due_timer, Some(deadline(2)));
    let fired = ok(store.claim_timers(deadline(3), "w2", LEASE_MS, 1).await, "claim a timer");
    assert_eq!(fired.iter().map(|t| t.run_id.clone()).collect::<Vec<_>>(), vec![run_id(2)]);
    let at = heads(store, deadline(3)).await;
    assert_eq!(at, QueueHeads { oldest_due_work: Some(T0 + 2), oldest_due_timer: Some(deadline(3)) });
    let after = deadline(3) + LEASE_MS + 1;
    assert_eq!(heads(store, after).await.oldest_due_timer, Some(deadline(2)), "its lease ran out");
}

/// The review request of run `id` gets no answer: its effect is unknown.
async fn unknown_effect(store: &Store, id: &str, at: i64) {
    let wf = workflow();
    ok(store.apply(id, at, deciding(&wf, &accepted_read(), at)).await, "read answered");
    let lost = Event::CallAnswered { step: "request-review".into(), attempt: 1, answer: CallAnswer::Uncertain };
    ok(store.apply(id, at + 1, deciding(&wf, &lost, at + 1)).await, "review request unanswered");
}

fn count(workflow: &str, reason: AttentionReason, runs: i64) -> AttentionCount {
    AttentionCount { workflow: workflow.to_owned(), reason, runs }
}

pub(crate) async fn runs_in_attention_are_counted_by_workflow_and_reason(store: &Store) {
    assert_eq!(ok(store.attention_by_reason().await, "none"), vec![]);
    let wf = workflow();
    for n in [1, 2, 3, 5] {
        admit(store, &wf, &run_id(n), T0).await;
    }
    // Run 4 is of another workflow (the store only copies the name).
    let other = NewRun { workflow: "another-workflow".into(), ..new_run(&wf, &run_id(4), "alice", None, T0) };
    ok(store.admit(&other, || Ok::<_, StoreError>(first(&wf, &other))).await, "admit run 4");
    for n in [1, 2, 4] {
        unknown_effect(store, &run_id(n), T0 + 10).await;
    }
    // A restore hold on run 2 (in attention already) and on run 3; run 5 works on.
    for n in [2, 3] {
        ok(store.apply(&run_id(n), T0 + 20, deciding(&wf, &Event::RestoreHoldPlaced, T0 + 20)).await, "hold");
    }
    let row = |n| async move { ok(store.load(&run_id(n)).await, "load").map(|r| (r.state, r.held)) };
    assert_eq!(row(1).await, Some((RunState::Attention, false)));
    assert_eq!(row(2).await, Some((RunState::Attention, true)));
    assert_eq!(row(5).await, Some((RunState::Running, false)));
    let (effect, hold) = (AttentionReason::UnknownEffect, AttentionReason::RestoreHold);
    assert_eq!(
        ok(store.attention_by_reason().await, "counts"),
        vec![
            count("another-workflow", effect, 1),
            count("reviewed-notice", effect, 1),
            count("reviewed-notice", hold, 2)
        ]
    );

    // Released: run 2 is back to its unknown effect, run 3 works on.
    for n in [2, 3] {
        ok(store.apply(&run_id(n), T0 + 30, deciding(&wf, &Event::RestoreHoldReleased, T0 + 30)).await, "release");
    }
    assert_eq!(
        ok(store.attention_by_reason().await, "after release"),
        vec![count("another-workflow", effect, 1), count("reviewed-notice", effect, 2)]
    );
}

/// The key ids named by the sealed snapshots of runs not finished, heads
/// and bases (`snapshot_frame`) alike, read from the sealed header (a version
/// byte, the id's length, the id), a length past 127 included; a finished
/// run's keys are not among them, nor is an empty head.
pub(crate) async fn sealed_key_ids_name_the_keys_of_runs_not_finished(db: &TestDb) {
    let wf = workflow();
    let long = "a".repeat(200);
    let literal = |id: Option<&str>| {
        let Some(id) = id else { return if db.is_postgres() { "''::bytea".to_owned() } else { "X''".to_owned() } };
        let mut bytes = vec![1_u8, u8::try_from(id.len()).unwrap_or(0)];
        bytes.extend_from_slice(id.as_bytes());
        bytes.extend_from_slice(&[7_u8; 40]);
        let hex = bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        if db.is_postgres() { format!("'\\x{hex}'::bytea") } else { format!("X'{hex}'") }
    };
    for (n, head, base, state) in [
        (1, Some("k1"), Some("k0"), "running"),
        (2, Some(long.as_str()), None, "attention"),
        (3, Some("old"), Some("old-base"), "finished"),
        (4, None, Some("k1"), "running"),
    ] {
        let id = admit(db, &wf, &run_id(n), T0).await;
        let base = if base.is_some() { literal(base) } else { "NULL".to_owned() };
        let sql = format!(
            "UPDATE runs SET snapshot = {}, snapshot_base = {base}, state = '{state}' WHERE id = '{id}'",
            literal(head)
        );
        raw(db, &sql).await;
    }
    assert_eq!(ok(db.sealed_key_ids().await, "key ids"), vec![long, "k0".to_owned(), "k1".to_owned()]);
}

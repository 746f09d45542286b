//! The run row's listing columns (migration 0011), written by real
//! decisions: `outcome` once the run finishes and never before,
//! `attention_step` while it is in attention for an unknown effect, and
//! `attention_since`, which the store keeps from the state it writes — on
//! every path that writes a run row (admission on both of PostgreSQL's paths,
//! a single apply; the batch is compared with it in `batch.rs`) and after an
//! upgrade.

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::{CallAnswer, Event};
use coordinator_core::model::run::RunState;
use coordinator_store::{
    Admission, AttentionGroup, AttentionReason, Decision, NewRun, Store, StoreError, TriggerEvent,
};

use coordinator_store::snapshot_frame;

use super::support::{BASE, T0, TestDb, admit, deciding, first, new_run, raw, raw_count, run_id, workflow};
use super::{accepted_read, ok};

/// What the listing reads of a run: (state, held, outcome, attention_step, attention_since).
pub(crate) type Listed = (RunState, bool, Option<String>, Option<String>, Option<i64>);

/// The listing columns of run `id`.
pub(crate) async fn listed(store: &Store, id: &str) -> Listed {
    let Some(r) = ok(store.load(id).await, "load") else { panic!("no run {id}") };
    (r.state, r.held, r.outcome, r.attention_step, r.attention_since)
}

/// The review request's answer for `attempt`.
pub(crate) fn review_answer(attempt: u32, answer: CallAnswer) -> Event {
    Event::CallAnswered { step: "request-review".into(), attempt, answer }
}

/// The refusal reviewed-notice finishes on (`review-refused`).
pub(crate) fn not_reviewable() -> CallAnswer {
    CallAnswer::Refused { code: "subject-not-reviewable".into() }
}

/// Applies `event` to run `id` at `at` through the machine.
pub(crate) async fn decide(store: &Store, wf: &Workflow, id: &str, event: Event, at: i64) {
    ok(store.apply(id, at, deciding(wf, &event, at)).await, "apply");
}

fn attention(step: Option<&str>, held: bool, since: i64) -> Listed {
    (RunState::Attention, held, None, step.map(str::to_owned), Some(since))
}

pub(crate) async fn listing_columns_follow_the_run(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let running = (RunState::Running, false, None, None, None);
    assert_eq!(listed(store, &id).await, running, "admitted");
    decide(store, &wf, &id, accepted_read(), T0 + 1).await;
    assert_eq!(listed(store, &id).await, running, "a step answered");

    decide(store, &wf, &id, review_answer(1, CallAnswer::Uncertain), T0 + 2).await;
    assert_eq!(listed(store, &id).await, attention(Some("request-review"), false, T0 + 2), "entered attention");
    // Decisions that keep the run in attention keep the instant it entered.
    decide(store, &wf, &id, Event::RestoreHoldPlaced, T0 + 3).await;
    assert_eq!(listed(store, &id).await, attention(None, true, T0 + 2), "no step under a hold");
    decide(store, &wf, &id, Event::RestoreHoldReleased, T0 + 4).await;
    assert_eq!(listed(store, &id).await, attention(Some("request-review"), false, T0 + 2), "released");

    decide(store, &wf, &id, Event::RetrySameRequested { step: "request-review".into() }, T0 + 5).await;
    assert_eq!(listed(store, &id).await, running, "left attention");
    // A refusal of the same command resent does not settle the effect: in attention again, since then.
    decide(store, &wf, &id, review_answer(2, not_reviewable()), T0 + 6).await;
    assert_eq!(listed(store, &id).await, attention(Some("request-review"), false, T0 + 6), "entered again");

    let other = admit(store, &wf, &run_id(2), T0).await;
    decide(store, &wf, &other, accepted_read(), T0 + 1).await;
    decide(store, &wf, &other, review_answer(1, not_reviewable()), T0 + 2).await;
    let finished = (RunState::Finished, false, Some("review-refused".to_owned()), None, None);
    assert_eq!(listed(store, &other).await, finished, "the outcome once finished");
}

pub(crate) async fn admissions_write_the_listing_columns(store: &Store) {
    let wf = workflow();
    // The store copies what the first decision says (the machine admits into
    // `running`; these are a store's contract, whatever the state).
    let in_attention = |new: &NewRun| Decision {
        state: RunState::Attention,
        attention_step: Some("read-application".into()),
        ..first(&wf, new)
    };
    let ended =
        |new: &NewRun| Decision { state: RunState::Finished, outcome: Some("notice-sent".into()), ..first(&wf, new) };
    // Without an event: one statement on PostgreSQL (with a key too), a transaction on SQLite.
    let plain = new_run(&wf, &run_id(1), "alice", None, T0);
    ok(store.admit(&plain, || Ok::<_, StoreError>(in_attention(&plain))).await, "admit");
    let keyed = new_run(&wf, &run_id(2), "alice", Some("key-2"), T0 + 1);
    ok(store.admit(&keyed, || Ok::<_, StoreError>(ended(&keyed))).await, "admit with a key");
    // From an event: a transaction on both.
    let event = TriggerEvent { trigger: "t".into(), event_id: "e-1".into() };
    let evented = new_run(&wf, &run_id(3), "alice", None, T0 + 2);
    let admitted = store.admit_event(&evented, &event, || Ok::<_, StoreError>(in_attention(&evented))).await;
    assert_eq!(ok(admitted, "admit from an event"), Admission::Created(run_id(3)));

    assert_eq!(listed(store, &run_id(1)).await, attention(Some("read-application"), false, T0));
    let finished = (RunState::Finished, false, Some("notice-sent".to_owned()), None, None);
    assert_eq!(listed(store, &run_id(2)).await, finished);
    assert_eq!(listed(store, &run_id(3)).await, attention(Some("read-application"), false, T0 + 2));
}

/// Runs written before migration 0011: NULL listing columns, except that a
/// run already in attention entered it, as far as the store knows, at its
/// last change.
pub(crate) async fn an_upgrade_dates_runs_already_in_attention(db: &TestDb) {
    let row = |n: u32, state: &str, held: bool, updated: i64| {
        format!(
            "INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, \
             admitted_at, updated_at, version, snapshot) \
             VALUES ('{}', 'w', 'r', 'alice', NULL, 'd', '{state}', {held}, {T0}, {updated}, 3, '');",
            run_id(n)
        )
    };
    let rows =
        [row(1, "attention", false, T0 + 7), row(2, "attention", true, T0 + 5), row(3, "finished", false, T0 + 9)];
    raw(db, &rows.concat()).await;
    ok(db.migrate().await, "upgrade");
    assert_eq!(listed(db, &run_id(1)).await, attention(None, false, T0 + 7));
    assert_eq!(listed(db, &run_id(2)).await, attention(None, true, T0 + 5));
    assert_eq!(listed(db, &run_id(3)).await, (RunState::Finished, false, None, None, None), "no outcome known");
    let group =
        |reason, runs, oldest_since| AttentionGroup { reason, workflow: "w".into(), step: None, runs, oldest_since };
    assert_eq!(
        ok(db.attention_groups(None, None).await, "inbox"),
        vec![group(AttentionReason::RestoreHold, 1, T0 + 5), group(AttentionReason::UnknownEffect, 1, T0 + 7)]
    );
}

/// A run's snapshot in its two columns (migration 0018, `snapshot_frame`):
/// the base in `snapshot_base`, the head in `snapshot`, on admission and on
/// every apply; a row without a base (written before) reads as its head alone.
pub(crate) async fn a_snapshot_is_kept_as_its_base_and_head(db: &TestDb) {
    let wf = workflow();
    let id = admit(db, &wf, &run_id(1), T0).await;
    let base = BASE.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let base = if db.is_postgres() { format!("'\\x{base}'::bytea") } else { format!("X'{base}'") };
    let kept =
        format!("SELECT count(*) FROM runs WHERE id = '{id}' AND snapshot_base = {base} AND length(snapshot) > 0");
    assert_eq!(raw_count(db, &kept).await, 1, "admitted");
    decide(db, &wf, &id, accepted_read(), T0 + 1).await;
    assert_eq!(raw_count(db, &kept).await, 1, "applied");
    let Some(row) = ok(db.load(&id).await, "load") else { panic!("no run {id}") };
    let Ok((Some(BASE), head)) = snapshot_frame::split(&row.snapshot) else { panic!("not a frame with the base") };
    let head = head.to_vec();
    raw(db, &format!("UPDATE runs SET snapshot_base = NULL WHERE id = '{id}'")).await;
    let Some(row) = ok(db.load(&id).await, "load") else { panic!("no run {id}") };
    assert_eq!(row.snapshot, head, "no base: the head alone");
}

/// On PostgreSQL every column holding a run id is a `uuid` (migration 0020:
/// 16 bytes in each row and index entry, not 36 characters); on both
/// backends a run id reads back as the hyphenated text it was given, the same
/// UUID in another form (upper case, no hyphens) finds the same run, and text
/// that is not a UUID finds no run.
pub(crate) async fn run_ids_are_uuids_on_postgres_and_read_back_as_text(db: &TestDb) {
    if db.is_postgres() {
        let text_ids = "SELECT count(*) FROM information_schema.columns c \
             JOIN information_schema.tables t ON t.table_name = c.table_name AND t.table_schema = c.table_schema \
             WHERE c.table_schema = current_schema() AND (c.column_name = 'run_id' OR (c.table_name = 'runs' AND c.column_name = 'id')) \
             AND c.data_type <> 'uuid'";
        assert_eq!(raw_count(db, text_ids).await, 0, "a run id column that is not a uuid");
        let uuid_ids = "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() \
             AND table_name IN ('runs', 'outbox', 'timers', 'waits', 'trigger_events', 'admission_keys', 'audit') \
             AND column_name IN ('id', 'run_id') AND data_type = 'uuid'";
        assert_eq!(raw_count(db, uuid_ids).await, 7);
    }
    let wf = workflow();
    let id = admit(db, &wf, &run_id(1), T0).await;
    let Some(row) = ok(db.load(&id).await, "load") else { panic!("no run {id}") };
    assert_eq!(row.id, id);
    let work = ok(db.work_of(&id).await, "work");
    assert!(!work.outbox.is_empty() && !work.audit.is_empty(), "{work:?}");
    assert!(ok(db.load("not-a-uuid").await, "load").is_none());
    // A UUID in another form names the same run on both backends.
    for other in [id.to_uppercase(), id.replace('-', "")] {
        let Some(row) = ok(db.load(&other).await, "load") else { panic!("{other} found no run") };
        assert_eq!(row.id, id);
    }
    let not_a_uuid = new_run(&wf, "not-a-uuid", "alice", None, T0);
    let refused = db.admit(&not_a_uuid, || Ok::<_, StoreError>(first(&wf, &not_a_uuid))).await;
    assert!(matches!(refused, Err(StoreError::InvalidRunId(_))), "{refused:?}");
}

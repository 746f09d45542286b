//! The hash-chained audit journal: entries written pending by every
//! transaction that records something and sealed into the chain by
//! `Store::seal_audit` (`Store::audit` shows only sealed ones); a gapless chain
//! across concurrent transactions with each run's entries in order, the actor
//! of each entry, deployment-level entries, sealers running at once (each
//! entry chained exactly once), the chaining of entries an older schema wrote,
//! and tampering done directly in the database (an edited detail, two swapped
//! positions, a deleted entry) found by `coordinator_core::audit::verify` at
//! the right position — but not an edit made before the entry was sealed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use coordinator_core::audit::{self, Entry, Head, Problem, Tampering};
use coordinator_core::machine::action::{Action, AuditKind};
use coordinator_core::model::run::RunState;
use coordinator_store::{Claim, Decision, Store, StoreError};

use super::support::{T0, TestDb, admit, deciding, raw, raw_count, run_id, workflow};
use super::{LEASE_MS, accepted_read, ok};

/// Seals every pending entry; returns how many.
pub(super) async fn seal(store: &Store) -> u64 {
    let mut total = 0;
    loop {
        let sealed = ok(store.seal_audit(100).await, "seal");
        total += sealed;
        if sealed < 100 {
            return total;
        }
    }
}

/// The whole journal as sealed so far, read 3 entries at a time, and the head of the last page.
async fn journal(store: &Store) -> (Vec<Entry>, Head) {
    let mut entries = Vec::new();
    let mut after = 0;
    loop {
        let page = ok(store.audit(None, after, 3).await, "audit page");
        assert!(page.entries.iter().all(|e| e.position > after && e.position <= page.head.position));
        entries.extend(page.entries);
        match page.next {
            Some(next) => after = next,
            None => return (entries, page.head),
        }
    }
}

/// The first tampering found, if any.
pub(super) async fn check(store: &Store) -> Result<u64, Tampering> {
    let (entries, head) = journal(store).await;
    audit::verify(&entries, &head).map(|v| v.checked)
}

/// A decision that only journals `detail` (the snapshot is kept as it is).
fn journaling(detail: String) -> impl FnOnce(&[u8]) -> Result<Decision, StoreError> {
    journaling_all(vec![detail])
}

/// A decision that journals each of `details`, in order, in one transaction.
fn journaling_all(details: Vec<String>) -> impl FnOnce(&[u8]) -> Result<Decision, StoreError> {
    move |snapshot| {
        let actions = details
            .into_iter()
            .enumerate()
            .map(|(n, detail)| {
                // Every other line with a step, so NULL and text both go through.
                let step = n.is_multiple_of(2).then(|| format!("step-{n}"));
                Action::Audit { kind: AuditKind::Operator, step, detail }
            })
            .collect();
        let snapshot = snapshot.to_vec();
        Ok(Decision {
            actions,
            snapshot,
            state: RunState::Running,
            held: false,
            outcome: None,
            attention_step: None,
            lanes: Vec::new(),
            connections: Vec::new(),
        })
    }
}

pub(crate) async fn audit_entries_are_chained_in_order_once_sealed(store: &Store) {
    let wf = workflow();
    let runs: Vec<String> = (1..=4).map(run_id).collect();
    for (n, id) in runs.iter().enumerate() {
        admit(store, &wf, id, T0 + i64::try_from(n).unwrap_or(0)).await;
    }
    // Concurrent transactions on different runs (and several on each run).
    let mut tasks = Vec::new();
    for round in 0..6_u32 {
        for id in &runs {
            let (store, id) = (store.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                let detail = format!("writer {round}");
                if round.is_multiple_of(2) {
                    store.apply_as(&id, T0 + 10, "ops", journaling(detail)).await
                } else {
                    store.apply(&id, T0 + 10, journaling(detail)).await
                }
            }));
        }
    }
    for task in tasks {
        ok(task.await.unwrap_or_else(|e| panic!("task: {e}")), "concurrent apply");
    }
    let (entries, head) = journal(store).await;
    assert_eq!((entries.len(), head.position), (0, 0), "nothing is chained before it is sealed");
    assert!(seal(store).await >= 4 + 24, "every admission's and writer's entry");
    let (entries, head) = journal(store).await;
    let verified = audit::verify(&entries, &head).unwrap_or_else(|e| panic!("the journal must verify: {e}"));
    assert_eq!(verified.checked, u64::try_from(entries.len()).unwrap_or(0));
    let positions: Vec<i64> = entries.iter().map(|e| e.position).collect();
    assert_eq!(positions, (1..=i64::try_from(entries.len()).unwrap_or(0)).collect::<Vec<_>>(), "no gaps");
    // Each run's writers, in the order the run lock let them commit, each with its actor.
    for id in &runs {
        let written: Vec<_> = entries
            .iter()
            .filter(|e| e.run_id.as_deref() == Some(id.as_str()) && e.detail.starts_with("writer"))
            .map(|e| (e.detail.clone(), e.actor.clone()))
            .collect();
        assert_eq!(written.len(), 6, "{written:?}");
        for (detail, actor) in &written {
            let round: u32 = detail.trim_start_matches("writer ").parse().unwrap_or(99);
            let expected = (round.is_multiple_of(2)).then(|| "ops".to_owned());
            assert_eq!(actor, &expected, "{detail}");
        }
        let page = ok(store.audit(Some(id), 0, 1000).await, "one run's entries");
        assert!(page.entries.iter().all(|e| e.run_id.as_deref() == Some(id.as_str())));
        assert_eq!(
            page.entries.first().map(|e| (e.kind.as_str(), e.actor.as_deref())),
            Some(("admission", Some("alice")))
        );
    }
    // A worker's report (no actor) and the deployment-level entries.
    ok(store.apply(&runs[0], T0 + 20, deciding(&wf, &accepted_read(), T0 + 20)).await, "answer");
    ok(store.place_hold(T0 + 30, "ops", None).await, "place");
    ok(store.place_hold(T0 + 31, "ops", None).await, "place again: no change, no entry");
    ok(store.release_hold(T0 + 32, "ops-2", Some("the backup was checked")).await, "release");
    ok(store.release_hold(T0 + 33, "ops-2", None).await, "release again: no entry");
    seal(store).await;
    let (entries, head) = journal(store).await;
    ok(audit::verify(&entries, &head).map_err(|e| StoreError::Corrupt(e.to_string())), "verify");
    let deployment: Vec<_> =
        entries.iter().filter(|e| e.run_id.is_none()).map(|e| (e.kind.as_str(), e.actor.as_deref(), e.at)).collect();
    assert_eq!(deployment, vec![("hold", Some("ops"), T0 + 30), ("hold", Some("ops-2"), T0 + 32)]);
    let released = entries.iter().find(|e| e.at == T0 + 32).map(|e| e.detail.as_str());
    assert_eq!(
        released,
        Some("restore hold released for the deployment; reason given: the backup was checked"),
        "the reason journaled"
    );
    let answered = entries.iter().filter(|e| e.at == T0 + 20).collect::<Vec<_>>();
    assert!(!answered.is_empty() && answered.iter().all(|e| e.actor.is_none()), "the coordinator's entries");
}

pub(crate) async fn activations_are_journaled_when_they_change(store: &Store) {
    let package =
        coordinator_store::Package { revision: "r1".into(), workflow: "w".into(), digest: "d1".into(), bytes: vec![1] };
    ok(store.put_package(&package).await, "put");
    ok(store.activate("w", "r1", T0, Some("ops")).await, "activate");
    ok(store.activate("w", "r1", T0 + 1, Some("ops")).await, "again: no change");
    assert_eq!(seal(store).await, 1);
    let (entries, head) = journal(store).await;
    assert_eq!(check(store).await, Ok(1));
    assert_eq!(head.position, 1);
    assert_eq!((entries[0].kind.as_str(), entries[0].actor.as_deref()), ("activation", Some("ops")));
    assert!(entries[0].detail.contains("r1") && entries[0].run_id.is_none(), "{:?}", entries[0]);
}

/// Where each sealed row starts and how many entries it holds, up to
/// `head` (a row holds a decision's entries for one run, `audit::rows`).
async fn rows_of(db: &TestDb, head: i64) -> Vec<(i64, i64)> {
    let mut starts = Vec::new();
    for p in 1..=head {
        if raw_count(db, &format!("SELECT count(*) FROM audit WHERE position = {p}")).await == 1 {
            starts.push(p);
        }
    }
    let ends: Vec<i64> = starts.iter().skip(1).copied().chain([head + 1]).collect();
    starts.into_iter().zip(ends).map(|(start, end)| (start, end - start)).collect()
}

pub(crate) async fn tampering_in_the_database_is_found_at_its_position(db: &TestDb) {
    let wf = workflow();
    for n in 1..=3 {
        admit(db, &wf, &run_id(n), T0).await;
    }
    ok(db.apply_as(&run_id(1), T0 + 1, "ops", journaling("operator note".into())).await, "note");
    seal(db).await;
    let total = ok(check(db).await.map_err(|e| StoreError::Corrupt(e.to_string())), "intact");
    let (entries, head) = journal(db).await;
    let rows = rows_of(db, head.position).await;
    assert!(rows.len() >= 4 && rows[1].1 >= 2, "rows to tamper with, the second of several entries: {rows:?}");
    let broken = |position, problem| Err(Tampering { position, problem });
    let (second, third, last) = (rows[1], rows[2], rows[rows.len() - 1]);

    // An edited detail: that entry's hash no longer matches — a row's first
    // entry (its own columns) or a later one (in `more`).
    raw(db, &format!("UPDATE audit SET detail = detail || 'x' WHERE position = {}", second.0)).await;
    assert_eq!(check(db).await, broken(second.0, Problem::HashMismatch));
    raw(db, &format!("UPDATE audit SET detail = substr(detail, 1, length(detail) - 1) WHERE position = {}", second.0))
        .await;
    assert_eq!(check(db).await, Ok(total), "restored");
    let inner = second.0 + 1;
    let detail = entries.iter().find(|e| e.position == inner).map(|e| e.detail.clone()).unwrap_or_default();
    let quoted = serde_json::to_string(&detail).unwrap_or_default();
    let edited = serde_json::to_string(&format!("{detail}x")).unwrap_or_default();
    let edit = |from: &str, to: &str| {
        format!("UPDATE audit SET more = replace(more, '{from}', '{to}') WHERE position = {}", second.0)
    };
    raw(db, &edit(&quoted, &edited)).await;
    assert_eq!(check(db).await, broken(inner, Problem::HashMismatch), "an entry inside a row");
    raw(db, &edit(&edited, &quoted)).await;
    assert_eq!(check(db).await, Ok(total), "restored");

    // A row's later entries removed: a gap where they were.
    raw(db, &format!("CREATE TABLE saved AS SELECT more FROM audit WHERE position = {}", second.0)).await;
    raw(db, &format!("UPDATE audit SET more = NULL WHERE position = {}", second.0)).await;
    assert_eq!(check(db).await, broken(inner, Problem::Missing { next: third.0 }));
    raw(
        db,
        &format!("UPDATE audit SET more = (SELECT more FROM saved) WHERE position = {}; DROP TABLE saved", second.0),
    )
    .await;
    assert_eq!(check(db).await, Ok(total), "restored");

    // A changed actor is an edit too.
    raw(db, "UPDATE audit SET actor = 'someone-else' WHERE actor = 'ops'").await;
    let operator = total; // the note is the last entry
    assert_eq!(check(db).await, broken(i64::try_from(operator).unwrap_or(0), Problem::HashMismatch));
    raw(db, "UPDATE audit SET actor = 'ops' WHERE actor = 'someone-else'").await;

    // Two swapped rows: the first of them no longer hashes (each hash covers its position).
    let swap = format!(
        "UPDATE audit SET position = -1 WHERE position = {a}; \
         UPDATE audit SET position = {a} WHERE position = {b}; \
         UPDATE audit SET position = {b} WHERE position = -1;",
        a = second.0,
        b = third.0
    );
    raw(db, &swap).await;
    assert_eq!(check(db).await, broken(second.0, Problem::HashMismatch));
    raw(db, &swap).await;
    assert_eq!(check(db).await, Ok(total), "swapped back");

    // A deleted row: a gap where it was; the deleted last row: a tail shorter than the head.
    let after_third = third.0 + third.1;
    raw(db, &format!("DELETE FROM audit WHERE position = {}", third.0)).await;
    assert_eq!(check(db).await, broken(third.0, Problem::Missing { next: after_third }));
    raw(db, &format!("UPDATE audit SET position = {}, prev_hash = 'x' WHERE position = {after_third}", third.0)).await;
    assert!(matches!(check(db).await, Err(Tampering { position, .. }) if position == third.0), "renumbering");
    raw(db, &format!("DELETE FROM audit WHERE position >= {} AND position < {}", third.0, last.0)).await;
    raw(db, &format!("UPDATE audit SET position = {} WHERE position = {}", third.0, last.0)).await;
    assert!(check(db).await.is_err());
    raw(db, &format!("DELETE FROM audit WHERE position = {}", third.0)).await;
    assert_eq!(check(db).await, broken(third.0, Problem::TailMissing { head: head.position }), "the head remembers");
}

/// A decision's entries for one run are one row, up to 64 (`audit::rows`);
/// longer ones continue in the next rows. Read back entry by entry, in
/// pages that start anywhere inside a row, they are the entries written.
pub(crate) async fn a_decisions_entries_share_rows_of_at_most_64(db: &TestDb) {
    let id = admit(db, &workflow(), &run_id(1), T0).await;
    let admission = raw_count(db, "SELECT count(*) FROM audit").await;
    let lines: Vec<String> = (0..150).map(|n| format!("line {n}")).collect();
    ok(db.apply_as(&id, T0 + 1, "ops", journaling_all(lines.clone())).await, "150 lines in one transaction");
    assert_eq!(raw_count(db, "SELECT count(*) FROM audit").await, admission + 3, "rows of 64, 64 and 22");
    assert_eq!(raw_count(db, "SELECT count(*) FROM audit WHERE hash IS NULL").await, admission + 3, "pending");
    let written = ok(db.work_of(&id).await, "work").audit;
    assert_eq!(written.iter().rev().take(150).rev().map(|w| w.2.clone()).collect::<Vec<_>>(), lines);
    seal(db).await;
    let (entries, head) = journal(db).await;
    assert_eq!(entries.len(), written.len());
    assert_eq!(check(db).await, Ok(u64::try_from(written.len()).unwrap_or(0)));
    let chained: Vec<_> = entries.iter().map(|e| (e.kind.clone(), e.step.clone(), e.detail.clone())).collect();
    assert_eq!(chained, written);
    for (after, limit) in [(0, 70), (5, 64), (63, 2), (64, 65), (head.position - 1, 10)] {
        let page = ok(db.audit(None, after, limit).await, "a page");
        let expected: Vec<_> = entries.iter().filter(|e| e.position > after).take(limit as usize).cloned().collect();
        assert_eq!(page.entries, expected, "after {after}, {limit}");
        let run = ok(db.audit(Some(&id), after, limit).await, "the run's page");
        assert_eq!(run.entries, expected, "the run's, after {after}, {limit}");
    }
    // Newest first, a page at a time, across rows, with the count.
    for limit in [1, 7, 64, 65, 500] {
        let (mut read, mut before) = (Vec::new(), None);
        loop {
            let page = ok(db.run_journal(&id, before, limit).await, "newest first");
            assert_eq!(page.total, u64::try_from(entries.len()).unwrap_or(0));
            assert!(page.entries.len() <= limit as usize);
            assert_eq!(page.newer, read.len() as u64, "the entries before this page, newest first");
            read.extend(page.entries.iter().map(|e| (e.position, e.detail.clone())));
            match page.older {
                Some(older) => before = Some(older),
                None => break,
            }
        }
        let newest_first: Vec<_> = entries.iter().rev().map(|e| (e.position, e.detail.clone())).collect();
        assert_eq!(read, newest_first, "pages of {limit}");
    }
}

/// The window the design accepts: an entry edited while pending is sealed as
/// edited, so the chain cannot tell (the sealer runs within ~100 ms of commit).
/// Once sealed, the same edit is found.
pub(crate) async fn an_edit_before_sealing_is_chained_as_written(db: &TestDb) {
    admit(db, &workflow(), &run_id(1), T0).await;
    ok(db.apply(&run_id(1), T0 + 1, journaling("pending note".into())).await, "note");
    raw(db, "UPDATE audit SET detail = 'rewritten note' WHERE detail = 'pending note' AND hash IS NULL").await;
    seal(db).await;
    let (entries, head) = journal(db).await;
    assert!(audit::verify(&entries, &head).is_ok(), "not detectable: it was never chained otherwise");
    assert_eq!(entries.last().map(|e| e.detail.as_str()), Some("rewritten note"));
    raw(db, "UPDATE audit SET detail = 'pending note' WHERE detail = 'rewritten note'").await;
    assert_eq!(check(db).await, Err(Tampering { position: head.position, problem: Problem::HashMismatch }));
}

pub(crate) async fn pending_entries_are_sealed_in_order_once(store: &Store) {
    let wf = workflow();
    let id = admit(store, &wf, &run_id(1), T0).await;
    let lines: Vec<String> = (0..10).map(|n| format!("line {n}")).collect();
    ok(store.apply_as(&id, T0 + 1, "ops", journaling_all(lines.clone())).await, "ten lines in one transaction");
    let written = ok(store.work_of(&id).await, "work").audit;
    assert!(written.len() > lines.len(), "the admission's entries and the ten lines: {written:?}");

    // Pending: written, but in no page, and the head has not moved.
    let page = ok(store.audit(None, 0, 1000).await, "page");
    assert_eq!((page.entries.len(), page.head.position, page.next), (0, 0, None));
    assert_eq!(ok(store.audit(Some(&id), 0, 1000).await, "the run's page").entries, vec![]);

    // Sealed in batches: each batch continues the chain where the last one stopped.
    assert_eq!(ok(store.seal_audit(0).await, "seal nothing"), 0);
    assert_eq!(ok(store.seal_audit(3).await, "seal three"), 3);
    let (entries, head) = journal(store).await;
    assert_eq!((entries.len(), head.position), (3, 3));
    assert_eq!(check(store).await, Ok(3));
    let rest = u64::try_from(written.len() - 3).unwrap_or(0);
    assert_eq!(ok(store.seal_audit(1000).await, "seal the rest"), rest);

    // In the order they were written (lines of one statement included), each once, verified.
    let (entries, head) = journal(store).await;
    let chained: Vec<_> = entries.iter().map(|e| (e.kind.clone(), e.step.clone(), e.detail.clone())).collect();
    assert_eq!(chained, written);
    let tail: Vec<_> = entries.iter().rev().take(10).rev().map(|e| (e.detail.clone(), e.actor.clone())).collect();
    assert_eq!(tail, lines.iter().map(|l| (l.clone(), Some("ops".to_owned()))).collect::<Vec<_>>());
    assert_eq!(entries.iter().rev().take(10).filter(|e| e.step.is_some()).count(), 5);
    assert_eq!(check(store).await, Ok(u64::try_from(written.len()).unwrap_or(0)));
    assert_eq!(ok(store.audit(Some(&id), 0, 1000).await, "the run's page").entries, entries);

    // Sealing again changes nothing.
    assert_eq!(ok(store.seal_audit(1000).await, "seal again"), 0);
    let (again, head_again) = journal(store).await;
    assert_eq!((again, head_again), (entries, head.clone()));

    // Later entries continue the chain.
    ok(store.apply(&id, T0 + 2, journaling("later".into())).await, "later");
    assert_eq!(ok(store.seal_audit(1000).await, "seal later"), 1);
    let (entries, last) = journal(store).await;
    assert_eq!((last.position, entries.last().map(|e| e.prev_hash.clone())), (head.position + 1, Some(head.hash)));
    assert!(audit::verify(&entries, &last).is_ok());
}

/// A batch of reports leaves nothing pending, on either backend: it seals
/// the admissions' pending entries first, then chains its own after them in
/// its transaction, each run's entries in their order, so the journal
/// verifies with no sealer run.
pub(crate) async fn a_batch_chains_its_entries_as_it_commits(store: &Store) {
    let wf = workflow();
    let ids: Vec<String> = (1..=5).map(run_id).collect();
    for id in &ids {
        admit(store, &wf, id, T0).await;
    }
    let claimed = ok(store.claim_work(T0, "w1", LEASE_MS, 10).await, "claim");
    assert_eq!(claimed.len(), ids.len(), "{claimed:?}");
    let claims: Vec<Claim> = claimed.into_iter().map(Claim::Work).collect();
    let event = accepted_read();
    let outcome = ok(
        store.apply_fenced_batch(&claims, "w1", T0 + 1, |_, snapshot| deciding(&wf, &event, T0 + 1)(snapshot)).await,
        "batch",
    );
    assert!(outcome.iter().all(|o| matches!(o, Ok(2))), "{outcome:?}");

    let written: usize = {
        let mut n = 0;
        for id in &ids {
            n += ok(store.work_of(id).await, "work").audit.len();
        }
        n
    };
    let (entries, head) = journal(store).await;
    assert_eq!(
        (entries.len(), head.position),
        (written, i64::try_from(written).unwrap_or(0)),
        "every entry chained at the batch's commit"
    );
    assert_eq!(ok(store.seal_audit(1000).await, "nothing left for the sealer"), 0);
    assert_eq!(check(store).await, Ok(u64::try_from(written).unwrap_or(0)));
    for id in &ids {
        let page = ok(store.audit(Some(id), 0, 1000).await, "the run's page").entries;
        let kinds: Vec<(String, Option<String>, String)> =
            page.iter().map(|e| (e.kind.clone(), e.step.clone(), e.detail.clone())).collect();
        assert_eq!(kinds, ok(store.work_of(id).await, "work").audit, "the run's entries in their order");
        assert_eq!(page.first().map(|e| e.kind.as_str()), Some("admission"));
    }
}

/// Sealers racing each other (and writers) leave one gapless chain holding
/// every committed entry exactly once, with each run's entries in the order
/// its transactions wrote them.
pub(crate) async fn concurrent_sealers_chain_every_entry_once(store: &Store) {
    const RUNS: u32 = 4;
    const APPLIES: u32 = 5;
    const LINES: u32 = 100;
    const BATCH: u32 = 64;
    let wf = workflow();
    let runs: Vec<String> = (1..=RUNS).map(run_id).collect();
    for id in &runs {
        admit(store, &wf, id, T0).await;
    }
    let writing = Arc::new(AtomicBool::new(true));
    let sealed = Arc::new(AtomicU64::new(0));
    let mut sealers = Vec::new();
    for _ in 0..3 {
        let (store, writing, sealed) = (store.clone(), Arc::clone(&writing), Arc::clone(&sealed));
        sealers.push(tokio::spawn(async move {
            loop {
                // Read the flag first: once it is down every entry has committed, so a short batch after it is the end.
                let done = !writing.load(Ordering::SeqCst);
                let n = store.seal_audit(BATCH).await?;
                sealed.fetch_add(n, Ordering::SeqCst);
                if done && n < u64::from(BATCH) {
                    return Ok::<_, StoreError>(());
                }
                if n == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    let mut writers = Vec::new();
    for id in &runs {
        let (store, id) = (store.clone(), id.clone());
        writers.push(tokio::spawn(async move {
            for apply in 0..APPLIES {
                let details = (0..LINES).map(|line| format!("{id} {apply:02} {line:03}")).collect();
                store.apply(&id, T0 + 1, journaling_all(details)).await?;
            }
            Ok::<_, StoreError>(())
        }));
    }
    for task in writers {
        ok(task.await.unwrap_or_else(|e| panic!("writer: {e}")), "write");
    }
    writing.store(false, Ordering::SeqCst);
    for task in sealers {
        ok(task.await.unwrap_or_else(|e| panic!("sealer: {e}")), "seal");
    }
    assert_eq!(ok(store.seal_audit(1000).await, "nothing left"), 0);

    let (entries, head) = journal(store).await;
    let count = u64::try_from(entries.len()).unwrap_or(0);
    assert_eq!(sealed.load(Ordering::SeqCst), count, "every sealed entry is in the chain, none twice");
    assert_eq!(audit::verify(&entries, &head).map(|v| v.checked), Ok(count));
    let positions: Vec<i64> = entries.iter().map(|e| e.position).collect();
    assert_eq!(positions, (1..=head.position).collect::<Vec<_>>(), "no gaps");
    for id in &runs {
        let chained: Vec<_> = entries
            .iter()
            .filter(|e| e.run_id.as_deref() == Some(id.as_str()) && e.kind == "operator")
            .map(|e| e.detail.clone())
            .collect();
        let expected: Vec<_> =
            (0..APPLIES).flat_map(|a| (0..LINES).map(move |l| format!("{id} {a:02} {l:03}"))).collect();
        assert_eq!(chained, expected, "each written once, in the run's order");
        let written = ok(store.work_of(id).await, "work").audit;
        let of_run = entries.iter().filter(|e| e.run_id.as_deref() == Some(id.as_str())).count();
        assert_eq!(of_run, written.len(), "the admission's entries too");
    }
}

pub(crate) async fn an_upgrade_chains_the_entries_written_before(db: &TestDb) {
    raw(
        db,
        &format!(
            "INSERT INTO audit (run_id, at, kind, step, detail) VALUES ('0199c8a0-0000-7000-8000-000000000999', {T0}, 'admission', NULL, 'admitted'); \
             INSERT INTO audit (run_id, at, kind, step, detail) VALUES ('0199c8a0-0000-7000-8000-000000000999', {T0}, 'dispatch', 'a', 'queued'); \
             INSERT INTO audit (run_id, at, kind, step, detail) VALUES (NULL, {T0}, 'hold', NULL, 'placed');"
        ),
    )
    .await;
    ok(db.migrate().await, "upgrade");
    ok(db.migrate().await, "upgrade again");
    assert_eq!(ok(db.seal_audit(1000).await, "nothing pending after migrate"), 0);
    assert_eq!(check(db).await, Ok(3));
    let (entries, _) = journal(db).await;
    let kinds: Vec<_> = entries.iter().map(|e| (e.position, e.kind.as_str(), e.actor.clone())).collect();
    assert_eq!(kinds, vec![(1, "admission", None), (2, "dispatch", None), (3, "hold", None)]);
    // New entries continue the chain.
    let wf = workflow();
    admit(db, &wf, &run_id(1), T0).await;
    assert_eq!(journal(db).await.0.len(), 3, "pending until sealed");
    seal(db).await;
    let (entries, head) = journal(db).await;
    assert!(entries.len() > 3 && audit::verify(&entries, &head).is_ok());
}

/// Sealed rows store no `prev_hash` (migration 14): each entry's predecessor
/// hash is read from the entry at the position before — within the page, from
/// the row before the page's first entry, for every entry of one run's page —
/// and a row written with its `prev_hash` (before migration 14) keeps it.
pub(crate) async fn entries_link_to_the_entry_before_without_storing_its_hash(db: &TestDb) {
    let wf = workflow();
    for n in 1..=3 {
        admit(db, &wf, &run_id(n), T0).await;
    }
    seal(db).await;
    ok(db.apply(&run_id(2), T0 + 1, journaling_all(vec!["a".into(), "b".into()])).await, "note");
    seal(db).await;
    assert_eq!(raw_count(db, "SELECT count(*) FROM audit WHERE prev_hash IS NOT NULL").await, 0);
    let (entries, head) = journal(db).await;
    ok(audit::verify(&entries, &head).map_err(|e| StoreError::Corrupt(e.to_string())), "verify");
    let hash_at = |position: i64| entries.iter().find(|e| e.position == position).map(|e| e.hash.clone());
    for after in 0..head.position {
        let page = ok(db.audit(None, after, 2).await, "a page from the middle");
        let first = page.entries.first().unwrap_or_else(|| panic!("a page after {after}"));
        let expected = if after == 0 { Some(Head::genesis().hash) } else { hash_at(after) };
        assert_eq!(Some(first.prev_hash.clone()), expected, "the first entry after {after}");
    }
    let run = ok(db.audit(Some(&run_id(2)), 0, 100).await, "one run's entries");
    assert!(run.entries.len() >= 3, "{:?}", run.entries);
    for e in &run.entries {
        let expected = if e.position == 1 { Some(Head::genesis().hash) } else { hash_at(e.position - 1) };
        assert_eq!(Some(e.prev_hash.clone()), expected, "entry {}", e.position);
    }
    // A row as an older schema sealed it: its stored `prev_hash` is what is read.
    let rows = rows_of(db, head.position).await;
    let (second, third) = (rows[1].0, rows[2]);
    raw(db, &format!("UPDATE audit SET prev_hash = 'stored' WHERE position = {second}")).await;
    let page = ok(db.audit(None, second - 1, 1).await, "the older row");
    assert_eq!(page.entries.first().map(|e| e.prev_hash.as_str()), Some("stored"));
    // A deleted predecessor leaves the entry after it unlinked, found as tampering.
    raw(db, &format!("UPDATE audit SET prev_hash = NULL WHERE position = {second}")).await;
    raw(db, &format!("DELETE FROM audit WHERE position = {}", third.0)).await;
    let page = ok(db.audit(None, third.0 + third.1 - 1, 1).await, "after the gap");
    assert_eq!(page.entries.first().map(|e| e.prev_hash.as_str()), Some(""));
    assert!(check(db).await.is_err());
}

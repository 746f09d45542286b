//! The hash-chained audit journal (`Store::audit`, chained by every
//! transaction that writes entries): positions in commit order across
//! concurrent transactions, the actor of each entry, deployment-level entries,
//! the chaining of entries an older schema wrote, and tampering done directly
//! in the database (an edited detail, two swapped positions, a deleted entry)
//! found by `coordinator_core::audit::verify` at the right position.

use coordinator_core::audit::{self, Entry, Head, Problem, Tampering};
use coordinator_core::machine::action::{Action, AuditKind};
use coordinator_core::model::run::RunState;
use coordinator_store::{Decision, Store, StoreError};

use super::support::{T0, TestDb, admit, deciding, raw, run_id, workflow};
use super::{accepted_read, ok};

/// The whole journal, read 3 entries at a time, and the head of the last page.
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
async fn check(store: &Store) -> Result<u64, Tampering> {
    let (entries, head) = journal(store).await;
    audit::verify(&entries, &head).map(|v| v.checked)
}

/// A decision that only journals `detail` (the snapshot is kept as it is).
fn journaling(detail: String) -> impl FnOnce(&[u8]) -> Result<Decision, StoreError> {
    move |snapshot| {
        let actions = vec![Action::Audit { kind: AuditKind::Operator, step: None, detail }];
        Ok(Decision { actions, snapshot: snapshot.to_vec(), state: RunState::Running, held: false })
    }
}

pub(crate) async fn audit_entries_are_chained_in_commit_order(store: &Store) {
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
    ok(store.place_hold(T0 + 30, "ops").await, "place");
    ok(store.place_hold(T0 + 31, "ops").await, "place again: no change, no entry");
    ok(store.release_hold(T0 + 32, "ops-2").await, "release");
    ok(store.release_hold(T0 + 33, "ops-2").await, "release again: no entry");
    let (entries, head) = journal(store).await;
    ok(audit::verify(&entries, &head).map_err(|e| StoreError::Corrupt(e.to_string())), "verify");
    let deployment: Vec<_> =
        entries.iter().filter(|e| e.run_id.is_none()).map(|e| (e.kind.as_str(), e.actor.as_deref(), e.at)).collect();
    assert_eq!(deployment, vec![("hold", Some("ops"), T0 + 30), ("hold", Some("ops-2"), T0 + 32)]);
    let answered = entries.iter().filter(|e| e.at == T0 + 20).collect::<Vec<_>>();
    assert!(!answered.is_empty() && answered.iter().all(|e| e.actor.is_none()), "the coordinator's entries");
}

pub(crate) async fn activations_are_journaled_when_they_change(store: &Store) {
    let package =
        coordinator_store::Package { revision: "r1".into(), workflow: "w".into(), digest: "d1".into(), bytes: vec![1] };
    ok(store.put_package(&package).await, "put");
    ok(store.activate("w", "r1", T0, Some("ops")).await, "activate");
    ok(store.activate("w", "r1", T0 + 1, Some("ops")).await, "again: no change");
    let (entries, head) = journal(store).await;
    assert_eq!(check(store).await, Ok(1));
    assert_eq!(head.position, 1);
    assert_eq!((entries[0].kind.as_str(), entries[0].actor.as_deref()), ("activation", Some("ops")));
    assert!(entries[0].detail.contains("r1") && entries[0].run_id.is_none(), "{:?}", entries[0]);
}

pub(crate) async fn tampering_in_the_database_is_found_at_its_position(db: &TestDb) {
    let wf = workflow();
    for n in 1..=2 {
        admit(db, &wf, &run_id(n), T0).await;
    }
    ok(db.apply_as(&run_id(1), T0 + 1, "ops", journaling("operator note".into())).await, "note");
    let total = ok(check(db).await.map_err(|e| StoreError::Corrupt(e.to_string())), "intact");
    assert!(total >= 6, "enough entries to tamper with: {total}");
    let broken = |position, problem| Err(Tampering { position, problem });

    // An edited detail: that entry's hash no longer matches.
    raw(db, "UPDATE audit SET detail = detail || 'x' WHERE position = 3").await;
    assert_eq!(check(db).await, broken(3, Problem::HashMismatch));
    raw(db, "UPDATE audit SET detail = substr(detail, 1, length(detail) - 1) WHERE position = 3").await;
    assert_eq!(check(db).await, Ok(total), "restored");

    // A changed actor is an edit too.
    raw(db, "UPDATE audit SET actor = 'someone-else' WHERE actor = 'ops'").await;
    let operator = total; // the note is the last entry
    assert_eq!(check(db).await, broken(i64::try_from(operator).unwrap_or(0), Problem::HashMismatch));
    raw(db, "UPDATE audit SET actor = 'ops' WHERE actor = 'someone-else'").await;

    // Two swapped positions: the first of them no longer hashes (each hash covers its position).
    let swap = "UPDATE audit SET position = -1 WHERE position = 2; \
                UPDATE audit SET position = 2 WHERE position = 4; \
                UPDATE audit SET position = 4 WHERE position = -1;";
    raw(db, swap).await;
    assert_eq!(check(db).await, broken(2, Problem::HashMismatch));
    raw(db, swap).await;
    assert_eq!(check(db).await, Ok(total), "swapped back");

    // A deleted entry: a gap where it was; the deleted last entry: a tail shorter than the head.
    raw(db, "DELETE FROM audit WHERE position = 5").await;
    assert_eq!(check(db).await, broken(5, Problem::Missing { next: 6 }));
    let last = i64::try_from(total).unwrap_or(0);
    raw(db, "UPDATE audit SET position = 5, prev_hash = 'x' WHERE position = 6").await;
    assert!(matches!(check(db).await, Err(Tampering { position: 5, .. })), "renumbering does not hide it");
    raw(db, &format!("DELETE FROM audit WHERE position >= 5 AND position < {last}")).await;
    raw(db, &format!("UPDATE audit SET position = 5 WHERE position = {last}")).await;
    assert!(check(db).await.is_err());
    raw(db, "DELETE FROM audit WHERE position = 5").await;
    assert_eq!(check(db).await, broken(5, Problem::TailMissing { head: last }), "the head remembers the end");
}

pub(crate) async fn an_upgrade_chains_the_entries_written_before(db: &TestDb) {
    raw(
        db,
        &format!(
            "INSERT INTO audit (run_id, at, kind, step, detail) VALUES ('r-old', {T0}, 'admission', NULL, 'admitted'); \
             INSERT INTO audit (run_id, at, kind, step, detail) VALUES ('r-old', {T0}, 'dispatch', 'a', 'queued'); \
             INSERT INTO audit (run_id, at, kind, step, detail) VALUES (NULL, {T0}, 'hold', NULL, 'placed');"
        ),
    )
    .await;
    ok(db.migrate().await, "upgrade");
    ok(db.migrate().await, "upgrade again");
    assert_eq!(check(db).await, Ok(3));
    let (entries, _) = journal(db).await;
    let kinds: Vec<_> = entries.iter().map(|e| (e.position, e.kind.as_str(), e.actor.clone())).collect();
    assert_eq!(kinds, vec![(1, "admission", None), (2, "dispatch", None), (3, "hold", None)]);
    // New entries continue the chain.
    let wf = workflow();
    admit(db, &wf, &run_id(1), T0).await;
    let (entries, head) = journal(db).await;
    assert!(entries.len() > 3 && audit::verify(&entries, &head).is_ok());
}

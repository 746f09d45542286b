//! Admissions together (`Store::admit_guarded_batch`): one statement on
//! PostgreSQL, one transaction on SQLite, admits many runs, each only through
//! its own open gate and with its key unused — a key twice in one batch
//! admits its first run only — and each admitted run has exactly the rows it
//! has when admitted alone. Only PostgreSQL leases first steps this way.

use coordinator_store::{EagerLease, GuardedAdmission, Store, WorkScope};

use super::audit_chain::{check, seal};
use super::support::{T0, TestDb, first, new_run, put_flagship_package, run_id, workflow};
use super::{LEASE_MS, ok};

pub(crate) async fn many_admissions_in_one_statement_keep_each_ones_gate_and_key(db: &TestDb) {
    let store: &Store = db;
    let wf = workflow();
    put_flagship_package(store, &wf).await;
    ok(store.activate("reviewed-notice", &wf.revision, T0, None).await, "activate");
    let admitting = |n: u32, key: Option<&str>, lease: Option<EagerLease>| {
        let new = new_run(&wf, &run_id(n), "alice", key, T0 + i64::from(n));
        GuardedAdmission { decision: first(&wf, &new), new, lease }
    };
    let mut inactive = admitting(4, Some("key-4"), None);
    inactive.new.revision = "not-active".into();
    let lease = EagerLease { scope: WorkScope::All, until: T0 + LEASE_MS, rows: 1 };
    let admissions = vec![
        admitting(1, Some("key-1"), None),
        // The same key in the same statement: the first run has it.
        admitting(2, Some("key-1"), None),
        admitting(3, None, None),
        inactive,
        admitting(5, None, Some(lease)),
    ];
    let answers = ok(store.admit_guarded_batch("w1", &admissions).await, "admit together");
    let created: Vec<bool> = answers.iter().map(Option::is_some).collect();
    assert_eq!(created, vec![true, false, true, false, true]);
    for (n, exists) in [(1, true), (2, false), (3, true), (4, false), (5, true)] {
        assert_eq!(ok(store.load(&run_id(n)).await, "load").is_some(), exists, "run {n}");
        let work = ok(store.work_of(&run_id(n)).await, "work");
        assert_eq!(work.outbox.is_empty() && work.timers.is_empty() && work.audit.is_empty(), !exists, "run {n}");
    }
    let gate = ok(store.admission_gate("reviewed-notice", "alice", Some("key-1")).await, "gate");
    assert_eq!(gate.keyed.map(|k| k.id), Some(run_id(1)));

    // Only the admission with a lease got its first step leased, and only on PostgreSQL.
    let leased: Vec<Vec<(String, String)>> = answers
        .iter()
        .map(|a| a.iter().flatten().map(|(item, _)| (item.run_id.clone(), item.step.clone())).collect())
        .collect();
    assert_eq!(leased[0], Vec::new());
    let first_step = if db.is_postgres() { vec![(run_id(5), "read-application".to_owned())] } else { Vec::new() };
    assert_eq!(leased[4], first_step);

    // A closed gate: nothing is written for anyone.
    ok(store.place_hold(T0, "ops", None).await, "hold");
    let held = vec![admitting(7, None, None), admitting(8, Some("key-8"), None)];
    let answers = ok(store.admit_guarded_batch("w1", &held).await, "admit held");
    assert!(answers.iter().all(Option::is_none), "{answers:?}");
    for n in [7, 8] {
        assert_eq!(ok(store.load(&run_id(n)).await, "load held"), None);
    }
    ok(store.release_hold(T0, "ops", None).await, "release");

    // Each run has the rows a run admitted alone has.
    let alone = new_run(&wf, &run_id(6), "alice", None, T0 + 1);
    let outcome = store.admit(&alone, || Ok::<_, coordinator_store::StoreError>(first(&wf, &alone))).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    let expected = ok(store.work_of(&run_id(6)).await, "alone");
    assert!(!expected.outbox.is_empty() && !expected.timers.is_empty() && !expected.audit.is_empty());
    assert_eq!(ok(store.work_of(&run_id(1)).await, "run 1"), expected);
    let (a, b) = (ok(store.load(&run_id(1)).await, "1"), ok(store.load(&run_id(6)).await, "6"));
    let (a, b) = (a.unwrap_or_else(|| panic!("run 1")), b.unwrap_or_else(|| panic!("run 6")));
    assert_eq!((a.state, a.held, a.version, a.snapshot.len()), (b.state, b.held, b.version, b.snapshot.len()));

    // The journal the statement wrote chains and verifies.
    seal(store).await;
    let checked = check(store).await;
    assert!(checked.as_ref().is_ok_and(|n| *n > 0), "{checked:?}");
}

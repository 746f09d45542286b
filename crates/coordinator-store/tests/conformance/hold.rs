//! The deployment's restore hold flag (`Store::place_hold`, `hold`,
//! `release_hold`) and what a hold leaves claimable: receipt lookups only
//! read, so they are claimed on held runs too, and a recovery-only claimer
//! (`WorkScope::ReceiptsOnly`) takes nothing else.

use coordinator_core::machine::action::Action;
use coordinator_core::machine::event::Event;
use coordinator_store::{Decision, Store, WorkKind, WorkScope};

use super::support::{T0, admit, deciding, decode, run_id, with_actions, workflow};
use super::{LEASE_MS, ok};

pub(crate) async fn the_restore_hold_is_placed_once_and_released(store: &Store) {
    assert_eq!(ok(store.hold().await, "none yet"), None);
    let placed = ok(store.place_hold(T0, "ops", None).await, "place");
    assert_eq!((placed.placed_at, placed.placed_by.as_str()), (T0, "ops"));
    let again = ok(store.place_hold(T0 + 5, "someone-else", None).await, "place again");
    assert_eq!(again, placed, "a placed hold is kept as it was");
    assert_eq!(ok(store.hold().await, "placed"), Some(placed));
    assert!(ok(store.release_hold(T0 + 6, "ops", None).await, "release"));
    assert!(!ok(store.release_hold(T0 + 7, "ops", None).await, "release again"));
    assert_eq!(ok(store.hold().await, "released"), None);
    // The operator's reason is kept with the hold.
    let placed = ok(store.place_hold(T0 + 8, "ops", Some("restored from last night's backup")).await, "place");
    assert_eq!(placed.reason.as_deref(), Some("restored from last night's backup"));
    assert!(ok(store.release_hold(T0 + 9, "ops", Some("reviewed")).await, "release with a reason"));
}

pub(crate) async fn receipts_are_claimed_on_held_runs_and_alone_in_recovery(store: &Store) {
    let wf = workflow();
    for n in 1..=2 {
        admit(store, &wf, &run_id(n), T0).await;
    }
    // Run 2 asks for a receipt (as a reconcile would), then a hold is placed on it.
    let ask = |snapshot: &[u8]| -> Result<Decision, String> {
        let run = decode(snapshot)?;
        let actions = vec![Action::RequestReceipt { step: "send-notice".into() }];
        Ok(with_actions(&run, actions))
    };
    ok(store.apply(&run_id(2), T0 + 1, ask).await, "receipt requested");
    ok(store.apply(&run_id(2), T0 + 2, deciding(&wf, &Event::RestoreHoldPlaced, T0 + 2)).await, "hold");

    assert_eq!(super::next_due(store, WorkScope::ReceiptsOnly).await, Some(T0 + 1));
    let receipts = ok(store.claim_work_in(WorkScope::ReceiptsOnly, T0 + 3, "r", LEASE_MS, 10).await, "receipts");
    let got: Vec<_> = receipts.iter().map(|w| (w.run_id.clone(), w.kind)).collect();
    assert_eq!(got, vec![(run_id(2), WorkKind::Receipt)], "only the receipt, though its run is held");
    assert_eq!(super::next_due(store, WorkScope::ReceiptsOnly).await, Some(T0 + 3 + LEASE_MS + 1));

    let all = ok(store.claim_work(T0 + 3, "w", LEASE_MS, 10).await, "everything else");
    let got: Vec<_> = all.iter().map(|w| (w.run_id.clone(), w.kind)).collect();
    assert_eq!(got, vec![(run_id(1), WorkKind::Attempt)], "the held run's attempt is not claimed");
}

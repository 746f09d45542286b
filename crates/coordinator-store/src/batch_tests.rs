//! The group commit's unit tests: which decisions' writes `batch` may group
//! (a statement per kind of write) and which must keep their order.

use coordinator_core::machine::action::Action;
use coordinator_core::machine::event::Timer;
use coordinator_core::machine::time::Instant;

use super::*;
use crate::types::WorkKind;

fn all(actions: &[Action]) -> Vec<Write<'_>> {
    decision_writes(actions, &[], &[])
}

#[test]
fn a_retry_deletes_the_old_attempt_before_queueing_the_next() {
    let retry = [
        Action::Dispatch { step: "s".into(), attempt: 2, not_before: Instant(5) },
        Action::Dispatch { step: "t".into(), attempt: 1, not_before: Instant(5) },
    ];
    assert_eq!(groupable(&all(&retry)).ok(), Some(true));
    let finish_then_queue = [
        Write::FinishWork { step: "s", kind: WorkKind::Attempt, attempt: Some(1) },
        Write::QueueWork { step: "s", kind: WorkKind::Attempt, attempt: 2, not_before: None, lane: None, conn: None },
    ];
    assert_eq!(groupable(&finish_then_queue).ok(), Some(true), "deletes run first anyway");
}

#[test]
fn a_row_written_after_it_was_inserted_keeps_its_order() {
    let queue_then_finish = [
        Write::QueueWork { step: "s", kind: WorkKind::Receipt, attempt: 0, not_before: None, lane: None, conn: None },
        Write::FinishWork { step: "s", kind: WorkKind::Receipt, attempt: None },
    ];
    assert_eq!(groupable(&queue_then_finish).ok(), Some(false));
    let timer = Timer::RunDeadline;
    let twice = [Write::SetTimer { timer: &timer, due_at: 1 }, Write::SetTimer { timer: &timer, due_at: 2 }];
    assert_eq!(groupable(&twice).ok(), Some(false), "an insert twice would hit ON CONFLICT twice");
    let ended_after_insert = [Write::SetTimer { timer: &timer, due_at: 1 }, Write::EndWork];
    assert_eq!(groupable(&ended_after_insert).ok(), Some(false));
    let ended_first = [Write::EndWork, Write::CloseWait { step: "w" }];
    assert_eq!(groupable(&ended_first).ok(), Some(true));
}

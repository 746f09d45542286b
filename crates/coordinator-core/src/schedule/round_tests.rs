use super::*;

const S: i64 = 1000;

fn every_30s() -> Calendar {
    Calendar::interval(30, 0).unwrap_or_else(|e| panic!("{e}"))
}

fn rules(calendar: &Calendar, overlap: Overlap) -> Rules<'_> {
    Rules { calendar, overlap, catch_up_ms: 100 * S }
}

fn idle(next_at: i64) -> Standing {
    Standing { next_at: Some(next_at), pending_at: None, previous_running: false }
}

/// Every move until none is left, with the standing after the last.
fn all_moves(rules: Rules<'_>, mut standing: Standing, now: i64) -> (Vec<Move>, Standing) {
    let mut moves = Vec::new();
    while let Some((m, after)) = next_move(rules, standing, now) {
        moves.push(m);
        standing = after;
        assert!(moves.len() < 1000, "no end: {moves:?}");
    }
    (moves, standing)
}

#[test]
fn nothing_is_due_before_the_next_instant() {
    let calendar = every_30s();
    assert_eq!(next_move(rules(&calendar, Overlap::Allow), idle(60 * S), 59_999), None);
}

#[test]
fn a_due_instant_fires_and_the_next_one_is_stored() {
    let calendar = every_30s();
    let (moves, after) = all_moves(rules(&calendar, Overlap::Skip), idle(60 * S), 61 * S);
    assert_eq!(moves, vec![Move::Fire { at: 60 * S }]);
    assert_eq!(after, Standing { next_at: Some(90 * S), pending_at: None, previous_running: true });
}

#[test]
fn missed_instants_within_the_window_fire_oldest_first_and_older_ones_are_skipped() {
    let calendar = every_30s();
    // Stopped from 0 to 400 s; the window is the last 100 s: 300, 330, 360, 390 fire.
    let (moves, after) = all_moves(rules(&calendar, Overlap::Allow), idle(30 * S), 400 * S);
    let skip = Move::Skip { first: 30 * S, last: 270 * S, count: 9, more: false, why: SkipReason::CatchUp };
    let fires = [300, 330, 360, 390].map(|t| Move::Fire { at: t * S });
    assert_eq!(moves.first(), Some(&skip));
    assert_eq!(&moves[1..], &fires);
    assert_eq!(after.next_at, Some(420 * S));
}

#[test]
fn skip_fires_the_first_and_skips_what_comes_while_it_runs() {
    let calendar = every_30s();
    let (moves, after) = all_moves(rules(&calendar, Overlap::Skip), idle(300 * S), 365 * S);
    let skipped = |t: i64| Move::Skip { first: t * S, last: t * S, count: 1, more: false, why: SkipReason::Overlap };
    assert_eq!(moves, vec![Move::Fire { at: 300 * S }, skipped(330), skipped(360)]);
    assert_eq!(after.next_at, Some(390 * S));
}

#[test]
fn one_pending_holds_one_instant_and_fires_it_when_the_previous_run_ends() {
    let calendar = every_30s();
    let running = Standing { next_at: Some(300 * S), pending_at: None, previous_running: true };
    let (moves, held) = all_moves(rules(&calendar, Overlap::OnePending), running, 365 * S);
    let skipped = |t: i64| Move::Skip { first: t * S, last: t * S, count: 1, more: false, why: SkipReason::Pending };
    assert_eq!(moves, vec![Move::Hold { at: 300 * S }, skipped(330), skipped(360)]);
    assert_eq!(held.pending_at, Some(300 * S));
    // The previous run ends: the pending instant fires, with its own nominal instant.
    let ended = Standing { previous_running: false, ..held };
    let (moves, after) = all_moves(rules(&calendar, Overlap::OnePending), ended, 366 * S);
    assert_eq!(moves, vec![Move::Fire { at: 300 * S }]);
    assert_eq!(after, Standing { next_at: Some(390 * S), pending_at: None, previous_running: true });
}

#[test]
fn allow_fires_every_instant_while_the_previous_run_goes_on() {
    let calendar = every_30s();
    let running = Standing { next_at: Some(300 * S), pending_at: None, previous_running: true };
    let (moves, _) = all_moves(rules(&calendar, Overlap::Allow), running, 360 * S);
    assert_eq!(moves, [300, 330, 360].map(|t| Move::Fire { at: t * S }).to_vec());
}

#[test]
fn a_gap_too_long_to_count_is_skipped_at_once_and_says_so() {
    let calendar = Calendar::interval(10, 0).unwrap_or_else(|e| panic!("{e}"));
    let now = 10 * S * (MOST_COUNTED as i64 + 50);
    let (moves, after) =
        all_moves(Rules { calendar: &calendar, overlap: Overlap::Skip, catch_up_ms: 0 }, idle(10 * S), now);
    match moves.first() {
        Some(Move::Skip { count, more, why, .. }) => {
            assert_eq!((*count, *more, *why), (MOST_COUNTED, true, SkipReason::CatchUp));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(moves.get(1), Some(&Move::Fire { at: now }));
    assert_eq!(after.next_at, Some(now + 10 * S));
}

#[test]
fn a_calendar_with_no_more_instants_stops() {
    let calendar = every_30s();
    let done = Standing { next_at: None, pending_at: None, previous_running: false };
    assert_eq!(next_move(rules(&calendar, Overlap::Allow), done, i64::MAX), None);
}

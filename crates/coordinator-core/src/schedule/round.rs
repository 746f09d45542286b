//! What a schedule does next, given where it stands and the time: fire an
//! instant, hold it pending, or skip some — one move at a time, so the
//! service persists each before it takes the next (a crash between them
//! repeats at most the move in hand, and a repeated firing meets its
//! idempotency key). Pure: the caller brings `now` and whether the
//! schedule's previous run has ended.

use crate::model::workflow::Overlap;

use super::Calendar;

/// The most instants one skip counts; a longer gap says "at least".
pub const MOST_COUNTED: u64 = 100_000;

/// Where a schedule stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// The next nominal instant not yet fired or skipped (ms); `None` when
    /// the calendar has no more.
    pub next_at: Option<i64>,
    /// An instant held back by `one-pending` until the previous run ends.
    pub pending_at: Option<i64>,
    /// Whether the schedule's last run has not ended yet.
    pub previous_running: bool,
}

/// Why instants were skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Older than the catch-up window when a process came to them.
    CatchUp,
    /// `overlap: skip` and the previous run had not ended.
    Overlap,
    /// `overlap: one-pending` and an instant was pending already.
    Pending,
}

impl SkipReason {
    /// The words a journal line uses.
    #[must_use]
    pub fn words(self) -> &'static str {
        match self {
            SkipReason::CatchUp => "older than the catch-up window",
            SkipReason::Overlap => "the previous run had not ended (overlap: skip)",
            SkipReason::Pending => "an instant was pending already (overlap: one-pending)",
        }
    }
}

/// One move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// Admit the run of nominal instant `at`.
    Fire {
        /// The nominal instant.
        at: i64,
    },
    /// Keep instant `at` pending until the previous run ends.
    Hold {
        /// The nominal instant.
        at: i64,
    },
    /// Skip `count` instants from `first` to `last`.
    Skip {
        /// The first skipped instant.
        first: i64,
        /// The last skipped instant.
        last: i64,
        /// How many (at most [`MOST_COUNTED`]; `more` says there were more).
        count: u64,
        /// Whether the count stopped at [`MOST_COUNTED`].
        more: bool,
        /// Why.
        why: SkipReason,
    },
}

/// The rules of one schedule.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// When it fires.
    pub calendar: &'a Calendar,
    /// What happens while its previous run has not ended.
    pub overlap: Overlap,
    /// How old (ms) a missed instant may be and still fire.
    pub catch_up_ms: i64,
}

/// The next move at `now` and where the schedule stands after it; `None`
/// when there is nothing to do until a later time (or the previous run ends).
#[must_use]
pub fn next_move(rules: Rules<'_>, standing: Standing, now: i64) -> Option<(Move, Standing)> {
    if let Some(at) = standing.pending_at
        && !standing.previous_running
    {
        let after = Standing { pending_at: None, previous_running: true, ..standing };
        return Some((Move::Fire { at }, after));
    }
    let at = standing.next_at.filter(|at| *at <= now)?;
    let window_start = now.saturating_sub(rules.catch_up_ms);
    if at < window_start {
        return Some(skip_old(rules.calendar, standing, at, window_start));
    }
    let following = rules.calendar.next_after(at);
    let moved = Standing { next_at: following, ..standing };
    let single = |why| Move::Skip { first: at, last: at, count: 1, more: false, why };
    if !standing.previous_running {
        return Some((Move::Fire { at }, Standing { previous_running: true, ..moved }));
    }
    Some(match rules.overlap {
        Overlap::Allow => (Move::Fire { at }, moved),
        Overlap::Skip => (single(SkipReason::Overlap), moved),
        Overlap::OnePending if standing.pending_at.is_none() => {
            (Move::Hold { at }, Standing { pending_at: Some(at), ..moved })
        }
        Overlap::OnePending => (single(SkipReason::Pending), moved),
    })
}

/// Skips every instant from `first` up to (not including) `window_start`.
fn skip_old(calendar: &Calendar, standing: Standing, first: i64, window_start: i64) -> (Move, Standing) {
    let mut last = first;
    let mut count: u64 = 1;
    let mut more = false;
    loop {
        match calendar.next_after(last) {
            Some(next) if next < window_start => {
                if count == MOST_COUNTED {
                    more = true;
                    // Jump to the window: whatever lies between is skipped too.
                    let resume = calendar.next_after(window_start.saturating_sub(1));
                    let skip = Move::Skip { first, last, count, more, why: SkipReason::CatchUp };
                    return (skip, Standing { next_at: resume, ..standing });
                }
                last = next;
                count += 1;
            }
            following => {
                let skip = Move::Skip { first, last, count, more, why: SkipReason::CatchUp };
                return (skip, Standing { next_at: following, ..standing });
            }
        }
    }
}

#[cfg(test)]
#[path = "round_tests.rs"]
mod tests;

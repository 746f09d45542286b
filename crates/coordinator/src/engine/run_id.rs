//! Run ids (docs/internals/engine.md#storage-and-partitions,
//! docs/reference/runs.md#admission): UUIDv7, generated at admission or
//! supplied by the client. A supplied id must be a UUIDv7 whose timestamp lies
//! within the last 24 hours and not more than 1 hour ahead of the coordinator's
//! clock, so ids stay roughly ordered by admission and cannot be minted far
//! ahead.

use uuid::Uuid;

/// How far back a supplied id's timestamp may lie.
pub const MAX_AGE_MS: i64 = 24 * 60 * 60 * 1000;
/// How far ahead a supplied id's timestamp may lie.
pub const MAX_AHEAD_MS: i64 = 60 * 60 * 1000;

/// Why a supplied run id is refused (`run-id.invalid`). Says what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunIdProblem {
    /// Not a UUID in its hyphenated text form.
    #[error("runId is not a UUID in its hyphenated form (xxxxxxxx-xxxx-7xxx-xxxx-xxxxxxxxxxxx)")]
    NotAUuid,
    /// A UUID of another version.
    #[error("runId is a version {0} UUID; it must be a UUIDv7 (time-ordered)")]
    NotVersion7(usize),
    /// The timestamp is too old.
    #[error("runId's timestamp is more than 24 hours in the past; generate a fresh UUIDv7")]
    TooOld,
    /// The timestamp is too far ahead.
    #[error("runId's timestamp is more than 1 hour ahead of the coordinator's clock; check the client's clock")]
    TooFarAhead,
}

/// A fresh UUIDv7 run id.
pub fn generate() -> String {
    Uuid::now_v7().to_string()
}

/// A run id as the store keeps it: a UUID in any spelling (upper case, say)
/// as its lowercase hyphenated text; other text as given (it names no run).
pub fn canonical(text: &str) -> String {
    Uuid::try_parse(text).map_or_else(|_| text.to_owned(), |id| id.hyphenated().to_string())
}

/// Checks a client-supplied run id against the clock `now_ms`; returns its canonical (lowercase) text.
///
/// # Errors
/// [`RunIdProblem`] naming what is wrong.
pub fn validate(text: &str, now_ms: i64) -> Result<String, RunIdProblem> {
    let is_hyphenated = text.len() == 36 && text.chars().filter(|c| *c == '-').count() == 4;
    let id = Uuid::try_parse(text).ok().filter(|_| is_hyphenated).ok_or(RunIdProblem::NotAUuid)?;
    if id.get_version_num() != 7 {
        return Err(RunIdProblem::NotVersion7(id.get_version_num()));
    }
    let Some((secs, nanos)) = id.get_timestamp().map(|t| t.to_unix()) else { return Err(RunIdProblem::NotAUuid) };
    let at = i64::try_from(secs).unwrap_or(i64::MAX).saturating_mul(1000).saturating_add(i64::from(nanos / 1_000_000));
    if at < now_ms.saturating_sub(MAX_AGE_MS) {
        return Err(RunIdProblem::TooOld);
    }
    if at > now_ms.saturating_add(MAX_AHEAD_MS) {
        return Err(RunIdProblem::TooFarAhead);
    }
    Ok(id.hyphenated().to_string())
}

#[cfg(test)]
mod tests {
    use uuid::{NoContext, Timestamp, Uuid};

    use super::*;

    const NOW: i64 = 1_791_968_400_000;

    fn v7_at(ms: i64) -> String {
        let secs = u64::try_from(ms / 1000).unwrap_or_default();
        let nanos = u32::try_from((ms % 1000) * 1_000_000).unwrap_or_default();
        Uuid::new_v7(Timestamp::from_unix(NoContext, secs, nanos)).to_string()
    }

    #[test]
    fn a_fresh_v7_is_accepted_and_canonicalised() {
        let id = v7_at(NOW - 1000);
        assert_eq!(validate(&id.to_uppercase(), NOW), Ok(id));
        assert_eq!(validate(&v7_at(NOW - MAX_AGE_MS + 1000), NOW).map(|_| ()), Ok(()));
        assert_eq!(validate(&v7_at(NOW + MAX_AHEAD_MS - 1000), NOW).map(|_| ()), Ok(()));
    }

    #[test]
    fn other_ids_are_refused_with_the_reason() {
        assert_eq!(validate("run-1", NOW), Err(RunIdProblem::NotAUuid));
        let simple = v7_at(NOW).replace('-', "");
        assert_eq!(validate(&simple, NOW), Err(RunIdProblem::NotAUuid));
        assert_eq!(validate("6ba7b810-9dad-41d1-80b4-00c04fd430c8", NOW), Err(RunIdProblem::NotVersion7(4)));
        assert_eq!(validate(&v7_at(NOW - MAX_AGE_MS - 1000), NOW), Err(RunIdProblem::TooOld));
        assert_eq!(validate(&v7_at(NOW + MAX_AHEAD_MS + 1000), NOW), Err(RunIdProblem::TooFarAhead));
    }
}

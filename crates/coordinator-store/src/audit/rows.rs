//! The journal's rows (migration 0017): one row holds a decision's entries
//! for one run, up to [`GROUP_MAX`]. The first entry lives in the row's own
//! columns (`position` and `hash` are that entry's); the others, in order, in
//! `more`, a JSON array of `[kind, step, detail, hash]` (`hash` null while the
//! row is pending), at the positions right after the row's. The entries of a
//! row share its run, instant and actor. A row with `more` NULL holds one
//! entry, as every row written before the migration does. A row's hashes
//! (its `hash` column and those in `more`) are their 32 bytes in unpadded
//! URL-safe base64 (43 characters, not the 64 hex digits the chain and the
//! API use; [`compact`]); one of 64 hex digits (written before) reads as it is.
//!
//! Why: a 3-call run writes about twelve entries in four or five decisions;
//! a row per entry cost a heap tuple and two index entries each, the largest
//! share of the journal's WAL (bench/RESULTS.md, twelfth sitting). Readers
//! explode rows into entries here, so nothing above the store sees rows.

use std::borrow::Cow;
use std::ops::Range;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use coordinator_core::audit::{Entry, Head};

use super::Line;
use crate::StoreError;
use crate::db::Row;

/// The most entries one row holds: a reader looking for position `p` finds
/// it in a row starting after `p - GROUP_MAX`.
pub(crate) const GROUP_MAX: usize = 64;
/// [`GROUP_MAX`] as a position offset.
pub(crate) const GROUP_SPAN: i64 = GROUP_MAX as i64;

/// One of a row's later entries as written: kind, step, detail, hash ([`compact`]).
type LaterOut<'a> = (&'a str, Option<&'a str>, &'a str, Option<Cow<'a, str>>);
/// One of a row's later entries as read back.
type LaterIn = (String, Option<String>, String, Option<String>);

/// A hash as `more` holds it: a hash of 64 lowercase hex digits (what the
/// chain computes) as its bytes in base64, anything else as it is.
pub(crate) fn compact(hash: &str) -> Cow<'_, str> {
    match hex::decode(hash) {
        Ok(bytes) if bytes.len() == 32 && hex::encode(&bytes) == hash => Cow::Owned(URL_SAFE_NO_PAD.encode(bytes)),
        _ => Cow::Borrowed(hash),
    }
}

/// A hash read from `more`: [`compact`]'s base64 back to hex; anything else
/// (64 hex digits written before, or an edit) as it is.
fn expanded(hash: String) -> String {
    if hash.len() != 43 {
        return hash;
    }
    match URL_SAFE_NO_PAD.decode(&hash) {
        Ok(bytes) if bytes.len() == 32 => hex::encode(bytes),
        _ => hash,
    }
}

/// The rows `entries` make, as ranges of it: each a run's consecutive
/// lines, at most [`GROUP_MAX`], in the order given.
pub(crate) fn groups(entries: &[(Option<&str>, &Line<'_>)]) -> Vec<Range<usize>> {
    let mut rows: Vec<Range<usize>> = Vec::new();
    for (i, (run, _)) in entries.iter().enumerate() {
        match rows.last_mut() {
            Some(row) if row.len() < GROUP_MAX && entries[row.start].0 == *run => row.end = i + 1,
            _ => rows.push(i..i + 1),
        }
    }
    rows
}

/// `more` for a row of `lines` (`None` for one line), with each later
/// line's hash when the row is chained.
pub(crate) fn more(
    lines: &[(Option<&str>, &Line<'_>)],
    hashes: Option<&[String]>,
) -> Result<Option<String>, StoreError> {
    if lines.len() < 2 {
        return Ok(None);
    }
    let later: Vec<LaterOut<'_>> = lines
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, (_, l))| {
            (l.kind, l.step.as_deref(), l.detail.as_ref(), hashes.and_then(|h| h.get(i)).map(|h| compact(h)))
        })
        .collect();
    serde_json::to_string(&later).map(Some).map_err(|e| StoreError::Corrupt(format!("audit row: {e}")))
}

/// The pending rows `entries` make ([`groups`]): each row's first line, and
/// its `more` (no hashes yet), in the order given.
pub(crate) type Pending<'e, 'l> = (Vec<(Option<&'e str>, &'e Line<'l>)>, Vec<Option<String>>);

/// [`Pending`] rows of `entries`.
pub(crate) fn pending<'e, 'l>(entries: &[(Option<&'e str>, &'e Line<'l>)]) -> Result<Pending<'e, 'l>, StoreError> {
    let groups = groups(entries);
    let firsts = groups.iter().map(|g| entries[g.start]).collect();
    let mores = groups.iter().map(|g| more(&entries[g.clone()], None)).collect::<Result<_, _>>()?;
    Ok((firsts, mores))
}

/// A row's later entries. `more` that is not what the coordinator writes
/// (edited in the database) reads as none: the positions it held are then a
/// gap, which verification reports.
pub(crate) fn later(more: Option<&str>) -> Vec<LaterIn> {
    let later: Vec<LaterIn> = more.and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default();
    later.into_iter().map(|(kind, step, detail, hash)| (kind, step, detail, hash.map(expanded))).collect()
}

/// `more` with each later entry's hash filled in (sealing a pending row).
pub(crate) fn sealed_more(later: &[LaterIn], hashes: &[String]) -> Result<Option<String>, StoreError> {
    if later.is_empty() {
        return Ok(None);
    }
    let rows: Vec<LaterOut<'_>> = later
        .iter()
        .zip(hashes)
        .map(|((kind, step, detail, _), hash)| (kind.as_str(), step.as_deref(), detail.as_str(), Some(compact(hash))))
        .collect();
    serde_json::to_string(&rows).map(Some).map_err(|e| StoreError::Corrupt(format!("audit row: {e}")))
}

/// The entries of a row read as `position, run_id, at, kind, step, actor,
/// detail, prev_hash, hash, more`, each with whether it carries its
/// `prev_hash` (rows written before migration 14 do; `link` fills in the
/// others). A hash missing reads as empty: the entry shows as tampered with.
pub(crate) fn entries(row: &Row) -> Result<Vec<(Entry, bool)>, StoreError> {
    let prev_hash: Option<String> = row.get(7)?;
    let stored = prev_hash.is_some();
    let first = Entry {
        position: row.get(0)?,
        run_id: row.get(1)?,
        at: row.get(2)?,
        kind: row.get(3)?,
        step: row.get(4)?,
        actor: row.get(5)?,
        detail: row.get(6)?,
        prev_hash: prev_hash.unwrap_or_default(),
        hash: row.get::<Option<String>>(8)?.map(expanded).unwrap_or_default(),
    };
    let more: Option<String> = row.get(9)?;
    let mut all = Vec::with_capacity(1);
    let (run_id, at, actor) = (first.run_id.clone(), first.at, first.actor.clone());
    let start = first.position;
    all.push((first, stored));
    for (position, (kind, step, detail, hash)) in (1..).map(|k| start.saturating_add(k)).zip(later(more.as_deref())) {
        let entry = Entry {
            position,
            run_id: run_id.clone(),
            at,
            kind,
            step,
            actor: actor.clone(),
            detail,
            prev_hash: String::new(),
            hash: hash.unwrap_or_default(),
        };
        all.push((entry, false));
    }
    Ok(all)
}

/// The hash of the entry at `position` in a row starting at `first` (its
/// own `hash` and `more`); `None` when the row does not reach it.
pub(crate) fn hash_in_row(first: i64, hash: Option<String>, more: Option<&str>, position: i64) -> Option<String> {
    match usize::try_from(position.checked_sub(first)?).ok()? {
        0 => hash.map(expanded),
        k => later(more).into_iter().nth(k - 1).and_then(|(.., hash)| hash),
    }
}

/// The last entry of a row starting at `first`, as a head.
pub(crate) fn last_in_row(first: i64, hash: Option<String>, more: Option<&str>) -> Head {
    let later = later(more);
    let position = first.saturating_add(i64::try_from(later.len()).unwrap_or(0));
    let hash = match later.into_iter().last() {
        Some((.., hash)) => hash,
        None => hash.map(expanded),
    };
    Head { position, hash: hash.unwrap_or_default() }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn line(detail: &str) -> Line<'_> {
        Line { kind: "note", step: None, detail: Cow::Borrowed(detail) }
    }

    #[test]
    fn a_runs_consecutive_lines_are_one_row_of_at_most_group_max() {
        let (a, b) = (line("a"), line("b"));
        let entries = [(Some("r1"), &a), (Some("r1"), &b), (Some("r2"), &a), (None, &b), (None, &a), (Some("r1"), &a)];
        assert_eq!(groups(&entries), vec![0..2, 2..3, 3..5, 5..6]);
        let many: Vec<(Option<&str>, &Line<'_>)> = (0..GROUP_MAX * 2 + 1).map(|_| (Some("r1"), &a)).collect();
        assert_eq!(groups(&many), vec![0..GROUP_MAX, GROUP_MAX..2 * GROUP_MAX, 2 * GROUP_MAX..2 * GROUP_MAX + 1]);
        assert!(groups(&[]).is_empty());
    }

    #[test]
    fn more_holds_the_later_lines_and_reads_back() {
        let (a, b, c) = (line("a"), line("b"), line("c \"quoted\""));
        let entries = [(Some("r1"), &a), (Some("r1"), &b), (Some("r1"), &c)];
        assert_eq!(more(&entries[..1], None).ok().flatten(), None, "one line: no more");
        let pending = more(&entries, None).ok().flatten();
        let read = later(pending.as_deref());
        assert_eq!(
            read.iter().map(|l| (l.2.as_str(), l.3.clone())).collect::<Vec<_>>(),
            vec![("b", None), ("c \"quoted\"", None)]
        );
        let hashes = ["h0".to_owned(), "h1".to_owned(), "h2".to_owned()];
        let chained = more(&entries, Some(&hashes)).ok().flatten();
        assert_eq!(
            chained,
            sealed_more(&read, &hashes[1..]).ok().flatten(),
            "sealing a pending row writes what chaining at once does"
        );
        assert_eq!(hash_in_row(7, Some("h0".into()), chained.as_deref(), 7), Some("h0".into()));
        assert_eq!(hash_in_row(7, Some("h0".into()), chained.as_deref(), 9), Some("h2".into()));
        assert_eq!(hash_in_row(7, Some("h0".into()), chained.as_deref(), 10), None);
        assert_eq!(hash_in_row(7, Some("h0".into()), chained.as_deref(), 6), None);
        assert_eq!(last_in_row(7, Some("h0".into()), chained.as_deref()), Head { position: 9, hash: "h2".into() });
        assert_eq!(last_in_row(7, Some("h0".into()), None), Head { position: 7, hash: "h0".into() });
    }

    #[test]
    fn more_holds_a_chained_hash_in_43_characters_and_reads_it_back_in_hex() {
        let (a, b) = (line("a"), line("b"));
        let entries = [(Some("r1"), &a), (Some("r1"), &b)];
        let hash = "0123456789abcdef".repeat(4);
        let hashes = [hash.clone(), hash.clone()];
        let chained = more(&entries, Some(&hashes)).ok().flatten().unwrap_or_default();
        let raw: Vec<LaterIn> = serde_json::from_str(&chained).unwrap_or_default();
        assert_eq!(raw.first().and_then(|l| l.3.as_ref()).map(String::len), Some(43), "{chained}");
        assert_eq!(later(Some(&chained)).first().and_then(|l| l.3.clone()), Some(hash.clone()));
        // Written before (hex), or anything else (an edit): read as it is.
        let hex = format!(r#"[["note",null,"b","{hash}"]]"#);
        assert_eq!(later(Some(&hex)).first().and_then(|l| l.3.clone()), Some(hash.clone()));
        let upper = hash.to_uppercase();
        assert_eq!(compact(&upper), upper.as_str(), "not the chain's spelling: kept");
        assert_eq!(expanded("edited".into()), "edited");
    }

    #[test]
    fn an_edited_more_that_does_not_parse_reads_as_no_later_entries() {
        assert!(later(Some("[[\"note\", null")).is_empty());
        assert!(later(Some("{}")).is_empty());
        assert_eq!(last_in_row(3, Some("h".into()), Some("not json")), Head { position: 3, hash: "h".into() });
    }
}

//! The audit journal's hash chain
//! (docs/reference/protection.md#the-audit-journal): the canonical encoding of
//! an entry, its hash, and verification of a journal read back.
//!
//! Every entry has a chain **position** (1, 2, 3, … with no gap, in the order
//! the store sealed entries into the chain), the hash of the entry before it
//! (`prevHash`; the first entry's is [`GENESIS`]) and its own `hash`:
//!
//! ```text
//! hash = lowercase hex SHA-256( "coordinator.audit.v1\n" ‖ JCS({position, runId, at, kind, step, actor, detail, prevHash}) )
//! ```
//!
//! where JCS is the RFC 8785 canonical JSON of the object (absent values are
//! `null`, `at` is milliseconds since the epoch). The store computes it when
//! it seals the entry, shortly after the transaction that wrote it; any
//! client recomputes it with [`Verifier`] (or [`verify`]) from the entries
//! alone, so `coordinatorctl` needs no database code. Editing an entry breaks
//! its hash, deleting one leaves a gap, reordering breaks the hashes (each
//! covers its position), and an edit whose hash was recomputed breaks the
//! next entry's `prevHash`. The journal's recorded head (last position and
//! hash) catches a truncated tail. Rewriting the whole tail *and* the head is
//! only caught against a head recorded elsewhere before (an anchor): print it
//! with `audit verify`. An entry edited before it was sealed is chained as
//! edited: the chain protects entries from their sealing on.
//!
//! Pure: no IO, no clock.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The `prevHash` of the first entry (and the hash of the empty journal's head).
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The domain-separation prefix hashed before each entry's canonical JSON.
const DOMAIN: &[u8] = b"coordinator.audit.v1\n";

/// What an entry records, before it is chained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Content<'a> {
    /// The run it concerns; `None` for a deployment-level entry.
    pub run_id: Option<&'a str>,
    /// When, in milliseconds since the epoch.
    pub at: i64,
    /// The kind (`admission`, `decision`, `dispatch`, `classification`, `operator`, `hold`, `activation`).
    pub kind: &'a str,
    /// The step it concerns.
    pub step: Option<&'a str>,
    /// The authenticated subject who caused it; `None` when the coordinator did.
    pub actor: Option<&'a str>,
    /// A description without protected payload.
    pub detail: &'a str,
}

/// One chained entry, as the store keeps it and `GET /v1/audit` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The chain position (1-based, no gaps, in the order entries were sealed).
    pub position: i64,
    /// The run; `None` for a deployment-level entry.
    pub run_id: Option<String>,
    /// When, in milliseconds since the epoch.
    pub at: i64,
    /// The kind.
    pub kind: String,
    /// The step.
    pub step: Option<String>,
    /// Who caused it (`None`: the coordinator).
    pub actor: Option<String>,
    /// The description.
    pub detail: String,
    /// The hash of the entry before (or [`GENESIS`]).
    pub prev_hash: String,
    /// This entry's hash.
    pub hash: String,
}

/// The journal's head: the last position and its hash (`0` and [`GENESIS`] when empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// The last position.
    pub position: i64,
    /// The last entry's hash.
    pub hash: String,
}

impl Head {
    /// The head of an empty journal.
    pub fn genesis() -> Head {
        Head { position: 0, hash: GENESIS.to_owned() }
    }
}

/// The object an entry's hash covers, its members declared in RFC 8785's
/// order (keys sorted by UTF-16 code units). With only strings, nulls and
/// integers of at most 2^53 in magnitude, `serde_json`'s compact encoding
/// of it IS the JCS encoding (the same escapes: `\"`, `\\`, `\b \f \n \r
/// \t`, lowercase `\u00xx` for the other control characters, the rest as
/// UTF-8; such integers print alike as integers and as doubles), written
/// without building a JSON value or sorting at run time. Larger integers
/// take the canonicalizer (JCS prints them as the nearest double). The tests
/// hold the two to each other byte for byte.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Hashed<'a> {
    actor: Option<&'a str>,
    at: i64,
    detail: &'a str,
    kind: &'a str,
    position: i64,
    prev_hash: &'a str,
    run_id: Option<&'a str>,
    step: Option<&'a str>,
}

/// The largest integer magnitude a double holds exactly (2^53).
const EXACT_IN_DOUBLE: u64 = 1 << 53;

/// The hash of an entry with `content` at `position` after `prev_hash`.
pub fn hash(position: i64, content: &Content<'_>, prev_hash: &str) -> String {
    let object = Hashed {
        actor: content.actor,
        at: content.at,
        detail: content.detail,
        kind: content.kind,
        position,
        prev_hash,
        run_id: content.run_id,
        step: content.step,
    };
    // Only strings and integers: encoding cannot fail; an empty encoding
    // would still hash to something no honest entry has.
    let canonical = if content.at.unsigned_abs() <= EXACT_IN_DOUBLE && position.unsigned_abs() <= EXACT_IN_DOUBLE {
        serde_json::to_vec(&object).unwrap_or_default()
    } else {
        serde_json_canonicalizer::to_vec(&object).unwrap_or_default()
    };
    let mut hasher = Sha256::new();
    hasher.update(DOMAIN);
    hasher.update(&canonical);
    hex::encode(hasher.finalize())
}

impl Entry {
    /// The entry that follows `head` with `content`.
    pub fn chained(head: &Head, content: &Content<'_>) -> Entry {
        let position = head.position + 1;
        Entry {
            position,
            run_id: content.run_id.map(str::to_owned),
            at: content.at,
            kind: content.kind.to_owned(),
            step: content.step.map(str::to_owned),
            actor: content.actor.map(str::to_owned),
            detail: content.detail.to_owned(),
            prev_hash: head.hash.clone(),
            hash: hash(position, content, &head.hash),
        }
    }

    /// What the entry records.
    pub fn content(&self) -> Content<'_> {
        Content {
            run_id: self.run_id.as_deref(),
            at: self.at,
            kind: &self.kind,
            step: self.step.as_deref(),
            actor: self.actor.as_deref(),
            detail: &self.detail,
        }
    }

    /// The hash this entry's content, position and `prevHash` give.
    pub fn expected_hash(&self) -> String {
        hash(self.position, &self.content(), &self.prev_hash)
    }

    /// The head this entry makes.
    pub fn head(&self) -> Head {
        Head { position: self.position, hash: self.hash.clone() }
    }
}

/// What is wrong at a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The entry's content, position or `prevHash` does not give its hash: it was edited or moved.
    HashMismatch,
    /// The entry's `prevHash` is not the previous entry's hash: the previous entry was replaced.
    LinkBroken,
    /// No entry at this position, the next one found is at `next`: entries were deleted.
    Missing {
        /// The next position present.
        next: i64,
    },
    /// The entry comes after a later position: the journal is out of order.
    OutOfOrder,
    /// The journal ends before the position its head records: entries were deleted from the end.
    TailMissing {
        /// The head's position.
        head: i64,
    },
    /// The last entry's hash is not the one the head records.
    HeadMismatch,
    /// The entry lies beyond the head read with it.
    BeyondHead {
        /// The head's position.
        head: i64,
    },
}

/// The first place the chain is broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("position {position}: {}", describe(.problem))]
pub struct Tampering {
    /// The position.
    pub position: i64,
    /// What is wrong there.
    pub problem: Problem,
}

fn describe(problem: &Problem) -> String {
    match problem {
        Problem::HashMismatch => "the entry does not hash to its recorded hash (edited or moved)".into(),
        Problem::LinkBroken => {
            "the entry's prevHash is not the previous entry's hash (the previous entry was replaced)".into()
        }
        Problem::Missing { next } => format!("the entry is missing (the next one present is at {next})"),
        Problem::OutOfOrder => "the entry is out of order".into(),
        Problem::TailMissing { head } => {
            format!("the journal ends before its recorded head at position {head} (entries deleted from the end)")
        }
        Problem::HeadMismatch => "the last entry's hash is not the one the journal's head records".into(),
        Problem::BeyondHead { head } => format!("the entry lies beyond the journal's head at position {head}"),
    }
}

impl Problem {
    /// A stable short code for reports (`hash-mismatch`, `link-broken`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Problem::HashMismatch => "hash-mismatch",
            Problem::LinkBroken => "link-broken",
            Problem::Missing { .. } => "missing",
            Problem::OutOfOrder => "out-of-order",
            Problem::TailMissing { .. } => "tail-missing",
            Problem::HeadMismatch => "head-mismatch",
            Problem::BeyondHead { .. } => "beyond-head",
        }
    }
}

/// Checks a journal entry by entry, from position 1 (entries may arrive page by page).
#[derive(Debug, Clone)]
pub struct Verifier {
    start: Head,
    last: Head,
    checked: u64,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier::after(None)
    }
}

impl Verifier {
    /// A verifier at the start of the journal.
    pub fn new() -> Verifier {
        Verifier::default()
    }

    /// A verifier that starts after `checkpoint`, the last entry a retention
    /// cut removed: the first entry must follow it and link to its hash.
    /// `None`: the journal's start ([`Verifier::new`]).
    pub fn after(checkpoint: Option<Head>) -> Verifier {
        let start = checkpoint.unwrap_or_else(Head::genesis);
        Verifier { last: start.clone(), start, checked: 0 }
    }

    /// Checks the next entry: its position, its hash, its link to the one before.
    ///
    /// # Errors
    /// The first [`Tampering`] found.
    pub fn feed(&mut self, entry: &Entry) -> Result<(), Tampering> {
        let expected = self.last.position + 1;
        if entry.position < expected {
            return Err(Tampering { position: entry.position, problem: Problem::OutOfOrder });
        }
        if entry.position > expected {
            return Err(Tampering { position: expected, problem: Problem::Missing { next: entry.position } });
        }
        if entry.expected_hash() != entry.hash {
            return Err(Tampering { position: entry.position, problem: Problem::HashMismatch });
        }
        if entry.prev_hash != self.last.hash {
            return Err(Tampering { position: entry.position, problem: Problem::LinkBroken });
        }
        self.last = entry.head();
        self.checked += 1;
        Ok(())
    }

    /// Ends the check against the journal's recorded head.
    ///
    /// # Errors
    /// [`Problem::TailMissing`], [`Problem::HeadMismatch`] or [`Problem::BeyondHead`].
    pub fn finish(self, head: &Head) -> Result<Verified, Tampering> {
        let last = self.last.position;
        if head.position > last {
            return Err(Tampering { position: last + 1, problem: Problem::TailMissing { head: head.position } });
        }
        if head.position < last {
            return Err(Tampering {
                position: head.position + 1,
                problem: Problem::BeyondHead { head: head.position },
            });
        }
        if head.hash != self.last.hash {
            return Err(Tampering { position: last, problem: Problem::HeadMismatch });
        }
        Ok(Verified { checked: self.checked, head: self.last, start: self.start })
    }
}

/// A journal that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many entries were checked.
    pub checked: u64,
    /// The head they end at.
    pub head: Head,
    /// Where they start: the journal's start ([`Head::genesis`]) or a retention checkpoint.
    pub start: Head,
}

/// Verifies a whole journal (from position 1) against its recorded head.
///
/// # Errors
/// The first [`Tampering`] found.
pub fn verify<'a>(entries: impl IntoIterator<Item = &'a Entry>, head: &Head) -> Result<Verified, Tampering> {
    let mut verifier = Verifier::new();
    for entry in entries {
        verifier.feed(entry)?;
    }
    verifier.finish(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The hash as first defined: a JSON value canonicalized by RFC 8785's rules.
    fn reference_hash(position: i64, content: &Content<'_>, prev_hash: &str) -> String {
        let object = json!({
            "position": position,
            "runId": content.run_id,
            "at": content.at,
            "kind": content.kind,
            "step": content.step,
            "actor": content.actor,
            "detail": content.detail,
            "prevHash": prev_hash,
        });
        let canonical = serde_json_canonicalizer::to_vec(&object).unwrap_or_else(|e| panic!("{e}"));
        let mut hasher = Sha256::new();
        hasher.update(DOMAIN);
        hasher.update(&canonical);
        hex::encode(hasher.finalize())
    }

    #[test]
    fn the_hash_is_the_canonical_encodings_for_every_kind_of_text() {
        let mut texts: Vec<String> = (0u8..0x80).map(|b| format!("a{}b", char::from(b))).collect();
        texts.extend(["", "\"quoted\" \\ back", "é 𝄞 \u{2028}\u{2029} \u{7f} \u{fffd}", "/slash/"].map(str::to_owned));
        for (i, text) in texts.iter().enumerate() {
            let i = i64::try_from(i).unwrap_or_default();
            let contents = [
                Content { run_id: Some(text), at: -i, kind: text, step: Some(text), actor: Some(text), detail: text },
                Content {
                    run_id: None,
                    at: 1_700_000_000_000 + i,
                    kind: "decision",
                    step: None,
                    actor: None,
                    detail: text,
                },
            ];
            for content in contents {
                assert_eq!(hash(i, &content, text), reference_hash(i, &content, text), "{text:?}");
            }
        }
        // Integers about and beyond 2^53, where JCS prints the nearest double.
        let exact = i64::try_from(EXACT_IN_DOUBLE).unwrap_or_default();
        for n in [exact - 1, exact, exact + 1, -exact - 1, i64::MAX, i64::MIN] {
            let content = Content { run_id: None, at: n, kind: "decision", step: None, actor: None, detail: "d" };
            assert_eq!(hash(n, &content, GENESIS), reference_hash(n, &content, GENESIS), "{n}");
        }
        // Pinned: chains sealed before keep verifying (computed apart, with Python's sorted compact JSON).
        let detail = "answer \"ok\" \\ \u{1}\u{1f}\n\t é 𝄞 \u{2028}";
        let content = Content {
            run_id: Some("run-1"),
            at: 1_700_000_000_000,
            kind: "decision",
            step: Some("read-application"),
            actor: None,
            detail,
        };
        assert_eq!(
            hash(7, &content, &"ab".repeat(32)),
            "0f890e0ed14cadc9acd1719c26b91e275bac06dece097baa81a6699c4152916f"
        );
    }

    fn journal(n: i64) -> (Vec<Entry>, Head) {
        let mut head = Head::genesis();
        let mut entries = Vec::new();
        for i in 0..n {
            let detail = format!("entry {i}");
            let step = (i % 2 == 0).then_some("read-application");
            let content =
                Content { run_id: Some("run-1"), at: 1_000 + i, kind: "decision", step, actor: None, detail: &detail };
            let entry = Entry::chained(&head, &content);
            head = entry.head();
            entries.push(entry);
        }
        (entries, head)
    }

    fn broken(entries: &[Entry], head: &Head) -> (i64, &'static str) {
        match verify(entries, head) {
            Ok(v) => panic!("verified {v:?}"),
            Err(t) => (t.position, t.problem.code()),
        }
    }

    #[test]
    fn an_intact_journal_verifies() {
        let (entries, head) = journal(5);
        let verified = verify(&entries, &head).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((verified.checked, verified.head), (5, head));
        assert_eq!(entries[0].prev_hash, GENESIS);
        let empty: Vec<Entry> = Vec::new();
        assert!(verify(&empty, &Head::genesis()).is_ok());
    }

    #[test]
    fn the_hash_is_pinned() {
        let content = Content {
            run_id: Some("r"),
            at: 1,
            kind: "admission",
            step: None,
            actor: Some("ops"),
            detail: "run admitted",
        };
        let entry = Entry::chained(&Head::genesis(), &content);
        // Independently: sha256 of the prefix and the sorted, compact JSON (e.g. Python's json.dumps).
        assert_eq!(entry.hash, "b9c3e1f09023429ae79148bdd6ea50f2dd7da8c9ca8927caa73675614755879e");
        assert_ne!(entry.hash, hash(1, &Content { actor: None, ..content }, GENESIS), "the actor is covered");
        assert_ne!(entry.hash, hash(2, &content, GENESIS), "the position is covered");
    }

    #[test]
    fn an_edited_entry_is_found_at_its_position() {
        let (mut entries, head) = journal(5);
        entries[2].detail.push('!');
        assert_eq!(broken(&entries, &head), (3, "hash-mismatch"));
        let (mut entries, head) = journal(5);
        entries[1].actor = Some("mallory".into());
        assert_eq!(broken(&entries, &head), (2, "hash-mismatch"));
    }

    #[test]
    fn an_edit_with_a_recomputed_hash_breaks_the_next_link() {
        let (mut entries, head) = journal(5);
        entries[2].detail = "nothing happened".into();
        entries[2].hash = entries[2].expected_hash();
        assert_eq!(broken(&entries, &head), (4, "link-broken"));
    }

    #[test]
    fn a_deleted_entry_is_a_gap_or_a_missing_tail() {
        let (mut entries, head) = journal(5);
        entries.remove(1);
        assert_eq!(broken(&entries, &head), (2, "missing"));
        let (mut entries, head) = journal(5);
        entries.pop();
        assert_eq!(broken(&entries, &head), (5, "tail-missing"));
        let (mut entries, head) = journal(5);
        entries.remove(1);
        for e in entries.iter_mut().skip(1) {
            e.position -= 1;
        }
        assert_eq!(broken(&entries, &head), (2, "hash-mismatch"), "renumbering does not hide a deletion");
    }

    #[test]
    fn swapped_positions_break_the_first_of_them() {
        let (mut entries, head) = journal(5);
        let (a, b) = (entries[1].position, entries[3].position);
        entries[1].position = b;
        entries[3].position = a;
        entries.sort_by_key(|e| e.position);
        assert_eq!(broken(&entries, &head), (2, "hash-mismatch"));
        let (mut entries, head) = journal(5);
        entries.swap(1, 2);
        assert_eq!(broken(&entries, &head), (2, "missing"), "read in the wrong order");
    }

    #[test]
    fn the_head_must_match() {
        let (entries, mut head) = journal(3);
        head.hash = GENESIS.into();
        assert_eq!(broken(&entries, &head), (3, "head-mismatch"));
        let (entries, _) = journal(3);
        assert_eq!(broken(&entries, &Head { position: 2, hash: entries[1].hash.clone() }), (3, "beyond-head"));
        let message = Tampering { position: 7, problem: Problem::Missing { next: 9 } }.to_string();
        assert_eq!(message, "position 7: the entry is missing (the next one present is at 9)");
    }
}

//! A run's snapshot sealed as the store keeps it: a base, sealed rarely, and
//! a head, sealed with every decision ([`coordinator_store::snapshot_frame`]
//! joins the two into the one byte string the engine sees).
//!
//! The base is the whole snapshot as [`crate::engine::snapshot::codec::encode`] writes it,
//! sealed under [`Purpose::Snapshot`]. The head is the whole snapshot again,
//! compressed against the base's JSON ([`crate::engine::snapshot::codec::encode_delta`]) and
//! sealed under [`Purpose::SnapshotDelta`], or nothing when the run is what the
//! base says. Both are bound to the run's id, so nothing protected is in
//! clear and neither opens as another run's; the head names its base by
//! digest, so it does not decode beside another base.
//!
//! Why: the database rewrites a whole row on every update, and the sealed
//! snapshot was most of it. A decision that keeps the base writes the same
//! base bytes again, and PostgreSQL logs an update on the same page without
//! the bytes the row's versions share at either end (the base is the row's
//! last column): such a decision costs the WAL of its head, about what
//! changed since the base.
//!
//! The base is kept while the head's plaintext is no longer than the base
//! (a longer head costs more to write than a new base would), the base's
//! JSON is within LZ4's reach ([`DELTA_WINDOW`]) and the base is sealed
//! under the active key; otherwise (a run that changed a lot since its base,
//! or a base under a key rotated out of use) the snapshot is sealed whole as
//! the new base, with an empty head (a run moves to the active key at its
//! next decision, as when it was sealed whole). Measured (bench/RESULTS.md,
//! thirteenth sitting): rebasing once the head passed half of the base cost
//! a 3-call run 0.1 KB more WAL; a chain of deltas, each against the
//! decision before, made each update smaller but the row larger, and the
//! run's last update, which changes its indexed state and so cannot stay on
//! the row's page as often, cost more than it saved. A snapshot written
//! before bases (no frame) opens as before, and its run's next decision
//! writes a base.

use std::sync::Arc;

use coordinator_core::machine::run::Run;
use coordinator_seal::{Binding, Keyring, Purpose};
use coordinator_store::snapshot_frame;

use crate::engine::error::EngineError;
use crate::engine::snapshot::codec::{self, DIGEST};

/// The longest base JSON a head is written against: LZ4 refers back at most
/// 64 KiB, so against a longer base most of the snapshot could not refer to
/// it and the head would come out about as long as the snapshot sealed whole
/// (a run with a large input is sealed whole at every decision, as before).
const DELTA_WINDOW: usize = 64 << 10;

/// A run's base as the engine keeps it beside the run it opened or sealed:
/// the sealed bytes (written again as they are) and their JSON (what the
/// next head is compressed against).
pub(crate) struct Base {
    sealed: Vec<u8>,
    json: Vec<u8>,
    digest: [u8; DIGEST],
}

/// Lengths only: the JSON is the run's state in clear.
impl std::fmt::Debug for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Base").field("sealed", &self.sealed.len()).field("json", &self.json.len()).finish()
    }
}

impl Base {
    fn new(sealed: Vec<u8>, json: Vec<u8>) -> Base {
        let digest = codec::digest_of(&sealed);
        Base { sealed, json, digest }
    }

    /// The bytes this base holds in memory, for a cache's weight.
    pub(crate) fn weight(&self) -> usize {
        self.sealed.len() + self.json.len()
    }
}

fn binding(run_id: &str, purpose: Purpose) -> Binding<'_> {
    Binding { run: run_id, purpose, step: None }
}

/// Seals `run` as a frame: against `base` while the head stays small and
/// the base under the active key, else on a new base. Returns the frame and
/// the base it holds.
pub(crate) fn seal(keyring: &Keyring, run: &Run, base: Option<Arc<Base>>) -> Result<(Vec<u8>, Arc<Base>), EngineError> {
    let json = serde_json::to_vec(run).map_err(|e| EngineError::Corrupt(format!("snapshot: {e}")))?;
    let serves = |b: &Arc<Base>| {
        b.json.len() <= DELTA_WINDOW && Keyring::key_of(&b.sealed).is_ok_and(|id| id == keyring.active())
    };
    if let Some(base) = base.filter(serves) {
        let delta = codec::encode_delta(&json, &run.id, &base.json, &base.digest);
        if delta.len() <= base.sealed.len() {
            let head = keyring.seal(binding(&run.id, Purpose::SnapshotDelta), &delta)?;
            return Ok((snapshot_frame::join(Some(base.sealed.clone()), head), base));
        }
    }
    let sealed = keyring.seal(binding(&run.id, Purpose::Snapshot), &codec::encode(&json, &run.id))?;
    let base = Arc::new(Base::new(sealed, json));
    Ok((snapshot_frame::join(Some(base.sealed.clone()), Vec::new()), base))
}

/// Opens a frame of run `run_id`: the run and its base (`None` for a
/// snapshot written before bases).
pub(crate) fn open(keyring: &Keyring, run_id: &str, frame: &[u8]) -> Result<(Run, Option<Arc<Base>>), EngineError> {
    let corrupt = |e: &dyn std::fmt::Display| EngineError::Corrupt(format!("the snapshot of run {run_id}: {e}"));
    let (base, head) = snapshot_frame::split(frame).map_err(|e| corrupt(&e))?;
    let Some(base) = base else {
        let json =
            codec::decode(keyring.open(binding(run_id, Purpose::Snapshot), head)?, run_id).map_err(|e| corrupt(&e))?;
        return Ok((parse(run_id, &json)?, None));
    };
    let base_json =
        codec::decode(keyring.open(binding(run_id, Purpose::Snapshot), base)?, run_id).map_err(|e| corrupt(&e))?;
    let base = Base::new(base.to_vec(), base_json);
    let run = if head.is_empty() {
        parse(run_id, &base.json)?
    } else {
        let delta = keyring.open(binding(run_id, Purpose::SnapshotDelta), head)?;
        let json = codec::decode_delta(&delta, run_id, &base.json, &base.digest).map_err(|e| corrupt(&e))?;
        parse(run_id, &json)?
    };
    Ok((run, Some(Arc::new(base))))
}

/// Parses a snapshot's JSON.
fn parse(run_id: &str, json: &[u8]) -> Result<Run, EngineError> {
    // serde's message can quote the snapshot (input, commands): say where, not what.
    serde_json::from_slice(json).map_err(|e| {
        EngineError::Corrupt(format!(
            "the snapshot of run {run_id} does not decode ({:?} at line {}, column {})",
            e.classify(),
            e.line(),
            e.column()
        ))
    })
}

#[cfg(test)]
mod tests {
    use coordinator_core::machine::time::Instant;
    use serde_json::json;

    use super::*;

    const RUN: &str = "01a243cf-1bdd-726e-a96b-d8e6ef9aaf8b";

    fn keyring() -> Keyring {
        Keyring::new("k1", [("k1".to_owned(), vec![7; 32])]).unwrap_or_else(|e| panic!("a keyring: {e}"))
    }

    fn run(steps: usize) -> Run {
        let mut run =
            Run::new(RUN, "sha256:abc", Instant(1), json!({"recordId": "0199c8a0-5c2e-7d41-9b3a-000000000000"}));
        run.path = (0..steps).map(|i| format!("step-{i}")).collect();
        run
    }

    fn sealed(keyring: &Keyring, run: &Run, base: Option<Arc<Base>>) -> (Vec<u8>, Arc<Base>) {
        seal(keyring, run, base).unwrap_or_else(|e| panic!("sealed: {e}"))
    }

    fn opened(keyring: &Keyring, frame: &[u8]) -> (Run, Option<Arc<Base>>) {
        open(keyring, RUN, frame).unwrap_or_else(|e| panic!("opened: {e}"))
    }

    fn parts(frame: &[u8]) -> (Vec<u8>, Vec<u8>) {
        match snapshot_frame::split(frame) {
            Ok((Some(base), head)) => (base.to_vec(), head.to_vec()),
            other => panic!("not a frame with a base: {other:?}"),
        }
    }

    #[test]
    fn a_decision_keeps_the_base_and_writes_a_head_against_it() {
        let keyring = keyring();
        let (first, base) = sealed(&keyring, &run(0), None);
        let (sealed_base, head) = parts(&first);
        assert!(head.is_empty(), "a new base needs no head");
        // The base as a fresh open of the row gives it, not only as the cache kept it.
        let (reopened, reopened_base) = opened(&keyring, &first);
        assert_eq!(reopened.path, run(0).path);
        for kept in [Some(base), reopened_base] {
            let (next, _) = sealed(&keyring, &run(1), kept);
            let (next_base, next_head) = parts(&next);
            assert_eq!(next_base, sealed_base, "a small change keeps the base");
            assert!(!next_head.is_empty());
            assert_eq!(opened(&keyring, &next).0.path, run(1).path);
        }
    }

    #[test]
    fn a_head_longer_than_the_base_rebases() {
        let keyring = keyring();
        let (_, base) = sealed(&keyring, &run(0), None);
        let (frame, rebased) = sealed(&keyring, &run(200), Some(Arc::clone(&base)));
        assert_ne!(rebased.sealed, base.sealed);
        assert!(parts(&frame).1.is_empty(), "a new base needs no head");
        assert_eq!(opened(&keyring, &frame).0.path, run(200).path);
    }

    #[test]
    fn a_base_beyond_lz4s_reach_is_not_written_against() {
        let keyring = keyring();
        let mut large = run(0);
        large.input = json!({"text": "x".repeat(DELTA_WINDOW)});
        let (_, base) = sealed(&keyring, &large, None);
        large.path.push("step-0".into());
        let (frame, next) = sealed(&keyring, &large, Some(Arc::clone(&base)));
        assert_ne!(next.sealed, base.sealed);
        assert!(parts(&frame).1.is_empty());
        assert_eq!(opened(&keyring, &frame).0.path, large.path);
    }

    #[test]
    fn a_head_beside_another_base_or_of_another_run_does_not_open() {
        let keyring = keyring();
        let (_, first) = sealed(&keyring, &run(0), None);
        let (_, second) = sealed(&keyring, &run(0), None);
        let (frame, _) = sealed(&keyring, &run(1), Some(first));
        let (_, head) = parts(&frame);
        let swapped = snapshot_frame::join(Some(second.sealed.clone()), head);
        assert!(matches!(open(&keyring, RUN, &swapped), Err(EngineError::Corrupt(_))));
        assert!(open(&keyring, "01a243cf-1bdd-726e-a96b-d8e6ef9aaf8c", &frame).is_err());
    }

    #[test]
    fn a_base_under_a_key_no_longer_active_is_sealed_again_under_the_active_one() {
        let (_, old) = sealed(&keyring(), &run(0), None);
        let rotated = Keyring::new("k2", [("k1".to_owned(), vec![7; 32]), ("k2".to_owned(), vec![8; 32])])
            .unwrap_or_else(|e| panic!("a keyring: {e}"));
        let (frame, base) = sealed(&rotated, &run(1), Some(old));
        assert_eq!(Keyring::key_of(&base.sealed).ok(), Some("k2"));
        assert!(parts(&frame).1.is_empty());
        assert_eq!(opened(&rotated, &frame).0.path, run(1).path);
    }

    #[test]
    fn a_base_shows_no_state_when_debugged() {
        let (_, base) = sealed(&keyring(), &run(0), None);
        let shown = format!("{base:?}");
        assert!(!shown.contains('[') && shown.starts_with("Base { sealed: "), "{shown}");
    }

    #[test]
    fn a_snapshot_sealed_whole_before_bases_still_opens() {
        let keyring = keyring();
        let json = serde_json::to_vec(&run(2)).unwrap_or_else(|e| panic!("json: {e}"));
        let whole = keyring
            .seal(binding(RUN, Purpose::Snapshot), &codec::encode(&json, RUN))
            .unwrap_or_else(|e| panic!("sealed: {e}"));
        let (run2, base) = opened(&keyring, &whole);
        assert_eq!(run2.path, run(2).path);
        assert!(base.is_none());
    }
}

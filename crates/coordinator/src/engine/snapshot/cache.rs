//! The runs this engine sealed last, kept opened, so the next decision on a
//! run (and the worker that sends its call) does not open the snapshot it
//! has just sealed: opening is decrypting, decompressing and parsing the
//! whole JSON, once per claim and once per report, about a tenth of the
//! coordinator's CPU in the throughput bench (bench/RESULTS.md, eighth
//! sitting).
//!
//! An entry is the sealed bytes, the run they were sealed from and its base
//! ([`sealed`](super::sealed): what the run's next seal is written against). A lookup
//! hits only when the bytes read from the database are *equal* to the
//! entry's: every seal takes a fresh nonce, so equal bytes are the very
//! snapshot this engine sealed from that run, whatever happened meanwhile (a
//! rolled-back transaction, another process deciding, a restored database —
//! each leaves different bytes in the row, and the lookup misses and opens
//! them). The database stays the only truth; the cache can only save work.
//!
//! A hit gives what opening the bytes would: a snapshot is the run's JSON,
//! and serde_json parses with `float_roundtrip` (the workspace enables it),
//! so every number reads back as the value that was written.
//!
//! Readers (a worker sending a call, a view) share the entry's run; a
//! decision takes it out (no copy unless a reader still holds it) and puts
//! the run it seals next back. Bounded by weight — the sealed bytes, times
//! [`WEIGHT_FACTOR`] for the parsed form — least recently used out first.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use coordinator_core::machine::run::Run;
use hashlink::LinkedHashMap;

use crate::engine::snapshot::sealed::Base;

/// The weight the cache holds at most (32 MiB: thousands of typical runs in flight).
pub const CAPACITY_BYTES: u64 = 32 << 20;
/// How much more than its sealed bytes an opened run is taken to weigh.
const WEIGHT_FACTOR: u64 = 4;

/// One sealed snapshot and the run it was sealed from.
struct Entry {
    sealed: Vec<u8>,
    run: Arc<Run>,
    base: Option<Arc<Base>>,
}

impl Entry {
    fn weight(&self) -> u64 {
        let base = u64::try_from(self.base.as_ref().map_or(0, |b| b.weight())).unwrap_or(u64::MAX);
        u64::try_from(self.sealed.len()).unwrap_or(u64::MAX).saturating_mul(WEIGHT_FACTOR).saturating_add(base)
    }
}

/// The entries by run id, least recently used first, and their weight.
#[derive(Default)]
struct Inner {
    entries: LinkedHashMap<String, Entry>,
    weight: u64,
}

/// The cache.
pub(crate) struct Opened {
    inner: Mutex<Inner>,
    capacity: u64,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened").field("entries", &self.lock().entries.len()).finish_non_exhaustive()
    }
}

impl Opened {
    /// An empty cache weighing at most `capacity` bytes.
    pub(crate) fn new(capacity: u64) -> Opened {
        Opened { inner: Mutex::new(Inner::default()), capacity }
    }

    /// A cache is only ever left consistent between statements, so a panic
    /// elsewhere while it was held leaves nothing half-done.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers that `sealed` is `run`'s snapshot (just sealed by this engine).
    pub(crate) fn sealed(&self, run: Arc<Run>, sealed: Vec<u8>, base: Option<Arc<Base>>) {
        let entry = Entry { sealed, run, base };
        let mut inner = self.lock();
        inner.weight = inner.weight.saturating_add(entry.weight());
        if let Some(old) = inner.entries.insert(entry.run.id.clone(), entry) {
            inner.weight = inner.weight.saturating_sub(old.weight());
        }
        while inner.weight > self.capacity {
            let Some((_, out)) = inner.entries.pop_front() else { break };
            inner.weight = inner.weight.saturating_sub(out.weight());
        }
    }

    /// The run `sealed` was sealed from, shared, when this engine sealed exactly these bytes.
    pub(crate) fn get(&self, run_id: &str, sealed: &[u8]) -> Option<Arc<Run>> {
        let mut inner = self.lock();
        let entry = inner.entries.to_back(run_id)?;
        (entry.sealed == sealed).then(|| Arc::clone(&entry.run))
    }

    /// [`Opened::get`], taking the run out (to decide on: the next seal puts one back).
    pub(crate) fn take(&self, run_id: &str, sealed: &[u8]) -> Option<(Run, Option<Arc<Base>>)> {
        let entry = {
            let mut inner = self.lock();
            let entry = inner.entries.remove(run_id)?;
            inner.weight = inner.weight.saturating_sub(entry.weight());
            entry
        };
        (entry.sealed == sealed)
            .then(|| (Arc::try_unwrap(entry.run).unwrap_or_else(|shared| (*shared).clone()), entry.base))
    }
}

#[cfg(test)]
mod tests {
    use coordinator_core::machine::time::Instant;

    use super::*;

    fn run(id: &str) -> Arc<Run> {
        Arc::new(Run::new(id, "rev", Instant(0), serde_json::json!({"a": 1})))
    }

    #[test]
    fn only_the_bytes_sealed_hit() {
        let opened = Opened::new(CAPACITY_BYTES);
        opened.sealed(run("r1"), b"sealed-1".to_vec(), None);
        assert_eq!(opened.get("r1", b"sealed-1").map(|r| r.id.clone()), Some("r1".to_owned()));
        assert!(opened.get("r1", b"sealed-2").is_none(), "other bytes in the row: open them");
        assert!(opened.get("r2", b"sealed-1").is_none(), "another run's id never hits");
        opened.sealed(run("r1"), b"sealed-2".to_vec(), None);
        assert!(opened.get("r1", b"sealed-1").is_none(), "a later seal replaces the entry");
        assert!(opened.take("r1", b"sealed-1").is_none(), "taking other bytes misses");
        assert!(opened.get("r1", b"sealed-2").is_none(), "and drops the stale entry");
    }

    #[test]
    fn a_decision_takes_the_run_and_readers_keep_theirs() {
        let opened = Opened::new(CAPACITY_BYTES);
        opened.sealed(run("r1"), b"s".to_vec(), None);
        let reader = opened.get("r1", b"s");
        assert_eq!(opened.take("r1", b"s").map(|(r, _)| r.id), Some("r1".to_owned()));
        assert!(opened.take("r1", b"s").is_none(), "taken once");
        assert_eq!(reader.map(|r| r.id.clone()), Some("r1".to_owned()));
    }

    #[test]
    fn the_least_recently_used_go_first_beyond_the_weight() {
        let opened = Opened::new(3 * 10 * WEIGHT_FACTOR);
        for id in ["a", "b", "c"] {
            opened.sealed(run(id), vec![0; 10], None);
        }
        assert!(opened.get("a", &[0; 10]).is_some(), "a used: b is now the oldest");
        opened.sealed(run("d"), vec![0; 10], None);
        assert!(opened.get("b", &[0; 10]).is_none());
        for id in ["a", "c", "d"] {
            assert!(opened.get(id, &[0; 10]).is_some(), "{id}");
        }
        assert_eq!(opened.lock().weight, 3 * 10 * WEIGHT_FACTOR);
    }

    #[test]
    fn numbers_read_back_as_written() {
        // What makes a hit the same as opening: parsing a written number gives it back exactly.
        for x in [0.1_f64, 1.0 / 3.0, 2.0_f64.powi(-1074), 123_456.789_012_345_68, f64::MAX, -0.000_123_456_789] {
            let text = serde_json::to_string(&x).unwrap_or_default();
            let back: f64 = serde_json::from_str(&text).unwrap_or(f64::NAN);
            assert_eq!(back.to_bits(), x.to_bits(), "{text}");
        }
    }
}

//! The compiled workflows of an engine, cached by revision and bounded
//! (moka's TinyLFU admission with LRU eviction), so a deployment that has
//! activated many revisions over the years keeps only the ones its runs use.
//!
//! Each entry weighs its package's size in bytes (definition and function
//! source: what compiling costs and roughly what the compiled form holds),
//! against [`CAPACITY_BYTES`]. Concurrent misses of one revision load and
//! compile it once; the others wait for that load. A revision is immutable,
//! so an entry never goes stale: eviction only costs a later load (open,
//! decode, compile). Hits and loads are counted
//! (`coordinator_definition_cache_total{result}`).

use std::sync::Arc;

use coordinator_core::machine::compiled::Workflow;
use coordinator_store::StoreError;
use moka::future::Cache;

use crate::engine::error::EngineError;

/// The package bytes the cache holds at most (64 MiB: thousands of typical revisions).
pub const CAPACITY_BYTES: u64 = 64 << 20;

/// A compiled workflow and what it weighs.
#[derive(Clone)]
pub(crate) struct Compiled {
    /// The workflow.
    pub(crate) workflow: Arc<Workflow>,
    /// Its package's size in bytes.
    pub(crate) weight: u32,
}

impl Compiled {
    /// `workflow`, weighing `package_bytes`.
    pub(crate) fn new(workflow: Workflow, package_bytes: usize) -> Compiled {
        Compiled { workflow: Arc::new(workflow), weight: u32::try_from(package_bytes).unwrap_or(u32::MAX) }
    }
}

/// The cache.
pub(crate) struct Definitions {
    cache: Cache<String, Compiled>,
}

impl std::fmt::Debug for Definitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Definitions").field("entries", &self.cache.entry_count()).finish_non_exhaustive()
    }
}

/// Whether a lookup found its revision cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Cached (or loaded meanwhile by a concurrent miss this one waited for).
    Hit,
    /// Loaded and compiled by this lookup.
    Load,
}

impl Definitions {
    /// A cache holding at most `capacity` bytes of packages.
    pub(crate) fn new(capacity: u64) -> Definitions {
        let cache = Cache::builder().max_capacity(capacity).weigher(|_: &String, c: &Compiled| c.weight).build();
        Definitions { cache }
    }

    /// The workflow of `revision`: cached, or loaded by `load` (once for concurrent misses).
    pub(crate) async fn get_or_load(
        &self,
        revision: &str,
        load: impl Future<Output = Result<Compiled, EngineError>>,
    ) -> Result<(Arc<Workflow>, Lookup), EngineError> {
        let entry = self.cache.entry_by_ref(revision).or_try_insert_with(load).await.map_err(|e| shared(&e))?;
        let lookup = if entry.is_fresh() { Lookup::Load } else { Lookup::Hit };
        Ok((Arc::clone(&entry.into_value().workflow), lookup))
    }

    /// Puts a workflow compiled elsewhere (an activation) in the cache.
    pub(crate) async fn insert(&self, revision: &str, compiled: Compiled) {
        self.cache.insert(revision.to_owned(), compiled).await;
    }
}

/// The error of a load another lookup shared: the store's kept as the
/// store's (so an unreachable database stays one), any other as corrupt state.
fn shared(error: &Arc<EngineError>) -> EngineError {
    match error.as_ref() {
        EngineError::Store(StoreError::Unavailable(reason)) => {
            EngineError::Store(StoreError::Unavailable(reason.clone()))
        }
        EngineError::Store(e) => EngineError::Store(StoreError::Database(e.to_string())),
        other => EngineError::Corrupt(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn compiled(weight: usize) -> Compiled {
        Compiled::new(crate::engine::recovery::inspection::tests::reviewed_notice(), weight)
    }

    #[tokio::test]
    async fn concurrent_misses_load_once_and_later_lookups_hit() {
        let cache = Arc::new(Definitions::new(CAPACITY_BYTES));
        let loads = Arc::new(AtomicUsize::new(0));
        let lookups = (0..8).map(|_| {
            let (cache, loads) = (Arc::clone(&cache), Arc::clone(&loads));
            tokio::spawn(async move {
                let load = async {
                    loads.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    Ok(compiled(1000))
                };
                cache.get_or_load("sha256:r1", load).await.map(|(_, lookup)| lookup)
            })
        });
        let mut results = Vec::new();
        for lookup in lookups.collect::<Vec<_>>() {
            results.push(lookup.await.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|e| panic!("{e}")));
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1, "one load for eight concurrent misses");
        assert_eq!(results.iter().filter(|l| **l == Lookup::Load).count(), 1, "{results:?}");
        let again = cache.get_or_load("sha256:r1", async { panic!("cached: no load") }).await;
        assert_eq!(again.map(|(_, lookup)| lookup).ok(), Some(Lookup::Hit));
    }

    #[tokio::test]
    async fn the_cache_stays_within_its_weight_and_a_failed_load_is_not_kept() {
        let cache = Definitions::new(10_000);
        for n in 0..50 {
            let revision = format!("sha256:r{n}");
            let load = async { Ok(compiled(1_000)) };
            cache.get_or_load(&revision, load).await.unwrap_or_else(|e| panic!("{e}"));
        }
        cache.cache.run_pending_tasks().await;
        assert!(cache.cache.weighted_size() <= 10_000, "weighs {}", cache.cache.weighted_size());
        let failed = cache.get_or_load("sha256:bad", async { Err(EngineError::Corrupt("no package".into())) }).await;
        assert!(matches!(failed, Err(EngineError::Corrupt(_))), "{failed:?}");
        let retried = cache.get_or_load("sha256:bad", async { Ok(compiled(1)) }).await;
        assert_eq!(retried.map(|(_, lookup)| lookup).ok(), Some(Lookup::Load), "the failure was not cached");
    }
}

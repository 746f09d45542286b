//! What the simulators counted, per operation and idempotency key: the
//! counts themselves (what must not move while a run is held) and the
//! checks that every mutation key acted once and the registry was read once
//! per run.

use coordinator_sim::{EffectCount, Simulators};

/// (operation, key, requests, effects) of every product a run touches, sorted.
pub type Counts = Vec<(String, Option<String>, u64, u64)>;

/// The simulators' counts now.
pub fn counts(sims: &Simulators) -> Counts {
    let all: Vec<EffectCount> = [sims.breg.effects(), sims.casework.effects(), sims.messaging.effects()].concat();
    let mut rows: Vec<_> = all.into_iter().map(|e| (e.operation, e.idempotency_key, e.requests, e.effects)).collect();
    rows.sort();
    rows
}

/// The counts of commands (requests with an idempotency key): what must not move under a hold.
pub fn commands(rows: Counts) -> Counts {
    rows.into_iter().filter(|r| r.1.is_some()).collect()
}

/// The mutations (keyed requests) of the flagship's two mutating products.
pub fn mutations(sims: &Simulators) -> [(&'static str, Vec<EffectCount>); 2] {
    let keyed = |effects: Vec<EffectCount>| effects.into_iter().filter(|e| e.idempotency_key.is_some()).collect();
    [("casework", keyed(sims.casework.effects())), ("messaging", keyed(sims.messaging.effects()))]
}

/// Each of `runs` runs made one key per mutating product, and each key acted once.
pub fn one_effect_per_key(sims: &Simulators, runs: usize) {
    for (product, keyed) in mutations(sims) {
        assert_eq!(keyed.len(), runs, "{product}: one key per run: {keyed:?}");
        let twice: Vec<_> = keyed.iter().filter(|e| e.effects != 1).collect();
        assert!(twice.is_empty(), "{product}: not acted once: {twice:?}");
    }
}

/// [`one_effect_per_key`], and every key was sent once (never again), and the registry read once per run.
pub fn sent_once_per_key(sims: &Simulators, runs: usize) {
    one_effect_per_key(sims, runs);
    for (product, keyed) in mutations(sims) {
        let resent: Vec<_> = keyed.iter().filter(|e| e.requests != 1).collect();
        assert!(resent.is_empty(), "{product}: sent more than once: {resent:?}");
    }
    let reads: u64 = sims.breg.effects().iter().map(|e| e.requests).sum();
    assert_eq!(reads, u64::try_from(runs).unwrap_or(0), "the registry is read once per run");
}

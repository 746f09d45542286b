//! The wait index (docs/reference/protection.md#payloads-sealed-at-rest:
//! nothing a product answered is stored in clear): a completion reference is a
//! product's answer, yet the store must find the runs waiting on one when the
//! product's notification names it. The store therefore keeps, for each open
//! wait, not the reference but a keyed hash of it — HMAC-SHA256 under a key
//! derived from the payload key (purpose `wait-reference.v1`), hex, prefixed
//! `h1:` — and a notification is looked up under the hash of every key the
//! deployment holds (so a rotation keeps finding waits opened before it) and as
//! given (waits an older version stored in clear).

use coordinator_core::machine::action::Action;
use coordinator_seal::Keyring;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const PURPOSE: &str = "wait-reference.v1";

fn hashed(key: &[u8; 32], reference: &str) -> String {
    // HMAC takes a key of any length: construction cannot fail.
    let Ok(mut mac) = <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(key) else {
        unreachable!("HMAC-SHA256 accepts keys of every length")
    };
    mac.update(reference.as_bytes());
    format!("h1:{}", hex::encode(mac.finalize().into_bytes()))
}

/// What the store keeps for `reference`: its hash under the active key.
pub(crate) fn index(keyring: &Keyring, reference: &str) -> String {
    hashed(&keyring.derive(PURPOSE), reference)
}

/// What a notification naming `reference` is looked up under: its hash
/// under every key held, then the reference itself (rows written in clear).
pub(crate) fn lookups(keyring: &Keyring, reference: &str) -> Vec<String> {
    let mut all: Vec<String> = keyring.derive_each(PURPOSE).iter().map(|key| hashed(key, reference)).collect();
    all.push(reference.to_owned());
    all
}

/// `actions` as the store persists them: each wait's reference replaced by its index.
pub(crate) fn for_store(keyring: &Keyring, actions: &[Action]) -> Vec<Action> {
    actions
        .iter()
        .map(|action| match action {
            Action::StartWait { step, reference, started_at, interval_seconds, timeout_at } => Action::StartWait {
                step: step.clone(),
                reference: index(keyring, reference),
                started_at: *started_at,
                interval_seconds: *interval_seconds,
                timeout_at: *timeout_at,
            },
            other => other.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyring(active: &str) -> Keyring {
        let keys = [("k1".to_owned(), vec![1_u8; 32]), ("k2".to_owned(), vec![2_u8; 32])];
        Keyring::new(active, keys).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_index_hides_the_reference_and_is_found_after_a_rotation() {
        let before = index(&keyring("k1"), "review-1");
        assert!(before.starts_with("h1:") && !before.contains("review-1"));
        assert_eq!(before, index(&keyring("k1"), "review-1"), "the same every time");
        assert_ne!(before, index(&keyring("k1"), "review-2"));
        let rotated = keyring("k2");
        assert_ne!(index(&rotated, "review-1"), before, "a new index under the new active key");
        let lookups = lookups(&rotated, "review-1");
        assert!(lookups.contains(&before) && lookups.contains(&index(&rotated, "review-1")));
        assert_eq!(lookups.last().map(String::as_str), Some("review-1"), "and rows stored in clear");
    }
}

//! Packages sealed at rest
//! (docs/reference/protection.md#payloads-sealed-at-rest): a package's bytes —
//! its workflow's definition and function source — are stored sealed under the
//! payload key, bound to their revision (purpose `package`), like a run's
//! input. The digest stays in clear beside them: it names the package, it does
//! not reveal it.
//!
//! A row an older version stored in clear is still read (its bytes are
//! checked against its digest by whoever reads the package, as before).
//! `coordinator serve` stores its pinned package afresh at every start (under
//! the active key), and re-seals under the active key every other row stored
//! in clear or sealed under another key it holds ([`reseal_rows`]), so that
//! once every process has started after a rotation, the old key seals no package.

use coordinator_seal::{Binding, Keyring, Purpose, SealError};
use coordinator_store::{Package, Store};

use crate::engine::error::EngineError;

fn binding(revision: &str) -> Binding<'_> {
    Binding { run: revision, purpose: Purpose::Package, step: None }
}

/// `package` with its bytes sealed, ready to be stored.
///
/// # Errors
/// [`SealError`] only for an absurdly large package.
pub(crate) fn sealed(keyring: &Keyring, package: &Package) -> Result<Package, SealError> {
    let bytes = keyring.seal(binding(&package.revision), &package.bytes)?;
    Ok(Package { bytes, ..package.clone() })
}

/// Whether stored bytes are sealed (an older version stored them in clear:
/// a package is canonical JSON, so its first byte is `{`, never the sealed
/// format's version byte).
fn is_sealed(bytes: &[u8]) -> bool {
    Keyring::key_of(bytes).is_ok()
}

/// The package bytes of a stored row: opened, or as stored when an older
/// version stored them in clear.
///
/// # Errors
/// [`EngineError::Seal`]: sealed under a key the deployment does not hold,
/// or altered, or moved to another revision.
pub(crate) fn opened(keyring: &Keyring, stored: &Package) -> Result<Vec<u8>, EngineError> {
    if !is_sealed(&stored.bytes) {
        return Ok(stored.bytes.clone());
    }
    Ok(keyring.open(binding(&stored.revision), &stored.bytes)?)
}

/// Re-seals under the active key every package row stored in clear (by a
/// version before packages were sealed) or sealed under another key the
/// keyring holds; returns how many. A row sealed under a key not held is left
/// as it is. Each is replaced only while it still holds the bytes read, so a
/// concurrent start does no harm.
///
/// # Errors
/// A store failure, or [`SealError`] for an absurdly large package or a row
/// that does not open.
pub(crate) async fn reseal_rows(store: &Store, keyring: &Keyring) -> Result<u64, EngineError> {
    let mut sealed_rows = 0;
    for revision in store.package_revisions().await? {
        let Some(stored) = store.package(&revision).await? else { continue };
        match Keyring::key_of(&stored.bytes) {
            Ok(key) if key == keyring.active() || !keyring.holds(key) => continue,
            Ok(_) | Err(_) => {}
        }
        let clear = Package { bytes: opened(keyring, &stored)?, ..stored.clone() };
        let replacement = sealed(keyring, &clear)?;
        if store.replace_package_bytes(&revision, &stored.bytes, &replacement.bytes).await? {
            sealed_rows += 1;
        }
    }
    Ok(sealed_rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyring() -> Keyring {
        Keyring::new("k1", [("k1".to_owned(), vec![9_u8; 32])]).unwrap_or_else(|e| panic!("{e}"))
    }

    fn package(revision: &str) -> Package {
        let bytes = format!("{{\"format\":\"test\",\"revision\":\"{revision}\"}}").into_bytes();
        Package { revision: revision.to_owned(), workflow: "w".to_owned(), digest: format!("d-{revision}"), bytes }
    }

    #[tokio::test]
    async fn rows_stored_in_clear_are_read_and_sealed_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("p.db").display());
        let store = Store::connect(&url).await.unwrap_or_else(|e| panic!("{e}"));
        store.migrate().await.unwrap_or_else(|e| panic!("{e}"));
        let ring = keyring();
        // One row as an older version stored it, one as this one does.
        let (old, new) = (package("r-old"), package("r-new"));
        store.put_package(&old).await.unwrap_or_else(|e| panic!("{e}"));
        store
            .put_package(&sealed(&ring, &new).unwrap_or_else(|e| panic!("{e}")))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for p in [&old, &new] {
            let stored =
                store.package(&p.revision).await.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("row"));
            assert_eq!(opened(&ring, &stored).unwrap_or_else(|e| panic!("{e}")), p.bytes);
        }
        assert_eq!(reseal_rows(&store, &ring).await.unwrap_or_else(|e| panic!("{e}")), 1);
        assert_eq!(reseal_rows(&store, &ring).await.unwrap_or_else(|e| panic!("{e}")), 0, "once");
        let stored = store.package("r-old").await.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("row"));
        assert!(is_sealed(&stored.bytes) && stored.bytes != old.bytes);
        assert_eq!(opened(&ring, &stored).unwrap_or_else(|e| panic!("{e}")), old.bytes);
        // Sealed for its revision: moved to another revision's row, it does not open.
        let moved = Package { revision: "r-new".to_owned(), ..stored };
        assert!(opened(&ring, &moved).is_err());
        // After a rotation (k2 active, k1 kept) both rows are sealed again under k2.
        let keys = [("k1".to_owned(), vec![9_u8; 32]), ("k2".to_owned(), vec![8_u8; 32])];
        let rotated = Keyring::new("k2", keys).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reseal_rows(&store, &rotated).await.unwrap_or_else(|e| panic!("{e}")), 2);
        for p in [&old, &new] {
            let stored =
                store.package(&p.revision).await.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("row"));
            assert_eq!(Keyring::key_of(&stored.bytes).ok(), Some("k2"));
            assert_eq!(opened(&rotated, &stored).unwrap_or_else(|e| panic!("{e}")), p.bytes);
        }
        // Storing a revision again with its digest replaces its bytes; another digest is refused.
        store
            .put_package(&sealed(&ring, &old).unwrap_or_else(|e| panic!("{e}")))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let again = store.package("r-old").await.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("row"));
        assert_eq!(Keyring::key_of(&again.bytes).ok(), Some("k1"));
        let other = Package { digest: "d-other".to_owned(), ..old.clone() };
        assert!(store.put_package(&other).await.is_err());
    }
}

//! Stored packages: a workflow revision's package bytes (opaque here: the
//! service seals them, `coordinator::engine::package::at_rest`), its workflow and its
//! digest, one row per revision. Storing a revision again with the same
//! workflow and digest replaces only its bytes (the same package sealed
//! afresh, e.g. under a new payload key); with another, it is refused.

use crate::db::{Arg, Tx};
use crate::types::Package;
use crate::{Store, StoreError};

const PUT_PACKAGE: &str = "INSERT INTO packages (revision, workflow, digest, bytes) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (revision) DO UPDATE SET bytes = excluded.bytes \
     WHERE packages.workflow = excluded.workflow AND packages.digest = excluded.digest";
const PACKAGE: &str = "SELECT revision, workflow, digest, bytes FROM packages WHERE revision = $1";
const REVISIONS: &str = "SELECT revision FROM packages ORDER BY revision";
const WORKFLOWS: &str = "SELECT DISTINCT workflow FROM packages ORDER BY workflow";
const REPLACE_BYTES: &str = "UPDATE packages SET bytes = $3 WHERE revision = $1 AND bytes = $2";

impl Store {
    /// Stores a package. Storing the same revision again with the same
    /// workflow and digest replaces its bytes; the same revision with another
    /// digest is a [`StoreError::Conflict`].
    pub async fn put_package(&self, package: &Package) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let args: Vec<Arg> = vec![
            package.revision.as_str().into(),
            package.workflow.as_str().into(),
            package.digest.as_str().into(),
            package.bytes.as_slice().into(),
        ];
        if tx.execute(PUT_PACKAGE, args).await? == 0 {
            let stored = fetch_package(&mut tx, &package.revision).await?;
            if stored.as_ref().map(|p| (&p.workflow, &p.digest)) != Some((&package.workflow, &package.digest)) {
                tx.abandon().await?;
                return Err(StoreError::Conflict {
                    what: format!("package {} with another content", package.revision),
                });
            }
        }
        tx.commit().await
    }

    /// A stored package.
    pub async fn package(&self, revision: &str) -> Result<Option<Package>, StoreError> {
        fetch_package(&mut self.pool.begin_read().await?, revision).await
    }

    /// Every stored revision, sorted.
    pub async fn package_revisions(&self) -> Result<Vec<String>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        tx.fetch_all(REVISIONS, Vec::new()).await?.iter().map(|row| row.get(0)).collect()
    }

    /// Every workflow a stored revision belongs to, sorted.
    pub async fn workflow_names(&self) -> Result<Vec<String>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        tx.fetch_all(WORKFLOWS, Vec::new()).await?.iter().map(|row| row.get(0)).collect()
    }

    /// Replaces the bytes of `revision`'s package with `bytes` (the same
    /// package, sealed), only while it still holds `expected`; returns
    /// whether it did.
    pub async fn replace_package_bytes(
        &self,
        revision: &str,
        expected: &[u8],
        bytes: &[u8],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let replaced = tx.execute(REPLACE_BYTES, vec![revision.into(), expected.into(), bytes.into()]).await? > 0;
        tx.commit().await?;
        Ok(replaced)
    }
}

/// A stored package, read in `tx`.
pub(crate) async fn fetch_package(tx: &mut Tx, revision: &str) -> Result<Option<Package>, StoreError> {
    let Some(row) = tx.fetch_optional(PACKAGE, vec![revision.into()]).await? else { return Ok(None) };
    Ok(Some(Package { revision: row.get(0)?, workflow: row.get(1)?, digest: row.get(2)?, bytes: row.get(3)? }))
}

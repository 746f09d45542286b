//! Whether a database's schema is this version's: the migrations it records
//! as applied (sqlx's `_sqlx_migrations`) against those compiled into this
//! binary. The service checks it before serving, so that neither an upgraded
//! binary on a database not migrated yet (it would fail at its first write)
//! nor an older binary on a database a newer version migrated (it would
//! misread what it does not know, e.g. the journal's rows of 0017 as gaps)
//! goes on.

use crate::db::{Dialect, Pool};
use crate::{Store, StoreError, migrations};

const HAS_TABLE_PG: &str = "SELECT to_regclass('_sqlx_migrations') IS NOT NULL";
const HAS_TABLE_SQLITE: &str =
    "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations')";
const APPLIED: &str = "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version";

/// How a database's schema stands against this binary's migrations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    /// This binary's migrations the database has not applied: version and description.
    pub missing: Vec<(i64, &'static str)>,
    /// Migrations the database applied that this binary does not know (a newer version's).
    pub unknown: Vec<i64>,
}

impl Schema {
    /// Whether the database is exactly this version's.
    pub fn is_current(&self) -> bool {
        self.missing.is_empty() && self.unknown.is_empty()
    }
}

impl Store {
    /// How the database's schema stands against this binary's migrations
    /// ([`Schema`]); a database never migrated misses all of them. A pure read.
    pub async fn schema(&self) -> Result<Schema, StoreError> {
        let (known, has_table) = match &self.pool {
            Pool::Sqlite(..) => (migrations::of(Dialect::Sqlite), HAS_TABLE_SQLITE),
            Pool::Pg(..) => (migrations::of(Dialect::Pg), HAS_TABLE_PG),
        };
        let mut tx = self.pool.begin_read().await?;
        let exists = match tx.fetch_optional(has_table, Vec::new()).await? {
            Some(row) => match tx.dialect() {
                Dialect::Pg => row.get::<bool>(0)?,
                Dialect::Sqlite => row.get::<i64>(0)? != 0,
            },
            None => false,
        };
        let applied: Vec<i64> = if exists {
            tx.fetch_all(APPLIED, Vec::new()).await?.iter().map(|row| row.get(0)).collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        Ok(compare(known, &applied))
    }
}

/// `applied` against `known` (version, description, SQL).
fn compare(known: &[(i64, &'static str, &'static str)], applied: &[i64]) -> Schema {
    Schema {
        missing: known.iter().filter(|(v, ..)| !applied.contains(v)).map(|&(v, d, _)| (v, d)).collect(),
        unknown: applied.iter().copied().filter(|v| !known.iter().any(|(k, ..)| k == v)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[(i64, &str, &str)] = &[(1, "init", ""), (2, "more", "")];

    #[test]
    fn missing_and_unknown_migrations_are_named() {
        assert!(compare(KNOWN, &[1, 2]).is_current());
        assert_eq!(compare(KNOWN, &[]).missing, vec![(1, "init"), (2, "more")]);
        let newer = compare(KNOWN, &[1, 2, 3]);
        assert_eq!((newer.missing.len(), newer.unknown.clone()), (0, vec![3]));
        assert!(!newer.is_current());
    }
}

//! Test support: a PostgreSQL database created for one test (not migrated)
//! and dropped when the guard is dropped, even when the test panics.

pub use coordinator_testdb::ScratchDb as PgDatabase;

/// Creates an empty database on the local PostgreSQL.
pub async fn database() -> PgDatabase {
    PgDatabase::create("coordinator_svc").await.unwrap_or_else(|e| panic!("{e}"))
}

//! PostgreSQL databases created for one test (not migrated) and dropped
//! when their guard is dropped, even when the test panics; and a test's
//! store on either backend.

use std::path::Path;

pub use coordinator_testdb::ScratchDb as PgDatabase;

use super::deploy::sqlite_url;

/// Creates an empty database on the local PostgreSQL.
pub async fn database() -> PgDatabase {
    PgDatabase::create("coordinator_svc").await.unwrap_or_else(|e| panic!("{e}"))
}

/// Where a test keeps its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file in the test's directory.
    Sqlite,
    /// A PostgreSQL database of the test's own.
    Postgres,
}

impl Backend {
    /// The backend's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

/// A test's database on one backend (a PostgreSQL one is dropped with it).
pub struct Database {
    /// Its URL.
    pub url: String,
    /// The PostgreSQL database, when it is one.
    pub pg: Option<PgDatabase>,
}

/// A database on `backend`: the file `c.db` in `dir`, or a fresh PostgreSQL database.
pub async fn on(backend: Backend, dir: &Path) -> Database {
    match backend {
        Backend::Sqlite => Database { url: sqlite_url(dir), pg: None },
        Backend::Postgres => {
            let pg = database().await;
            Database { url: pg.url.clone(), pg: Some(pg) }
        }
    }
}

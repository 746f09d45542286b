//! Scratch PostgreSQL databases for tests and benchmarks: each is created on
//! the local server (127.0.0.1:5432, trust authentication, user `postgres`)
//! under a name no other test or process uses, and dropped (`WITH (FORCE)`)
//! when its guard is dropped — also when a test panics. Nothing is migrated:
//! callers do what their test needs.
//!
//! Only tests and benchmarks depend on this crate. It also hands out free
//! loopback ports for the processes they start ([`ports`]) and starts private
//! `redis-server`s ([`redis`]).

use std::sync::atomic::{AtomicU64, Ordering};

pub mod ports;
pub mod redis;

use sqlx::{Connection, PgConnection};

/// The maintenance database scratch databases are created from.
pub const MAINTENANCE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Why a scratch database could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ScratchError {
    /// The server did not answer or refused the connection.
    #[error("PostgreSQL must answer on 127.0.0.1:5432 (trust authentication, user postgres): {0}")]
    Connect(#[source] sqlx::Error),
    /// `CREATE DATABASE` failed.
    #[error("create database {name}: {source}")]
    Create {
        /// The database's name.
        name: String,
        /// What the server said.
        #[source]
        source: sqlx::Error,
    },
}

/// A scratch database; dropped with the guard.
#[derive(Debug)]
pub struct ScratchDb {
    /// Its URL.
    pub url: String,
    name: String,
}

impl ScratchDb {
    /// Creates `<prefix>_<pid>_<nanos>_<n>`, unique among the processes and
    /// tests running at once.
    ///
    /// # Errors
    /// [`ScratchError`] when the server does not answer or refuses.
    pub async fn create(prefix: &str) -> Result<ScratchDb, ScratchError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}_{}_{nanos}_{n}", std::process::id());
        let mut admin = PgConnection::connect(MAINTENANCE_URL).await.map_err(ScratchError::Connect)?;
        let created = sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut admin).await;
        let _ = admin.close().await;
        created.map_err(|source| ScratchError::Create { name: name.clone(), source })?;
        Ok(ScratchDb { url: format!("postgres://postgres@127.0.0.1:5432/{name}"), name })
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs outside async: drop the database from a thread with its own runtime.
        let dropped = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return false };
            rt.block_on(async {
                let Ok(mut admin) = PgConnection::connect(MAINTENANCE_URL).await else { return false };
                let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                sqlx::query(&sql).execute(&mut admin).await.is_ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(true)) {
            eprintln!("could not drop scratch database {}; drop it by hand", self.name);
        }
    }
}

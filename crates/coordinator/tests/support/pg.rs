//! Test support: a PostgreSQL database created for one test (not migrated)
//! and dropped when the guard is dropped, even when the test panics.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::{Connection, PgConnection};

/// The maintenance database test databases are created from.
const MAINTENANCE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A fresh database; dropped with the guard.
pub struct PgDatabase {
    /// Its URL.
    pub url: String,
    name: String,
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs outside async: drop the database from a thread with its own runtime.
        let dropped = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async {
                if let Ok(mut admin) = PgConnection::connect(MAINTENANCE_URL).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::query(&(sql)).execute(&mut admin).await;
                }
            });
        })
        .join();
        if dropped.is_err() {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}

/// Creates an empty database on the local PostgreSQL.
pub async fn database() -> PgDatabase {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let name = format!("coordinator_svc_{}_{}_{}", std::process::id(), nanos, COUNTER.fetch_add(1, Ordering::Relaxed));
    let mut admin = PgConnection::connect(MAINTENANCE_URL)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL must answer on 127.0.0.1:5432: {e}"));
    sqlx::query(&(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    let _ = admin.close().await;
    PgDatabase { url: format!("postgres://postgres@127.0.0.1:5432/{name}"), name }
}

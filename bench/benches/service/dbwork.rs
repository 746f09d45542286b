//! What PostgreSQL did for a batch of runs, read from its own statistics
//! before and after: WAL bytes (the insert position, exact), WAL records,
//! full-page images and syncs (`pg_stat_wal`, cluster-wide: run nothing else
//! against the server meanwhile), transactions and rows written in the
//! bench's database (`pg_stat_database`), HOT updates (`pg_stat_user_tables`)
//! and, when the server preloads `pg_stat_statements`, statements executed in
//! the database. Statistics are flushed by each backend at most once a second,
//! so [`DbWork::read`] after a batch first waits for that.

use std::time::Duration;

use sqlx::PgPool;

/// Counters at one instant.
#[derive(Debug, Clone, Default)]
pub struct DbWork {
    wal_bytes: f64,
    wal_records: f64,
    wal_fpi: f64,
    wal_syncs: f64,
    commits: f64,
    inserted: f64,
    updated: f64,
    hot_updated: f64,
    deleted: f64,
    statements: Option<f64>,
    /// The WAL insert position, for [`DbWork::wal_by_relation`].
    lsn: Option<String>,
}

const WAL: &str = "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8, \
     wal_records::float8, wal_fpi::float8, wal_sync::float8, pg_current_wal_insert_lsn()::text FROM pg_stat_wal";
/// WAL between two positions by the relation of each record's first block
/// (`pg_walinspect`; records without a block under their resource manager).
const WAL_BY_RELATION: &str = "WITH r AS (SELECT record_length, fpi_length, resource_manager, record_type, \
     (regexp_match(block_ref, 'rel \\d+/\\d+/(\\d+)'))[1]::oid AS node \
     FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)) \
     SELECT COALESCE(c.relname, r.resource_manager) || ' ' || r.record_type, count(*)::float8, \
     SUM(record_length)::float8, SUM(fpi_length)::float8 \
     FROM r LEFT JOIN pg_class c ON c.relfilenode = r.node GROUP BY 1 ORDER BY 3 DESC LIMIT $3";
const DATABASE: &str = "SELECT (xact_commit + xact_rollback)::float8, tup_inserted::float8, tup_updated::float8, \
     tup_deleted::float8 FROM pg_stat_database WHERE datname = current_database()";
const HOT: &str = "SELECT COALESCE(SUM(n_tup_hot_upd), 0)::float8 FROM pg_stat_user_tables";
const STATEMENTS: &str = "SELECT COALESCE(SUM(calls), 0)::float8 FROM pg_stat_statements \
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())";

impl DbWork {
    /// Loads `pg_stat_statements` into the database when the server preloads
    /// it (`shared_preload_libraries`); without it statements are not counted.
    pub async fn prepare(pool: &PgPool) {
        let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").execute(pool).await;
        let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_walinspect").execute(pool).await;
    }

    /// The counters at the start of a measured batch, `pool` prepared first
    /// (`None` without PostgreSQL).
    pub async fn start(pool: Option<&PgPool>) -> anyhow::Result<Option<DbWork>> {
        let Some(pool) = pool else { return Ok(None) };
        DbWork::prepare(pool).await;
        Ok(Some(DbWork::read(pool, Duration::ZERO).await?))
    }

    /// What PostgreSQL did per run since `start` for `runs` runs ([`DbWork::per_run`]),
    /// printing the WAL by relation first when `walstats`.
    pub async fn since(
        pool: Option<&PgPool>,
        start: Option<DbWork>,
        runs: usize,
        walstats: bool,
    ) -> anyhow::Result<Option<String>> {
        let (Some(pool), Some(before)) = (pool, start) else { return Ok(None) };
        let after = DbWork::read(pool, Duration::from_millis(1500)).await?;
        if walstats {
            for line in after.wal_by_relation(pool, &before, runs, 25).await.unwrap_or_default() {
                println!("  WAL {line}");
            }
        }
        Ok(Some(after.per_run(&before, runs)))
    }

    /// The counters now, after the backends' statistics have been flushed
    /// (`settle`: wait this long first; a second and a half is enough).
    pub async fn read(pool: &PgPool, settle: Duration) -> anyhow::Result<DbWork> {
        tokio::time::sleep(settle).await;
        let _ = sqlx::query("SELECT pg_stat_clear_snapshot()").execute(pool).await;
        let (wal_bytes, wal_records, wal_fpi, wal_syncs, lsn): (f64, f64, f64, f64, String) =
            sqlx::query_as(WAL).fetch_one(pool).await?;
        let (commits, inserted, updated, deleted): (f64, f64, f64, f64) =
            sqlx::query_as(DATABASE).fetch_one(pool).await?;
        let (hot_updated,): (f64,) = sqlx::query_as(HOT).fetch_one(pool).await?;
        let statements = sqlx::query_as::<_, (f64,)>(STATEMENTS).fetch_one(pool).await.ok().map(|(n,)| n);
        Ok(DbWork {
            wal_bytes,
            wal_records,
            wal_fpi,
            wal_syncs,
            commits,
            inserted,
            updated,
            hot_updated,
            deleted,
            statements,
            lsn: Some(lsn),
        })
    }

    /// The `top` relations and record types that wrote the most WAL between
    /// `before` and `self`, per run, one per line; `None` without `pg_walinspect`.
    pub async fn wal_by_relation(&self, pool: &PgPool, before: &DbWork, runs: usize, top: i64) -> Option<Vec<String>> {
        let n = runs.max(1) as f64;
        let rows: Vec<(String, f64, f64, f64)> = sqlx::query_as(WAL_BY_RELATION)
            .bind(before.lsn.as_deref()?)
            .bind(self.lsn.as_deref()?)
            .bind(top)
            .fetch_all(pool)
            .await
            .ok()?;
        Some(
            rows.into_iter()
                .map(|(what, records, bytes, fpi)| {
                    format!(
                        "{what}: {:.0} B in {:.1} records ({:.0} B full-page images) per run",
                        bytes / n,
                        records / n,
                        fpi / n
                    )
                })
                .collect(),
        )
    }

    /// What happened between `before` and `self`, per run of `runs`, as one line.
    pub fn per_run(&self, before: &DbWork, runs: usize) -> String {
        let n = runs.max(1) as f64;
        let d = |a: f64, b: f64| (a - b) / n;
        let statements = match (self.statements, before.statements) {
            (Some(a), Some(b)) => format!("{:.1}", d(a, b)),
            _ => "n/a (pg_stat_statements not preloaded)".to_owned(),
        };
        format!(
            "per run: WAL {:.1} KB, {:.0} records ({:.1} full-page images), {:.2} WAL syncs; \
             {:.2} transactions; rows inserted {:.1}, updated {:.1} ({:.1} HOT), deleted {:.1}; statements {statements}",
            d(self.wal_bytes, before.wal_bytes) / 1024.0,
            d(self.wal_records, before.wal_records),
            d(self.wal_fpi, before.wal_fpi),
            d(self.wal_syncs, before.wal_syncs),
            d(self.commits, before.commits),
            d(self.inserted, before.inserted),
            d(self.updated, before.updated),
            d(self.hot_updated, before.hot_updated),
            d(self.deleted, before.deleted),
        )
    }
}

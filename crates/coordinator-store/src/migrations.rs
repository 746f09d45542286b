//! The schema migrations compiled into the binary, handed to sqlx's migrator
//! through a source of our own (docs/internals/migrations.md).
//!
//! sqlx records the checksum of each migration it applies (SHA-384 of the
//! whole text) and refuses to run where a recorded checksum differs from the
//! binary's. So a released migration's statements never change. Its comments
//! may be reworded: such a migration is listed in [`REWORDED`] with the
//! checksum it was released with, which it keeps, and the checksum of its
//! statements (the text without its comment lines), which the file must
//! still have: the migrator refuses it otherwise.

use std::borrow::Cow;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use crate::StoreError;
use crate::db::Dialect;

/// The schema migrations of each dialect: (version, description, SQL), in order.
const SQLITE: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../migrations/sqlite/0001_init.sql")),
    (2, "claims and waits", include_str!("../migrations/sqlite/0002_claims_and_waits.sql")),
    (3, "trigger events", include_str!("../migrations/sqlite/0003_trigger_events.sql")),
    (4, "restore hold", include_str!("../migrations/sqlite/0004_restore_hold.sql")),
    (5, "audit chain", include_str!("../migrations/sqlite/0005_audit_chain.sql")),
    (6, "claim order indexes", include_str!("../migrations/sqlite/0006_claim_order_indexes.sql")),
    (7, "audit pending index", include_str!("../migrations/sqlite/0007_audit_pending.sql")),
    (8, "unleased outbox index", include_str!("../migrations/sqlite/0008_unleased_outbox.sql")),
    (9, "sealed audit indexes", include_str!("../migrations/sqlite/0009_sealed_audit_indexes.sql")),
    (10, "trace parent and attention index", include_str!("../migrations/sqlite/0010_trace_parent.sql")),
    (11, "listing columns and indexes", include_str!("../migrations/sqlite/0011_listing.sql")),
    (12, "runs fillfactor", include_str!("../migrations/sqlite/0012_runs_fillfactor.sql")),
    (13, "admission keys and journal checkpoint", include_str!("../migrations/sqlite/0013_partitions.sql")),
    (14, "narrower journal", include_str!("../migrations/sqlite/0014_narrower_journal.sql")),
    (15, "fence", include_str!("../migrations/sqlite/0015_fence.sql")),
    (16, "lanes", include_str!("../migrations/sqlite/0016_lanes.sql")),
    (17, "journal rows", include_str!("../migrations/sqlite/0017_journal_rows.sql")),
    (18, "snapshot base", include_str!("../migrations/sqlite/0018_snapshot_base.sql")),
    (19, "revision prefix", include_str!("../migrations/sqlite/0019_revision_prefix.sql")),
    (20, "uuid run ids", include_str!("../migrations/sqlite/0020_uuid_run_ids.sql")),
    (21, "connections", include_str!("../migrations/sqlite/0021_connections.sql")),
    (22, "console sign-outs", include_str!("../migrations/sqlite/0022_console_sign_outs.sql")),
    (23, "connection allowances", include_str!("../migrations/sqlite/0023_connection_allowances.sql")),
    (24, "search keys", include_str!("../migrations/sqlite/0024_search_keys.sql")),
    (25, "batches", include_str!("../migrations/sqlite/0025_batches.sql")),
    (26, "schedules", include_str!("../migrations/sqlite/0026_schedules.sql")),
];
const PG: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../migrations/pg/0001_init.sql")),
    (2, "claims and waits", include_str!("../migrations/pg/0002_claims_and_waits.sql")),
    (3, "trigger events", include_str!("../migrations/pg/0003_trigger_events.sql")),
    (4, "restore hold", include_str!("../migrations/pg/0004_restore_hold.sql")),
    (5, "audit chain", include_str!("../migrations/pg/0005_audit_chain.sql")),
    (6, "claim order indexes", include_str!("../migrations/pg/0006_claim_order_indexes.sql")),
    (7, "audit pending index", include_str!("../migrations/pg/0007_audit_pending.sql")),
    (8, "unleased outbox index", include_str!("../migrations/pg/0008_unleased_outbox.sql")),
    (9, "sealed audit indexes", include_str!("../migrations/pg/0009_sealed_audit_indexes.sql")),
    (10, "trace parent and attention index", include_str!("../migrations/pg/0010_trace_parent.sql")),
    (11, "listing columns and indexes", include_str!("../migrations/pg/0011_listing.sql")),
    (12, "runs fillfactor", include_str!("../migrations/pg/0012_runs_fillfactor.sql")),
    (13, "day partitions, admission keys and journal checkpoint", include_str!("../migrations/pg/0013_partitions.sql")),
    (14, "narrower journal", include_str!("../migrations/pg/0014_narrower_journal.sql")),
    (15, "fence", include_str!("../migrations/pg/0015_fence.sql")),
    (16, "lanes", include_str!("../migrations/pg/0016_lanes.sql")),
    (17, "journal rows", include_str!("../migrations/pg/0017_journal_rows.sql")),
    (18, "snapshot base", include_str!("../migrations/pg/0018_snapshot_base.sql")),
    (19, "revision prefix", include_str!("../migrations/pg/0019_revision_prefix.sql")),
    (20, "uuid run ids", include_str!("../migrations/pg/0020_uuid_run_ids.sql")),
    (21, "connections", include_str!("../migrations/pg/0021_connections.sql")),
    (22, "console sign-outs", include_str!("../migrations/pg/0022_console_sign_outs.sql")),
    (23, "connection allowances", include_str!("../migrations/pg/0023_connection_allowances.sql")),
    (24, "search keys", include_str!("../migrations/pg/0024_search_keys.sql")),
    (25, "batches", include_str!("../migrations/pg/0025_batches.sql")),
    (26, "schedules", include_str!("../migrations/pg/0026_schedules.sql")),
];

/// A released migration whose comments were reworded after its release.
struct Reworded {
    dialect: Dialect,
    version: i64,
    /// The checksum of the text as released (hex): the one databases recorded.
    released: &'static str,
    /// The checksum of its statements (hex; see [`statements`]).
    statements: &'static str,
}

/// The released migrations whose comments were reworded: their comments
/// cited documents outside the repository.
const REWORDED: &[Reworded] = &[
    Reworded {
        dialect: Dialect::Sqlite,
        version: 3,
        released: "265ee5a7e6507679cb93d2572f79da4030c9e57bb3d1a324a92328ef1d0709cef3d9f86f0a7fc9612c581130b6ab750c",
        statements: "c2c6b9db2506480ba14bebaf1eeff9b95f98d6caaefc1b8a4dde3ff232cd275b45b2207c2be747af7c0cce2119fa8815",
    },
    Reworded {
        dialect: Dialect::Sqlite,
        version: 4,
        released: "fb56d4cd2a469843ecdabd88fb69e5e854c31582d53d4eb670fafcf4ea865d1eefbeb26742502f2ac7f0fdbcb8d282b0",
        statements: "2d8a21c2c8689435a724432c406d1dbb689b3010f1cf218627ff1a2833e5ed054d086932530e7dc49e656fe41aa36d8a",
    },
    Reworded {
        dialect: Dialect::Sqlite,
        version: 5,
        released: "60ff5391e16517c4d27a6553a88727fbff86ea24a7921c2315e04ce82e4f5bd8e0514fcdef4dbd68968382c36d79f7eb",
        statements: "5b064ef49a99171187760211a74db1ae3b463b9c38c38135f0f15ac6a36b8b37eb1c11d036d8024518462ebff8062332",
    },
    Reworded {
        dialect: Dialect::Pg,
        version: 3,
        released: "8d61ba658a3d499e314305eefaec39aa941931b019ed761122975c2d85663ca37ab0f580a2c74471919929855a5484ea",
        statements: "5afb102b5cd4b55303f090429ebffe86305bc7e0cb73d2261c2ae341cd15721f2b56e372437ab241ad009ee39637b6f4",
    },
    Reworded {
        dialect: Dialect::Pg,
        version: 4,
        released: "fb56d4cd2a469843ecdabd88fb69e5e854c31582d53d4eb670fafcf4ea865d1eefbeb26742502f2ac7f0fdbcb8d282b0",
        statements: "2d8a21c2c8689435a724432c406d1dbb689b3010f1cf218627ff1a2833e5ed054d086932530e7dc49e656fe41aa36d8a",
    },
    Reworded {
        dialect: Dialect::Pg,
        version: 5,
        released: "25c75f4aa79223bfce328e9ade9a764aeac9e9ee640f5433ed22899625b9e08e0cfa7a372743a8619c294e4f1f7fa72f",
        statements: "0bf373e1b6b6873a38904acb0f236a6b3c581b9f12fd307c1089cdb74819fe2f08299d4cf7a38d81628d2654bbec0a4d",
    },
];

/// The migrations of `dialect`: (version, description, SQL), in order.
pub(crate) fn of(dialect: Dialect) -> &'static [(i64, &'static str, &'static str)] {
    match dialect {
        Dialect::Sqlite => SQLITE,
        Dialect::Pg => PG,
    }
}

/// The dialect's name, as in `migrations/<name>/`.
pub(crate) fn name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "sqlite",
        Dialect::Pg => "pg",
    }
}

/// A migration's statements: its lines that are neither blank nor comments,
/// without trailing white space.
fn statements(sql: &str) -> String {
    sql.lines()
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with("--"))
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// sqlx's migrator over the dialect's migrations, each with the checksum it was released with.
pub(crate) async fn migrator(dialect: Dialect) -> Result<Migrator, StoreError> {
    let mut migrations = Vec::new();
    for &(version, description, sql) in of(dialect) {
        let mut migration =
            Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, Cow::Borrowed(sql), false);
        if let Some(released) = released_checksum(dialect, version, sql)? {
            migration.checksum = Cow::Owned(released);
        }
        migrations.push(migration);
    }
    Migrator::new(Embedded(migrations))
        .await
        .map_err(|e| StoreError::Database(format!("reading the {} migrations: {e}", name(dialect))))
}

/// The checksum migration `version` of `dialect` was released with, when its
/// comments were reworded since (`None`: the checksum of its text); an error
/// when its statements (`sql` without comment lines) are not those released.
fn released_checksum(dialect: Dialect, version: i64, sql: &str) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(reworded) = REWORDED.iter().find(|r| r.dialect == dialect && r.version == version) else {
        return Ok(None);
    };
    let named = || format!("{} migration {version}", name(dialect));
    let statements =
        Migration::new(version, Cow::Borrowed(""), MigrationType::Simple, Cow::Owned(statements(sql)), false);
    if hex::encode(&statements.checksum) != reworded.statements {
        return Err(StoreError::Database(format!(
            "{}: its statements are not the ones released (only a released migration's comments may change)",
            named()
        )));
    }
    let released = hex::decode(reworded.released)
        .map_err(|e| StoreError::Database(format!("the released checksum of {}: {e}", named())))?;
    Ok(Some(released))
}

/// The migrations compiled into the binary, as sqlx's migrator reads them.
#[derive(Debug)]
struct Embedded(Vec<Migration>);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 'static>> {
        Box::pin(async move { Ok(self.0) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file under `migrations/<dialect>` is embedded, in the order of its number.
    #[test]
    fn every_migration_file_is_embedded_in_order() {
        for dialect in [Dialect::Sqlite, Dialect::Pg] {
            let dialect = name(dialect);
            let embedded = if dialect == "sqlite" { SQLITE } else { PG };
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(dialect);
            let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|entry| entry.unwrap_or_else(|e| panic!("{e}")).path())
                .collect();
            files.sort();
            assert_eq!(files.len(), embedded.len(), "{dialect}: a migration file is not in the list");
            for (i, (file, (version, _, sql))) in files.iter().zip(embedded).enumerate() {
                let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                assert!(name.starts_with(&format!("{version:04}_")), "{dialect}: {name} is not migration {version}");
                assert_eq!(i64::try_from(i + 1).ok(), Some(*version), "{dialect}: numbers run 1, 2, …");
                let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(text, *sql, "{dialect}: {name} is not the text embedded");
            }
        }
    }

    /// The checksum sqlx computes of `sql`, in hex.
    fn checksum(sql: String) -> String {
        hex::encode(Migration::new(0, Cow::Borrowed(""), MigrationType::Simple, Cow::Owned(sql), false).checksum)
    }

    /// A reworded migration's statements are the ones released: only its comments changed.
    #[test]
    fn a_reworded_migration_keeps_its_released_statements() {
        for reworded in REWORDED {
            let Some(&(_, _, sql)) = of(reworded.dialect).iter().find(|(v, ..)| *v == reworded.version) else {
                panic!("{} migration {} is not embedded", name(reworded.dialect), reworded.version);
            };
            assert_eq!(
                checksum(statements(sql)),
                reworded.statements,
                "{} migration {}: a released migration's statements never change (only its comments may)",
                name(reworded.dialect),
                reworded.version
            );
            let reworded_again = format!("-- Reworded once more.\n{sql}\n   -- and a last line\n");
            let released = released_checksum(reworded.dialect, reworded.version, &reworded_again);
            assert_eq!(released.ok().flatten().map(hex::encode).as_deref(), Some(reworded.released));
            let changed = format!("{sql}SELECT 1;\n");
            let refused = released_checksum(reworded.dialect, reworded.version, &changed);
            assert!(
                refused.as_ref().is_err_and(|e| e.to_string().contains("statements are not the ones released")),
                "{refused:?}"
            );
        }
    }

    /// A migration not reworded carries the checksum of its text; a reworded
    /// one the checksum it was released with, whatever its text is now.
    #[tokio::test]
    async fn the_migrator_offers_the_released_checksums() {
        for dialect in [Dialect::Sqlite, Dialect::Pg] {
            let migrator = migrator(dialect).await.unwrap_or_else(|e| panic!("{e}"));
            for migration in migrator.iter() {
                let expected = match REWORDED.iter().find(|r| r.dialect == dialect && r.version == migration.version) {
                    Some(reworded) => reworded.released.to_string(),
                    None => checksum(migration.sql.to_string()),
                };
                assert_eq!(hex::encode(&migration.checksum), expected, "{} {}", name(dialect), migration.version);
            }
        }
    }

    /// The statements leave out comment and blank lines and keep everything else, trailing comments included.
    #[test]
    fn statements_leave_out_comment_and_blank_lines_only() {
        let sql = "-- a comment\nCREATE TABLE t (a INT); -- kept  \n   -- indented comment\n\n  SELECT 1;\n";
        assert_eq!(statements(sql), "CREATE TABLE t (a INT); -- kept\n  SELECT 1;");
    }
}

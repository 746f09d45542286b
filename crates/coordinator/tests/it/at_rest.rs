//! Nothing protected is stored in clear
//! (docs/reference/protection.md#payloads-sealed-at-rest), on both stores: after the
//! flagship runs to its end and a notice whose answer was lost is reconciled,
//! every table of the database (PostgreSQL: each table's rows as text, bytes
//! as hex; SQLite: the database file and its WAL) is searched for the input's
//! values, the products' answers (review references, the notice's receipt and
//! output) and the package's function source, in clear and hex-encoded. The
//! same search finds the run ids and the revision, so it is not vacuous.

use std::path::Path;
use std::time::Duration;

use coordinator_sim::Simulators;
use sqlx::{Connection, PgConnection, Row};

use crate::support::deploy::{deployment, eager_flagship, migrated};
use crate::support::pg::{self, Backend};
use crate::support::{
    files_starting, finished_and_reconciled, flagship, notice_strings, on_runtime, sample_input, strings_of, tempdir,
};

/// What must not be found: input values, product answers, function source.
fn protected(sims: &Simulators, runs: &[String]) -> Vec<String> {
    let mut found = strings_of(&sample_input());
    found.extend(sims.casework.references());
    for run in runs {
        found.extend(notice_strings(sims, run));
    }
    let source =
        std::fs::read_to_string(flagship().join("functions.rhai")).unwrap_or_else(|e| panic!("functions.rhai: {e}"));
    let lines: Vec<String> = source
        .lines()
        .map(str::trim)
        .filter(|l| l.len() >= 24 && !l.contains(['"', '\\']))
        .map(str::to_owned)
        .collect();
    assert!(lines.len() >= 3, "the function source has lines to look for");
    found.extend(lines);
    found.sort();
    found.dedup();
    // Run ids are in the clear by design (keys and outputs carry them): not what is looked for.
    found.retain(|s| s.len() >= 8 && !runs.iter().any(|r| r.contains(s.as_str()) || s.contains(r.as_str())));
    found
}

/// Everything the database holds, as text to search.
async fn everything(pg: Option<&str>, dir: &Path) -> String {
    let Some(url) = pg else {
        let all: Vec<u8> = files_starting(dir, "c.db").into_iter().flat_map(|(_, bytes)| bytes).collect();
        assert!(!all.is_empty(), "the SQLite files");
        return String::from_utf8_lossy(&all).into_owned();
    };
    let mut conn = PgConnection::connect(url).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_else(|e| panic!("tables: {e}"));
    assert!(tables.iter().any(|t| t == "packages") && tables.iter().any(|t| t == "runs"), "{tables:?}");
    let mut all = String::new();
    for table in tables {
        let sql = format!("SELECT COALESCE(string_agg(t::text, E'\\n'), '') FROM \"{table}\" t");
        let row = sqlx::query(&sql).fetch_one(&mut conn).await.unwrap_or_else(|e| panic!("{table}: {e}"));
        all.push_str(&row.get::<String, _>(0));
        all.push('\n');
    }
    all
}

async fn nothing_in_clear_on(backend: Backend) {
    let dir = tempdir();
    let db = pg::on(backend, dir.path()).await;
    // The review wait observes every second: a decision announced before the run entered
    // its wait (a notification only brings an open wait's observation forward) costs a second.
    let (mut spec, sims) = deployment(&db.url, Some(Duration::from_millis(100)), true).await;
    spec.project = eager_flagship(dir.path());
    let url = spec.url();
    let service = migrated(&spec.write(dir.path())).await;
    let revision = service.revision.clone();
    let runs = finished_and_reconciled(&url, &sims.base, &revision).await;
    drop(service);

    let stored = everything(db.pg.as_ref().map(|p| p.url.as_str()), dir.path()).await;
    let store = backend.name();
    for run in &runs {
        assert!(stored.contains(run.as_str()), "{store}: the search sees the run ids");
    }
    assert!(stored.contains(revision.as_str()), "{store}: the search sees the revision");
    let looked_for = protected(&sims.sims, &runs);
    assert!(looked_for.len() >= 8, "{store}: something to look for: {looked_for:?}");
    for value in &looked_for {
        assert!(!stored.contains(value.as_str()), "{store}: `{value}` is stored in clear");
        assert!(!stored.contains(&hex::encode(value)), "{store}: `{value}` is stored in clear (as bytes)");
    }
    drop(db);
}

#[test]
fn nothing_protected_is_stored_in_clear_on_sqlite() {
    on_runtime(nothing_in_clear_on(Backend::Sqlite));
}

#[test]
fn nothing_protected_is_stored_in_clear_on_postgres() {
    on_runtime(nothing_in_clear_on(Backend::Postgres));
}

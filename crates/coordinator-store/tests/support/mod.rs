//! Conformance-suite support: a fresh database per test on each backend (the
//! PostgreSQL one dropped by a guard even when the test panics), migrated to
//! the current schema or only to the first one (upgrade tests), raw SQL for
//! setting up old rows, the reviewed-notice workflow, and runs driven through
//! the real state machine.

use std::borrow::Cow;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use coordinator_core::check::{ProjectSource, SourceError, check_project};
use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::Event;
use coordinator_core::machine::run::{Attention, Run};
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings, Transition, decide};
use coordinator_functions::Limits;
use coordinator_store::{Admission, Decision, NewRun, Package, Store, StoreError, snapshot_frame};
use coordinator_testdb::ScratchDb;
use serde_json::json;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::{Connection, PgConnection, SqliteConnection};

/// The admission instant of test runs.
pub const T0: i64 = 1_791_968_400_000; // 2026-10-14T09:00:00Z

/// A store on a fresh database, removed when dropped. It derefs to the
/// [`Store`], so suite functions taking `&Store` accept `&TestDb`.
pub struct TestDb {
    pub store: Store,
    /// The database URL (for a second handle or raw SQL).
    pub url: String,
    _cleanup: Cleanup,
}

impl Deref for TestDb {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

impl TestDb {
    /// Whether this is the PostgreSQL backend.
    pub fn is_postgres(&self) -> bool {
        self.url.starts_with("postgres:")
    }
}

/// Which schema a fresh test database gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// Everything `Store::migrate` applies.
    Current,
    /// Only migration 1 (as released), for upgrade tests.
    Initial,
}

/// What a test database leaves to remove when it is dropped.
enum Cleanup {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Pg(#[allow(dead_code)] ScratchDb),
}

/// A SQLite store in a fresh temporary directory, migrated to `schema`.
pub async fn sqlite(schema: Schema) -> TestDb {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("store.db").display());
    let store = Store::connect(&url).await.unwrap_or_else(|e| panic!("connect {url}: {e}"));
    let db = TestDb { store, url, _cleanup: Cleanup::Sqlite(dir) };
    migrate(&db, schema).await;
    db
}

/// A PostgreSQL store on a database created for this test, migrated to `schema`.
pub async fn postgres(schema: Schema) -> TestDb {
    let scratch = ScratchDb::create("coordinator_test").await.unwrap_or_else(|e| panic!("{e}"));
    let url = scratch.url.clone();
    let cleanup = Cleanup::Pg(scratch);
    let store = Store::connect(&url).await.unwrap_or_else(|e| panic!("connect {url}: {e}"));
    let db = TestDb { store, url, _cleanup: cleanup };
    migrate(&db, schema).await;
    db
}

/// Exactly these migrations, as sqlx's migrator reads them.
#[derive(Debug)]
struct Only(Vec<Migration>);

impl MigrationSource<'static> for Only {
    fn resolve(
        self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<Migration>, sqlx::error::BoxDynError>> + Send + 'static>>
    {
        Box::pin(async move { Ok(self.0) })
    }
}

async fn migrate(db: &TestDb, schema: Schema) {
    if schema == Schema::Current {
        db.store.migrate().await.unwrap_or_else(|e| panic!("migrate: {e}"));
        return;
    }
    // Migration 1 exactly as `Store::migrate` records it, so a later migrate continues from it.
    let sql = if db.is_postgres() {
        include_str!("../../migrations/pg/0001_init.sql")
    } else {
        include_str!("../../migrations/sqlite/0001_init.sql")
    };
    let init = Migration::new(1, Cow::Borrowed("init"), MigrationType::Simple, Cow::Borrowed(sql), false);
    let migrator = Migrator::new(Only(vec![init])).await.unwrap_or_else(|e| panic!("migrator: {e}"));
    let applied = if db.is_postgres() {
        let mut conn = PgConnection::connect(&db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        migrator.run(&mut conn).await
    } else {
        let mut conn = SqliteConnection::connect(&db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        migrator.run(&mut conn).await
    };
    applied.unwrap_or_else(|e| panic!("migration 1: {e}"));
}

/// Runs raw SQL statements on the test database, outside the store.
pub async fn raw(db: &TestDb, sql: &str) {
    let done = if db.is_postgres() {
        let mut conn = PgConnection::connect(&db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        sqlx::raw_sql(sql).execute(&mut conn).await.map(|_| ())
    } else {
        let mut conn = SqliteConnection::connect(&db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        sqlx::raw_sql(sql).execute(&mut conn).await.map(|_| ())
    };
    done.unwrap_or_else(|e| panic!("raw SQL: {e}"));
}

/// The first column of the first row of `sql`, an integer (`count(*)`), read directly.
pub async fn raw_count(db: &TestDb, sql: &str) -> i64 {
    let counted = if db.is_postgres() {
        let mut conn = PgConnection::connect(&db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        sqlx::query_scalar::<_, i64>(sql).fetch_one(&mut conn).await
    } else {
        let mut conn = SqliteConnection::connect(&db.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        sqlx::query_scalar::<_, i64>(sql).fetch_one(&mut conn).await
    };
    counted.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

struct DirSource(PathBuf);

impl ProjectSource for DirSource {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        match std::fs::read_to_string(self.0.join(path)) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SourceError::Unreadable { path: path.into(), reason: e.to_string() }),
        }
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        Ok(Vec::new())
    }
}

/// The flagship workflow, compiled.
pub fn workflow() -> Workflow {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/reviewed-notice");
    let report = check_project(&DirSource(dir)).unwrap_or_else(|e| panic!("reviewed-notice unreadable: {e}"));
    let Some(checked) = report.checked else { panic!("reviewed-notice must check clean") };
    Workflow::compile(checked.definition, Limits::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// A decision carrying a run's snapshot as JSON (the service seals it; the store does not care).
pub fn decision(run: &Run, transition: &Transition) -> Decision {
    with_actions(run, transition.actions.clone())
}

/// A decision of `actions` leaving the run as `run` is, its listing columns
/// copied from it as the service copies them.
pub fn with_actions(run: &Run, actions: Vec<coordinator_core::machine::action::Action>) -> Decision {
    let attention_step = match &run.attention {
        Some(Attention::UnknownEffect { step }) => Some(step.clone()),
        Some(Attention::RestoreHold) | None => None,
    };
    Decision {
        actions,
        snapshot: encode(run),
        state: run.state,
        held: run.held,
        outcome: run.outcome.clone(),
        attention_step,
        lanes: Vec::new(),
        connections: Vec::new(),
    }
}

/// The base every test snapshot is framed with (`snapshot_frame`): the
/// service's is a sealed snapshot; here it only has to come back.
pub const BASE: &[u8] = b"\x01the base of every test snapshot";

/// The snapshot bytes of a run: a frame of [`BASE`] and the run's JSON as
/// the head (the service seals both parts).
pub fn encode(run: &Run) -> Vec<u8> {
    let json = serde_json::to_vec(run).unwrap_or_else(|e| panic!("snapshot: {e}"));
    snapshot_frame::join(Some(BASE.to_vec()), json)
}

/// A run back from its snapshot bytes, which must carry [`BASE`]: every
/// read of a snapshot returns both of its columns.
pub fn decode(bytes: &[u8]) -> Result<Run, String> {
    match snapshot_frame::split(bytes).map_err(|e| e.to_string())? {
        (Some(BASE), head) => serde_json::from_slice(head).map_err(|e| e.to_string()),
        (base, _) => Err(format!("the snapshot came back with base {base:?}, not the one written")),
    }
}

/// A new run of reviewed-notice for `owner` with `key`.
pub fn new_run(wf: &Workflow, id: &str, owner: &str, key: Option<&str>, admitted_at: i64) -> NewRun {
    NewRun {
        id: id.to_owned(),
        workflow: "reviewed-notice".to_owned(),
        revision: wf.revision.clone(),
        owner: owner.to_owned(),
        idempotency_key: key.map(str::to_owned),
        input_digest: "sha256:input-1".to_owned(),
        admitted_at,
        trace_parent: None,
        search_keys: Vec::new(),
    }
}

/// The first decision of a run: its `Admitted` transition.
pub fn first(wf: &Workflow, new: &NewRun) -> Decision {
    let input =
        json!({"applicationId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", "recipient": {"kind": "person", "id": "p-1"}});
    let mut run = Run::new(&new.id, &wf.revision, Instant(new.admitted_at), input);
    let t = decide(wf, &run, &Event::Admitted, Instant(new.admitted_at), &Settings::default());
    assert_eq!(t.outcome, Outcome::Applied, "admission must apply");
    for a in &t.actions {
        run.apply(a);
    }
    decision(&run, &t)
}

/// Stores the flagship's package at `wf`'s revision (not activated).
pub async fn put_flagship_package(store: &Store, wf: &Workflow) {
    let package = Package {
        revision: wf.revision.clone(),
        workflow: "reviewed-notice".into(),
        digest: "d1".into(),
        bytes: b"package".to_vec(),
    };
    assert!(store.put_package(&package).await.is_ok(), "put the package");
}

/// Admits a run (no key) and returns its id.
pub async fn admit(store: &Store, wf: &Workflow, id: &str, admitted_at: i64) -> String {
    let new = new_run(wf, id, "alice", None, admitted_at);
    match store.admit(&new, || Ok::<_, StoreError>(first(wf, &new))).await {
        Ok(Admission::Created(id)) => id,
        other => panic!("admission of {id}: {other:?}"),
    }
}

/// Decides `event` on the stored snapshot: the closure `Store::apply` runs under the lock.
pub fn deciding<'a>(
    wf: &'a Workflow,
    event: &'a Event,
    now: i64,
) -> impl FnOnce(&[u8]) -> Result<Decision, String> + 'a {
    move |snapshot| {
        let mut run = decode(snapshot)?;
        let t = decide(wf, &run, event, Instant(now), &Settings::default());
        if t.outcome != Outcome::Applied {
            return Err(format!("{event:?}: {:?}", t.outcome));
        }
        for a in &t.actions {
            run.apply(a);
        }
        Ok(decision(&run, &t))
    }
}

/// A run id for test `n` (UUIDv7-shaped text).
pub fn run_id(n: u32) -> String {
    format!("0199c8a0-0000-7000-8000-{n:012}")
}

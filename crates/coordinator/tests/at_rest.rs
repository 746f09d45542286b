//! Nothing protected is stored in clear (SPEC §4), on both stores: after the
//! flagship runs to its end and a notice whose answer was lost is reconciled,
//! every table of the database (PostgreSQL: each table's rows as text, bytes
//! as hex; SQLite: the database file and its WAL) is searched for the input's
//! values, the products' answers (review references, the notice's receipt and
//! output) and the package's function source, in clear and hex-encoded. The
//! same search finds the run ids and the revision, so it is not vacuous.

#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
#[path = "support/deploy.rs"]
mod deploy;
#[path = "support/pg.rs"]
mod pg;
#[allow(dead_code, reason = "shared test support; this binary uses a part of it")]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use coordinator::process::deployment::RuntimeConfig;
use coordinator::process::serve;
use coordinator_sim::casework::CaseworkConfig;
use coordinator_sim::{ReceiptLookup, SimConfig};
use deploy::{DeploymentSpec, SimServer, free_port, sim_server};
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection, Row};
use support::{authorized_client, on_runtime, repo, sample_input};

/// How long any wait may take (a failure guard, never a speed claim).
const GUARD: Duration = Duration::from_secs(120);

async fn until(client: &reqwest::Client, url: &str, run: &str, state: &str) {
    let started = Instant::now();
    loop {
        let view: Value = match client.get(format!("{url}/v1/runs/{run}")).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        if view["state"] == state {
            return;
        }
        assert!(started.elapsed() < GUARD, "{run} never reached {state}: {view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn strings_of(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::String(s) => into.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, into)),
        Value::Object(map) => map.values().for_each(|v| strings_of(v, into)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// What must not be found: input values, product answers, function source.
fn protected(sims: &SimServer, runs: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    strings_of(&sample_input(), &mut found);
    found.extend(sims.sims.casework.references());
    for run in runs {
        let key = format!("{run}:send-notice");
        let ReceiptLookup::Found(accepted) = sims.sims.messaging.receipt(&key) else { panic!("no receipt for {key}") };
        found.extend(accepted.completions.values().cloned());
        strings_of(&accepted.output, &mut found);
    }
    let source = std::fs::read_to_string(repo().join("examples/reviewed-notice/functions.rhai"))
        .unwrap_or_else(|e| panic!("functions.rhai: {e}"));
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

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Everything the database holds, as text to search.
async fn everything(pg: Option<&str>, dir: &Path) -> String {
    let Some(url) = pg else {
        let mut all = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{e}")).flatten() {
            if entry.file_name().to_string_lossy().starts_with("c.db") {
                all.extend(std::fs::read(entry.path()).unwrap_or_else(|e| panic!("{e}")));
            }
        }
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

async fn nothing_in_clear_on(postgres: bool) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let sims = sim_server(SimConfig {
        casework: CaseworkConfig {
            auto_decide_after: Some(Duration::from_millis(100)),
            notify_url: Some(format!("{url}/v1/completions/casework")),
            ..CaseworkConfig::default()
        },
        ..SimConfig::default()
    })
    .await;
    let pg = if postgres { Some(pg::database().await) } else { None };
    let database = match &pg {
        None => format!("sqlite://{}?mode=rwc", dir.path().join("c.db").display()),
        Some(pg) => pg.url.clone(),
    };
    let mut spec = DeploymentSpec::new(&database, &sims.base);
    spec.listen = format!("127.0.0.1:{port}");
    let file = spec.write(dir.path());
    let config = RuntimeConfig::read(&file).unwrap_or_else(|e| panic!("runtime.yaml: {e}"));
    serve::migrate(&config).await.unwrap_or_else(|e| panic!("migrate: {e}"));
    let service = serve::start(config.resolve().unwrap_or_else(|e| panic!("resolve: {e}")))
        .await
        .unwrap_or_else(|e| panic!("serve: {e}"));
    let revision = service.revision.clone();
    let client = authorized_client(Duration::from_secs(30));
    let admit = |key: &str| {
        let body = json!({"workflow": "reviewed-notice", "revision": revision, "idempotencyKey": key, "input": sample_input()});
        let request = client.post(format!("{url}/v1/runs")).json(&body);
        async move {
            let response = request.send().await.unwrap_or_else(|e| panic!("{e}"));
            let body: Value = response.json().await.unwrap_or(Value::Null);
            body["runId"].as_str().unwrap_or_else(|| panic!("{body}")).to_owned()
        }
    };
    let flagship = admit("flagship").await;
    until(&client, &url, &flagship, "finished").await;
    let fault = json!({"operation": "submit-message/v1", "fault": "drop-response-after-effect", "count": 1});
    let (status, answer) = support::post(&format!("{}/sim/messaging/v1/faults", sims.base), &fault).await;
    assert_eq!(status, 200, "{answer}");
    let faulted = admit("faulted").await;
    until(&client, &url, &faulted, "attention").await;
    let reconciled = client.post(format!("{url}/v1/runs/{faulted}/steps/send-notice/reconcile")).send().await;
    assert_eq!(reconciled.map(|r| r.status().as_u16()).ok(), Some(202));
    until(&client, &url, &faulted, "finished").await;
    drop(service);

    let runs = vec![flagship, faulted];
    let stored = everything(pg.as_ref().map(|p| p.url.as_str()), dir.path()).await;
    let store = if postgres { "PostgreSQL" } else { "SQLite" };
    for run in &runs {
        assert!(stored.contains(run.as_str()), "{store}: the search sees the run ids");
    }
    assert!(stored.contains(revision.as_str()), "{store}: the search sees the revision");
    let looked_for = protected(&sims, &runs);
    assert!(looked_for.len() >= 8, "{store}: something to look for: {looked_for:?}");
    for value in &looked_for {
        assert!(!stored.contains(value.as_str()), "{store}: `{value}` is stored in clear");
        assert!(!stored.contains(&hex(value)), "{store}: `{value}` is stored in clear (as bytes)");
    }
    drop(pg);
}

#[test]
fn nothing_protected_is_stored_in_clear_on_sqlite() {
    on_runtime(nothing_in_clear_on(false));
}

#[test]
fn nothing_protected_is_stored_in_clear_on_postgres() {
    on_runtime(nothing_in_clear_on(true));
}

//! `console`: the operator console's pages over a PostgreSQL store holding a
//! million runs. The runs are written straight into the `runs` table (one
//! `INSERT … SELECT … FROM generate_series`: 97 % finished, 2 % running, 1 %
//! in attention — half under a hold —, three workflows, 30 days of
//! admissions, time-ordered ids; each with an idempotency key and a search key
//! `application` of its own), then the console is signed in to and each
//! page asked for repeatedly. Server time is the `latency_ms` of the page's
//! request log line (the service's own measure, from request to response);
//! the client's round trip on loopback is printed beside it.

use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use serde_json::Value;

use crate::Options;
use crate::stack::{API_TOKEN, Backend, Observer, Stack};

/// Requests per page (after [`WARMUP`] unmeasured ones).
const REQUESTS: usize = 30;
const WARMUP: usize = 3;

const POPULATE: &str = "INSERT INTO runs (id, workflow, revision, owner, idempotency_key, input_digest, state, held, \
     admitted_at, updated_at, version, snapshot, trace_parent, outcome, attention_step, attention_since) \
     SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, \
       CASE i % 3 WHEN 0 THEN $1 WHEN 1 THEN 'workflow-b' ELSE 'workflow-c' END, \
       CASE i % 3 WHEN 0 THEN $2 ELSE 'sha256:' || lpad(to_hex(i % 3), 64, '0') END, \
       'bench', 'key-' || i, 'sha256:00', \
       CASE WHEN i % 100 = 7 THEN 'attention' WHEN i % 100 IN (3, 5) THEN 'running' ELSE 'finished' END, \
       (i % 200 = 7), at, at + 5000, 3, '\\x00'::bytea, NULL, \
       CASE WHEN i % 100 IN (3, 5, 7) THEN NULL ELSE 'done' END, \
       CASE WHEN i % 100 = 7 AND i % 200 <> 7 THEN 'call-two' END, \
       CASE WHEN i % 100 = 7 THEN at + 5000 END \
     FROM (SELECT i, $3::bigint + i * $4::bigint AS at, lpad(to_hex($3::bigint + i * $4::bigint), 12, '0') AS h \
           FROM generate_series(1, $5::bigint) AS i) AS s";

/// Every run's idempotency key in `admission_keys`, and a search key of its own.
const POPULATE_KEYS: [&str; 2] = [
    "INSERT INTO admission_keys (owner, workflow, idempotency_key, run_id) \
     SELECT owner, workflow, idempotency_key, id FROM runs",
    "INSERT INTO run_keys (name, value, run_id) SELECT 'application', 'app-' || substr(idempotency_key, 5), id FROM runs",
];

/// A page and how to ask for it.
struct Probe {
    name: &'static str,
    path: String,
    route: &'static str,
    /// Whether the page must list exactly one run (a lookup by key).
    finds_one: bool,
}

pub async fn console(options: &Options) -> anyhow::Result<()> {
    let runs: i64 = options.number("runs", 1_000_000)?;
    let stack = Stack::start(Backend::Pg, "three-calls", "sslmode=disable").await?;
    let Observer::Pg(pool) = &stack.observer else { bail!("the console bench runs on PostgreSQL") };
    let now = crate::load::epoch_ms();
    let span: i64 = 30 * 24 * 3600 * 1000;
    let started = Instant::now();
    sqlx::query(POPULATE)
        .bind(&stack.workflow)
        .bind(&stack.revision)
        .bind(now - span)
        .bind(span / runs.max(1))
        .bind(runs)
        .execute(pool)
        .await
        .context("populating runs")?;
    for statement in POPULATE_KEYS {
        sqlx::query(statement).execute(pool).await.context("populating keys")?;
    }
    sqlx::query("ANALYZE runs, admission_keys, run_keys").execute(pool).await?;
    println!("{runs} runs written in {:.1} s", started.elapsed().as_secs_f64());

    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let signed = client
        .post(format!("{}/console/sign-in", stack.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={API_TOKEN}&next=%2Fconsole%2Fruns"))
        .send()
        .await?;
    let cookie = signed
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("the console did not sign in"))?;
    let first = fetch(&client, &stack.url, "/console/runs", &cookie).await?.1;
    let older = first
        .split("href=\"/console/runs?")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(|q| format!("/console/runs?{}", q.replace("&amp;", "&")))
        .ok_or_else(|| anyhow!("the first page has no older page"))?;
    let workflow = &stack.workflow;
    let probe =
        |name: &'static str, path: String, route: &'static str, finds_one: bool| Probe { name, path, route, finds_one };
    let (runs_page, inbox) = ("/console/runs", "/console/attention");
    let probes = [
        probe("runs, newest first", runs_page.into(), runs_page, false),
        probe("runs, the next page", older, runs_page, false),
        probe(
            "runs of a workflow, running",
            format!("/console/runs?workflow={workflow}&state=running"),
            runs_page,
            false,
        ),
        probe("runs in attention", "/console/runs?state=attention".into(), runs_page, false),
        probe("runs by search key", format!("/console/runs?key=application%3Dapp-{}", runs / 3), runs_page, true),
        probe(
            "runs by search key, in attention",
            format!("/console/runs?state=attention&key=application%3Dapp-{}", runs / 3),
            runs_page,
            false,
        ),
        probe("runs by idempotency key", format!("/console/runs?idempotencyKey=key-{}", runs / 2), runs_page, true),
        probe("attention inbox (groups)", inbox.into(), inbox, false),
        probe(
            "attention inbox, one group's runs",
            format!("/console/attention?workflow={workflow}&reason=unknown-effect&step=call-two"),
            inbox,
            false,
        ),
    ];
    println!("| page | server p50 ms | server p95 ms | server max ms | round trip p50 ms | bytes |");
    println!("|---|---|---|---|---|---|");
    for probe in &probes {
        for _ in 0..WARMUP {
            fetch(&client, &stack.url, &probe.path, &cookie).await?;
        }
        let before = log_lines(&stack, probe.route).len();
        let mut trips = Vec::new();
        let mut bytes = 0;
        for _ in 0..REQUESTS {
            let (trip, body) = fetch(&client, &stack.url, &probe.path, &cookie).await?;
            trips.push(trip.as_secs_f64() * 1000.0);
            bytes = body.len();
            if probe.finds_one && body.matches("<a class=\"id\" href=\"/console/runs/").count() != 1 {
                bail!("{}: the page does not list exactly one run", probe.name);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut server: Vec<f64> = log_lines(&stack, probe.route).into_iter().skip(before).collect();
        if server.len() < REQUESTS {
            bail!("{}: only {} request lines were logged", probe.name, server.len());
        }
        server.truncate(REQUESTS);
        let (p50, p95, max) = quantiles(&mut server);
        let (trip50, _, _) = quantiles(&mut trips);
        println!("| {} | {p50:.2} | {p95:.2} | {max:.2} | {trip50:.2} | {bytes} |", probe.name);
    }
    stack.stop().await;
    Ok(())
}

async fn fetch(client: &reqwest::Client, base: &str, path: &str, cookie: &str) -> anyhow::Result<(Duration, String)> {
    let started = Instant::now();
    let response = client.get(format!("{base}{path}")).header("cookie", cookie).send().await?;
    let status = response.status();
    let body = response.text().await?;
    if !status.is_success() {
        bail!("{path}: {status}");
    }
    Ok((started.elapsed(), body))
}

/// `latency_ms` of every request line of `route` so far.
fn log_lines(stack: &Stack, route: &str) -> Vec<f64> {
    stack
        .log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == "request" && l["route"] == route)
        .filter_map(|l| l["latency_ms"].as_f64())
        .collect()
}

fn quantiles(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.95), at(1.0))
}

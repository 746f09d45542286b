//! Flow control under load (docs/reference/service.md#limits), 3-call runs
//! (bench/fixtures/three-calls) on PostgreSQL, each row on a fresh database:
//!
//! 1. **Limits that do not bind cost nothing**: `rounds` pairs of rows, one
//!    serve process, the order alternating within the pairs: without limits,
//!    and with `limits: {concurrency: 10000, ratePerSecond: 1000000}` on
//!    both connections of the fixture (every request then goes through the
//!    limited lanes, the connection row's lock and its bucket). Completed
//!    runs/s of each row; the ratio of the medians.
//! 2. **A binding rate across two processes**: `limits: {ratePerSecond:
//!    rate}` on messaging, two serve processes on one database, `rated` runs
//!    admitted through the first (both claim). Messaging's arrivals per
//!    second after the bucket's first burst (from 2 s after the first
//!    arrival to the last), the whole row against what the bucket allows
//!    (`burst + rate × seconds`), and how many requests each process sent.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use anyhow::bail;
use sqlx::postgres::PgPoolOptions;

use crate::fleet::{Process, end_row, metrics, spawn, wait_ready};
use crate::load::{Admitter, closed_loop, wait_finished};
use crate::stack::{Observer, PgScratch, SimServer, coordinator_bin, read_listen, repo, sim_server, write_deployment};
use crate::{Cpu, FINISH_LIMIT, FINISH_POLL, Options, three_calls_input};

/// Limits far above what the machine can send: configured, never binding.
const NOT_BINDING: &str = "{concurrency: 10000, ratePerSecond: 1000000}";

/// `flow` scenario.
pub async fn flow(options: &Options) -> anyhow::Result<()> {
    let rounds: usize = options.number("rounds", 3)?;
    let clients: usize = options.number("clients", 32)?;
    let runs: usize = options.number("runs", 4000)?;
    let rate: f64 = options.number("rate", 200.0)?;
    let rated: usize = options.number("rated", 3000)?;
    let not_binding = options.text("limits", NOT_BINDING);
    let only: Vec<String> = options.list("parts", "free,rate");
    if only.iter().any(|p| p == "free") {
        println!("limits not binding: {runs} 3-call runs per row at {clients} clients, one serve process, PostgreSQL");
        println!(
            "| round | limits | completed runs/s | CPU ms per run: coordinator / postgres | claim rounds per run |"
        );
        println!("|---|---|---|---|---|");
        let (mut none, mut limited) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let order = if round % 2 == 0 { [false, true] } else { [true, false] };
            for with in order {
                let limits = with.then_some(not_binding.as_str());
                let row = Row::start(options, 1, limits.map(|l| [("registry", l), ("messaging", l)].to_vec())).await?;
                let before = Cpu::read_all(&row.pids, &[])?;
                let per_second = row.run(clients, runs).await?;
                let used = Cpu::read_all(&row.pids, &[])?.since(&before);
                let rounds = claim_rounds(&metrics(&row.urls[0]).await?);
                let per_run = |seconds: f64| 1000.0 * seconds / runs as f64;
                println!(
                    "| {} | {} | {per_second:.0} | {:.2} / {:.2} | {:.2} |",
                    round + 1,
                    limits.unwrap_or("none"),
                    per_run(used.coordinator),
                    per_run(used.postgres),
                    rounds / runs as f64
                );
                if with { limited.push(per_second) } else { none.push(per_second) }
            }
        }
        let (a, b) = (median(&mut none), median(&mut limited));
        println!("medians: none {a:.0}, limited {b:.0}: limited / none = {:.3}", b / a);
    }
    if only.iter().any(|p| p == "rate") {
        println!("messaging at ratePerSecond: {rate}, two serve processes, {rated} runs");
        let limits = format!("{{ratePerSecond: {rate}}}");
        let row = Row::start(options, 2, Some(vec![("messaging", limits.as_str())])).await?;
        row.sims.sims.messaging.reset_load();
        row.run(clients, rated).await?;
        let arrivals = row.sims.sims.messaging.load().arrivals;
        let (Some(&first), Some(&last)) = (arrivals.first(), arrivals.last()) else {
            bail!("messaging received nothing")
        };
        let steady_from = first + 2_000;
        let steady = arrivals.iter().filter(|&&at| at >= steady_from).count();
        let steady_seconds = (last.saturating_sub(steady_from)) as f64 / 1000.0;
        let whole_seconds = (last - first) as f64 / 1000.0;
        let allowed = rate.ceil() + rate * whole_seconds;
        let mut sent = Vec::new();
        for url in &row.urls {
            sent.push(requests_to(&metrics(url).await?, "messaging"));
        }
        println!(
            "messaging: {} requests over {whole_seconds:.1} s (the bucket allows {allowed:.0}); after the first burst {steady} in {steady_seconds:.1} s = {:.1}/s ({:+.1} % of {rate}); sent per process: {sent:?}",
            arrivals.len(),
            steady as f64 / steady_seconds,
            100.0 * (steady as f64 / steady_seconds / rate - 1.0),
        );
    }
    Ok(())
}

/// One row's deployment: serve processes on a fresh database, the simulators.
struct Row {
    urls: Vec<String>,
    workflow: String,
    revision: String,
    observer: Observer,
    sims: SimServer,
    pids: Vec<u32>,
    _procs: Vec<Process>,
    _pg: PgScratch,
    _dir: tempfile::TempDir,
}

impl Row {
    /// `serves` processes with `limits` written on the named connections.
    async fn start(options: &Options, serves: usize, limits: Option<Vec<(&str, &str)>>) -> anyhow::Result<Row> {
        let bin = coordinator_bin()?;
        let dir = tempfile::Builder::new().prefix("coordinator-flow-").tempdir()?;
        let sims = sim_server().await?;
        let pg = PgScratch::create("coordinator_bench").await?;
        let params = options.pg_params();
        let url = if params.is_empty() { pg.url.clone() } else { format!("{}?{params}", pg.url) };
        let project = repo().join("bench/fixtures/three-calls");
        let (mut urls, mut procs, mut pids) = (Vec::new(), Vec::new(), Vec::new());
        let (mut workflow, mut revision) = (String::new(), String::new());
        for i in 0..serves {
            let place = dir.path().join(format!("serve-{i}"));
            std::fs::create_dir_all(&place)?;
            (workflow, revision) = write_deployment(&place, &project, &url, &sims.base, None)?;
            let runtime = place.join("runtime.yaml");
            for (connection, limits) in limits.iter().flatten() {
                limit(&runtime, connection, limits)?;
            }
            if i == 0 {
                let migrated = Command::new(&bin).args(["migrate", "--runtime"]).arg(&runtime).output()?;
                if !migrated.status.success() {
                    bail!("coordinator migrate failed: {}", String::from_utf8_lossy(&migrated.stderr));
                }
            }
            procs.push(spawn(&bin, &["serve", "--runtime"], &runtime, &place.join("serve.log"))?);
            pids.push(procs[procs.len() - 1].0.id());
            urls.push(format!("http://{}", read_listen(&runtime)?));
        }
        for url in &urls {
            wait_ready(url).await?;
        }
        let observer = Observer::Pg(PgPoolOptions::new().max_connections(1).connect(&url).await?);
        Ok(Row { urls, workflow, revision, observer, sims, pids, _procs: procs, _pg: pg, _dir: dir })
    }

    /// Admits `runs` through the first process and waits for them: completed runs/s.
    async fn run(&self, clients: usize, runs: usize) -> anyhow::Result<f64> {
        let admitter =
            Arc::new(Admitter::new(&self.urls[0], &self.workflow, &self.revision, "flow", three_calls_input)?);
        let admissions = closed_loop(admitter, clients, runs, None).await?;
        let (finished, _, last) = wait_finished(&self.observer, admissions.admitted, FINISH_POLL, FINISH_LIMIT).await?;
        let wall = (last - admissions.first_sent_ms) as f64 / 1000.0;
        end_row(&self.observer, &admissions, finished).await?;
        Ok(finished as f64 / wall)
    }
}

/// Writes `limits` on `connection` in the runtime.yaml at `path`.
fn limit(path: &Path, connection: &str, limits: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let header = format!("  {connection}:\n    product: ");
    let Some(at) = text.find(&header) else { bail!("no connection {connection} in {}", path.display()) };
    let line_end = at + header.len() + text[at + header.len()..].find('\n').unwrap_or(0) + 1;
    let edited = format!("{}    limits: {limits}\n{}", &text[..line_end], &text[line_end..]);
    std::fs::write(path, edited)?;
    Ok(())
}

/// Requests a process sent to `connection` (`coordinator_product_request_seconds_count`, every series).
fn requests_to(metrics: &str, connection: &str) -> u64 {
    let label = format!("connection=\"{connection}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("coordinator_product_request_seconds_count") && l.contains(&label))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, n)| n.parse::<f64>().ok()))
        .map(|n| n as u64)
        .sum()
}

/// Claim rounds a process ran (`coordinator_claim_round_seconds_count`).
fn claim_rounds(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("coordinator_claim_round_seconds_count"))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, n)| n.parse::<f64>().ok()))
        .sum()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

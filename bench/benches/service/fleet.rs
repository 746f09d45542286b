//! Scale-out: `serves` `coordinator serve` processes on one PostgreSQL
//! database with `workers` `coordinator worker` processes (0: every
//! connection in-process; otherwise both connections of the fixture remote,
//! the workers spread over the serve processes), 3-call runs admitted by
//! closed-loop clients through the first serve process. Reports completed
//! runs/s, the dispatch delay (due → claimed; for remote work, due → offered,
//! acquired one round trip later) from every serve process's
//! `coordinator_dispatch_delay_seconds`, and CPU per run by process kind.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use sqlx::postgres::PgPoolOptions;

use crate::load::{Admissions, Admitter, closed_loop, wait_finished};
use crate::stack::{
    API_TOKEN, Observer, PgScratch, WORKER_TOKEN, connection_yaml, coordinator_bin, free_port, read_listen, repo,
    sim_server, write_deployment,
};
use crate::{Cpu, FINISH_LIMIT, FINISH_POLL, Options, three_calls_input};

/// A child process killed when dropped.
pub(crate) struct Process(pub(crate) Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn spawn(bin: &Path, args: &[&str], file: &Path, log: &Path) -> anyhow::Result<Process> {
    let out = std::fs::File::create(log)?;
    let child = Command::new(bin)
        .args(args)
        .arg(file)
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .spawn()
        .with_context(|| format!("spawn {}", bin.display()))?;
    Ok(Process(child))
}

/// `workers` scenario: every combination of `serves=1,2` and `workers=0,2,4`.
pub async fn fleet(options: &Options) -> anyhow::Result<()> {
    let runs: usize = options.number("runs", 3000)?;
    let clients: usize = options.number("clients", 32)?;
    let serves: Vec<usize> = options.list("serves", "1,2").iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
    let workers: Vec<usize> = options.list("workers", "0,2,4").iter().map(|w| w.parse()).collect::<Result<_, _>>()?;
    println!(
        "3-call runs (bench/fixtures/three-calls) on PostgreSQL, {runs} per row at {clients} clients, each row on a fresh database"
    );
    println!(
        "| serve processes | remote workers | completed runs/s | dispatch delay p50 ms | p99 ms | CPU ms per run: serve / workers / bench / postgres | machine busy |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &s in &serves {
        for &w in &workers {
            row(options, runs, clients, s, w).await?;
        }
    }
    Ok(())
}

async fn row(options: &Options, runs: usize, clients: usize, serves: usize, workers: usize) -> anyhow::Result<()> {
    let bin = coordinator_bin()?;
    let dir = tempfile::Builder::new().prefix("coordinator-fleet-").tempdir()?;
    let sims = sim_server().await?;
    let pg = PgScratch::create("coordinator_bench").await?;
    let params = options.pg_params();
    let url = if params.is_empty() { pg.url.clone() } else { format!("{}?{params}", pg.url) };
    let project = repo().join("bench/fixtures/three-calls");
    let mut urls = Vec::new();
    let mut grpcs = Vec::new();
    let mut procs = Vec::new();
    let mut serve_pids = Vec::new();
    let (mut workflow, mut revision) = (String::new(), String::new());
    for i in 0..serves {
        let place = dir.path().join(format!("serve-{i}"));
        std::fs::create_dir_all(&place)?;
        let grpc = if workers > 0 { Some(free_port()?) } else { None };
        (workflow, revision) = write_deployment(&place, &project, &url, &sims.base, grpc)?;
        let runtime = place.join("runtime.yaml");
        if i == 0 {
            let migrated = Command::new(&bin).args(["migrate", "--runtime"]).arg(&runtime).output()?;
            if !migrated.status.success() {
                bail!("coordinator migrate failed: {}", String::from_utf8_lossy(&migrated.stderr));
            }
        }
        let process = spawn(&bin, &["serve", "--runtime"], &runtime, &place.join("serve.log"))?;
        serve_pids.push(process.0.id());
        procs.push(process);
        urls.push(format!("http://{}", read_listen(&runtime)?));
        grpcs.extend(grpc.map(|port| format!("http://127.0.0.1:{port}")));
    }
    for url in &urls {
        wait_ready(url).await?;
    }
    let mut worker_pids = Vec::new();
    for i in 0..workers {
        let config = write_worker(&dir.path().join(format!("worker-{i}")), &grpcs[i % grpcs.len()], &sims.base)?;
        let process = spawn(&bin, &["worker", "--config"], &config, &dir.path().join(format!("worker-{i}.log")))?;
        worker_pids.push(process.0.id());
        procs.push(process);
    }
    let observer = Observer::Pg(PgPoolOptions::new().max_connections(1).connect(&url).await?);
    let admitter = Arc::new(Admitter::new(&urls[0], &workflow, &revision, "fleet", three_calls_input)?);
    let before = Cpu::read_all(&serve_pids, &worker_pids)?;
    let admissions = closed_loop(admitter, clients, runs, None).await?;
    let (finished, _, last) = wait_finished(&observer, admissions.admitted, FINISH_POLL, FINISH_LIMIT).await?;
    let usage = Cpu::read_all(&serve_pids, &worker_pids)?.since(&before);
    let wall = (last - admissions.first_sent_ms) as f64 / 1000.0;
    let mut delays = Histogram::default();
    for url in &urls {
        delays.add(&metrics(url).await?, if workers > 0 { "remote" } else { "in-process" });
    }
    let per_run = |seconds: f64| format!("{:.2}", 1000.0 * seconds / finished.max(1) as f64);
    println!(
        "| {serves} | {workers} | {:.0} | {} | {} | {} / {} / {} / {} | {} |",
        finished as f64 / wall,
        delays.quantile_ms(0.5),
        delays.quantile_ms(0.99),
        per_run(usage.coordinator),
        if workers > 0 { per_run(usage.workers) } else { "—".to_owned() },
        per_run(usage.bench),
        per_run(usage.postgres),
        usage.machine,
    );
    end_row(&observer, &admissions, finished).await?;
    drop(procs);
    drop(pg);
    Ok(())
}

/// Says what did not go through in a row and closes the observer's pool
/// (before the scratch database is dropped).
pub(crate) async fn end_row(observer: &Observer, admissions: &Admissions, finished: usize) -> anyhow::Result<()> {
    if admissions.failed > 0 {
        println!("  {} admissions failed; first: {:?}", admissions.failed, admissions.first_failure);
    }
    if finished < admissions.admitted {
        println!("  NOT ALL FINISHED ({finished} of {}): states {:?}", admissions.admitted, observer.states().await?);
    }
    if let Observer::Pg(pool) = observer {
        pool.close().await;
    }
    Ok(())
}

/// A worker.yaml serving both connections of the fixture for the coordinator at `address`.
pub(crate) fn write_worker(dir: &Path, address: &str, sims: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("token"), WORKER_TOKEN)?;
    std::fs::write(dir.join("client-secret"), coordinator_sim::DEFAULT_CLIENT.1)?;
    let yaml = format!(
        "apiVersion: coordinator/v1\nkind: Worker\ncoordinator: {{address: \"{address}\", token: file:token}}\n\
         concurrency: 64\nconnections:\n{}{}",
        connection_yaml("registry", "breg", sims),
        connection_yaml("messaging", "messaging", sims),
    );
    let path = dir.join("worker.yaml");
    std::fs::write(&path, yaml)?;
    Ok(path)
}

pub(crate) async fn wait_ready(url: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    for _ in 0..600 {
        if let Ok(r) = client.get(format!("{url}/readyz")).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(anyhow!("{url} did not become ready"))
}

pub(crate) async fn metrics(url: &str) -> anyhow::Result<String> {
    let client = reqwest::Client::new();
    Ok(client.get(format!("{url}/metrics")).bearer_auth(API_TOKEN).send().await?.text().await?)
}

/// Cumulative buckets (upper bound in seconds → count) summed over processes.
#[derive(Default)]
pub(crate) struct Histogram(Vec<(f64, f64)>);

impl Histogram {
    /// Adds the `path` buckets of `coordinator_dispatch_delay_seconds` from a Prometheus text.
    pub(crate) fn add(&mut self, text: &str, path: &str) {
        let prefix = "coordinator_dispatch_delay_seconds_bucket{";
        for line in text.lines().filter(|l| l.starts_with(prefix) && l.contains(&format!("path=\"{path}\""))) {
            let Some((labels, count)) = line.rsplit_once(' ') else { continue };
            let Some(le) = labels.split("le=\"").nth(1).and_then(|rest| rest.split('"').next()) else { continue };
            let bound = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::INFINITY) };
            let count: f64 = count.parse().unwrap_or(0.0);
            match self.0.iter_mut().find(|(b, _)| *b == bound) {
                Some((_, c)) => *c += count,
                None => self.0.push((bound, count)),
            }
        }
        self.0.sort_by(|a, b| a.0.total_cmp(&b.0));
    }

    /// The `q` quantile in ms, interpolated linearly inside its bucket.
    pub(crate) fn quantile_ms(&self, q: f64) -> String {
        let Some(&(_, total)) = self.0.last() else { return "—".to_owned() };
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(bound, count) in &self.0 {
            if count >= rank {
                if bound.is_infinite() {
                    return format!("> {:.0}", lower.0 * 1000.0);
                }
                let within = if count > lower.1 { (rank - lower.1) / (count - lower.1) } else { 0.0 };
                return format!("{:.1}", (lower.0 + within * (bound - lower.0)) * 1000.0);
            }
            lower = (bound, count);
        }
        "—".to_owned()
    }
}

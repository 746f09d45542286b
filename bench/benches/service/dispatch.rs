//! Due → acquired with Redis dispatch hints off and on, in one sitting: two
//! `coordinator serve` processes on one PostgreSQL database, admissions
//! offered at a fixed rate to the first, and the dispatch delay
//! (`coordinator_dispatch_delay_seconds`: the claim's `now` minus the row's
//! `not_before`; for remote work, due → offered, acquired one round trip
//! later) read from both processes afterwards.
//!
//! Layouts: `remote` — every connection remote, one `coordinator worker`
//! connected to the **second** process, so the work an admission queues on
//! the first is work the first has no poll waiting for (the case the hints are
//! for: without them the worker's poll finds it at its next recheck);
//! `in-process` — every connection in-process, both workers claiming. With
//! `redis=on` each row gets a private `redis-server` (no persistence) and
//! `dispatch: {redis: …}` in both runtime.yaml files. `notify=off` makes the
//! database's `pg_notify` a no-op (a function of that name in `public`, searched
//! before `pg_catalog`), so the processes wake each other through the hints
//! alone: what taking `NOTIFY` out would leave. `clients=N` (with `runs`)
//! admits in a closed loop instead of at `rate`, for completed runs/s.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use sqlx::postgres::PgPoolOptions;

use crate::fleet::{Histogram, Process, end_row, metrics, spawn, wait_ready, write_worker};
use crate::load::{Admitter, closed_loop, open_loop, wait_finished};
use crate::stack::{Observer, PgScratch, Ticks, coordinator_bin, free_port, read_listen, repo, sim_server};
use crate::{FINISH_LIMIT, FINISH_POLL, Options, three_calls_input};

/// A private `redis-server`, killed when dropped.
struct Redis {
    url: String,
    child: Child,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn redis_server() -> anyhow::Result<Redis> {
    let port = free_port()?;
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| anyhow!("redis-server (Debian package redis-server): {e}"))?;
    let redis = Redis { url: format!("redis://127.0.0.1:{port}"), child };
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok(redis);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    bail!("redis-server on port {port} did not listen")
}

/// How the runs are admitted.
#[derive(Debug, Clone, Copy)]
enum Load {
    /// At a fixed rate (per second) for a time (seconds).
    Open(f64, f64),
    /// By closed-loop clients, this many runs.
    Closed(usize, usize),
}

/// `dispatch` scenario: every `layout` × `fixture` × `notify`, Redis `off`
/// then `on`, `repeat` times.
pub async fn dispatch(options: &Options) -> anyhow::Result<()> {
    let clients: usize = options.number("clients", 0)?;
    let load = match clients {
        0 => Load::Open(options.number("rate", 20.0)?, options.number("seconds", 30.0)?),
        c => Load::Closed(c, options.number("runs", 3000)?),
    };
    let repeat: usize = options.number("repeat", 1)?;
    let layouts = options.list("layout", "remote,in-process");
    let fixtures = options.list("fixture", "one-call,three-calls");
    let redis = options.list("redis", "off,on");
    let notify = options.list("notify", "on");
    match load {
        Load::Open(rate, seconds) => {
            println!("two serve processes on one PostgreSQL, {rate} admissions/s for {seconds} s to the first");
        }
        Load::Closed(clients, runs) => {
            println!(
                "two serve processes on one PostgreSQL, {runs} runs by {clients} closed-loop clients of the first"
            );
        }
    }
    println!(
        "| layout | fixture | NOTIFY | Redis | runs finished | completed runs/s | dispatch delay p50 ms | p90 ms | \
         p99 ms | claims | hints sent | hint wake-ups | machine busy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for layout in &layouts {
        for fixture in &fixtures {
            for notify in &notify {
                for _ in 0..repeat {
                    for on in &redis {
                        row(options, layout, fixture, notify != "off", on == "on", load).await?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Makes `pg_notify` a no-op in the scratch database `name` for every later connection.
async fn mute_notify(url: &str, name: &str) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new().max_connections(1).connect(url).await?;
    sqlx::query("CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS $$BEGIN END$$")
        .execute(&pool)
        .await?;
    sqlx::query(&format!("ALTER DATABASE {name} SET search_path = \"$user\", public, pg_catalog"))
        .execute(&pool)
        .await?;
    pool.close().await;
    Ok(())
}

async fn row(options: &Options, layout: &str, fixture: &str, notify: bool, on: bool, load: Load) -> anyhow::Result<()> {
    let remote = match layout {
        "remote" => true,
        "in-process" => false,
        other => bail!("layout={other}: remote or in-process"),
    };
    let bin = coordinator_bin()?;
    let dir = tempfile::Builder::new().prefix("coordinator-dispatch-").tempdir()?;
    let sims = sim_server().await?;
    let pg = PgScratch::create("coordinator_bench").await?;
    let params = options.pg_params();
    let url = if params.is_empty() { pg.url.clone() } else { format!("{}?{params}", pg.url) };
    if !notify {
        mute_notify(&url, pg.name()).await?;
    }
    let redis = if on { Some(redis_server().await?) } else { None };
    let project = repo().join("bench/fixtures").join(fixture);
    let (mut urls, mut grpcs, mut procs) = (Vec::new(), Vec::new(), Vec::<Process>::new());
    let (mut workflow, mut revision) = (String::new(), String::new());
    for i in 0..2 {
        let place = dir.path().join(format!("serve-{i}"));
        std::fs::create_dir_all(&place)?;
        let grpc = if remote { Some(free_port()?) } else { None };
        (workflow, revision) = crate::stack::write_deployment(&place, &project, &url, &sims.base, grpc)?;
        let runtime = place.join("runtime.yaml");
        if let Some(redis) = &redis {
            std::fs::write(place.join("redis-url"), &redis.url)?;
            let mut yaml = std::fs::read_to_string(&runtime)?;
            yaml.push_str("dispatch: {redis: {url: file:redis-url}}\n");
            std::fs::write(&runtime, yaml)?;
        }
        if i == 0 {
            let migrated = Command::new(&bin).args(["migrate", "--runtime"]).arg(&runtime).output()?;
            if !migrated.status.success() {
                bail!("coordinator migrate failed: {}", String::from_utf8_lossy(&migrated.stderr));
            }
        }
        procs.push(spawn(&bin, &["serve", "--runtime"], &runtime, &place.join("serve.log"))?);
        urls.push(format!("http://{}", read_listen(&runtime)?));
        grpcs.extend(grpc.map(|port| format!("http://127.0.0.1:{port}")));
    }
    for url in &urls {
        wait_ready(url).await?;
        if on {
            wait_redis_up(url).await?;
        }
    }
    if remote {
        // One worker, on the second process: the first's admissions queue work no poll of its waits for.
        let config = write_worker(&dir.path().join("worker"), &grpcs[1], &sims.base)?;
        procs.push(spawn(&bin, &["worker", "--config"], &config, &dir.path().join("worker.log"))?);
        // Its first poll is waiting before the load starts.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let observer = Observer::Pg(PgPoolOptions::new().max_connections(1).connect(&url).await?);
    let admitter = Arc::new(Admitter::new(&urls[0], &workflow, &revision, "dispatch", three_calls_input)?);
    let ticks0 = Ticks::read()?;
    let admissions = match load {
        Load::Open(rate, seconds) => open_loop(admitter, rate, Duration::from_secs_f64(seconds)).await?,
        Load::Closed(clients, runs) => closed_loop(admitter, clients, runs, None).await?,
    };
    let (finished, _, last) = wait_finished(&observer, admissions.admitted, FINISH_POLL, FINISH_LIMIT).await?;
    let completed = finished as f64 / ((last - admissions.first_sent_ms).max(1) as f64 / 1000.0);
    let ticks = Ticks::read()?.since(&ticks0);
    let path = if remote { "remote" } else { "in-process" };
    let mut delays = Histogram::default();
    let (mut sent, mut woke, mut claims) = (0.0, 0.0, 0.0);
    for url in &urls {
        let text = metrics(url).await?;
        delays.add(&text, path);
        claims += sample(&text, &format!("coordinator_dispatch_delay_seconds_count{{path=\"{path}\"}}"));
        sent += sample(&text, "coordinator_dispatch_hints_sent_total");
        woke += sample(&text, &format!("coordinator_dispatch_hint_wakeups_total{{path=\"{path}\"}}"));
    }
    println!(
        "| {layout} | {fixture} | {} | {} | {finished} / {} | {completed:.0} | {} | {} | {} | {claims:.0} | {} | {} | {ticks} |",
        if notify { "on" } else { "off" },
        if on { "on" } else { "off" },
        admissions.admitted,
        delays.quantile_ms(0.5),
        delays.quantile_ms(0.9),
        delays.quantile_ms(0.99),
        if on { format!("{sent:.0}") } else { "—".to_owned() },
        if on { format!("{woke:.0}") } else { "—".to_owned() },
    );
    end_row(&observer, &admissions, finished).await?;
    drop(procs);
    drop(pg);
    Ok(())
}

/// Waits until `url` says every part of its hints reaches Redis.
async fn wait_redis_up(url: &str) -> anyhow::Result<()> {
    for _ in 0..200 {
        if sample(&metrics(url).await?, "coordinator_dispatch_hints_redis_up") == 1.0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{url} never reached Redis")
}

/// The value of the sample `name` (labels included, as written) in a Prometheus text; 0 when absent.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

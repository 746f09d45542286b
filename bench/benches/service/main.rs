//! The service under load: `coordinator serve` (the release binary, a child
//! process) on SQLite or PostgreSQL, against the simulators served by this
//! process on their own port, driven over HTTP.
//!
//! Build the service first, then pick a scenario:
//!
//! ```text
//! cargo build --release -p coordinator
//! cargo bench -p coordinator-bench --bench service -- throughput [db=sqlite,pg] [clients=1,8,32] [runs=3000] [pgbench=15] [walstats=0|1]
//! cargo bench -p coordinator-bench --bench service -- latency [db=sqlite,pg] [rate=200] [seconds=20] [walstats=0|1] [pgbench=0] [probe=0]
//! cargo bench -p coordinator-bench --bench service -- timers [db=pg] [runs=100000] [lead=600] [clients=32]
//! cargo bench -p coordinator-bench --bench service -- pgbench [clients=32] [seconds=20]
//! cargo bench -p coordinator-bench --bench service -- console [runs=1000000]
//! cargo bench -p coordinator-bench --bench service -- history [sizes=0,1000000] [entries=12] [clients=32] [runs=3000] [rate=200] [seconds=20] [rounds=1]
//! cargo bench -p coordinator-bench --bench service -- workers [serves=1,2] [workers=0,2,4] [clients=32] [runs=3000]
//! cargo bench -p coordinator-bench --bench service -- flow [parts=free,rate] [rounds=3] [clients=32] [runs=4000] [limits={…}] [rate=200] [rated=3000]
//! cargo bench -p coordinator-bench --bench service -- dispatch [layout=remote,in-process] [fixture=one-call,three-calls] [redis=off,on] [notify=on,off] [rate=20] [seconds=30] [clients=0] [runs=3000] [repeat=1]
//! ```
//!
//! `pg=sslmode=disable` (any URL query) is added to the PostgreSQL URL the
//! service gets; without it the URL has no parameters (sqlx: `sslmode=prefer`).
//!
//! Every service run starts from a fresh database (a SQLite file in a
//! temporary directory, or `coordinator_bench_<pid>_<n>` on 127.0.0.1:5432,
//! dropped afterwards). Figures go to bench/RESULTS.md with the command.

mod console;
mod dbwork;
mod dispatch;
mod fleet;
mod flow;
mod history;
mod load;
mod pgbench;
mod stack;
mod stalls;
mod watch;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use dbwork::DbWork;
use load::{Admitter, admission_buckets, closed_loop, epoch_ms, listed, open_loop, wait_finished};
use serde_json::json;
use stack::{Backend, Stack, Ticks, cpu_seconds, cpu_seconds_of, memory_kb};

/// The most a batch of runs may take to finish before the bench reports it unfinished.
pub(crate) const FINISH_LIMIT: Duration = Duration::from_secs(900);
/// How often the bench counts finished runs in the store while it waits. The
/// count reads `runs` (4–7 ms of PostgreSQL's CPU at a few thousand runs), and
/// the figures come from the runs' own instants, not from when the count saw
/// them: polled every 50 ms it took a tenth of a core from the system measured.
pub(crate) const FINISH_POLL: Duration = Duration::from_millis(500);

fn main() -> anyhow::Result<()> {
    // `cargo bench` adds `--bench`; everything else is `scenario key=value…`.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let Some((scenario, rest)) = args.split_first() else {
        bail!(
            "name a scenario: throughput, latency, timers, pgbench, console, history, workers, dispatch or flow (see the top of benches/service/main.rs)"
        );
    };
    let options = Options::parse(rest)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(8 << 20).build()?;
    runtime.block_on(async {
        match scenario.as_str() {
            "throughput" => throughput(&options).await,
            "latency" => latency(&options).await,
            "timers" => timers(&options).await,
            "pgbench" => pgbench::pgbench(&options).await,
            "console" => console::console(&options).await,
            "history" => history::history(&options).await,
            "workers" => fleet::fleet(&options).await,
            "dispatch" => dispatch::dispatch(&options).await,
            "flow" => flow::flow(&options).await,
            other => {
                bail!("unknown scenario `{other}`: throughput, latency, timers, pgbench, console, history, workers, dispatch or flow")
            }
        }
    })
}

/// `key=value` arguments.
pub(crate) struct Options(BTreeMap<String, String>);

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut map = BTreeMap::new();
        for arg in args {
            let (key, value) = arg.split_once('=').ok_or_else(|| anyhow!("`{arg}` is not key=value"))?;
            map.insert(key.to_owned(), value.to_owned());
        }
        Ok(Options(map))
    }

    pub(crate) fn number<T: std::str::FromStr>(&self, key: &str, default: T) -> anyhow::Result<T> {
        match self.0.get(key) {
            None => Ok(default),
            Some(text) => text.parse().map_err(|_| anyhow!("{key}={text} is not a number")),
        }
    }

    pub(crate) fn text(&self, key: &str, default: &str) -> String {
        self.0.get(key).map_or(default, String::as_str).to_owned()
    }

    pub(crate) fn list(&self, key: &str, default: &str) -> Vec<String> {
        self.0.get(key).map_or(default, String::as_str).split(',').map(str::to_owned).collect()
    }

    /// `pg=QUERY`: parameters added to the PostgreSQL URL (`pg=sslmode=disable`).
    pub(crate) fn pg_params(&self) -> String {
        self.0.get("pg").cloned().unwrap_or_default()
    }

    fn backends(&self, default: &str) -> anyhow::Result<Vec<Backend>> {
        self.list("db", default)
            .iter()
            .map(|b| match b.as_str() {
                "sqlite" => Ok(Backend::Sqlite),
                "pg" | "postgres" => Ok(Backend::Pg),
                other => Err(anyhow!("db={other}: sqlite or pg")),
            })
            .collect()
    }
}

/// The input of the i-th three-calls run.
pub(crate) fn three_calls_input(i: usize) -> serde_json::Value {
    json!({"recordId": format!("0199c8a0-5c2e-7d41-9b3a-{i:012x}"), "recipient": {"kind": "person", "id": format!("p-{i}")}})
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn mb(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// Admissions/s and completed 3-call runs/s at each concurrency. On
/// PostgreSQL each row first runs pgbench's simple-update on the same server
/// with as many clients for `pgbench` seconds (0: not run), so the row's
/// figure is also a ratio measured in the same sitting; each row then says
/// what the database and each process did per run.
async fn throughput(options: &Options) -> anyhow::Result<()> {
    let backends = options.backends("sqlite,pg")?;
    let runs: usize = options.number("runs", 3000)?;
    let pgbench_seconds: u64 = options.number("pgbench", 15)?;
    let clients: Vec<usize> =
        options.list("clients", "1,8,32").iter().map(|c| c.parse()).collect::<Result<_, _>>().context("clients")?;
    println!("3-call runs (bench/fixtures/three-calls), {runs} per row, each row on a fresh database and service");
    println!(
        "| store | clients | admissions/s | admission p50 ms | p99 ms | completed runs/s | pgbench TPS | runs per pgbench transaction \
         | first admission → last finish s | CPU ms per run: coordinator / bench / postgres | machine busy | finished (store / list API) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut details = Vec::new();
    let mut completed: BTreeMap<(Backend, usize), f64> = BTreeMap::new();
    for backend in backends {
        for &c in &clients {
            let tps = match backend {
                Backend::Pg if pgbench_seconds > 0 => {
                    Some(pgbench::run_pgbench(c, pgbench_seconds, &options.pg_params()).await?.tps)
                }
                _ => None,
            };
            let stack = Stack::start(backend, "three-calls", &options.pg_params()).await?;
            let admitter =
                Arc::new(Admitter::new(&stack.url, &stack.workflow, &stack.revision, "tp", three_calls_input)?);
            let pg = stack.observer.pg_pool();
            let work0 = DbWork::start(pg).await?;
            let cpu0 = Cpu::read(stack.pid)?;
            let admissions = closed_loop(admitter, c, runs, None).await?;
            let (finished, _, last) =
                wait_finished(&stack.observer, admissions.admitted, FINISH_POLL, FINISH_LIMIT).await?;
            let cpu = Cpu::read(stack.pid)?.since(&cpu0);
            let work = DbWork::since(pg, work0, finished, options.number("walstats", 0)? > 0).await?;
            let wall = (last - admissions.first_sent_ms) as f64 / 1000.0;
            let rate = finished as f64 / wall;
            completed.insert((backend, c), rate);
            let shown = listed(&stack.url, "finished").await?;
            let per_run = |seconds: f64| 1000.0 * seconds / finished.max(1) as f64;
            println!(
                "| {} | {c} | {:.0} | {} | {} | {rate:.0} | {} | {} | {wall:.2} | {:.2} / {:.2} / {} | {} | {finished} / {shown} |",
                backend.name(),
                admissions.rate(),
                ms(admissions.quantile(0.5)),
                ms(admissions.quantile(0.99)),
                tps.map_or("—".to_owned(), |t| format!("{t:.0}")),
                tps.map_or("—".to_owned(), |t| format!("{:.3}", rate / t)),
                per_run(cpu.coordinator),
                per_run(cpu.bench),
                if backend == Backend::Pg { format!("{:.2}", per_run(cpu.postgres)) } else { "—".to_owned() },
                cpu.machine,
            );
            if let Some(work) = work {
                details.push(format!("{} {c} clients, {work}", backend.name()));
            }
            report_unfinished(&stack, &admissions, finished).await?;
            stack.stop().await;
        }
    }
    for line in details {
        println!("  {line}");
    }
    for &c in &clients {
        if let (Some(sqlite), Some(pg)) = (completed.get(&(Backend::Sqlite, c)), completed.get(&(Backend::Pg, c))) {
            println!("  {c} clients: SQLite / PostgreSQL completed runs/s = {:.2}", sqlite / pg);
        }
    }
    Ok(())
}

/// Says what went wrong when a batch did not go through cleanly.
async fn report_unfinished(stack: &Stack, admissions: &load::Admissions, finished: usize) -> anyhow::Result<()> {
    if admissions.failed > 0 {
        println!("  {} admissions failed; first: {:?}", admissions.failed, admissions.first_failure);
    }
    // A batch of reports that failed as a whole was applied again one by one (`committer`).
    let whole = stack.log_text().matches("failed as a whole").count();
    if whole > 0 {
        println!("  {whole} batches of reports failed as a whole and were applied one by one");
    }
    if finished < admissions.admitted {
        println!("  NOT ALL FINISHED: states {:?}", stack.observer.states().await?);
        let log = stack.log_text();
        let tail: Vec<&str> = log.lines().rev().take(10).collect();
        println!("  serve log (last lines, newest first): {tail:?}");
    }
    Ok(())
}

/// Admission latency at a fixed offered rate (open loop), while the admitted
/// runs execute. `pgbench=S`: on PostgreSQL, pgbench's simple-update at the
/// same rate for S seconds just before the row, its latencies from their
/// scheduled starts as the open loop's (the server's own commit latency).
/// `probe=R`: on PostgreSQL, pgbench's simple-update at R/s *during* the row,
/// and how many admissions over 10 ms overlapped a probe transaction over
/// 10 ms (whether the slow admissions fell while the server was slow).
/// Every row also samples the machine's own stalls (`stalls`: a thread late
/// to wake, the hypervisor taking the cores) and says how many slow
/// admissions overlapped one; on PostgreSQL it says what the server did
/// meanwhile (`watch`: checkpoints, their sync time, autovacuum).
async fn latency(options: &Options) -> anyhow::Result<()> {
    let backends = options.backends("sqlite,pg")?;
    let rate: f64 = options.number("rate", 200.0)?;
    let seconds: f64 = options.number("seconds", 20.0)?;
    println!("open loop: {rate} admissions/s offered for {seconds} s (3-call runs, executed meanwhile)");
    println!(
        "| store | sent | achieved/s | p50 ms | p90 ms | p99 ms | max ms | failed | all finished, s after the last admission |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let pgbench_seconds: u64 = options.number("pgbench", 0)?;
    let probe_rate: f64 = options.number("probe", 0.0)?;
    for backend in backends {
        // The server's own commit latency at the same rate, just before the row.
        let server = match backend {
            Backend::Pg if pgbench_seconds > 0 => {
                Some(pgbench::at_rate(rate, pgbench_seconds, &options.pg_params()).await?)
            }
            _ => None,
        };
        let stack = Stack::start(backend, "three-calls", &options.pg_params()).await?;
        let admitter = Arc::new(Admitter::new(&stack.url, &stack.workflow, &stack.revision, "lat", three_calls_input)?);
        let pg = stack.observer.pg_pool();
        let work0 = DbWork::start(pg).await?;
        let before = Cpu::read(stack.pid)?;
        let probe = match backend {
            Backend::Pg if probe_rate > 0.0 => {
                Some(pgbench::Probe::start(probe_rate, seconds.ceil() as u64 + 1, &options.pg_params()).await?)
            }
            _ => None,
        };
        let watch = match pg {
            Some(pool) => Some(watch::Watch::start(pool.clone()).await?),
            None => None,
        };
        let sampler = stalls::Sampler::start();
        let admissions = open_loop(admitter, rate, Duration::from_secs_f64(seconds)).await?;
        let stalled = sampler.finish()?;
        let watched = match watch {
            Some(watch) => Some(watch.stop().await?),
            None => None,
        };
        let during = Cpu::read(stack.pid)?.since(&before);
        let probed = probe.map(pgbench::Probe::finish).transpose()?;
        let ended = epoch_ms();
        let (finished, _, last) =
            wait_finished(&stack.observer, admissions.admitted, FINISH_POLL, FINISH_LIMIT).await?;
        let work = DbWork::since(pg, work0, finished, options.number("walstats", 0)? > 0).await?;
        println!(
            "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {:.2} |",
            backend.name(),
            admissions.admitted + admissions.failed,
            admissions.rate(),
            ms(admissions.quantile(0.5)),
            ms(admissions.quantile(0.9)),
            ms(admissions.quantile(0.99)),
            ms(admissions.quantile(1.0)),
            admissions.failed,
            (last - ended).max(0) as f64 / 1000.0,
        );
        let (buckets, total) = admission_buckets(&stack.url).await?;
        let within: Vec<String> = buckets
            .iter()
            .filter(|(bound, _)| bound.len() <= 6)
            .map(|(bound, n)| format!("≤ {bound} s: {n}"))
            .collect();
        println!(
            "  while admitting: {during}; the service's own admission times (decision and commit), of {total}: {}",
            within.join(", ")
        );
        if let Some(work) = work {
            println!("  {} at {rate}/s offered, {work}", backend.name());
        }
        if let Some(server) = server {
            println!(
                "  the server just before, simple-update at {rate}/s ({} transactions, `{}`, machine busy {}): p50 {} ms, \
                 p99 {} ms, max {} ms; admission p99 / its p99 = {:.2}",
                server.count(),
                server.command,
                server.machine,
                ms(server.quantile(0.5)),
                ms(server.quantile(0.99)),
                ms(server.quantile(1.0)),
                admissions.quantile(0.99).as_secs_f64() / server.quantile(0.99).as_secs_f64().max(1e-9),
            );
        }
        println!("  {}", stalled.attribute(&admissions.timed, SLOW));
        if let Some(watched) = watched {
            println!("  the server meanwhile: {watched}");
        }
        if let Some(probed) = probed {
            println!("  {}", attribute(&admissions.timed, &probed, probe_rate));
        }
        report_unfinished(&stack, &admissions, finished).await?;
        stack.stop().await;
    }
    Ok(())
}

/// What an admission over this long is (the target's bound).
const SLOW: Duration = Duration::from_millis(10);

/// Whether the slow admissions of `timed` (planned start µs, latency) fell
/// while the server itself was slow: how many overlapped a `probed`
/// transaction (start µs, latency) slower than [`SLOW`].
fn attribute(timed: &[(i64, Duration)], probed: &[(i64, Duration)], probe_rate: f64) -> String {
    let slow_probes = stalls::slow_intervals(probed, SLOW);
    let slow = stalls::slow_intervals(timed, SLOW);
    let overlapping = stalls::overlapping(&slow, &slow_probes);
    let mut latencies: Vec<Duration> = probed.iter().map(|(_, l)| *l).collect();
    latencies.sort();
    format!(
        "beside it, pgbench simple-update at {probe_rate}/s on the same server ({} transactions): p99 {} ms, max {} ms, \
         {} over {} ms; of the {} admissions over {} ms, {} overlapped one of those",
        latencies.len(),
        ms(load::quantile(&latencies, 0.99)),
        ms(load::quantile(&latencies, 1.0)),
        slow_probes.len(),
        SLOW.as_millis(),
        slow.len(),
        SLOW.as_millis(),
        overlapping,
    )
}

/// CPU used so far: the machine's busy and total ticks, the coordinator
/// processes, the remote workers, this process (load and simulators) and the
/// PostgreSQL server's processes.
pub(crate) struct Cpu {
    pub(crate) machine: Ticks,
    pub(crate) coordinator: f64,
    pub(crate) workers: f64,
    pub(crate) bench: f64,
    pub(crate) postgres: f64,
}

impl Cpu {
    fn read(coordinator: u32) -> anyhow::Result<Cpu> {
        Cpu::read_all(&[coordinator], &[])
    }

    /// With several coordinator processes and the remote workers' processes.
    pub(crate) fn read_all(coordinators: &[u32], workers: &[u32]) -> anyhow::Result<Cpu> {
        let sum = |pids: &[u32]| -> anyhow::Result<f64> { pids.iter().map(|p| cpu_seconds(Some(*p))).sum() };
        Ok(Cpu {
            machine: Ticks::read()?,
            coordinator: sum(coordinators)?,
            workers: sum(workers)?,
            bench: cpu_seconds(None)?,
            postgres: cpu_seconds_of("postgres")?,
        })
    }

    pub(crate) fn since(&self, before: &Cpu) -> Cpu {
        Cpu {
            machine: self.machine.since(&before.machine),
            coordinator: self.coordinator - before.coordinator,
            workers: self.workers - before.workers,
            bench: self.bench - before.bench,
            postgres: self.postgres - before.postgres,
        }
    }
}

impl std::fmt::Display for Cpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "machine busy {}, CPU s: coordinator {:.1}, bench process {:.1}, postgres {:.1}",
            self.machine, self.coordinator, self.bench, self.postgres
        )
    }
}

/// Many runs waiting on one instant: the service's memory while they wait,
/// then how fast the due timers fire.
async fn timers(options: &Options) -> anyhow::Result<()> {
    let backends = options.backends("pg")?;
    let runs: usize = options.number("runs", 100_000)?;
    let lead: u64 = options.number("lead", 600)?;
    let clients: usize = options.number("clients", 32)?;
    for backend in backends {
        let stack = Stack::start(backend, "timers", &options.pg_params()).await?;
        let (idle_rss, _) = memory_kb(stack.pid)?;
        let wake_ms = epoch_ms() + i64::try_from(lead)? * 1000;
        let wake_at = chrono::DateTime::from_timestamp_millis(wake_ms)
            .ok_or_else(|| anyhow!("instant out of range"))?
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string();
        println!(
            "{}: up to {runs} runs waiting until {wake_at} ({lead} s ahead), admitted by {clients} clients; \
             coordinator serve pid {}, RSS at start {} MB",
            backend.name(),
            stack.pid,
            mb(idle_rss)
        );
        // Stop admitting in time to see every admitted run wait before the instant.
        let stop = Instant::now() + Duration::from_secs(lead.saturating_sub(45));
        let admitter = Arc::new(Admitter::new(
            &stack.url,
            &stack.workflow,
            &stack.revision,
            "tm",
            move |_| json!({"wakeAt": wake_at}),
        )?);
        let admissions = closed_loop(admitter, clients, runs, Some(stop)).await?;
        println!(
            "  admitted {} in {:.1} s ({:.0}/s, p50 {} ms, p99 {} ms){}",
            admissions.admitted,
            admissions.elapsed.as_secs_f64(),
            admissions.rate(),
            ms(admissions.quantile(0.5)),
            ms(admissions.quantile(0.99)),
            if admissions.admitted < runs { "; STOPPED EARLY: the instant was near" } else { "" }
        );
        if admissions.failed > 0 {
            println!("  {} admissions failed; first: {:?}", admissions.failed, admissions.first_failure);
        }
        // Memory while they all wait: sampled every 5 s until the instant.
        let mut samples = Vec::new();
        while epoch_ms() < wake_ms - 2000 {
            samples.push(memory_kb(stack.pid)?.0);
            let left = u64::try_from(wake_ms - 2000 - epoch_ms()).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(left.min(5000))).await;
        }
        let (rss, hwm) = memory_kb(stack.pid)?;
        samples.push(rss);
        let waiting = stack.observer.states().await?;
        println!(
            "  while waiting (states {waiting:?}): RSS {} MB last, {} MB highest of {} samples; peak RSS since start (VmHWM) {} MB",
            mb(rss),
            mb(samples.iter().copied().max().unwrap_or(rss)),
            samples.len(),
            mb(hwm)
        );
        let cpu0 = cpu_seconds(Some(stack.pid))?;
        let (finished, first, last) =
            wait_finished(&stack.observer, admissions.admitted, Duration::from_millis(200), FINISH_LIMIT).await?;
        let cpu1 = cpu_seconds(Some(stack.pid))?;
        let span = (last - wake_ms) as f64 / 1000.0;
        println!(
            "  fired: {finished} of {} finished; first {:.3} s after the instant, last {span:.2} s after it: \
             {:.0} timers/s; coordinator CPU {:.1} s; RSS after {} MB",
            admissions.admitted,
            (first - wake_ms) as f64 / 1000.0,
            finished as f64 / span,
            cpu1 - cpu0,
            mb(memory_kb(stack.pid)?.0)
        );
        report_unfinished(&stack, &admissions, finished).await?;
        stack.stop().await;
    }
    Ok(())
}

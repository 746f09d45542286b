//! The same PostgreSQL's own limits, measured beside the service's rows:
//! pgbench's simple-update on a scratch database of the local server, flat
//! out (the commit limit: `throughput`'s `pgbench TPS`) or at a fixed rate
//! with every transaction's latency logged (the server's own commit latency
//! at the rate `latency` offers its admissions). An `sslmode` in `pg_params`
//! (the service's URL query, `pg=`) is pgbench's too (`PGSSLMODE`), so both
//! talk to the server alike.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};

use crate::Options;
use crate::stack::{PgScratch, Ticks};

/// The `pgbench` scenario: simple-update flat out.
pub(crate) async fn pgbench(options: &Options) -> anyhow::Result<()> {
    let clients: usize = options.number("clients", 32)?;
    let seconds: u64 = options.number("seconds", 20)?;
    let run = run_pgbench(clients, seconds, &options.pg_params()).await?;
    println!("{}", run.command);
    for line in &run.summary {
        println!("  {line}");
    }
    Ok(())
}

/// What one pgbench run printed.
pub(crate) struct Pgbench {
    pub(crate) command: String,
    summary: Vec<String>,
    pub(crate) tps: f64,
}

/// Clients of a rate-limited run: enough that one slow commit does not hold
/// the next transactions back (pgbench counts a late start in the latency,
/// as the open loop does).
const RATE_CLIENTS: usize = 8;

/// Commit latency of simple-update transactions offered at a fixed rate.
pub(crate) struct AtRate {
    pub(crate) command: String,
    /// Each transaction's latency from its scheduled start, sorted.
    latencies: Vec<Duration>,
    /// The machine's CPU while pgbench ran.
    pub(crate) machine: Ticks,
}

impl AtRate {
    /// The `p` quantile (0..=1) of the latencies, by the open loop's rule.
    pub(crate) fn quantile(&self, p: f64) -> Duration {
        crate::load::quantile(&self.latencies, p)
    }

    pub(crate) fn count(&self) -> usize {
        self.latencies.len()
    }
}

/// A scratch database initialised for pgbench, and the arguments that reach the server.
struct Prepared {
    db: PgScratch,
    bin: PathBuf,
    sslmode: Option<String>,
}

const BASE: [&str; 6] = ["-h", "127.0.0.1", "-p", "5432", "-U", "postgres"];

impl Prepared {
    async fn new(pg_params: &str) -> anyhow::Result<Prepared> {
        let bin = pgbench_bin()?;
        let db = PgScratch::create("coordinator_bench").await?;
        let init = Command::new(&bin).args(BASE).args(["-i", "-q", db.name()]).output()?;
        if !init.status.success() {
            bail!("pgbench -i: {}", String::from_utf8_lossy(&init.stderr));
        }
        let sslmode = pg_params.split('&').find_map(|p| p.strip_prefix("sslmode=")).map(str::to_owned);
        Ok(Prepared { db, bin, sslmode })
    }

    /// Runs pgbench with `args` (the database last); returns the command as
    /// a user would type it and what it printed.
    fn run(&self, args: &[&str]) -> anyhow::Result<(String, String)> {
        let env = self.sslmode.as_ref().map(|m| format!("PGSSLMODE={m} ")).unwrap_or_default();
        let command = format!("{env}{} {} {} {}", self.bin.display(), BASE.join(" "), args.join(" "), self.db.name());
        let run = self.command(args).output()?;
        let out = String::from_utf8_lossy(&run.stdout).into_owned();
        if !run.status.success() {
            bail!("pgbench: {}{}", out, String::from_utf8_lossy(&run.stderr));
        }
        Ok((command, out))
    }

    /// pgbench with `args` on the scratch database, reaching the server as the service does.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.bin);
        if let Some(mode) = &self.sslmode {
            command.env("PGSSLMODE", mode);
        }
        command.args(BASE).args(args).arg(self.db.name());
        command
    }
}

/// `pgbench -b simple-update` with `clients` clients for `seconds`, flat out.
pub(crate) async fn run_pgbench(clients: usize, seconds: u64, pg_params: &str) -> anyhow::Result<Pgbench> {
    let prepared = Prepared::new(pg_params).await?;
    let (c, t) = (clients.to_string(), seconds.to_string());
    let threads = clients.min(2).to_string();
    let (command, out) = prepared.run(&["-b", "simple-update", "-c", &c, "-j", &threads, "-T", &t])?;
    let summary: Vec<String> = out
        .lines()
        .filter(|l| l.starts_with("tps") || l.contains("latency") || l.contains("transactions"))
        .map(str::to_owned)
        .collect();
    let tps = summary
        .iter()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok())
        .ok_or_else(|| anyhow!("pgbench printed no tps: {out}"))?;
    Ok(Pgbench { command, summary, tps })
}

/// `pgbench -b simple-update -R rate` for `seconds`, every transaction
/// logged (`-l`): its latency from its scheduled start.
pub(crate) async fn at_rate(rate: f64, seconds: u64, pg_params: &str) -> anyhow::Result<AtRate> {
    let prepared = Prepared::new(pg_params).await?;
    let logs = tempfile::tempdir()?;
    let prefix = logs.path().join("pgbench_log");
    let prefix = prefix.to_str().context("the temporary directory's path is not UTF-8")?;
    let (c, r, t) = (RATE_CLIENTS.to_string(), format!("{rate}"), seconds.to_string());
    let log_prefix = format!("--log-prefix={prefix}");
    let args = ["-b", "simple-update", "-c", &c, "-j", "2", "-R", &r, "-T", &t, "-l", &log_prefix];
    let before = Ticks::read()?;
    let (command, _) = prepared.run(&args)?;
    let machine = Ticks::read()?.since(&before);
    let mut latencies: Vec<Duration> = logged(logs.path())?.into_iter().map(|(_, latency)| latency).collect();
    latencies.sort();
    Ok(AtRate { command: command.replace(prefix, "<dir>/pgbench_log"), latencies, machine })
}

/// Every transaction pgbench logged (`-l`) in `dir`: when it ended (µs
/// since the epoch) and its latency. A line is `client transaction
/// latency_us script epoch_s epoch_us [lag_us]`.
fn logged(dir: &Path) -> anyhow::Result<Vec<(i64, Duration)>> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let text = std::fs::read_to_string(entry?.path())?;
        for line in text.lines() {
            let field = |n: usize| -> anyhow::Result<i64> {
                line.split_whitespace()
                    .nth(n)
                    .and_then(|f| f.parse().ok())
                    .ok_or_else(|| anyhow!("pgbench's log line {line:?} has no field {n}"))
            };
            let latency = Duration::from_micros(u64::try_from(field(2)?).unwrap_or(0));
            all.push((field(4)? * 1_000_000 + field(5)?, latency));
        }
    }
    Ok(all)
}

/// pgbench's simple-update at a fixed rate in the background, beside a
/// measurement: the server's commit latency at the same moments.
pub(crate) struct Probe {
    child: std::process::Child,
    logs: tempfile::TempDir,
    _prepared: Prepared,
}

impl Probe {
    /// Starts `pgbench -b simple-update -c 2 -j 1 -R rate -T seconds -l`.
    pub(crate) async fn start(rate: f64, seconds: u64, pg_params: &str) -> anyhow::Result<Probe> {
        let prepared = Prepared::new(pg_params).await?;
        let logs = tempfile::tempdir()?;
        let prefix = logs.path().join("probe_log");
        let prefix = prefix.to_str().context("the temporary directory's path is not UTF-8")?;
        let (r, t, log_prefix) = (format!("{rate}"), seconds.to_string(), format!("--log-prefix={prefix}"));
        let args = ["-b", "simple-update", "-c", "2", "-j", "1", "-R", &r, "-T", &t, "-l", &log_prefix];
        let child =
            prepared.command(&args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn()?;
        Ok(Probe { child, logs, _prepared: prepared })
    }

    /// Waits for pgbench to end; its transactions: when each started (µs
    /// since the epoch) and its latency, in no particular order.
    pub(crate) fn finish(mut self) -> anyhow::Result<Vec<(i64, Duration)>> {
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the pgbench probe failed: {status}");
        }
        let ended = logged(self.logs.path())?;
        Ok(ended.into_iter().map(|(end, latency)| (end - crate::load::micros(latency), latency)).collect())
    }
}

/// `pgbench` on PATH, else the newest in /usr/lib/postgresql/*/bin.
fn pgbench_bin() -> anyhow::Result<PathBuf> {
    if Command::new("pgbench").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Ok("pgbench".into());
    }
    let mut found: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin/pgbench"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| anyhow!("pgbench is neither on PATH nor in /usr/lib/postgresql/*/bin"))
}

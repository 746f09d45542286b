//! `coordinator`: the service binary (docs/reference/service.md#coordinator):
//! `dev`, `serve`, `migrate`, `worker`. Parses arguments, sets logging up,
//! prints `dev`'s banner, waits for SIGTERM/SIGINT to drain, and maps failures
//! to exit codes (`0` ok or drained, `1` refused, `2` usage, `3` a needed
//! resource is unavailable, `4` stopped before the drain finished: a second
//! signal, or the grace period ran out).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use coordinator::Drained;
use coordinator::process::deployment::{DeploymentError, RuntimeConfig};
use coordinator::process::dev::{self, DevError, DevOptions};
use coordinator::process::serve::{self, ServeError};
use coordinator::process::test_clock;
use coordinator::telemetry::logging::{self, LogSettings};
use coordinator_core::diagnostic::Diagnostic;
use coordinator_core::model::runtime::{LogFormat, Logging};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The service's allocator. With glibc's, a fifth of the coordinator's CPU in
/// the throughput bench went to `malloc`, `free` and their bookkeeping across
/// the runtime's threads (`perf record`); mimalloc's thread-local free lists
/// take most of that away (bench/RESULTS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code of a stop before the drain finished.
const STOPPED_UNDRAINED: u8 = 4;

/// The Coordinator service.
#[derive(Debug, Parser)]
#[command(name = "coordinator", version)]
struct Args {
    /// How log lines are written to standard error (default: human on a terminal, json otherwise;
    /// runtime.yaml's `logging.format` when given). `RUST_LOG` filters them.
    #[arg(long, global = true, value_enum)]
    log_format: Option<Format>,
    #[command(subcommand)]
    command: Command,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    /// Readable lines.
    Human,
    /// One JSON object per line.
    Json,
}

impl From<Format> for LogFormat {
    fn from(format: Format) -> LogFormat {
        match format {
            Format::Human => LogFormat::Human,
            Format::Json => LogFormat::Json,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a project locally: embedded SQLite, generated keys, simulators under /sim.
    Dev {
        /// The project directory.
        #[arg(long)]
        project: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:7400")]
        listen: SocketAddr,
        /// Data directory (default: a fresh temporary directory, removed when stopped with Ctrl-C).
        #[arg(long)]
        data: Option<PathBuf>,
        /// The operator token (default: random).
        #[arg(long)]
        token: Option<String>,
    },
    /// Run the service of a deployment described by runtime.yaml (the database must be migrated).
    Serve {
        /// The deployment's runtime file.
        #[arg(long)]
        runtime: PathBuf,
        /// After a database restore: admit nothing, dispatch nothing, fire no timer;
        /// serve inspection, the restore hold and operator commands.
        #[arg(long)]
        recovery_only: bool,
    },
    /// Make the product requests of remote connections (`dispatch: remote`) for a coordinator,
    /// next to the product, with the credentials only worker.yaml holds.
    Worker {
        /// The worker's file (worker.yaml).
        #[arg(long)]
        config: PathBuf,
        /// Check the file (decoding and every secret reference) and exit: 0 when it can run.
        #[arg(long)]
        check: bool,
    },
    /// Bring the schema of runtime.yaml's database up to date (idempotent).
    Migrate {
        /// The deployment's runtime file.
        #[arg(long)]
        runtime: PathBuf,
    },
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let flag = args.log_format.map(LogFormat::from);
    let runtime = coordinator::runtime().context("starting the async runtime")?;
    let ended = runtime.block_on(async {
        match args.command {
            Command::Dev { project, listen, data, token } => {
                if let Err(code) = start_logging(flag, None) {
                    return Ok(code);
                }
                run_dev(DevOptions { project, listen, data, token }).await
            }
            Command::Serve { runtime, recovery_only } => {
                let mode = if recovery_only { serve::Mode::RecoveryOnly } else { serve::Mode::Normal };
                Ok(with_config(&runtime, flag, |config| run_serve(config, mode)).await)
            }
            Command::Migrate { runtime } => Ok(with_config(&runtime, flag, run_migrate).await),
            Command::Worker { config, check } => {
                if let Err(code) = start_logging(flag, None) {
                    return Ok(code);
                }
                Ok(run_worker(&config, check).await)
            }
        }
    });
    // Every line logged, including the runtime's last tasks', is written before the process exits.
    drop(runtime);
    logging::flush();
    ended
}

/// Installs the log subscriber; on a filter that does not parse, logs why
/// with the default filter and gives the exit code (2, usage).
fn start_logging(flag: Option<LogFormat>, file: Option<&Logging>) -> Result<(), ExitCode> {
    let settings = LogSettings::resolve(std::env::var("RUST_LOG").ok(), flag, file);
    match logging::install(&settings) {
        Ok(()) => Ok(()),
        Err(e) => {
            let fallback = LogSettings { filter: logging::DEFAULT_FILTER.to_owned(), ..settings };
            if logging::install(&fallback).is_ok() {
                tracing::error!(error = %e, "cannot start");
            }
            Err(ExitCode::from(2))
        }
    }
}

/// Reads runtime.yaml, sets logging up as it says (or with the defaults when
/// it is refused, to say why) and runs `then` on it.
async fn with_config<F, Fut>(file: &std::path::Path, flag: Option<LogFormat>, then: F) -> ExitCode
where
    F: FnOnce(RuntimeConfig) -> Fut,
    Fut: std::future::Future<Output = ExitCode>,
{
    match RuntimeConfig::read(file) {
        Ok(config) => match start_logging(flag, config.runtime.logging.as_ref()) {
            Ok(()) => then(config).await,
            Err(code) => code,
        },
        Err(e) => match start_logging(flag, None) {
            Ok(()) => refuse(&ServeError::Deployment(e)),
            Err(code) => code,
        },
    }
}

/// Follows the test clock's file when the environment names one.
fn follow_test_clock(engine: &std::sync::Arc<coordinator::Engine>) {
    if let Some(file) = std::env::var_os(test_clock::VARIABLE) {
        test_clock::follow(engine, file.into());
    }
}

/// SIGTERM and SIGINT, the signals that drain the service.
struct Signals {
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        Ok(Signals {
            terminate: signal(SignalKind::terminate()).context("handling SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("handling SIGINT")?,
        })
    }

    /// The next signal's name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}

/// Drains with `drain` until it ends or a second signal comes (then exits at once).
async fn drain_on(signals: &mut Signals, first: &str, drain: impl std::future::Future<Output = Drained>) -> ExitCode {
    tracing::info!(signal = first, "stopping: draining (a second signal stops at once)");
    tokio::select! {
        drained = drain => match drained {
            Drained::Clean => ExitCode::SUCCESS,
            Drained::GraceExpired { .. } => ExitCode::from(STOPPED_UNDRAINED),
        },
        second = signals.next() => {
            tracing::warn!(
                signal = second,
                "stopping at once: product requests in flight become uncertain once their leases run out"
            );
            logging::flush();
            std::process::exit(i32::from(STOPPED_UNDRAINED));
        }
    }
}

async fn run_dev(options: DevOptions) -> anyhow::Result<ExitCode> {
    let mut signals = Signals::install()?;
    let project = options.project.clone();
    let mut dev = match dev::start(options).await {
        Ok(dev) => dev,
        Err(DevError::Refused(diagnostics)) => {
            for d in diagnostics.iter().filter(|d| d.is_error()) {
                log_diagnostic(d);
            }
            tracing::error!(project = %project.display(), "the project was refused; nothing was started");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e).context("starting coordinator dev"),
    };
    follow_test_clock(&dev.engine);
    let url = dev.url();
    let input = project.join("input.json");
    println!("coordinator dev: workflow {} at revision {}", dev.workflow, dev.revision);
    println!("  console:     {url}/console   (sign in with the operator token)");
    println!("  API:         {url}/v1/runs   (health: {url}/healthz)");
    println!("  simulators:  {url}/sim/{{breg,casework,messaging,scheduling,evaluation}}, tokens at {url}/sim/token");
    println!("  data:        {}", dev.data_dir.display());
    println!("  operator token: {}", dev.token);
    println!("  (subject dev-operator, every role for every workflow; send `Authorization: Bearer <token>`)");
    println!();
    println!("Admit a run:");
    println!("  TOKEN={}", dev.token);
    println!(
        "  curl -sS -X POST {url}/v1/runs -H \"authorization: Bearer $TOKEN\" -H 'content-type: application/json' \\\n    -d \"{{\\\"workflow\\\": \\\"{}\\\", \\\"revision\\\": \\\"{}\\\", \\\"idempotencyKey\\\": \\\"try-1\\\", \\\"input\\\": $(cat {})}}\"",
        dev.workflow,
        dev.revision,
        input.display()
    );
    println!("Then: curl -sS -H \"authorization: Bearer $TOKEN\" {url}/v1/runs/RUN_ID");
    if !dev.schedules.is_empty() {
        println!();
        println!("Schedules (fired by the service; GET {url}/v1/schedules shows them as they stand):");
        for (schedule, next) in &dev.schedules {
            println!("  {schedule}");
            for firing in next {
                println!("    next: {firing}");
            }
        }
    }
    if let Some(trigger) = dev.triggers.first() {
        println!();
        println!("Send a signed event (triggers: {}; docs/api.md has the scheme):", dev.triggers.join(", "));
        println!("  SECRET={}   # eventSigningSecret of every trigger connection in dev", dev.event_secret);
        println!("  BODY='{{\"eventId\": \"…\", …}}'; T=$(date +%s)");
        println!("  SIG=$(printf '%s' \"$T.$BODY\" | openssl dgst -sha256 -hmac \"$SECRET\" | sed 's/^.*= //')");
        println!(
            "  curl -sS -X POST {url}/v1/events/{}/{trigger} -H \"coordinator-signature: t=$T,v1=$SIG\" \\\n    -H 'content-type: application/json' --data-binary \"$BODY\"",
            dev.workflow
        );
    }
    tracing::info!(
        workflow = %dev.workflow,
        revision = %dev.revision,
        url = %url,
        owner = dev.engine.owner(),
        grace_seconds = dev.grace().as_secs(),
        "serving"
    );
    let first = tokio::select! {
        () = dev.serve_forever() => {
            tracing::error!("the HTTP server stopped");
            return Ok(ExitCode::from(3));
        }
        first = signals.next() => first,
    };
    Ok(drain_on(&mut signals, first, dev.drain()).await)
}

async fn run_serve(config: RuntimeConfig, mode: serve::Mode) -> ExitCode {
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            return ExitCode::from(3);
        }
    };
    let deployment = match config.resolve() {
        Ok(d) => d,
        Err(e) => return refuse(&ServeError::Deployment(e)),
    };
    let unprotected = deployment.access.is_empty();
    let mut service = match serve::start_with(deployment, mode).await {
        Ok(service) => service,
        Err(e) => return refuse(&e),
    };
    follow_test_clock(&service.engine);
    tracing::info!(
        workflow = %service.workflow,
        revision = %service.revision,
        url = %service.url(),
        console = %format!("{}/console", service.url()),
        owner = service.engine.owner(),
        grace_seconds = service.grace.as_secs(),
        "serving"
    );
    if mode == serve::Mode::RecoveryOnly {
        tracing::warn!(
            "RECOVERY-ONLY: nothing is admitted or dispatched and no timer fires; inspect, place the restore hold \
             (POST /v1/restore-hold), reconcile or cancel, then start normally and release the hold"
        );
    }
    if unprotected {
        tracing::warn!(
            "runtime.yaml's `access` has no tokens and no OIDC issuers: every call but /healthz, /readyz, \
             /v1/openapi.json and completion notifications is refused (401)"
        );
    }
    let first = tokio::select! {
        () = service.serve_forever() => {
            tracing::error!("the HTTP server stopped");
            return ExitCode::from(3);
        }
        first = signals.next() => first,
    };
    drain_on(&mut signals, first, service.drain()).await
}

async fn run_migrate(config: RuntimeConfig) -> ExitCode {
    match serve::migrate(&config).await {
        Ok(()) => {
            tracing::info!(runtime = %config.file.display(), "the database is up to date");
            ExitCode::SUCCESS
        }
        Err(e) => refuse(&e),
    }
}

/// `coordinator worker`: checks worker.yaml, then (unless `check`) runs
/// until SIGTERM/SIGINT, finishing the tasks it acquired.
async fn run_worker(file: &std::path::Path, check: bool) -> ExitCode {
    use coordinator::dispatch::remote_worker::config::{ConfigError, WorkerConfig};
    let resolved = WorkerConfig::read(file).and_then(|config| {
        for d in &config.warnings {
            log_diagnostic(d);
        }
        config.resolve()
    });
    let worker = match resolved {
        Ok(worker) => worker,
        Err(e) => {
            if let ConfigError::Refused { diagnostics, .. } = &e {
                for d in diagnostics {
                    log_diagnostic(d);
                }
            }
            tracing::error!(error = %e, "the worker cannot start");
            // As for serve: a secret that cannot be read now is unavailable (3), the file itself wrong (1).
            let unavailable = matches!(&e, ConfigError::Unusable(d) if d.is_unavailable());
            return ExitCode::from(if unavailable { 3 } else { 1 });
        }
    };
    if check {
        tracing::info!(file = %file.display(), worker = ?worker, "the worker file is usable");
        return ExitCode::SUCCESS;
    }
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            return ExitCode::from(3);
        }
    };
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let mut running = tokio::spawn(worker.run(stopping));
    let first = tokio::select! {
        ended = &mut running => return worker_exit(ended),
        first = signals.next() => first,
    };
    tracing::info!(signal = first, "stopping: finishing the tasks acquired (a second signal stops at once)");
    let _ = stop.send(true);
    tokio::select! {
        ended = &mut running => worker_exit(ended),
        second = signals.next() => {
            tracing::warn!(signal = second, "stopping at once: tasks in flight become uncertain once their leases run out");
            ExitCode::from(STOPPED_UNDRAINED)
        }
    }
}

fn worker_exit(
    ended: Result<Result<(), coordinator::dispatch::remote_worker::WorkerError>, tokio::task::JoinError>,
) -> ExitCode {
    match ended {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "the worker stopped");
            ExitCode::from(1)
        }
        Err(e) => {
            tracing::error!(error = %e, "the worker stopped");
            ExitCode::from(3)
        }
    }
}

/// Logs why the service cannot go on; exit code 1 (refused) or 3 (unavailable).
fn refuse(error: &ServeError) -> ExitCode {
    if let ServeError::Deployment(DeploymentError::Refused { diagnostics, .. }) = error {
        for d in diagnostics {
            log_diagnostic(d);
        }
    }
    tracing::error!(error = %error, "cannot start");
    ExitCode::from(if error.is_unavailable() { 3 } else { 1 })
}

/// One diagnostic as a log line, compiler-style (`file:line:column: error[code]: message`).
fn log_diagnostic(d: &Diagnostic) {
    let help = (!d.help.is_empty()).then_some(d.help.as_str());
    let at = format!("{}:{}:{}", d.file, d.line, d.column);
    if d.is_error() {
        tracing::error!(code = d.code.as_str(), help, "{at}: error[{}]: {}", d.code.as_str(), d.message);
    } else {
        tracing::warn!(code = d.code.as_str(), help, "{at}: warning[{}]: {}", d.code.as_str(), d.message);
    }
}

//! `coordinator`: the service binary (SPEC §7): `dev`, `serve`, `migrate`.
//! Parses arguments, prints, and maps failures to exit codes (`0` ok, `1`
//! refused, `2` usage, `3` a needed resource is unavailable).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use coordinator::deployment::{DeploymentError, RuntimeConfig};
use coordinator::dev::{self, DevError, DevOptions};
use coordinator::serve::{self, ServeError};

/// The Coordinator service.
#[derive(Debug, Parser)]
#[command(name = "coordinator", version)]
struct Args {
    #[command(subcommand)]
    command: Command,
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
    /// Bring the schema of runtime.yaml's database up to date (idempotent).
    Migrate {
        /// The deployment's runtime file.
        #[arg(long)]
        runtime: PathBuf,
    },
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let runtime = coordinator::runtime().context("starting the async runtime")?;
    runtime.block_on(async {
        match args.command {
            Command::Dev { project, listen, data, token } => run_dev(DevOptions { project, listen, data, token }).await,
            Command::Serve { runtime, recovery_only } => {
                let mode = if recovery_only { serve::Mode::RecoveryOnly } else { serve::Mode::Normal };
                Ok(run_serve(&runtime, mode).await)
            }
            Command::Migrate { runtime } => Ok(run_migrate(&runtime).await),
        }
    })
}

async fn run_dev(options: DevOptions) -> anyhow::Result<ExitCode> {
    let project = options.project.clone();
    let mut dev = match dev::start(options).await {
        Ok(dev) => dev,
        Err(DevError::Refused(diagnostics)) => {
            for d in diagnostics.iter().filter(|d| d.is_error()) {
                eprintln!("{}:{}:{}: error[{}]: {}", d.file, d.line, d.column, d.code.as_str(), d.message);
            }
            eprintln!("error: {} was refused; nothing was started", project.display());
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e).context("starting coordinator dev"),
    };
    let url = dev.url();
    let input = project.join("input.json");
    println!("coordinator dev: workflow {} at revision {}", dev.workflow, dev.revision);
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
    tokio::select! {
        () = dev.serve_forever() => {}
        _ = tokio::signal::ctrl_c() => println!("coordinator dev: stopping"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_serve(runtime: &std::path::Path, mode: serve::Mode) -> ExitCode {
    let deployment = match RuntimeConfig::read(runtime).and_then(RuntimeConfig::resolve) {
        Ok(d) => d,
        Err(e) => return refuse(&ServeError::Deployment(e)),
    };
    let unprotected = deployment.access.is_empty();
    let mut service = match serve::start_with(deployment, mode).await {
        Ok(service) => service,
        Err(e) => return refuse(&e),
    };
    let url = service.url();
    println!("coordinator serve: workflow {} at revision {}", service.workflow, service.revision);
    println!("  API: {url}/v1/runs   (health: {url}/healthz)");
    if mode == serve::Mode::RecoveryOnly {
        println!(
            "  RECOVERY-ONLY: nothing is admitted or dispatched and no timer fires; inspect, place the restore hold \
             (POST /v1/restore-hold), reconcile or cancel, then start normally and release the hold"
        );
    }
    if unprotected {
        println!(
            "  warning: runtime.yaml's `access` has no tokens and no OIDC issuers: every call but /healthz, /v1/openapi.json and \
             completion notifications is refused (401)"
        );
    }
    tokio::select! {
        () = service.serve_forever() => {}
        _ = tokio::signal::ctrl_c() => println!("coordinator serve: stopping"),
    }
    ExitCode::SUCCESS
}

async fn run_migrate(runtime: &std::path::Path) -> ExitCode {
    let config = match RuntimeConfig::read(runtime) {
        Ok(c) => c,
        Err(e) => return refuse(&ServeError::Deployment(e)),
    };
    match serve::migrate(&config).await {
        Ok(()) => {
            println!("coordinator migrate: the database of {} is up to date", runtime.display());
            ExitCode::SUCCESS
        }
        Err(e) => refuse(&e),
    }
}

/// Prints why the service cannot go on; exit code 1 (refused) or 3 (unavailable).
fn refuse(error: &ServeError) -> ExitCode {
    if let ServeError::Deployment(DeploymentError::Refused { diagnostics, .. }) = error {
        for d in diagnostics {
            let severity = if d.is_error() { "error" } else { "warning" };
            eprintln!("{}:{}:{}: {severity}[{}]: {}", d.file, d.line, d.column, d.code.as_str(), d.message);
            if !d.help.is_empty() {
                eprintln!("  help: {}", d.help);
            }
        }
    }
    eprintln!("error: {error}");
    ExitCode::from(if error.is_unavailable() { 3 } else { 1 })
}

//! `coordinator`: the service binary. Only `dev` is built so far (SPEC §7);
//! `serve` and `migrate` with `runtime.yaml` are later work.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use coordinator::dev::{self, DevError, DevOptions};

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
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let runtime = coordinator::runtime().context("starting the async runtime")?;
    runtime.block_on(async {
        match args.command {
            Command::Dev { project, listen, data, token } => run_dev(DevOptions { project, listen, data, token }).await,
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
    println!("  (authentication is not built yet: the API does not check the token)");
    println!();
    println!("Admit a run:");
    println!(
        "  curl -sS -X POST {url}/v1/runs -H 'content-type: application/json' \\\n    -d \"{{\\\"workflow\\\": \\\"{}\\\", \\\"revision\\\": \\\"{}\\\", \\\"idempotencyKey\\\": \\\"try-1\\\", \\\"input\\\": $(cat {})}}\"",
        dev.workflow,
        dev.revision,
        input.display()
    );
    println!("Then: curl -sS {url}/v1/runs/RUN_ID");
    tokio::select! {
        () = dev.serve_forever() => {}
        _ = tokio::signal::ctrl_c() => println!("coordinator dev: stopping"),
    }
    Ok(ExitCode::SUCCESS)
}

//! `coordinator-sim`: the product simulators as a stand-alone server, for
//! trying a connection by hand or pointing a coordinator at them. Prints each
//! product's base URL and the token endpoint, then serves until killed.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use coordinator_sim::casework::CaseworkConfig;
use coordinator_sim::{Client, PRODUCTS, SimConfig, Simulators};

/// Product simulators speaking the coordinator's product protocol.
#[derive(Debug, Parser)]
#[command(name = "coordinator-sim", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7401")]
    listen: SocketAddr,
    /// A client the token endpoint accepts, as ID:SECRET (repeatable; default
    /// coordinator:coordinator-secret).
    #[arg(long = "client", value_name = "ID:SECRET")]
    clients: Vec<String>,
    /// Decide each review request by itself after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    auto_decide_seconds: Option<f64>,
    /// Announce each review decision with `POST URL` and `{"reference"}`.
    #[arg(long, value_name = "URL")]
    notify_url: Option<String>,
    /// A messaging recipient id that opted out (repeatable).
    #[arg(long = "opted-out", value_name = "ID")]
    opted_out: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config = SimConfig::default();
    if !args.clients.is_empty() {
        config.clients = args
            .clients
            .iter()
            .map(|c| c.split_once(':').map(|(id, secret)| Client::new(id, secret)))
            .collect::<Option<_>>()
            .context("--client takes ID:SECRET")?;
    }
    let auto_decide = args.auto_decide_seconds.map(Duration::try_from_secs_f64).transpose();
    config.casework = CaseworkConfig {
        auto_decide_after: auto_decide.context("--auto-decide-seconds takes a non-negative number")?,
        notify_url: args.notify_url,
        ..CaseworkConfig::default()
    };
    config.opted_out = args.opted_out;
    let clients: Vec<String> = config.clients.iter().map(|c| format!("{}:{}", c.id, c.secret)).collect();

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!("token endpoint: http://{addr}/sim/token (clients: {})", clients.join(", "));
    for product in PRODUCTS {
        println!("{product}: http://{addr}/sim/{product}");
    }
    coordinator_sim::serve(listener, &Simulators::new(config)).await.context("serving the simulators")
}

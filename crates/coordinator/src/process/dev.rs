//! `coordinator dev`: one process, no set-up
//! (docs/reference/service.md#coordinator-dev---project-dir---listen-1270017400---data-dir---token-token).
//! Checks and packages the project, opens an embedded SQLite store (migrated),
//! activates the package, generates a payload key and the operator token
//! (subject `dev-operator`, every role for every workflow) — kept in the data
//! directory, so a restart with the same `--data` resumes every run
//! ([`dev_secrets`]) — and serves the API and the product simulators
//! (`/sim/{product}`) on one listener, with every connection pointed at them.
//! The observation floor is 1 s; casework decides each review by itself after
//! [`AUTO_DECIDE`] and notifies `POST /v1/completions/{connection}`. Every
//! connection a trigger uses verifies signed events with one generated
//! `eventSigningSecret` ([`Dev::event_secret`], printed at start), so a
//! developer signs events with `openssl dgst -sha256 -hmac` (docs/api.md).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::process::tasks::{Drained, Running};
use coordinator_core::check::{SourceError, check_project};
use coordinator_core::diagnostic::Diagnostic;
use coordinator_core::machine::Settings;
use coordinator_core::package;
use coordinator_products::{Connection, HttpUrl, Secret, TokenSource};
use coordinator_seal::Keyring;
use coordinator_sim::casework::CaseworkConfig;
use coordinator_sim::{DEFAULT_CLIENT, SimConfig, Simulators};
use coordinator_store::{Package, Store};
use tokio::net::TcpListener;

use crate::auth::access::Access;
use crate::engine::Engine;
use crate::engine::error::EngineError;
use crate::engine::package::at_rest;
use crate::process::dev_secrets;
use crate::process::project_dir::ProjectDir;

/// How long the casework simulator takes to decide a review by itself in dev.
pub const AUTO_DECIDE: Duration = Duration::from_secs(2);

/// The options of `coordinator dev`.
#[derive(Debug, Clone)]
pub struct DevOptions {
    /// The project directory.
    pub project: PathBuf,
    /// Where to listen (port 0: any free port).
    pub listen: SocketAddr,
    /// Where the SQLite database lives (default: a fresh temporary directory).
    pub data: Option<PathBuf>,
    /// The operator token (default: random).
    pub token: Option<String>,
}

/// Why `coordinator dev` could not start.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// The project was refused by the checker.
    #[error("the project was refused ({} diagnostics)", .0.len())]
    Refused(Vec<Diagnostic>),
    /// The project could not be read.
    #[error("the project cannot be read: {0}")]
    Unreadable(#[from] SourceError),
    /// Input/output (listener, data directory, randomness).
    #[error("{0}")]
    Io(String),
    /// The engine or store failed to start.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// A running dev stack. Dropping it stops the server and the background
/// tasks (worker, audit chain, janitor) and removes a temporary data directory.
pub struct Dev {
    /// The address served.
    pub addr: SocketAddr,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The operator token: subject `dev-operator` with every role for every workflow.
    pub token: String,
    /// The workflow and its active revision.
    pub workflow: String,
    /// The active revision.
    pub revision: String,
    /// The `eventSigningSecret` of every connection a trigger uses (random per start).
    pub event_secret: String,
    /// The workflow's triggers (names), for which `POST /v1/events/{workflow}/{trigger}` admits runs.
    pub triggers: Vec<String>,
    /// The workflow's schedules, each in words with its next firings
    /// (`2026-03-30 07:30:00 CEST (+02:00) = 2026-03-30T05:30:00Z`).
    pub schedules: Vec<(String, Vec<String>)>,
    /// The simulators (tests read their effect counts).
    pub sims: Simulators,
    /// The engine.
    pub engine: Arc<Engine>,
    running: Running,
    _temp: Option<tempfile::TempDir>,
}

impl Dev {
    /// The server's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits until the server task ends (it ends only on failure or abort).
    pub async fn serve_forever(&mut self) {
        self.running.serve_forever().await;
    }

    /// How long a drain may take: the claim lease of the dev connections.
    pub fn grace(&self) -> Duration {
        crate::dispatch::worker::WorkerOptions::for_engine(&self.engine).lease()
    }

    /// Stops as `coordinator serve` does (SIGTERM, SIGINT), within [`Dev::grace`].
    pub async fn drain(&mut self) -> Drained {
        let grace = self.grace();
        self.running.drain(grace).await
    }
}

/// Starts the dev stack.
///
/// # Errors
/// [`DevError`] when the project is refused or anything cannot start.
pub async fn start(options: DevOptions) -> Result<Dev, DevError> {
    let report = check_project(&ProjectDir::new(options.project.clone()))?;
    let Some(checked) = report.checked else { return Err(DevError::Refused(report.diagnostics)) };
    let built = package::build(&checked, env!("CARGO_PKG_VERSION")).map_err(|e| DevError::Io(e.to_string()))?;

    let (temp, data_dir) = match options.data {
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(|e| DevError::Io(format!("{}: {e}", dir.display())))?;
            (None, dir)
        }
        None => {
            let temp = tempfile::Builder::new().prefix("coordinator-dev-").tempdir().map_err(io)?;
            let dir = temp.path().to_path_buf();
            (Some(temp), dir)
        }
    };
    let url = format!("sqlite://{}?mode=rwc", data_dir.join("coordinator.db").display());
    let store = Store::connect(&url).await.map_err(EngineError::Store)?;
    store.migrate().await.map_err(EngineError::Store)?;
    let workflow = checked.definition.workflow.clone();
    let stored = Package {
        revision: checked.revision.clone(),
        workflow: workflow.clone(),
        digest: built.digest,
        bytes: built.bytes,
    };

    let listener = TcpListener::bind(options.listen).await.map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let base = format!("http://{addr}");

    // Connection name -> product, from the operations the workflow uses.
    let mut products: HashMap<String, String> = HashMap::new();
    for op in checked.definition.operations.values() {
        let product = op.operation.split_once('.').map_or(op.operation.as_str(), |(p, _)| p);
        products.insert(op.connection.clone(), product.to_owned());
    }
    let mut connections = HashMap::new();
    for (name, product) in &products {
        connections.insert(name.clone(), connection(&base, product)?);
    }
    let casework_connection =
        products.iter().find(|(_, p)| p.as_str() == "casework").map_or("casework", |(c, _)| c.as_str());
    let sims = Simulators::new(SimConfig {
        casework: CaseworkConfig {
            auto_decide_after: Some(AUTO_DECIDE),
            notify_url: Some(format!("{base}/v1/completions/{casework_connection}")),
            ..CaseworkConfig::default()
        },
        ..SimConfig::default()
    });

    // Kept in the data directory, so that a restart with the same `--data` opens every run (`dev_secrets`).
    let payload_key = dev_secrets::kept(&data_dir, dev_secrets::PAYLOAD_KEY)?;
    let keyring = Keyring::new("dev-1", [("dev-1".to_owned(), payload_key)]).map_err(EngineError::Seal)?;
    let sealed = at_rest::sealed(&keyring, &stored).map_err(EngineError::Seal)?;
    store.put_package(&sealed).await.map_err(EngineError::Store)?;
    store.activate(&workflow, &checked.revision, crate::engine::now_ms(), None).await.map_err(EngineError::Store)?;
    let token = match options.token {
        Some(t) if t.trim().is_empty() || t.trim() != t => {
            return Err(DevError::Io("--token must be non-empty, without surrounding whitespace".to_owned()));
        }
        Some(t) => t,
        None => hex::encode(dev_secrets::kept(&data_dir, dev_secrets::OPERATOR_TOKEN)?),
    };
    let event_secret = hex::encode(dev_secrets::kept(&data_dir, dev_secrets::EVENT_SECRET)?);
    let event_secrets: HashMap<String, Secret> = checked
        .definition
        .triggers
        .values()
        .map(|t| (t.connection.clone(), Secret::new(event_secret.clone())))
        .collect();
    let triggers = checked.definition.triggers.keys().cloned().collect();
    let schedules = upcoming(&checked.definition.schedules, crate::engine::now_ms());
    let engine = Engine::new(store, keyring, connections, Settings { observe_floor_seconds: 1 })
        .with_event_secrets(event_secrets);
    // A data directory restored from a copy (or another's) is fenced as serve's database would be.
    engine.arm_fence().await?;
    let engine = Arc::new(engine);
    let access = Arc::new(Access::dev(&token));
    let router = crate::api::app(Arc::clone(&engine), access).merge(coordinator_sim::app(&sims));
    let running = Running::start("dev", listener, router, &engine, None);
    Ok(Dev {
        addr,
        data_dir,
        token,
        event_secret,
        triggers,
        schedules,
        workflow,
        revision: checked.revision,
        sims,
        engine,
        running,
        _temp: temp,
    })
}

/// The connection to `product`'s simulator served at `base` (its token endpoint beside it).
pub(crate) fn connection(base: &str, product: &str) -> Result<Connection, DevError> {
    let base_url = HttpUrl::parse(&format!("{base}/sim/{product}")).map_err(|e| DevError::Io(e.to_string()))?;
    let token_endpoint = HttpUrl::parse(&format!("{base}/sim/token")).map_err(|e| DevError::Io(e.to_string()))?;
    Ok(Connection::new(
        base_url,
        TokenSource::ClientSecret {
            token_endpoint,
            client_id: DEFAULT_CLIENT.0.to_owned(),
            client_secret: Secret::new(DEFAULT_CLIENT.1),
            scope: None,
        },
    ))
}

fn io(e: std::io::Error) -> DevError {
    DevError::Io(e.to_string())
}

/// How many next firings `dev` shows of each schedule.
const SHOWN_FIRINGS: usize = 3;

/// Each schedule in words with its next firings after `now`.
fn upcoming(schedules: &[coordinator_core::model::workflow::Schedule], now: i64) -> Vec<(String, Vec<String>)> {
    use coordinator_core::schedule::{describe, upcoming_in_words};
    schedules
        .iter()
        .map(|s| {
            let next =
                upcoming_in_words(s, now, SHOWN_FIRINGS).into_iter().map(|(local, utc)| format!("{local} = {utc}"));
            (format!("{}: {}", s.id, describe(s)), next.collect())
        })
        .collect()
}

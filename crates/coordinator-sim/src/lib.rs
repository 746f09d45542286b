//! Product simulators (docs/reference/products.md#simulators,
//! docs/simulators.md): in-memory stand-ins for the built-in products — `breg`,
//! `casework`, `messaging`, `scheduling`, `evaluation` — and an OAuth 2.0
//! client-credentials token endpoint, speaking the product protocol with
//! controllable faults and a count of effects per idempotency key, so tests can
//! prove that nothing was done twice.
//!
//! [`app`] serves them all under `/sim/{product}` (the token endpoint at
//! `/sim/token`); `coordinator dev` nests the same router in its own server,
//! tests bind [`serve`] to `127.0.0.1:0`. The protocol, faults, receipts and
//! counts are shared ([`engine`]); each product module says only what its
//! operations do. Simulators know nothing of runs or the coordinator's store,
//! and keep everything in memory.
//!
//! Endpoints of every product at `{base}` = `/sim/{product}`:
//! - `POST {base}/v1/operations/{name}/v{N}` — bearer token required;
//! - `GET {base}/v1/receipts/{idempotencyKey}` — bearer token required;
//! - `GET {base}/v1/completions/{name}/{reference}` — bearer token required;
//! - control API, open (it is the test harness's, not the coordinator's):
//!   `POST|DELETE {base}/v1/faults`, `GET {base}/v1/effects`,
//!   `GET|DELETE {base}/v1/load`, and for casework
//!   `POST {base}/v1/reviews/{reference}/decision`.
//!
//! Modules:
//! - [`engine`]: the protocol every product shares: bearer check, faults,
//!   idempotent replay, receipts, completions, effects count, control API
//!   ([`Sim`], [`Product`]).
//! - [`ledger`]: what a simulator remembers per idempotency key, and the counts
//!   of requests and effects ([`EffectCount`]).
//! - [`load`]: the product requests being served, the most at once, and
//!   when each arrived ([`LoadView`]).
//! - [`faults`]: the `POST {base}/v1/faults` request and the queues the next
//!   calls take their fault from ([`Fault`]).
//! - [`error`]: the answers a simulator gives when it does not accept
//!   ([`ApiError`], [`Refusal`]).
//! - [`token`]: the simulated OAuth 2.0 token endpoint and the bearer check
//!   ([`Tokens`]).
//! - [`breg`], [`casework`], [`messaging`], [`scheduling`], [`evaluation`]: one
//!   module per built-in product, saying only what its operations do.

pub mod breg;
pub mod casework;
mod engine;
mod error;
pub mod evaluation;
mod faults;
mod ledger;
mod load;
pub mod messaging;
pub mod scheduling;
pub mod token;

use std::time::Duration;

use axum::Router;
use coordinator_core::check::catalog::Catalog;

pub use engine::{Accepted, Completion, Product, Sim};
pub use error::{ApiError, Refusal};
pub use faults::{Fault, FaultKind, FaultRequest};
pub use ledger::{EffectCount, ReceiptLookup};
pub use load::{ARRIVALS_KEPT, LoadView};
pub use token::{Client, Tokens};

use breg::Breg;
use casework::{Casework, CaseworkConfig};
use evaluation::Evaluation;
use messaging::Messaging;
use scheduling::Scheduling;

/// The products served, in the order they are listed.
pub const PRODUCTS: &[&str] = &["breg", "casework", "messaging", "scheduling", "evaluation"];

/// The client every default configuration accepts: `coordinator` / `coordinator-secret`.
pub const DEFAULT_CLIENT: (&str, &str) = ("coordinator", "coordinator-secret");

/// How the simulators are set up.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Clients the token endpoint accepts.
    pub clients: Vec<Client>,
    /// Lifetime of issued tokens.
    pub token_ttl: Duration,
    /// How long a `timeout` fault holds the answer back when it names no `delaySeconds`.
    pub timeout_delay: Duration,
    /// The case-work reviewers.
    pub casework: CaseworkConfig,
    /// Messaging recipients (by id) who opted out.
    pub opted_out: Vec<String>,
}

impl Default for SimConfig {
    /// One client ([`DEFAULT_CLIENT`]), tokens valid for an hour, 30 s timeouts,
    /// reviews decided only by hand, nobody opted out.
    fn default() -> Self {
        SimConfig {
            clients: vec![Client::new(DEFAULT_CLIENT.0, DEFAULT_CLIENT.1)],
            token_ttl: Duration::from_secs(3600),
            timeout_delay: Duration::from_secs(30),
            casework: CaseworkConfig::default(),
            opted_out: Vec::new(),
        }
    }
}

/// Every simulator, sharing one token issuer. Cheap to clone (handles).
#[derive(Clone)]
pub struct Simulators {
    /// The token endpoint's issuer, which every product checks tokens against.
    pub tokens: Tokens,
    /// The record registry.
    pub breg: Sim<Breg>,
    /// The case-work system.
    pub casework: Sim<Casework>,
    /// Messaging.
    pub messaging: Sim<Messaging>,
    /// Scheduling.
    pub scheduling: Sim<Scheduling>,
    /// The decision evaluator.
    pub evaluation: Sim<Evaluation>,
}

impl Simulators {
    /// Fresh simulators, configured by `config`, with the built-in catalog's rules.
    pub fn new(config: SimConfig) -> Self {
        let catalog = Catalog::builtin();
        let tokens = Tokens::new(config.clients, config.token_ttl);
        let delay = config.timeout_delay;
        Simulators {
            breg: Sim::new(Breg::default(), tokens.clone(), &catalog, delay),
            casework: Sim::new(Casework::new(config.casework), tokens.clone(), &catalog, delay),
            messaging: Sim::new(Messaging::new(config.opted_out), tokens.clone(), &catalog, delay),
            scheduling: Sim::new(Scheduling::default(), tokens.clone(), &catalog, delay),
            evaluation: Sim::new(Evaluation::default(), tokens.clone(), &catalog, delay),
            tokens,
        }
    }
}

impl Default for Simulators {
    fn default() -> Self {
        Simulators::new(SimConfig::default())
    }
}

/// All simulators under `/sim`: `/sim/token` and `/sim/{product}/…`.
pub fn app(sims: &Simulators) -> Router {
    let sim = Router::new()
        .merge(token::router(sims.tokens.clone()))
        .nest("/breg", breg::router(sims.breg.clone()))
        .nest("/casework", casework::router(sims.casework.clone()))
        .nest("/messaging", messaging::router(sims.messaging.clone()))
        .nest("/scheduling", scheduling::router(sims.scheduling.clone()))
        .nest("/evaluation", evaluation::router(sims.evaluation.clone()));
    Router::new().nest("/sim", sim)
}

/// Serves [`app`] on `listener` until the server fails. Its routes are made
/// ready once (`into_make_service`), not for every connection accepted: the
/// coordinator opens a connection for every mutation it sends.
///
/// # Errors
/// The listener's IO error.
pub async fn serve(listener: tokio::net::TcpListener, sims: &Simulators) -> std::io::Result<()> {
    axum::serve(listener, app(sims).into_make_service()).await
}

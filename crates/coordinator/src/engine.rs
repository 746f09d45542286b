//! The engine: every input to a run becomes an event that goes through the
//! store's one transaction — lock the run, open its sealed snapshot, `decide`,
//! apply the actions to the snapshot, seal it again, persist, commit (SPEC §5).
//!
//! The snapshot is the JSON of `machine::run::Run`, sealed whole under
//! `Purpose::Snapshot` and bound to its run id: it carries the input, every
//! prepared command, product output and completion value, so nothing protected
//! reaches the database in clear. Compiled workflows are cached per revision
//! (immutable). After every commit that may have queued work the worker is woken
//! (`Engine::wake`); the worker itself lives in `worker`.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use coordinator_core::machine::compiled::Workflow;
use coordinator_core::machine::event::Event;
use coordinator_core::machine::run::Run;
use coordinator_core::machine::time::Instant;
use coordinator_core::machine::{Outcome, Settings, Transition, decide};
use coordinator_core::model::run::RunState;
use coordinator_core::package;
use coordinator_functions::Limits;
use coordinator_products::{Connection, ProductClient};
use coordinator_seal::{Binding, Keyring, Purpose};
use coordinator_store::{Admission, Decision, NewRun, Store};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::error::EngineError;

/// The result of an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitResult {
    /// The run id.
    pub run_id: String,
    /// Whether this admission created the run (`false`: the same key, revision and input were admitted before).
    pub created: bool,
    /// The run's state now.
    pub state: RunState,
}

/// A run as the API may show it: no input, commands or product responses.
#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    /// The run id.
    pub run_id: String,
    /// The workflow.
    pub workflow: String,
    /// The pinned revision.
    pub revision: String,
    /// The run's state.
    pub state: RunState,
    /// The outcome of the finish reached, if any.
    pub outcome: Option<String>,
    /// The published output (only of a finished run).
    pub output: Option<Value>,
    /// Why it failed or expired (code, step and a message without values).
    pub failure: Option<coordinator_core::machine::run::Failure>,
}

/// The engine's collaborators and caches. Shared as `Arc<Engine>`.
pub struct Engine {
    pub(crate) store: Store,
    keyring: Keyring,
    pub(crate) products: ProductClient,
    /// Connection name → how to reach the product.
    pub(crate) connections: HashMap<String, Connection>,
    settings: Settings,
    workflows: RwLock<HashMap<String, Arc<Workflow>>>,
    /// Woken after every commit that may have queued work.
    pub(crate) wake: Notify,
    /// This process's lease owner id.
    pub(crate) owner: String,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("owner", &self.owner).field("settings", &self.settings).finish()
    }
}

/// Milliseconds since the Unix epoch, from the system clock (the engine's only clock).
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Engine {
    /// An engine over a migrated store.
    pub fn new(store: Store, keyring: Keyring, connections: HashMap<String, Connection>, settings: Settings) -> Self {
        Engine {
            store,
            keyring,
            products: ProductClient::new(),
            connections,
            settings,
            workflows: RwLock::new(HashMap::new()),
            wake: Notify::new(),
            owner: format!("coordinator-{}", uuid::Uuid::now_v7()),
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The compiled workflow of a stored revision (compiled once, then cached).
    ///
    /// # Errors
    /// [`EngineError::Corrupt`] when the package is missing or does not compile.
    pub async fn workflow(&self, revision: &str) -> Result<Arc<Workflow>, EngineError> {
        if let Some(wf) = self.workflows.read().unwrap_or_else(PoisonError::into_inner).get(revision) {
            return Ok(Arc::clone(wf));
        }
        let stored = self
            .store
            .package(revision)
            .await?
            .ok_or_else(|| EngineError::Corrupt(format!("no package for revision {revision}")))?;
        let package = package::read(&stored.bytes, Some(&stored.digest))
            .map_err(|e| EngineError::Corrupt(format!("package {revision}: {e}")))?;
        let wf = Workflow::compile(package.definition, Limits::default())
            .map_err(|e| EngineError::Corrupt(format!("package {revision}: {e}")))?;
        let wf = Arc::new(wf);
        let mut cache = self.workflows.write().unwrap_or_else(PoisonError::into_inner);
        Ok(Arc::clone(cache.entry(revision.to_owned()).or_insert(wf)))
    }

    /// Admits a run of `workflow` at `revision` (which must be the active one):
    /// validates the input, then admits it with its first transition in one
    /// transaction. The same key, revision and input give the same run.
    ///
    /// # Errors
    /// [`EngineError::UnknownWorkflow`], [`EngineError::RevisionNotActive`],
    /// [`EngineError::InputInvalid`], [`EngineError::KeyReused`], or a store failure.
    pub async fn admit(
        &self,
        workflow: &str,
        revision: &str,
        input: Value,
        idempotency_key: Option<String>,
        owner: &str,
    ) -> Result<AdmitResult, EngineError> {
        let active = self.store.active(workflow).await?.ok_or_else(|| EngineError::UnknownWorkflow(workflow.into()))?;
        if active != revision {
            return Err(EngineError::RevisionNotActive { requested: revision.to_owned() });
        }
        let wf = self.workflow(&active).await?;
        let violations = wf.check_input(&input);
        if !violations.is_empty() {
            return Err(EngineError::InputInvalid { pointers: violations.into_iter().map(|v| v.pointer).collect() });
        }
        let now = now_ms();
        let new = NewRun {
            id: uuid::Uuid::now_v7().to_string(),
            workflow: workflow.to_owned(),
            revision: active.clone(),
            owner: owner.to_owned(),
            idempotency_key,
            input_digest: input_digest(&input)?,
            admitted_at: now,
        };
        let first = || -> Result<Decision, EngineError> {
            let run = Run::new(&new.id, &active, Instant(now), input);
            let t = decide(&wf, &run, &Event::Admitted, Instant(now), &self.settings);
            self.conclude(run, &t)
        };
        let admission = self.store.admit(&new, first).await.map_err(EngineError::from_store)?;
        let created = matches!(admission, Admission::Created(_));
        if created {
            self.wake.notify_one();
        }
        let row = self.store.load(admission.run_id()).await?.ok_or(EngineError::RunNotFound)?;
        Ok(AdmitResult { run_id: row.id, created, state: row.state })
    }

    /// Applies one event to a run under its lock (no claim fence: API events).
    ///
    /// # Errors
    /// [`EngineError::Ignored`] / [`EngineError::Refused`] when the machine does
    /// not apply the event (nothing is written), or a store/seal failure.
    pub async fn handle(&self, run_id: &str, event: &Event, now: i64) -> Result<(), EngineError> {
        let wf = self.workflow_of(run_id).await?;
        let decide = |snapshot: &[u8]| self.decide_on(&wf, run_id, snapshot, event, now);
        self.store.apply(run_id, now, decide).await.map_err(EngineError::from_store)?;
        self.wake.notify_one();
        Ok(())
    }

    /// The workflow a stored run is pinned to.
    pub(crate) async fn workflow_of(&self, run_id: &str) -> Result<Arc<Workflow>, EngineError> {
        let row = self.store.load(run_id).await?.ok_or(EngineError::RunNotFound)?;
        self.workflow(&row.revision).await
    }

    /// The decide closure every apply runs under the run lock.
    pub(crate) fn decide_on(
        &self,
        wf: &Workflow,
        run_id: &str,
        snapshot: &[u8],
        event: &Event,
        now: i64,
    ) -> Result<Decision, EngineError> {
        let run = self.open(run_id, snapshot)?;
        let t = decide(wf, &run, event, Instant(now), &self.settings);
        self.conclude(run, &t)
    }

    /// Applies an applied transition to the run and seals the result; any other outcome writes nothing.
    fn conclude(&self, mut run: Run, t: &Transition) -> Result<Decision, EngineError> {
        match &t.outcome {
            Outcome::Applied => {}
            Outcome::Ignored { reason } => return Err(EngineError::Ignored(reason.clone())),
            Outcome::Refused { code, .. } => return Err(EngineError::Refused { code: code.clone() }),
        }
        for action in &t.actions {
            run.apply(action);
        }
        let snapshot = self.seal(&run)?;
        Ok(Decision { actions: t.actions.clone(), snapshot, state: run.state, held: run.held })
    }

    /// Seals a run snapshot.
    fn seal(&self, run: &Run) -> Result<Vec<u8>, EngineError> {
        let json = serde_json::to_vec(run).map_err(|e| EngineError::Corrupt(format!("snapshot: {e}")))?;
        Ok(self.keyring.seal(snapshot_binding(&run.id), &json)?)
    }

    /// Opens a sealed run snapshot.
    pub(crate) fn open(&self, run_id: &str, sealed: &[u8]) -> Result<Run, EngineError> {
        let json = self.keyring.open(snapshot_binding(run_id), sealed)?;
        serde_json::from_slice(&json).map_err(|e| EngineError::Corrupt(format!("snapshot of run {run_id}: {e}")))
    }

    /// A run as the API shows it.
    ///
    /// # Errors
    /// [`EngineError::RunNotFound`], or a store/seal failure.
    pub async fn view(&self, run_id: &str) -> Result<RunView, EngineError> {
        let row = self.store.load(run_id).await?.ok_or(EngineError::RunNotFound)?;
        let run = self.open(&row.id, &row.snapshot)?;
        let finished = run.state == RunState::Finished;
        Ok(RunView {
            run_id: row.id,
            workflow: row.workflow,
            revision: row.revision,
            state: run.state,
            outcome: run.outcome,
            output: if finished { run.output } else { None },
            failure: run.failure,
        })
    }
}

fn snapshot_binding(run_id: &str) -> Binding<'_> {
    Binding { run: run_id, purpose: Purpose::Snapshot, step: None }
}

/// `sha256:<hex>` over the input's canonical JSON (RFC 8785), compared on a repeated key.
fn input_digest(input: &Value) -> Result<String, EngineError> {
    let canonical =
        serde_json_canonicalizer::to_vec(input).map_err(|e| EngineError::Corrupt(format!("input digest: {e}")))?;
    let digest = Sha256::digest(&canonical);
    Ok(format!("sha256:{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

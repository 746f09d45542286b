//! The engine's typed errors. Each variant the API shows maps to one stable
//! error code ([`crate::api::Code`], mapped in `impl From<EngineError> for ApiError`,
//! an exhaustive match); none carries a protected value (input, command,
//! product response).

use coordinator_seal::SealError;
use coordinator_store::StoreError;

/// What can go wrong when admitting or deciding.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No revision of this workflow is active (`workflow.unknown`).
    #[error("no workflow `{0}` is active")]
    UnknownWorkflow(String),
    /// The admission named another revision than the active one (`revision.not-active`).
    #[error("revision {requested} is not the active revision of the workflow")]
    RevisionNotActive {
        /// The revision the caller asked for.
        requested: String,
    },
    /// The input does not match the workflow's input schema (`input.invalid`).
    #[error("the input does not match the workflow's input schema")]
    InputInvalid {
        /// JSON pointers of the offending places (never the values).
        pointers: Vec<String>,
    },
    /// A search key has no usable value for the input (`input.search-key-failed`).
    #[error("{0}")]
    SearchKey(#[from] coordinator_core::machine::search_keys::SearchKeyError),
    /// More runs match a batch's filter than one batch may hold (`batch.too-large`).
    #[error(
        "more than {} runs match the filter; narrow it (a state, a step, a time range) and start several batches",
        coordinator_store::MOST_BATCH_RUNS
    )]
    BatchTooLarge,
    /// The idempotency key was used before with another revision or input (`idempotency.key-reused`).
    #[error("the idempotency key was used before with another revision or input")]
    KeyReused,
    /// A supplied run id is not acceptable (`run-id.invalid`).
    #[error("{0}")]
    RunIdInvalid(#[from] crate::engine::run_id::RunIdProblem),
    /// A supplied run id belongs to another admission (`run-id.taken`).
    #[error("the run id is already taken by another admission; choose a fresh UUIDv7 or omit runId")]
    RunIdTaken,
    /// The service runs in recovery-only mode: nothing is admitted (`service.recovery-only`).
    #[error("the service runs in recovery-only mode: it admits nothing until it is started normally")]
    RecoveryOnly,
    /// The service is stopping: nothing is admitted; another process (or this one
    /// once restarted) admits the request (`service.draining`).
    #[error("the service is stopping: retry the request, another process of the deployment admits it")]
    Draining,
    /// A restore hold is placed: nothing is admitted until it is released (`restore-hold.placed`).
    #[error("a restore hold is placed: nothing is admitted until an operator releases it")]
    RestoreHoldPlaced,
    /// No such run (`run.unknown`).
    #[error("no such run")]
    RunNotFound,
    /// The machine ignored the event (stale answer, timer no longer wanted): nothing was written.
    #[error("event ignored: {0}")]
    Ignored(String),
    /// The machine refused the event (an operator request the rules do not allow).
    #[error("event refused: {code}")]
    Refused {
        /// The machine's stable code.
        code: String,
    },
    /// A pause or resume of a connection refused before anything was written
    /// (`connection.unknown`, `request.invalid`).
    #[error("{0}")]
    Connection(#[from] crate::engine::connections::ConnectionRefusal),
    /// A pause or resume of a schedule refused before anything was written (`schedule.unknown`).
    #[error("{0}")]
    Schedule(#[from] crate::engine::schedules::ScheduleRefusal),
    /// A stored package or snapshot cannot be used.
    #[error("corrupt state: {0}")]
    Corrupt(String),
    /// Sealing or opening a snapshot failed.
    #[error("seal: {0}")]
    Seal(#[from] SealError),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

impl EngineError {
    /// Unwraps an engine error that travelled through the store's decide closure.
    pub(crate) fn from_store(error: StoreError) -> EngineError {
        match error {
            StoreError::Rejected(inner) => match inner.downcast::<EngineError>() {
                Ok(engine) => *engine,
                Err(other) => EngineError::Corrupt(other.to_string()),
            },
            StoreError::KeyReused { .. } => EngineError::KeyReused,
            other => EngineError::Store(other),
        }
    }
}

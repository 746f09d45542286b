//! The store's one error type, [`StoreError`]: a leaf every layer returns
//! (the `db` layer below the tables included), so it imports nothing of the
//! crate.

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The run row changed under the decision (its version moved): everything was rolled back.
    #[error("run {run_id} changed under the decision (expected version {expected})")]
    Stale {
        /// The run.
        run_id: String,
        /// The version the decision was made on.
        expected: i64,
    },
    /// A row that must be unique already exists with other content.
    #[error("conflict: {what}")]
    Conflict {
        /// What collided.
        what: String,
    },
    /// The idempotency key was used before with another revision or input (`idempotency.key-reused`).
    #[error("idempotency key reused by run {run_id} with another revision or input")]
    KeyReused {
        /// The run admitted with the key.
        run_id: String,
    },
    /// A row the operation needs does not exist.
    #[error("not found: {what}")]
    NotFound {
        /// What is missing.
        what: String,
    },
    /// The claim's lease was taken over or its row changed: the decision was not applied.
    #[error("lease lost on {what}")]
    LeaseLost {
        /// The claim.
        what: String,
    },
    /// The caller's decide closure failed: nothing was written.
    #[error("decision rejected: {0}")]
    Rejected(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A database URL that cannot be used, and why (never the URL: it may carry a password).
    #[error("the database URL cannot be used: {0}")]
    BadUrl(String),
    /// The URL names no supported backend.
    #[error("unsupported database URL scheme `{0}` (use sqlite: or postgres:)")]
    UnsupportedUrl(String),
    /// The database failed or refused a statement (on a lost connection
    /// outside a transaction, or at its commit: whether it took effect is
    /// not known).
    #[error("database: {0}")]
    Database(String),
    /// The database could not be reached, or the connection was lost before
    /// the transaction committed: nothing was done, and the same request can
    /// be made again.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The restore fence tripped (the evidence): nothing is claimed until an operator releases the restore hold.
    #[error("the restore fence holds: {0}")]
    Fenced(String),
    /// A new run's id is not a UUID (run ids are UUIDv7s, `run_id` in the service).
    #[error("run id {0:?} is not a UUID: a run's id must be a UUIDv7")]
    InvalidRunId(String),
    /// A stored value cannot be read back: the schema or data is not what this version wrote.
    #[error("corrupt store: {0}")]
    Corrupt(String),
}

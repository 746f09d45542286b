//! Group admission: plain admissions (no trigger event, no run id
//! supplied, [`Engine::admit_with`](crate::Engine::admit_with)) are decided by their own request and
//! queued here, and one task admits whatever queued while its statements
//! ran, in one statement on PostgreSQL and one transaction on SQLite
//! ([`Store::admit_guarded_batch`]), with up to the store's
//! [`statements_in_flight`] of them at once: each run
//! only while its own gate is open and its key unused, as alone. Under light
//! load a batch is one admission and costs what it cost alone; under a burst
//! the round trips, commits and fsyncs are shared.
//!
//! An admission the statement did not write (its gate closed, its key taken —
//! by an earlier run or by another of the same statement — or its first
//! decision not writable this way) hears [`Guarded::Closed`] with its decision
//! and goes on alone, as before. So does every admission of a statement that
//! failed as a whole, so one bad admission cannot hold the others back.
//!
//! It decides nothing: decisions are made by each request before it queues.
//!
//! [`statements_in_flight`]: coordinator_store::Store::statements_in_flight

use coordinator_store::{ClaimedRun, Guarded, GuardedAdmission, Store, StoreError, WorkItem};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

/// Admissions one statement carries at most.
const LIMIT: usize = 128;

/// What became of one admission: as [`Store::admit_guarded_leasing`] says.
///
/// [`Store::admit_guarded_leasing`]: coordinator_store::Store::admit_guarded_leasing
pub(crate) type Admitted = (Guarded, Vec<(WorkItem, ClaimedRun)>);

struct Queued {
    admission: GuardedAdmission,
    done: oneshot::Sender<Admitted>,
}

/// Where requests queue their admissions; the task stops when this is dropped.
pub(crate) struct Admissions {
    queue: mpsc::UnboundedSender<Queued>,
}

impl Admissions {
    /// Starts the task admitting for `store`, leasing what it leases to `owner`.
    pub(crate) fn start(store: Store, owner: String) -> Admissions {
        let (queue, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(store, owner, receiver));
        Admissions { queue }
    }

    /// Admits `admission` in the next statement.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the task stopped before answering (the
    /// service is stopping): whether the run was created is not known.
    pub(crate) async fn admit(&self, admission: GuardedAdmission) -> Result<Admitted, StoreError> {
        let (done, answer) = oneshot::channel();
        if self.queue.send(Queued { admission, done }).is_err() {
            return Err(stopped());
        }
        answer.await.map_err(|_| stopped())
    }
}

fn stopped() -> StoreError {
    StoreError::Database(
        "the admission queue stopped before answering: whether the run was created is not known".into(),
    )
}

async fn run(store: Store, owner: String, mut receiver: mpsc::UnboundedReceiver<Queued>) {
    let depth = store.statements_in_flight().max(1);
    let mut in_flight = FuturesUnordered::new();
    let mut open = true;
    loop {
        tokio::select! {
            queued = receiver.recv(), if open && in_flight.len() < depth => match queued {
                Some(first) => {
                    let mut batch = vec![first];
                    while batch.len() < LIMIT {
                        match receiver.try_recv() {
                            Ok(queued) => batch.push(queued),
                            Err(_) => break,
                        }
                    }
                    in_flight.push(admit(&store, &owner, batch));
                }
                None => open = false,
            },
            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
            else => return,
        }
    }
}

/// Admits `batch` in one statement and tells each of its requests what became of it.
async fn admit(store: &Store, owner: &str, batch: Vec<Queued>) {
    let (admissions, done): (Vec<_>, Vec<_>) = batch.into_iter().map(|q| (q.admission, q.done)).unzip();
    let answers = match store.admit_guarded_batch(owner, &admissions).await {
        Ok(answers) => answers,
        Err(e) => {
            // Nothing was written for any of them (as a single admission's failure says): each
            // goes on alone with its decision.
            tracing::warn!(error = %e, admissions = done.len(), "a grouped admission failed; each goes on alone");
            admissions.iter().map(|_| None).collect()
        }
    };
    for ((admission, done), answer) in admissions.into_iter().zip(done).zip(answers) {
        let admitted = match answer {
            Some(leased) => (Guarded::Created, leased),
            None => (Guarded::Closed(admission.decision), Vec::new()),
        };
        // A request that stopped waiting is gone; its run stands.
        let _ = done.send(admitted);
    }
}

//! Permits for eager leases: a batch of reports (`batch`) that queues rows
//! of a limited connection may lease them at once to its worker, as it does
//! the rows of a connection without limits (`commit_leases`), when the
//! connection's pace grants them in the batch's own transaction — so limits
//! that do not bind cost no claim round and no second write of the row.
//!
//! The permits are the process's allowance of the connection
//! ([`allowance`](super::allowance)), taken by its claim rounds under the
//! connection row's lock and spent here without it: a permit is still the
//! lease, every process counts the allowance as in flight, and two processes
//! never exceed the limit together.
//!
//! **Only while the limit does not bind**: an allowance is taken only while
//! the limit leaves more than [`CLAIM_ROOM`] permits (and tokens) free for
//! the claims. Rows due before the batch's (a new run's first request, a
//! retry) are taken by claims, in due order and round-robin across
//! workflows; as a limit nears, no allowance is taken and every permit goes
//! through those claims, so a run in progress never takes a permit ahead of
//! work that waited for it for long. Nothing is leased while the breaker is
//! not closed (its probe is claimed): the batch's statement leases nothing
//! while any connection is held back.
//!
//! PostgreSQL only: a SQLite batch leases no lane's rows (its service does
//! not lease at commit, `Store::eager_dispatch`).

use std::collections::HashMap;
use std::sync::Arc;

use super::Memory;
use super::allowance::{self, Pending};
use crate::StoreError;
use crate::db::{Dialect, Tx};

/// The permits (and tokens) a batch leaves for claims: what one claim
/// round of the service takes at most.
pub const CLAIM_ROOM: u32 = 32;

/// What `owner`'s allowance of each connection of `wanted` (with how many
/// of the batch's rows would be leased at once) grants the commit `tx` at
/// `now`; a connection absent from the answer grants nothing. The grants are
/// held in the returned [`Pending`] until the commit ends.
pub(crate) async fn grant(
    tx: &mut Tx,
    memory: &Arc<Memory>,
    owner: &str,
    wanted: &[(String, u32)],
    now: i64,
) -> Result<(HashMap<String, u32>, Pending), StoreError> {
    let (mut granted, mut pending) = (HashMap::new(), Pending::default());
    if tx.dialect() != Dialect::Pg {
        return Ok((granted, pending));
    }
    for (name, want) in wanted {
        let send = allowance::spend(tx, memory, name, *want, owner, now, &mut pending).await?;
        if send > 0 {
            granted.insert(name.clone(), send);
        }
    }
    Ok((granted, pending))
}

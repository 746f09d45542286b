//! The breaker's probes: while a connection's breaker is open, claims take
//! none of its rows (`not_blocked!`), and once its probe is due one real
//! request — the connection's next due row, in claim order — is claimed as
//! the probe: the breaker goes half-open, and the probe's answer closes it
//! or opens it again ([`Store::record_answer`]).
//!
//! A probe is claimed under the connection's row lock, only while none of
//! its requests is in flight (a probe whose lease ran out is replaced by the
//! next one), so two processes never probe at once. A connection that is
//! paused or held by a `Retry-After` is not probed until that ends.

use coordinator_core::pace::Limits;

use super::pace;
use crate::claims::{in_work_order, work_row};
use crate::db::{Dialect, Writer};
use crate::types::{ClaimedRun, WorkItem, WorkScope};
use crate::{Store, StoreError};

/// `$1` now: the connections whose probe may go.
const DUE: &str = "SELECT name FROM connections WHERE paused_at IS NULL AND hold_until <= $1 \
     AND ((breaker = 'open' AND probe_at <= $1) OR breaker = 'half-open') ORDER BY name";
/// `$1` the connection, `$2` now: its requests in flight (leased, the lease not run out).
const IN_FLIGHT: &str = "SELECT count(*) FROM outbox WHERE conn = $1 AND lease_until >= $2";

/// The claim of one row of connection `$4`, as `claims` claims (`$1` owner,
/// `$2` lease end, `$3` now, `$5` 1 for receipts only); `$lock` is
/// PostgreSQL's row-lock clause.
macro_rules! claim_probe_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE outbox SET lease_owner = $1, lease_until = $2, claims = claims + 1 \
             WHERE (run_id, step, kind) IN (SELECT o.run_id, o.step, o.kind FROM outbox o \
             JOIN runs r ON r.id = o.run_id WHERE o.conn = $4 AND o.lane IS NULL AND o.not_before <= $3 \
             AND (o.lease_until IS NULL OR o.lease_until < $3) AND (NOT r.held OR o.kind = 'receipt') \
             AND ($5 = 0 OR o.kind = 'receipt') ORDER BY o.not_before, o.run_id, o.step, o.kind LIMIT 1",
            $lock,
            ")",
            super::claimed_columns!()
        )
    };
}
const CLAIM_PG: &str = claim_probe_sql!(" FOR UPDATE OF o SKIP LOCKED");
const CLAIM_SQLITE: &str = claim_probe_sql!("");

impl Store {
    /// Claims the due probes of connections whose breaker is open, at most
    /// `room`, for `owner` until `now + lease_ms` (see the module doc).
    pub(crate) async fn claim_probes(
        &self,
        scope: WorkScope,
        now: i64,
        owner: &str,
        lease_ms: i64,
        room: u32,
    ) -> Result<Vec<(WorkItem, ClaimedRun)>, StoreError> {
        if room == 0 {
            return Ok(Vec::new());
        }
        let due: Vec<String> = {
            let mut tx = self.pool.begin_read().await?;
            let rows = tx.fetch_all(DUE, vec![now.into()]).await?;
            rows.iter().map(|row| row.get(0)).collect::<Result<_, _>>()?
        };
        let mut claimed = Vec::new();
        for name in due.iter().take(usize::try_from(room).unwrap_or(usize::MAX)) {
            if let Some(probe) = self.claim_probe(name, scope, now, owner, lease_ms).await? {
                claimed.push(probe);
            }
        }
        Ok(in_work_order(claimed))
    }

    /// Claims connection `name`'s probe, when it may go and a row is due.
    async fn claim_probe(
        &self,
        name: &str,
        scope: WorkScope,
        now: i64,
        owner: &str,
        lease_ms: i64,
    ) -> Result<Option<(i64, WorkItem, ClaimedRun)>, StoreError> {
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        crate::fence::refuse(&self.fence)?;
        // An open breaker's probe: one request, whatever the limits (the bucket is kept as it is).
        let mut pace = pace::lock(&mut tx, name, &self.limits_of(name), now).await?;
        let limits = Limits::default();
        let in_flight: i64 = match tx.fetch_optional(IN_FLIGHT, vec![name.into(), now.into()]).await? {
            Some(row) => row.get(0)?,
            None => 0,
        };
        let grant = pace.grant(&limits, u32::try_from(in_flight).unwrap_or(u32::MAX), 1, now);
        if !grant.probe {
            tx.commit().await?;
            return Ok(None);
        }
        let sql = match tx.dialect() {
            Dialect::Pg => CLAIM_PG,
            Dialect::Sqlite => CLAIM_SQLITE,
        };
        let receipts_only = i64::from(scope == WorkScope::ReceiptsOnly);
        let args =
            vec![owner.into(), now.saturating_add(lease_ms).into(), now.into(), name.into(), receipts_only.into()];
        let row = tx.fetch_optional(sql, args).await?;
        let Some(row) = row else {
            // Nothing due: the breaker stays as it was, and the next round looks again.
            tx.commit().await?;
            return Ok(None);
        };
        pace::write(&mut tx, name, &pace, None).await?;
        tx.commit().await?;
        self.remember_pace(name, &pace::view_of(&pace, None), now);
        Ok(Some(work_row(&row, 0)?))
    }
}

//! The lanes of a connection whose rows wait in lanes (a remote
//! connection's, or one claimed under limits): one per workflow
//! ([`workflow_lane`]: `{connection}/{workflow}`; names have no `/`), so that
//! each workflow's due rows are in an index of their own, read in due order
//! and a few at a time (`limits`), however many another workflow has queued.
//!
//! Which lanes a connection has is read from the queue itself, not from a
//! list the engine keeps: a skip over the distinct lanes of the outbox's lane
//! indexes (one probe per lane), kept to those of the connection. A lane
//! named after the connection alone (rows queued by an earlier release) is
//! one of them too.

use crate::db::{Arg, Dialect, Tx, Writer};
use crate::{Store, StoreError};

/// What separates a limited connection's name from the workflow in a lane.
pub(crate) const SUB: char = '/';

/// The lane of `workflow`'s rows of a connection whose rows wait in lanes.
pub fn workflow_lane(connection: &str, workflow: &str) -> String {
    format!("{connection}{SUB}{workflow}")
}

/// PostgreSQL: a `WITH` naming `lanes`, every distinct lane with a row in
/// the outbox, unleased or leased: a skip over each lane index (the two are
/// partial by lease), one probe per lane. Statements that need a
/// connection's lanes in the same statement start with it.
macro_rules! lanes_with_pg {
    () => {
        "WITH RECURSIVE fresh(lane) AS (\
         SELECT (SELECT min(lane) FROM outbox WHERE lease_until IS NULL AND lane IS NOT NULL) \
         UNION ALL SELECT (SELECT min(o.lane) FROM outbox o WHERE o.lease_until IS NULL AND o.lane IS NOT NULL \
         AND o.lane > fresh.lane) FROM fresh WHERE fresh.lane IS NOT NULL), \
         leased(lane) AS (\
         SELECT (SELECT min(lane) FROM outbox WHERE lease_until IS NOT NULL AND lane IS NOT NULL) \
         UNION ALL SELECT (SELECT min(o.lane) FROM outbox o WHERE o.lease_until IS NOT NULL AND o.lane IS NOT NULL \
         AND o.lane > leased.lane) FROM leased WHERE leased.lane IS NOT NULL), \
         lanes AS (SELECT lane FROM fresh WHERE lane IS NOT NULL UNION SELECT lane FROM leased WHERE lane IS NOT NULL)"
    };
}
pub(crate) use lanes_with_pg;

/// Every distinct lane with a row in the outbox ([`lanes_with_pg`]).
const LANES_PG: &str = concat!(lanes_with_pg!(), " SELECT lane FROM lanes");
const LANES_SQLITE: &str = "WITH RECURSIVE l(lane) AS (\
     SELECT (SELECT min(lane) FROM outbox WHERE lane IS NOT NULL) \
     UNION ALL SELECT (SELECT min(o.lane) FROM outbox o WHERE o.lane IS NOT NULL AND o.lane > l.lane) \
     FROM l WHERE l.lane IS NOT NULL) SELECT lane FROM l WHERE lane IS NOT NULL";

/// Rows of the connections `$1` (a JSON array, or PostgreSQL's `text[]`)
/// queued before they were limited, or in the connection's lane of an
/// earlier release, go in their workflow's lane.
const LANE_ROWS_SQLITE: &str = "UPDATE outbox SET lane = conn || '/' || \
     (SELECT r.workflow FROM runs r WHERE r.id = outbox.run_id) \
     WHERE (lane IS NULL OR lane = conn) AND lease_until IS NULL AND conn IN (SELECT l.value FROM json_each($1) AS l)";
const LANE_ROWS_PG: &str = "UPDATE outbox SET lane = conn || '/' || \
     (SELECT r.workflow FROM runs r WHERE r.id = outbox.run_id) \
     WHERE (lane IS NULL OR lane = conn) AND lease_until IS NULL AND conn = ANY($1::text[])";

/// The lanes of connection `name` in the outbox now (see the module doc).
pub(crate) async fn of(tx: &mut Tx, name: &str) -> Result<Vec<String>, StoreError> {
    of_each(tx, std::slice::from_ref(&name.to_owned())).await
}

/// The lanes of every connection of `names` in the outbox now.
pub(crate) async fn of_each(tx: &mut Tx, names: &[String]) -> Result<Vec<String>, StoreError> {
    let sql = match tx.dialect() {
        Dialect::Pg => LANES_PG,
        Dialect::Sqlite => LANES_SQLITE,
    };
    let mut lanes = Vec::new();
    for row in tx.fetch_all(sql, Vec::new()).await? {
        let lane: String = row.get(0)?;
        if names.iter().any(|name| of_connection(&lane, name)) {
            lanes.push(lane);
        }
    }
    Ok(lanes)
}

/// Whether `lane` is one of connection `name`'s lanes.
fn of_connection(lane: &str, name: &str) -> bool {
    match lane.split_once(SUB) {
        Some((connection, _)) => connection == name,
        None => lane == name,
    }
}

/// `lanes` as the statements take a list: PostgreSQL's `text[]`, SQLite's JSON array.
pub(crate) fn arg(dialect: Dialect, lanes: &[String]) -> Result<Arg, StoreError> {
    match dialect {
        Dialect::Pg => Ok(Arg::Texts(lanes.to_vec())),
        Dialect::Sqlite => {
            serde_json::to_string(lanes).map(Arg::Text).map_err(|e| StoreError::Corrupt(format!("lanes: {e}")))
        }
    }
}

impl Store {
    /// Puts the unleased rows of `connections` (limited now) in their
    /// workflow's lane: rows queued before they were limited, and rows of the
    /// connection's own lane of an earlier release. Returns how many moved.
    pub async fn lane_rows(&self, connections: &[String]) -> Result<u64, StoreError> {
        if connections.is_empty() {
            return Ok(0);
        }
        let mut tx = self.pool.begin_for(Writer::Background).await?;
        let sql = match tx.dialect() {
            Dialect::Pg => LANE_ROWS_PG,
            Dialect::Sqlite => LANE_ROWS_SQLITE,
        };
        let list = arg(tx.dialect(), connections)?;
        let moved = tx.execute(sql, vec![list]).await?;
        tx.commit().await?;
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connections_lanes_are_its_workflows_and_its_own_name() {
        let lane = workflow_lane("messaging", "reviewed-notice");
        assert_eq!(lane, "messaging/reviewed-notice");
        assert!(of_connection(&lane, "messaging"));
        assert!(of_connection("messaging", "messaging"), "an earlier release's lane");
        assert!(!of_connection(&lane, "messagin"));
        assert!(!of_connection("messaging-eu/reviewed-notice", "messaging"));
        assert!(!of_connection("casework", "messaging"));
    }
}

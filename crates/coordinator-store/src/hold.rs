//! The deployment-wide restore hold (docs/reference/recovery.md#the-restore-hold): one row that says a hold is
//! placed, when and by whom. Placing it on each run is the machine's work
//! (`RestoreHoldPlaced` through the engine); this module only keeps the
//! deployment's flag, so that admissions can be refused and a later start can
//! finish holding runs a crash left unheld. Placing and releasing the flag
//! are journaled (kind `hold`, no run, the operator as actor) in the same
//! transaction, when they change it.

use crate::audit::{self, Line};
use crate::{Store, StoreError};

const HOLD: &str = "SELECT placed_at, placed_by, reason FROM restore_hold WHERE singleton = 1";
const PLACE: &str = "INSERT INTO restore_hold (singleton, placed_at, placed_by, reason) VALUES (1, $1, $2, $3) \
     ON CONFLICT (singleton) DO NOTHING";
const RELEASE: &str = "DELETE FROM restore_hold WHERE singleton = 1";

/// A placed restore hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// When it was placed, ms since the epoch.
    pub placed_at: i64,
    /// Who placed it (the operator's subject; `coordinator` for the fence).
    pub placed_by: String,
    /// Why: the operator's reason, or the fence's evidence when the fence placed it.
    pub reason: Option<String>,
}

/// The journal line of a hold changed by `by`, with the operator's reason when given.
fn hold_line(change: &str, reason: Option<&str>) -> Line<'static> {
    let detail = match reason {
        Some(reason) => format!("restore hold {change} for the deployment; reason given: {reason}"),
        None => format!("restore hold {change} for the deployment"),
    };
    Line { kind: "hold", step: None, detail: detail.into() }
}

impl Store {
    /// The placed hold, if any.
    pub async fn hold(&self) -> Result<Option<Hold>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        match tx.fetch_optional(HOLD, Vec::new()).await? {
            Some(row) => Ok(Some(Hold { placed_at: row.get(0)?, placed_by: row.get(1)?, reason: row.get(2)? })),
            None => Ok(None),
        }
    }

    /// Places the hold (with the operator's `reason`, kept with it and
    /// journaled); a hold already placed is kept as it is. Returns the hold in force.
    pub async fn place_hold(&self, at: i64, by: &str, reason: Option<&str>) -> Result<Hold, StoreError> {
        let mut tx = self.pool.begin().await?;
        let placed = tx.execute(PLACE, vec![at.into(), by.into(), reason.into()]).await? > 0;
        let row = tx.fetch_optional(HOLD, Vec::new()).await?;
        let hold = match row {
            Some(row) => Hold { placed_at: row.get(0)?, placed_by: row.get(1)?, reason: row.get(2)? },
            None => return Err(StoreError::Corrupt("the restore hold vanished while it was placed".into())),
        };
        if placed {
            audit::append(&mut tx, None, at, Some(by), &[hold_line("placed", reason)]).await?;
        }
        tx.commit().await?;
        Ok(hold)
    }

    /// Removes the hold's flag (at `at`, by `by`, journaled with the
    /// operator's `reason`). Returns whether one was placed.
    pub async fn release_hold(&self, at: i64, by: &str, reason: Option<&str>) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let removed = tx.execute(RELEASE, Vec::new()).await?;
        if removed > 0 {
            audit::append(&mut tx, None, at, Some(by), &[hold_line("released", reason)]).await?;
        }
        tx.commit().await?;
        Ok(removed > 0)
    }
}

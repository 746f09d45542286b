//! Console sessions ended by signing out (docs/console.md#signing-in). A
//! session's cookie is signed, not stored, so every process of a deployment
//! accepts it until it expires; signing out records the session's id (a
//! digest the console derives from the cookie's signature, never the
//! cookie) until that expiry, and every process refuses a session named
//! here. Rows past their expiry are removed as sign-outs are written.

use crate::db::Writer;
use crate::{Store, StoreError};

const END: &str = "INSERT INTO console_sign_outs (session, until) VALUES ($1, $2) ON CONFLICT (session) DO NOTHING";
const FORGET: &str = "DELETE FROM console_sign_outs WHERE until < $1";
const ENDED: &str = "SELECT 1 FROM console_sign_outs WHERE session = $1";

impl Store {
    /// Ends console session `session` (its id, see the module doc) for every
    /// process, recorded until `until` (ms: when its cookie expires anyway);
    /// removes what expired before `now`.
    pub async fn end_console_session(&self, session: &str, until: i64, now: i64) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_for(Writer::Request).await?;
        tx.execute(FORGET, vec![now.into()]).await?;
        tx.execute(END, vec![session.into(), until.into()]).await?;
        tx.commit().await
    }

    /// Whether console session `session` was ended by signing out.
    pub async fn console_session_ended(&self, session: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        Ok(tx.fetch_optional(ENDED, vec![session.into()]).await?.is_some())
    }
}

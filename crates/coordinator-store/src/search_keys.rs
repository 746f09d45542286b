//! Search keys (docs/reference/project.md#searchkeys) in `run_keys`: written
//! with the run they belong to, in its admission's transaction (PostgreSQL's
//! one-statement admissions write them in their own `WITH` part from
//! [`columns`]); read back for a run's pages; the listing filters on them
//! (`listing::push_filter`). Retention removes them with the run's other rows.

use crate::db::{Arg, Tx};
use crate::types::NewRun;
use crate::{Store, StoreError};

/// `$1` run ids, `$2` names, `$3` values (PostgreSQL arrays).
const INSERT_PG: &str = "INSERT INTO run_keys (name, value, run_id) \
     SELECT k.name, k.value, k.run_id FROM unnest($1::uuid[], $2::text[], $3::text[]) AS k(run_id, name, value)";
/// `$1` a JSON array of `[run, name, value]` (SQLite).
const INSERT_SQLITE: &str = "INSERT INTO run_keys (name, value, run_id) \
     SELECT j.value ->> 1, j.value ->> 2, j.value ->> 0 FROM json_each($1) AS j";
const OF_RUN: &str = "SELECT name, value FROM run_keys WHERE run_id = $1 ORDER BY name";

/// The three array columns (run ids, names, values) of the keys of `runs`.
pub(crate) fn columns<'a>(runs: impl Iterator<Item = &'a NewRun>) -> [Arg; 3] {
    let (mut ids, mut names, mut values) = (Vec::new(), Vec::new(), Vec::new());
    for new in runs {
        for (name, value) in &new.search_keys {
            ids.push(new.id.clone());
            names.push(name.clone());
            values.push(value.clone());
        }
    }
    [Arg::Ids(ids), Arg::Texts(names), Arg::Texts(values)]
}

/// Writes the keys of `runs` in `tx` (nothing when none has a key).
pub(crate) async fn insert<'a>(tx: &mut Tx, runs: impl Iterator<Item = &'a NewRun>) -> Result<(), StoreError> {
    let runs: Vec<&NewRun> = runs.filter(|r| !r.search_keys.is_empty()).collect();
    if runs.is_empty() {
        return Ok(());
    }
    match tx.dialect() {
        crate::db::Dialect::Pg => {
            tx.execute(INSERT_PG, Vec::from(columns(runs.into_iter()))).await?;
        }
        crate::db::Dialect::Sqlite => {
            let rows: Vec<serde_json::Value> = runs
                .iter()
                .flat_map(|r| r.search_keys.iter().map(|(name, value)| serde_json::json!([r.id, name, value])))
                .collect();
            let text = serde_json::Value::Array(rows).to_string();
            tx.execute(INSERT_SQLITE, vec![text.into()]).await?;
        }
    }
    Ok(())
}

impl Store {
    /// The search keys of run `run_id` (name, value), by name.
    pub async fn run_search_keys(&self, run_id: &str) -> Result<Vec<(String, String)>, StoreError> {
        let mut tx = self.pool.begin_read().await?;
        let rows = tx.fetch_all(OF_RUN, vec![Arg::id(run_id)]).await?;
        rows.iter().map(|row| Ok((row.get(0)?, row.get(1)?))).collect()
    }
}

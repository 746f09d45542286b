//! The simulated record registry (BReg): `read-record/v1` and
//! `invoke-action/v1`. It has no receipts (as the catalog says).
//!
//! Every record exists: one never written reads as revision 1 with empty data, so
//! `coordinator dev` runs need no seeding. Seeded records (`Sim::<Breg>::put_record`)
//! read as seeded. An action raises the revision by one; `expectedRevision` that no
//! longer matches is refused with `revision-mismatch` (not a declared refusal).

use std::collections::BTreeMap;
use std::time::SystemTime;

use axum::Router;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::engine::{self, Accepted, Completion, Product, Sim};
use crate::error::Refusal;

/// One registry record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Monotonic revision, from 1.
    pub revision: u64,
    /// The record's fields.
    pub data: Map<String, Value>,
    /// The actions invoked on it, in order.
    pub actions: Vec<String>,
}

impl Default for Record {
    fn default() -> Self {
        Record { revision: 1, data: Map::new(), actions: Vec::new() }
    }
}

/// The registry's state: records by (record type, record id).
#[derive(Debug, Default)]
pub struct Breg {
    records: BTreeMap<(String, String), Record>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordRef {
    record_type: String,
    record_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InvokeAction {
    record_type: String,
    record_id: String,
    action: String,
    expected_revision: Option<u64>,
}

impl Product for Breg {
    const NAME: &'static str = "breg";
    const OPERATIONS: &'static [&'static str] = &["read-record/v1", "invoke-action/v1"];

    fn perform(&mut self, operation: &str, command: &Value, _now: SystemTime) -> Result<Accepted, Refusal> {
        match operation {
            "read-record/v1" => {
                let r: RecordRef = serde_json::from_value(command.clone()).map_err(|_| Refusal::invalid_command())?;
                let record =
                    self.records.get(&(r.record_type.clone(), r.record_id.clone())).cloned().unwrap_or_default();
                Ok(Accepted::output(json!({
                    "recordId": r.record_id,
                    "recordType": r.record_type,
                    "revision": record.revision,
                    "data": record.data,
                })))
            }
            "invoke-action/v1" => {
                let a: InvokeAction =
                    serde_json::from_value(command.clone()).map_err(|_| Refusal::invalid_command())?;
                let record = self.records.entry((a.record_type, a.record_id.clone())).or_default();
                if a.expected_revision.is_some_and(|expected| expected != record.revision) {
                    return Err(Refusal::conflict("revision-mismatch"));
                }
                record.revision += 1;
                record.actions.push(a.action);
                Ok(Accepted::output(json!({"recordId": a.record_id, "revision": record.revision})))
            }
            _ => Err(Refusal::not_found("unknown-operation")),
        }
    }

    fn completion(&self, _name: &str, _reference: &str) -> Option<Completion> {
        None
    }
}

impl Sim<Breg> {
    /// Seeds (or replaces the data of) a record; a new record starts at revision 1.
    pub fn put_record(&self, record_type: &str, record_id: &str, data: Map<String, Value>) {
        self.with_product(|b| {
            b.records.entry((record_type.to_owned(), record_id.to_owned())).or_default().data = data;
        });
    }

    /// A record as it would read now (`None` if it was never written or seeded).
    pub fn record(&self, record_type: &str, record_id: &str) -> Option<Record> {
        self.with_product(|b| b.records.get(&(record_type.to_owned(), record_id.to_owned())).cloned())
    }
}

/// The registry routes (protocol and control API), to be served at `/sim/breg`.
pub fn router(sim: Sim<Breg>) -> Router {
    engine::routes().with_state(sim)
}

//! JSON Schemas of the project file formats, generated from the model types,
//! for editors (the `yaml-language-server` modeline) and for other tools.
//! The committed copies under `schemas/` are checked against these by a test.

use schemars::schema_for;
use serde_json::Value;

use crate::model::catalog::CatalogFile;
use crate::model::runtime::RuntimeFile;
use crate::model::scenarios::ScenariosFile;
use crate::model::worker::WorkerFile;
use crate::model::workflow::WorkflowFile;

/// `(file name, schema)` for every format, in a stable order.
pub fn all() -> Vec<(&'static str, Value)> {
    vec![
        ("workflow.schema.json", schema_for!(WorkflowFile).to_value()),
        ("catalog.schema.json", schema_for!(CatalogFile).to_value()),
        ("scenarios.schema.json", schema_for!(ScenariosFile).to_value()),
        ("runtime.schema.json", schema_for!(RuntimeFile).to_value()),
        ("worker.schema.json", schema_for!(WorkerFile).to_value()),
    ]
}

/// The schema text as committed: pretty JSON with a final newline.
pub fn text(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

//! Schema proofs: the input schema and every outcome schema are valid JSON
//! Schema 2020-12 (`schema.invalid-json-schema`, pointing inside the schema).

use crate::diagnostic::Code;
use crate::json_schema;
use crate::yaml::{Part, Path};

use super::context::Ctx;

/// Runs the schema proofs.
pub fn check(cx: &mut Ctx<'_>) {
    let wf = cx.wf;
    one(cx, Path::root().key("input"), &wf.input, "the input schema");
    for (name, schema) in &wf.outcomes {
        one(cx, Path::root().key("outcomes").key(name), schema, &format!("the schema of outcome `{name}`"));
    }
}

fn one(cx: &mut Ctx<'_>, base: Path, schema: &serde_json::Value, what: &str) {
    if let Err(e) = json_schema::compile(schema) {
        let mut path = base;
        path.0.extend(e.path.0);
        cx.error(
            Code::SchemaInvalidJsonSchema,
            &path,
            Part::Value,
            format!("{what} is not a valid JSON Schema 2020-12: {}", e.message),
            "fix the schema keyword at this position (see json-schema.org, draft 2020-12)",
        );
    }
}

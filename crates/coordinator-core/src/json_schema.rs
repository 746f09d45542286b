//! JSON Schema 2020-12: compiling the schemas a project embeds and validating
//! values against them. `format` is asserted (`uuid`, `date-time`, `email`, …).
//! Remote and file `$ref`s are impossible: the validator is built without any
//! resolver, so a schema can never make the coordinator fetch anything.

use jsonschema::{Draft, Validator};
use serde_json::Value;

use crate::yaml::{Path, Seg};

/// A schema that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaError {
    /// Where in the schema document the problem is.
    pub path: Path,
    /// What is wrong with the schema.
    pub message: String,
}

/// One way a value does not match a schema. Never contains the value itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer into the value (`/recipient/id`; empty for the whole value).
    pub pointer: String,
    /// What is wrong, without the value.
    pub message: String,
}

/// Compiles a JSON Schema 2020-12 with format assertions on.
///
/// # Errors
/// [`SchemaError`] when the document is not a valid schema.
pub fn compile(schema: &Value) -> Result<Validator, SchemaError> {
    if let Some((path, target)) = external_ref(schema, Path::root()) {
        return Err(SchemaError {
            path,
            message: format!(
                "`$ref` to `{target}` points outside this schema; schemas must be self-contained (use `#/$defs/…`)"
            ),
        });
    }
    jsonschema::options().with_draft(Draft::Draft202012).should_validate_formats(true).build(schema).map_err(|e| {
        SchemaError { path: pointer_to_path(&e.instance_path().to_string()), message: e.masked().to_string() }
    })
}

/// The first `$ref` that does not point inside the same document.
fn external_ref(value: &Value, path: Path) -> Option<(Path, String)> {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref")
                && !target.starts_with('#')
            {
                return Some((path.key("$ref"), target.clone()));
            }
            map.iter().find_map(|(k, v)| external_ref(v, path.key(k)))
        }
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| external_ref(v, path.index(i))),
        _ => None,
    }
}

/// Every way `value` violates `validator`, in the validator's order.
pub fn violations(validator: &Validator, value: &Value) -> Vec<Violation> {
    validator
        .iter_errors(value)
        .map(|e| Violation { pointer: e.instance_path().to_string(), message: e.masked().to_string() })
        .collect()
}

/// Turns a JSON pointer into a path of segments (numeric tokens become indices).
pub fn pointer_to_path(pointer: &str) -> Path {
    let segs = pointer
        .split('/')
        .skip(1)
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .map(|token| match token.parse::<usize>() {
            Ok(i) => Seg::Index(i),
            Err(_) => Seg::Key(token),
        })
        .collect();
    Path(segs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invalid_schemas_are_refused_with_a_location() {
        let err = compile(&json!({"type": "object", "properties": {"a": {"type": "strnig"}}})).err();
        let path = err.map(|e| e.path);
        assert!(path.is_some_and(|p| p.0.starts_with(&[Seg::Key("properties".into())])));
    }

    #[test]
    fn formats_are_asserted_and_values_are_not_echoed() {
        let v = compile(&json!({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}}));
        let Ok(v) = v else { panic!("schema should compile") };
        let found = violations(&v, &json!({"id": "secret-not-a-uuid"}));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/id");
        assert!(!found[0].message.contains("secret"), "{}", found[0].message);
    }
}

//! Sample instances of a JSON Schema, for proofs that evaluate a function on
//! inputs the schema accepts (the checker's search key proof). A sample is
//! built from the schema's own words — `examples`, `const`, `enum`,
//! `default`, `required`, `format`, bounds — and kept only when the schema
//! validates it; a schema this cannot satisfy (a `pattern`, `allOf`, …)
//! gives fewer samples, never a wrong one.

use serde_json::{Map, Value, json};

use crate::json_schema;

/// How deep a sample nests (objects, arrays, local `$ref`s).
const MAX_DEPTH: usize = 16;

/// Valid instances of `schema`: each of its `examples`, then one with only
/// the required properties of every object and one with every property.
/// Each is validated against the schema; duplicates are dropped.
pub fn samples(schema: &Value) -> Vec<Value> {
    let Ok(validator) = json_schema::compile(schema) else { return Vec::new() };
    let mut out: Vec<Value> = Vec::new();
    let examples = schema.get("examples").and_then(Value::as_array).cloned().unwrap_or_default();
    let built =
        [Fill::Required, Fill::Every].into_iter().filter_map(|fill| Sampler { root: schema, fill }.of(schema, 0));
    for sample in examples.into_iter().chain(built) {
        if validator.is_valid(&sample) && !out.contains(&sample) {
            out.push(sample);
        }
    }
    out
}

/// Which properties of an object a sample fills.
#[derive(Clone, Copy)]
enum Fill {
    Required,
    Every,
}

struct Sampler<'s> {
    root: &'s Value,
    fill: Fill,
}

impl Sampler<'_> {
    fn of(&self, schema: &Value, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let schema = match schema {
            Value::Bool(true) => return Some(Value::Null),
            Value::Object(map) => map,
            _ => return None,
        };
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            return self.of(self.local(target)?, depth + 1);
        }
        for word in ["const", "default"] {
            if let Some(value) = schema.get(word) {
                return Some(value.clone());
            }
        }
        if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
            return Some(first.clone());
        }
        if let Some(first) = schema.get("examples").and_then(Value::as_array).and_then(|e| e.first()) {
            return Some(first.clone());
        }
        for word in ["oneOf", "anyOf"] {
            if let Some(variants) = schema.get(word).and_then(Value::as_array) {
                return variants.iter().find_map(|v| self.of(v, depth + 1));
            }
        }
        let kind = match schema.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(Value::Array(types)) => {
                types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null")
            }
            None if schema.contains_key("properties") => "object",
            _ => return None,
        };
        match kind {
            "object" => self.object(schema, depth),
            "array" => self.array(schema, depth),
            "string" => string(schema),
            "integer" => Some(json!(number(schema).ceil() as i64)),
            "number" => Some(json!(number(schema))),
            "boolean" => Some(json!(false)),
            "null" => Some(Value::Null),
            _ => None,
        }
    }

    /// A `$ref` inside the same document (`#/$defs/x`, `#/definitions/x`).
    fn local(&self, target: &str) -> Option<&Value> {
        self.root.pointer(target.strip_prefix('#')?)
    }

    fn object(&self, schema: &Map<String, Value>, depth: usize) -> Option<Value> {
        let properties = schema.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        for (name, property) in properties.into_iter().flatten() {
            if matches!(self.fill, Fill::Every) || required.contains(&name.as_str()) {
                out.insert(name.clone(), self.of(property, depth + 1)?);
            }
        }
        // A required property the schema does not describe: any value it allows.
        for name in required {
            if !out.contains_key(name) {
                let extra = schema.get("additionalProperties").unwrap_or(&Value::Bool(true));
                out.insert(name.to_owned(), self.of(extra, depth + 1)?);
            }
        }
        Some(Value::Object(out))
    }

    fn array(&self, schema: &Map<String, Value>, depth: usize) -> Option<Value> {
        let least = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        if least == 0 {
            return Some(json!([]));
        }
        let item = self.of(schema.get("items")?, depth + 1)?;
        Some(Value::Array(vec![item; usize::try_from(least.min(64)).ok()?]))
    }
}

fn string(schema: &Map<String, Value>) -> Option<Value> {
    if schema.contains_key("pattern") {
        return None;
    }
    let base = match schema.get("format").and_then(Value::as_str) {
        Some("uuid") => "0199c8a0-0000-7000-8000-000000000000",
        Some("date-time") => "2026-01-01T00:00:00Z",
        Some("date") => "2026-01-01",
        Some("time") => "00:00:00Z",
        Some("email") => "someone@example.org",
        Some("uri" | "iri" | "uri-reference" | "iri-reference") => "https://example.org/",
        Some("hostname" | "idn-hostname") => "example.org",
        Some("ipv4") => "192.0.2.1",
        Some("ipv6") => "2001:db8::1",
        Some(_) => return None,
        None => "sample",
    };
    let least = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0);
    let mut text = base.to_owned();
    while (text.chars().count() as u64) < least.min(4096) {
        text.push('x');
    }
    if let Some(most) = schema.get("maxLength").and_then(Value::as_u64) {
        text = text.chars().take(usize::try_from(most).ok()?).collect();
    }
    Some(Value::String(text))
}

fn number(schema: &Map<String, Value>) -> f64 {
    let bound = |word: &str| schema.get(word).and_then(Value::as_f64);
    match (bound("minimum"), bound("exclusiveMinimum"), bound("maximum"), bound("exclusiveMaximum")) {
        (Some(min), _, _, _) => min,
        (_, Some(min), _, _) => min + 1.0,
        (_, _, Some(max), _) if max < 0.0 => max,
        (_, _, _, Some(max)) if max <= 0.0 => max - 1.0,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_valid_instances_from_the_schemas_own_words() {
        let schema = json!({
            "type": "object",
            "required": ["applicationId", "recipient"],
            "properties": {
                "applicationId": {"type": "string", "format": "uuid"},
                "recipient": {
                    "type": "object",
                    "required": ["kind", "id"],
                    "properties": {"kind": {"enum": ["person", "organisation"]}, "id": {"type": "string", "minLength": 1}},
                    "additionalProperties": false
                },
                "recommendation": {"enum": ["approved", "rejected"]},
                "count": {"type": "integer", "minimum": 3}
            },
            "additionalProperties": false
        });
        let got = samples(&schema);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0]["recipient"]["kind"], "person");
        assert!(got[0].get("recommendation").is_none());
        assert_eq!(got[1]["recommendation"], "approved");
        assert_eq!(got[1]["count"], 3);
    }

    #[test]
    fn examples_come_first_and_an_unsatisfiable_part_gives_no_sample() {
        let schema = json!({
            "type": "object",
            "required": ["code"],
            "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            "examples": [{"code": "ABC"}, {"code": "not valid"}]
        });
        assert_eq!(samples(&schema), vec![json!({"code": "ABC"})]);
    }

    #[test]
    fn local_references_are_followed_and_bounded() {
        let schema = json!({
            "$defs": {"node": {"type": "object", "required": ["next"], "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "type": "object",
            "required": ["id"],
            "properties": {"id": {"$ref": "#/$defs/id"}},
            "additionalProperties": false
        });
        // `#/$defs/id` does not exist: no sample, and no panic.
        assert!(samples(&schema).is_empty());
        let looping = json!({"$defs": {"node": {"type": "object", "required": ["next"], "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"});
        assert!(samples(&looping).is_empty());
    }
}

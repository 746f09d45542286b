//! JSON values in and out of the sandbox.
//!
//! Owns the mapping between [`serde_json::Value`] and Rhai's `Dynamic`: JSON
//! integers become Rhai `INT` (i64), other numbers `FLOAT`, `null` becomes
//! `()`, and back again, so a value that only passes through a function comes
//! out exactly as it went in. It must not describe any value in an error:
//! only kinds of values ("a function pointer"), never their contents or map
//! keys (keys can be data too).

use rhai::Dynamic;
use serde_json::Value;

/// Deepest nesting a result may have. serde_json refuses to parse deeper
/// documents by default, so a deeper result could be saved but never read
/// back; refusing it here keeps every output re-readable.
pub(crate) const MAX_OUTPUT_DEPTH: usize = 128;

/// Converts one JSON argument. A JSON integer beyond `i64` becomes a float,
/// as Rhai has no wider integer.
pub(crate) fn to_rhai(value: &Value) -> Result<Dynamic, String> {
    rhai::serde::to_dynamic(value).map_err(|_| "the argument cannot be represented in Rhai".to_string())
}

/// Converts a result, refusing anything JSON cannot hold instead of letting
/// serde quietly turn it into something else (serde_json maps a NaN to null).
pub(crate) fn to_json(value: Dynamic) -> Result<Value, String> {
    let value = value.flatten();
    check_shape(&value, 0)?;
    rhai::serde::from_dynamic::<Value>(&value).map_err(|_| "the result could not be converted to JSON".to_string())
}

/// Stops at the first part of the value JSON cannot hold. The recursion is
/// at most [`MAX_OUTPUT_DEPTH`] deep, so it cannot exhaust the native stack.
fn check_shape(value: &Dynamic, depth: usize) -> Result<(), String> {
    if depth > MAX_OUTPUT_DEPTH {
        return Err(format!("it nests deeper than {MAX_OUTPUT_DEPTH} levels"));
    }
    if value.is_unit() || value.is_bool() || value.is_int() || value.is_string() || value.is_char() {
        return Ok(());
    }
    if value.is_float() {
        return match value.as_float() {
            Ok(number) if number.is_finite() => Ok(()),
            _ => Err("it contains a NaN or infinite number".to_string()),
        };
    }
    if let Ok(array) = value.as_array_ref() {
        return array.iter().try_for_each(|item| check_shape(item, depth + 1));
    }
    if let Ok(map) = value.as_map_ref() {
        return map.values().try_for_each(|item| check_shape(item, depth + 1));
    }
    Err(describe_kind(value))
}

fn describe_kind(value: &Dynamic) -> String {
    if value.is_fnptr() {
        "it contains a function pointer".to_string()
    } else if value.is_blob() {
        "it contains a BLOB".to_string()
    } else {
        format!("it contains a value of type `{}`", value.type_name())
    }
}

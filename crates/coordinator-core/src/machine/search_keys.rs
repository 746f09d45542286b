//! Search keys (docs/reference/project.md#searchkeys): the named values a
//! workflow computes from a run's input at admission, stored in clear beside
//! the run so it can be found by them. One rule for what a key may hold,
//! shared by the checker (on sample inputs) and admission.

use coordinator_functions::Functions;
use serde_json::Value;

use super::compiled::Workflow;

/// The most characters a search key's value may have.
pub const MAX_SEARCH_KEY_CHARS: usize = 128;

/// Why a search key has no usable value for an input. Never carries the
/// input or the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchKeyError {
    /// The function failed (its description names no value).
    #[error("search key `{key}`: function `{function}` failed: {message}")]
    Failed {
        /// The key.
        key: String,
        /// Its function.
        function: String,
        /// What went wrong, without values.
        message: String,
    },
    /// The function returned something a key cannot hold.
    #[error(
        "search key `{key}`: function `{function}` returned {found}; a key is a string of 1 to \
         {MAX_SEARCH_KEY_CHARS} characters without control characters, or `()` for none"
    )]
    Unusable {
        /// The key.
        key: String,
        /// Its function.
        function: String,
        /// What it returned, by kind only.
        found: &'static str,
    },
}

impl SearchKeyError {
    /// The key the error is about.
    pub fn key(&self) -> &str {
        match self {
            SearchKeyError::Failed { key, .. } | SearchKeyError::Unusable { key, .. } => key,
        }
    }
}

/// A key's value from what its function returned: `Ok(None)` for `()`
/// (null: the run has no value for the key), `Err` with the kind of value
/// when it is not a usable key.
pub fn key_value(returned: Value) -> Result<Option<String>, &'static str> {
    match returned {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Err("an empty string"),
        Value::String(s) if s.chars().count() > MAX_SEARCH_KEY_CHARS => Err("a string that is too long"),
        Value::String(s) if s.chars().any(char::is_control) => Err("a string with a control character"),
        Value::String(s) => Ok(Some(s)),
        Value::Bool(_) => Err("a boolean"),
        Value::Number(_) => Err("a number"),
        Value::Array(_) => Err("an array"),
        Value::Object(_) => Err("an object"),
    }
}

/// Evaluates one key's `function` on `input` with `functions`.
///
/// # Errors
/// [`SearchKeyError`] when it fails or returns what a key cannot hold.
pub fn evaluate(
    functions: &Functions,
    key: &str,
    function: &str,
    input: &Value,
) -> Result<Option<String>, SearchKeyError> {
    let returned = functions.call(function, std::slice::from_ref(input)).map_err(|e| SearchKeyError::Failed {
        key: key.to_owned(),
        function: function.to_owned(),
        message: e.to_string(),
    })?;
    key_value(returned).map_err(|found| SearchKeyError::Unusable {
        key: key.to_owned(),
        function: function.to_owned(),
        found,
    })
}

impl Workflow {
    /// The run's search keys for `input` (already valid against the input
    /// schema), by name; a key whose function returned `()` is left out.
    ///
    /// # Errors
    /// [`SearchKeyError`] for the first key without a usable value.
    pub fn search_keys(&self, input: &Value) -> Result<Vec<(String, String)>, SearchKeyError> {
        let mut keys = Vec::with_capacity(self.definition.search_keys.len());
        for (name, function) in &self.definition.search_keys {
            if let Some(value) = evaluate(&self.functions, name, function, input)? {
                keys.push((name.clone(), value));
            }
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_is_a_short_printable_string_or_none() {
        assert_eq!(key_value(json!("0199c8a0")), Ok(Some("0199c8a0".to_owned())));
        assert_eq!(key_value(Value::Null), Ok(None));
        assert_eq!(key_value(json!("")), Err("an empty string"));
        assert_eq!(key_value(json!("a\nb")), Err("a string with a control character"));
        assert_eq!(key_value(json!("x".repeat(MAX_SEARCH_KEY_CHARS))), Ok(Some("x".repeat(128))));
        assert_eq!(key_value(json!("é".repeat(MAX_SEARCH_KEY_CHARS + 1))), Err("a string that is too long"));
        assert_eq!(key_value(json!(7)), Err("a number"));
        assert_eq!(key_value(json!({"a": 1})), Err("an object"));
    }
}

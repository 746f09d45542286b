//! Search key proofs: each key's function exists and takes one parameter
//! (the input; [`functions`](super::functions) reports those), and returns a
//! usable key — a string of at most 128 characters without control
//! characters, or `()` for none — on every sample input the input schema
//! yields ([`schema_sample`](crate::schema_sample): its `examples`, and
//! instances built from its own words). A schema that yields no sample
//! leaves the result unproven, and the key's value is checked at each
//! admission, which refuses an input whose key function fails.

use coordinator_functions::Functions;

use crate::diagnostic::Code;
use crate::machine::search_keys::{self, SearchKeyError};
use crate::schema_sample;
use crate::yaml::{Part, Path};

use super::context::Ctx;

/// Runs the result proofs with the compiled functions (none: the functions
/// file did not compile, and its own diagnostic says why).
pub fn check(cx: &mut Ctx<'_>, functions: Option<&Functions>) {
    let wf = cx.wf;
    let Some(functions) = functions else { return };
    if wf.search_keys.is_empty() {
        return;
    }
    let samples = schema_sample::samples(&wf.input);
    for (name, key) in &wf.search_keys {
        let takes_input = cx.functions.as_ref().and_then(|f| f.get(&key.function)).is_some_and(|a| a.contains(&1));
        if !takes_input {
            continue;
        }
        for (i, sample) in samples.iter().enumerate() {
            let Err(error) = search_keys::evaluate(functions, name, &key.function, sample) else { continue };
            let what = match i {
                0 if samples.len() == 1 => "the sample input".to_owned(),
                _ => format!("sample input {} of {}", i + 1, samples.len()),
            };
            let message = match &error {
                SearchKeyError::Failed { message, .. } => format!("`{}` fails on {what}: {message}", key.function),
                SearchKeyError::Unusable { found, .. } => format!("`{}` returns {found} on {what}", key.function),
            };
            cx.error(
                Code::SearchKeyResult,
                &Path::root().key("searchKeys").key(name).key("function"),
                Part::Value,
                message,
                format!(
                    "return a string of 1 to {} characters without control characters, or `()` when the run has \
                     no value for the key (samples: the input schema's `examples`, then instances built from it)",
                    search_keys::MAX_SEARCH_KEY_CHARS
                ),
            );
            break;
        }
    }
}

//! Turns Rhai's runtime errors into value-free descriptions.
//!
//! Owns the decision of which bound (if any) stopped a call and the wording
//! of every other failure. Rhai's own `Display` for its errors echoes thrown
//! values, indexes, operands and strings from the data, so this module never
//! forwards Rhai's text: each kind of error gets a fixed phrase written here,
//! plus the script position and the innermost function. A function or
//! variable name is shown only when it is a word of the source itself (a
//! name can also be built from data, e.g. `Fn(input.kind)`). It must not
//! look inside any `Dynamic` carried by an error.

use std::collections::HashSet;

use rhai::{EvalAltResult, ParseErrorType, Position};

use crate::limits::Bound;

/// What stopped a call, in terms safe to show anyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A sandbox bound.
    Bound(Bound),
    /// Any other error, described without values.
    Failed(String),
}

/// Classifies `err`, looking through the chain of nested function calls.
/// `source_words` are the identifiers of the script, the only names shown.
pub(crate) fn describe(err: &EvalAltResult, source_words: &HashSet<String>) -> Failure {
    let mut innermost_function = None;
    let mut err = err;
    while let EvalAltResult::ErrorInFunctionCall(name, _, inner, _) = err {
        innermost_function = Some(name.as_str());
        err = inner;
    }
    if let Some(bound) = bound_of(err) {
        return Failure::Bound(bound);
    }
    let mut message = named_kind(err, source_words).unwrap_or_else(|| kind_of(err));
    message.push_str(&at(err.position()));
    if let Some(name) = innermost_function {
        message.push_str(&format!(" in `{name}`"));
    }
    Failure::Failed(message)
}

/// " at line L, column C", or nothing when Rhai kept no position.
fn at(position: Position) -> String {
    match position.line() {
        Some(line) => format!(" at line {line}, column {}", position.position().unwrap_or(1)),
        None => String::new(),
    }
}

fn bound_of(err: &EvalAltResult) -> Option<Bound> {
    match err {
        EvalAltResult::ErrorTooManyOperations(_) => Some(Bound::Operations),
        EvalAltResult::ErrorStackOverflow(_) => Some(Bound::CallDepth),
        EvalAltResult::ErrorTooManyVariables(_) => Some(Bound::Variables),
        // Rhai names what grew: "Length of string", "Size of array/BLOB",
        // "Size of BLOB" or "Size of object map". This is a fixed label, not data.
        EvalAltResult::ErrorDataTooLarge(what, _) if what.contains("string") => Some(Bound::StringSize),
        EvalAltResult::ErrorDataTooLarge(..) => Some(Bound::CollectionSize),
        EvalAltResult::ErrorParsing(ParseErrorType::ExprTooDeep, _) => Some(Bound::ExpressionDepth),
        _ => None,
    }
}

/// The phrase for an error about a name, when the name is the script's own.
fn named_kind(err: &EvalAltResult, source_words: &HashSet<String>) -> Option<String> {
    match err {
        // Rhai writes the signature as "name (type, ...)".
        EvalAltResult::ErrorFunctionNotFound(signature, _) => {
            let name = signature.split([' ', '(']).next()?;
            source_words.contains(name).then(|| format!("no function `{name}` is available for these arguments"))
        }
        EvalAltResult::ErrorVariableNotFound(name, _) => {
            source_words.contains(name.as_str()).then(|| format!("the variable `{name}` is not defined"))
        }
        _ => None,
    }
}

/// A fixed phrase per kind of error. The `_` arm is forced by Rhai marking
/// its error enum `#[non_exhaustive]`.
fn kind_of(err: &EvalAltResult) -> String {
    let phrase = match err {
        EvalAltResult::ErrorRuntime(..) => "the function threw an error (the thrown value is not shown)",
        EvalAltResult::ErrorArithmetic(text, _) => arithmetic_kind(text),
        EvalAltResult::ErrorMismatchDataType(expected, actual, _)
        | EvalAltResult::ErrorMismatchOutputType(expected, actual, _) => {
            return format!("a value has the wrong type (expected {expected}, found {actual})");
        }
        EvalAltResult::ErrorIndexingType(type_name, _) => {
            return format!("a value of type {type_name} cannot be indexed");
        }
        EvalAltResult::ErrorFunctionNotFound(..) => {
            "a function was called that does not exist for these argument types"
        }
        EvalAltResult::ErrorVariableNotFound(..) => "an undefined variable was used",
        EvalAltResult::ErrorVariableExists(..) => "a variable was declared that already exists",
        EvalAltResult::ErrorForbiddenVariable(..) => "a forbidden variable name was used",
        EvalAltResult::ErrorPropertyNotFound(..) => "a property that does not exist was used",
        EvalAltResult::ErrorIndexNotFound(..) => "an index or key that does not exist was used",
        EvalAltResult::ErrorArrayBounds(..) => "an array index is out of bounds",
        EvalAltResult::ErrorStringBounds(..) => "a string index is out of bounds",
        EvalAltResult::ErrorBitFieldBounds(..) => "a bit index is out of bounds",
        EvalAltResult::ErrorFor(..) => "a `for` loop was given a value it cannot iterate",
        EvalAltResult::ErrorUnboundThis(..) => "`this` was used outside a method call",
        EvalAltResult::ErrorDataRace(..) => "a shared value was used while it was borrowed",
        EvalAltResult::ErrorNonPureMethodCallOnConstant(..) => {
            "a method that changes its object was called on a constant"
        }
        EvalAltResult::ErrorAssignmentToConstant(..) => "a constant was assigned to",
        EvalAltResult::ErrorDotExpr(..) => "a property access failed",
        EvalAltResult::ErrorModuleNotFound(..) | EvalAltResult::ErrorInModule(..) => {
            "a module was used, but modules are unavailable"
        }
        EvalAltResult::ErrorInFunctionCall(..) => "a nested function call failed",
        EvalAltResult::ErrorParsing(..) => "a syntax error was met while running",
        EvalAltResult::ErrorCustomSyntax(..) => "custom syntax failed",
        EvalAltResult::ErrorTerminated(..) => "the call was terminated",
        EvalAltResult::ErrorSystem(..) => "the script engine failed",
        EvalAltResult::LoopBreak(..) => "`break` or `continue` was used outside a loop",
        EvalAltResult::Return(..) | EvalAltResult::Exit(..) => "the function ended abnormally",
        EvalAltResult::ErrorTooManyOperations(..)
        | EvalAltResult::ErrorTooManyVariables(..)
        | EvalAltResult::ErrorTooManyModules(..)
        | EvalAltResult::ErrorStackOverflow(..)
        | EvalAltResult::ErrorDataTooLarge(..) => "a limit of the script engine was reached",
        _ => "the function failed",
    };
    phrase.to_string()
}

/// Rhai's arithmetic messages put the operands after the kind
/// ("Division by zero: 7 / 0", "Error parsing integer number 'abc': ...").
/// Only a known kind is kept; the rest of the text never is.
fn arithmetic_kind(text: &str) -> &'static str {
    const KNOWN: [(&str, &str); 13] = [
        ("Addition overflow", "integer overflow in an addition"),
        ("Subtraction overflow", "integer overflow in a subtraction"),
        ("Multiplication overflow", "integer overflow in a multiplication"),
        ("Division by zero", "division by zero"),
        ("Division overflow", "integer overflow in a division"),
        ("Modulo division by zero", "modulo by zero or integer overflow"),
        ("Exponential overflow", "integer overflow in a power"),
        ("Negation overflow", "integer overflow in a negation"),
        ("Integer overflow", "a number does not fit in an integer"),
        ("Error parsing integer", "a string is not an integer"),
        ("Error parsing floating-point", "a string is not a number"),
        ("Cannot convert to floating-point", "a number does not fit in a float"),
        ("Invalid radix", "an invalid radix was given"),
    ];
    KNOWN.iter().find(|(prefix, _)| text.starts_with(prefix)).map_or("an arithmetic error", |(_, phrase)| phrase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_operands_are_dropped() {
        assert_eq!(arithmetic_kind("Division by zero: 7 / 0"), "division by zero");
        assert_eq!(
            arithmetic_kind("Error parsing integer number 'secret': invalid digit"),
            "a string is not an integer"
        );
        assert_eq!(arithmetic_kind("something new: 42"), "an arithmetic error");
    }

    #[test]
    fn thrown_values_are_not_described() {
        let err = EvalAltResult::ErrorRuntime("hunter2".into(), Position::new(3, 5));
        let Failure::Failed(message) = describe(&err, &HashSet::new()) else {
            panic!("a throw is a failure, not a bound");
        };
        assert!(!message.contains("hunter2"), "{message}");
        assert!(message.ends_with("at line 3, column 5"), "{message}");
    }

    #[test]
    fn only_names_from_the_source_are_shown() {
        let words: HashSet<String> = ["timestamp".to_string()].into();
        let missing = |name: &str| {
            let err = EvalAltResult::ErrorFunctionNotFound(format!("{name} ()"), Position::NONE);
            describe(&err, &words)
        };
        assert_eq!(
            missing("timestamp"),
            Failure::Failed("no function `timestamp` is available for these arguments".into())
        );
        let Failure::Failed(message) = missing("hunter2") else {
            panic!("a missing function is a failure");
        };
        assert!(!message.contains("hunter2"), "{message}");
    }
}

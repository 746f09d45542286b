//! Error messages never echo argument values, thrown values or map keys:
//! run data may be protected.

use coordinator_functions::{CallError, Functions, Limits};
use serde_json::json;

const SECRET: &str = "SSN-123-45-6789";

fn compile(source: &str) -> Functions {
    Functions::compile(source, Limits::default()).expect("test source compiles")
}

fn failure(functions: &Functions, name: &str, args: &[serde_json::Value]) -> CallError {
    let error = functions.call(name, args).expect_err("the call fails");
    let shown = format!("{error} / {error:?}");
    assert!(!shown.contains(SECRET), "secret echoed: {shown}");
    assert!(!shown.contains("6789"), "part of the secret echoed: {shown}");
    error
}

#[test]
fn a_thrown_secret_is_not_in_the_error() {
    let functions = compile("fn reject(x) {\n  throw `refused: ${x.id}`;\n}");
    let error = failure(&functions, "reject", &[json!({ "id": SECRET })]);
    match error {
        CallError::Failed { function, message } => {
            assert_eq!(function, "reject");
            assert!(message.contains("threw"), "{message}");
            assert!(message.contains("line 2, column 3"), "{message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn a_secret_thrown_in_a_helper_names_the_helper_not_the_value() {
    let functions = compile("fn outer(x) { inner(x) }\nfn inner(x) { throw x; }");
    let error = failure(&functions, "outer", &[json!(SECRET)]);
    let message = error.to_string();
    assert!(message.contains("in `inner`"), "{message}");
    assert!(message.contains("line 2"), "{message}");
}

#[test]
fn arithmetic_errors_do_not_echo_operands() {
    let functions = compile("fn divide(a, b) { a / b }\nfn parse(s) { parse_int(s) }");
    let error = failure(&functions, "divide", &[json!(6789), json!(0)]);
    assert!(error.to_string().contains("division by zero"), "{error}");
    let error = failure(&functions, "parse", &[json!(SECRET)]);
    assert!(error.to_string().contains("not an integer"), "{error}");
}

#[test]
fn missing_keys_and_indexes_are_not_echoed() {
    let functions = compile(
        "fn by_key(m, k) { let x = m; x[k] = 1; x[k].foo() }\n\
         fn by_index(a, i) { a[i] }\n\
         fn by_name(n) { call(Fn(n)) }",
    );
    failure(&functions, "by_key", &[json!({}), json!(SECRET)]);
    failure(&functions, "by_index", &[json!([1]), json!(6789)]);
    failure(&functions, "by_name", &[json!(SECRET)]);
    failure(&functions, "by_name", &[json!("SSN_123_45_6789")]);
}

#[test]
fn an_unusable_result_does_not_echo_its_keys() {
    let functions = compile("fn out(k) { let m = #{}; m[k] = 0.0 / 0.0; m }");
    failure(&functions, "out", &[json!(SECRET)]);
}

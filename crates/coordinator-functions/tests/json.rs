//! JSON goes in and comes out exactly, and a result JSON cannot hold is an
//! error, never a silent substitute.

use coordinator_functions::{CallError, Functions, Limits};
use serde_json::{Value, json};

fn compile(source: &str) -> Functions {
    Functions::compile(source, Limits::default()).expect("test source compiles")
}

fn output_error(result: Result<Value, CallError>) -> String {
    match result {
        Err(error @ CallError::Output { .. }) => error.to_string(),
        other => panic!("expected an output error, got {other:?}"),
    }
}

#[test]
fn an_object_round_trips_exactly_through_a_new_map() {
    let source = "fn rebuild(x) { #{ copy: x, nested: x.nested, n: x.int, f: x.float } }";
    let input = json!({
        "int": 7,
        "negative": -3,
        "float": 2.5,
        "whole_float": 1.0,
        "big": i64::MAX,
        "null": null,
        "yes": true,
        "no": false,
        "text": "héllo \"quoted\"",
        "nested": [1, [2.0, null], { "deep": [true, "x"] }, []],
        "empty": {}
    });
    let output = compile(source).call("rebuild", std::slice::from_ref(&input));
    let expected = json!({
        "copy": input,
        "nested": input["nested"],
        "n": 7,
        "f": 2.5
    });
    assert_eq!(output, Ok(expected.clone()));
    // Integers stay integers and floats stay floats, byte for byte.
    let text = serde_json::to_string(&output.expect("checked above")).expect("serializes");
    assert_eq!(text, serde_json::to_string(&expected).expect("serializes"));
    assert!(text.contains("\"whole_float\":1.0"), "{text}");
    assert!(text.contains("\"n\":7,"), "{text}");
}

#[test]
fn rhai_integers_come_back_as_json_integers() {
    let functions = compile("fn sum(a, b) { a + b } fn half(a) { a / 2 } fn real(a) { a / 2.0 }");
    let sum = functions.call("sum", &[json!(2), json!(3)]).expect("adds");
    assert!(sum.is_i64(), "{sum}");
    assert_eq!(sum.to_string(), "5");
    assert_eq!(functions.call("half", &[json!(5)]), Ok(json!(2)));
    assert_eq!(functions.call("real", &[json!(5)]), Ok(json!(2.5)));
}

#[test]
fn a_function_without_a_value_returns_null() {
    let functions = compile("fn nothing(x) { }");
    assert_eq!(functions.call("nothing", &[json!(1)]), Ok(Value::Null));
}

#[test]
fn chars_become_strings() {
    let functions = compile("fn first(s) { s[0] }");
    assert_eq!(functions.call("first", &[json!("abc")]), Ok(json!("a")));
}

#[test]
fn a_function_pointer_result_is_an_output_error() {
    let functions = compile("fn pointer() { Fn(\"pointer\") } fn closure() { |x| x }");
    assert!(output_error(functions.call("pointer", &[])).contains("function pointer"));
    assert!(output_error(functions.call("closure", &[])).contains("function pointer"));
}

#[test]
fn a_nan_or_infinite_result_is_an_output_error_not_null() {
    let functions = compile("fn nan() { [0.0 / 0.0] } fn inf() { #{ x: 1.0 / 0.0 } }");
    assert!(output_error(functions.call("nan", &[])).contains("NaN or infinite"));
    assert!(output_error(functions.call("inf", &[])).contains("NaN or infinite"));
}

#[test]
fn a_range_result_is_an_output_error() {
    let functions = compile("fn range() { 0..3 }");
    output_error(functions.call("range", &[]));
}

#[test]
fn a_result_nested_beyond_json_depth_is_an_output_error() {
    let functions = compile("fn deep(n) { let a = []; for i in 0..n { a = [a]; } a } fn ok() { [[[1]]] }");
    assert!(output_error(functions.call("deep", &[json!(200)])).contains("deeper than 128"));
    assert_eq!(functions.call("ok", &[]), Ok(json!([[[1]]])));
}

#[test]
fn a_captured_variable_is_returned_by_value() {
    let functions = compile("fn captured() { let x = 41; let f = || x + 1; x = f.call(); x }");
    assert_eq!(functions.call("captured", &[]), Ok(json!(42)));
}

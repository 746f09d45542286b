//! The public surface: compile errors, signatures, unknown functions, error
//! codes, and sharing across threads.

use coordinator_functions::{CallError, CompileError, Functions, Limits, Signature};
use serde_json::json;

fn compile(source: &str) -> Functions {
    Functions::compile(source, Limits::default()).expect("test source compiles")
}

#[test]
fn functions_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<Functions>();

    let functions = compile("fn double(x) { x * 2 }");
    let handles: Vec<_> = (0..4)
        .map(|n| {
            let functions = functions.clone();
            std::thread::spawn(move || functions.call("double", &[json!(n)]))
        })
        .collect();
    for (n, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.join().expect("thread ends"), Ok(json!(n * 2)));
    }
}

#[test]
fn an_unknown_function_or_a_wrong_arity_is_unknown_function() {
    let functions = compile("fn pair(a, b) { [a, b] }");
    assert_eq!(functions.call("missing", &[]), Err(CallError::UnknownFunction { name: "missing".into(), arity: 0 }));
    assert_eq!(functions.call("pair", &[json!(1)]), Err(CallError::UnknownFunction { name: "pair".into(), arity: 1 }));
    assert_eq!(functions.call("pair", &[json!(1), json!(2)]), Ok(json!([1, 2])));
}

#[test]
fn built_in_functions_cannot_be_called_directly() {
    let functions = compile("fn f() { 1 }");
    assert!(matches!(functions.call("len", &[json!("abc")]), Err(CallError::UnknownFunction { .. })));
}

#[test]
fn a_compile_error_reports_its_one_based_line_and_column() {
    let source = "fn ok() { 1 }\n\nfn broken(x) {\n    let y = x +;\n}\n";
    let error = Functions::compile(source, Limits::default()).expect_err("does not compile");
    assert_eq!((error.line, error.column), (4, 16), "{error}");
    assert!(!error.message.is_empty());
}

#[test]
fn crlf_sources_compile_and_report_the_same_positions() {
    let lf = "fn ok() { 1 }\n\nfn broken(x) {\n    let y = x +;\n}\n";
    let crlf = lf.replace('\n', "\r\n");
    let from_lf = Functions::compile(lf, Limits::default()).expect_err("does not compile");
    let from_crlf = Functions::compile(&crlf, Limits::default()).expect_err("does not compile");
    assert_eq!(from_lf, from_crlf);

    let functions = compile("fn text() {\r\n  `a\r\nb`\r\n}\r\n");
    assert_eq!(functions.call("text", &[]), Ok(json!("a\nb")));
}

#[test]
fn a_compile_error_without_position_is_at_one_one() {
    let error = CompileError { message: "x".into(), line: 1, column: 1 };
    assert_eq!(error.to_string(), "x (line 1, column 1)");
}

#[test]
fn signatures_list_every_function_sorted_with_positions() {
    let source = "// helpers\n\
                  fn zeta(a, b) { a }\n\
                  private fn alpha(x) { x }\n\
                  fn alpha() { 0 }\n\
                  fn trigger_input(event) { event }\n";
    let signatures = compile(source).signatures();
    let expected = vec![
        Signature { name: "alpha".into(), params: 0, line: 4, column: 4 },
        Signature { name: "alpha".into(), params: 1, line: 3, column: 12 },
        Signature { name: "trigger_input".into(), params: 1, line: 5, column: 4 },
        Signature { name: "zeta".into(), params: 2, line: 2, column: 4 },
    ];
    assert_eq!(signatures, expected);
}

#[test]
fn private_functions_can_be_called() {
    let functions = compile("private fn hidden(x) { x + 1 }");
    assert_eq!(functions.call("hidden", &[json!(1)]), Ok(json!(2)));
}

#[test]
fn every_call_error_has_the_run_failure_code() {
    let functions = compile("fn spin() { loop {} } fn fail() { throw 1 } fn ptr() { Fn(\"ptr\") }");
    let errors = [
        functions.call("nope", &[]).expect_err("unknown"),
        functions.call("spin", &[]).expect_err("bound"),
        functions.call("fail", &[]).expect_err("throw"),
        functions.call("ptr", &[]).expect_err("output"),
    ];
    for error in errors {
        assert_eq!(error.code(), "function.failed", "{error:?}");
    }
}

#[test]
fn the_limits_are_kept() {
    let limits = Limits { max_operations: 5, ..Limits::default() };
    let functions = Functions::compile("fn f() { 1 }", limits).expect("compiles");
    assert_eq!(functions.limits(), limits);
    assert_eq!(Limits::default().max_operations, 100_000);
    assert_eq!(Limits::default().max_call_depth, 32);
    assert_eq!(Limits::default().max_expr_depth, 64);
    assert_eq!(Limits::default().max_string_bytes, 65_536);
    assert_eq!(Limits::default().max_collection_entries, 10_000);
}

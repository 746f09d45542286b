//! What a function cannot reach: the clock, `eval`, modules, output, sleep,
//! and the script's top-level statements.

use coordinator_functions::{CallError, Functions, Limits};
use serde_json::json;

fn compile(source: &str) -> Functions {
    Functions::compile(source, Limits::default()).expect("test source compiles")
}

#[test]
fn timestamp_is_unavailable() {
    let functions = compile("fn now() { timestamp() }");
    match functions.call("now", &[]) {
        Err(CallError::Failed { message, .. }) => {
            assert!(message.contains("`timestamp`"), "{message}");
            assert!(message.contains("line 1, column 12"), "{message}");
        }
        other => panic!("timestamp() must not produce a value, got {other:?}"),
    }
}

#[test]
fn sleep_is_unavailable() {
    let functions = compile("fn nap() { sleep(3600); 1 }");
    assert!(matches!(functions.call("nap", &[]), Err(CallError::Failed { .. })));
}

#[test]
fn eval_is_refused() {
    let error = Functions::compile(r#"fn run() { eval("1") }"#, Limits::default()).expect_err("eval must not compile");
    assert_eq!((error.line, error.column), (1, 12), "{error}");
}

#[test]
fn import_is_refused() {
    let error =
        Functions::compile("import \"x\" as x;\nfn f() { 1 }", Limits::default()).expect_err("import must not compile");
    assert_eq!(error.line, 1, "{error}");
}

#[test]
fn print_and_debug_do_nothing_and_the_call_returns() {
    let functions = compile(r#"fn talk(x) { print("x"); debug(x); x + 1 }"#);
    assert_eq!(functions.call("talk", &[json!(1)]), Ok(json!(2)));
}

#[test]
fn top_level_statements_never_run() {
    let functions = compile("loop { }\nthrow \"boom\";\nfn one() { 1 }");
    assert_eq!(functions.call("one", &[]), Ok(json!(1)));
}

#[test]
fn an_undeclared_variable_does_not_compile() {
    let error = Functions::compile("fn f() { missing + 1 }", Limits::default()).expect_err("strict variables");
    assert_eq!((error.line, error.column), (1, 10), "{error}");
}

#[test]
fn calls_cannot_influence_each_other() {
    // A function may change its own arguments; the next call still sees its own.
    let functions = compile("fn bump(m) { m.n += 1; m.n }");
    for _ in 0..3 {
        assert_eq!(functions.call("bump", &[json!({ "n": 1 })]), Ok(json!(2)));
    }
}

#[test]
fn closures_and_function_pointers_work_inside_a_call() {
    let source = "fn twice(items) { let k = 2; items.map(|x| x * k) }\n\
                  fn apply(items) { items.filter(Fn(\"is_even\")) }\n\
                  private fn is_even(x) { x % 2 == 0 }";
    let functions = compile(source);
    assert_eq!(functions.call("twice", &[json!([1, 2])]), Ok(json!([2, 4])));
    assert_eq!(functions.call("apply", &[json!([1, 2, 3, 4])]), Ok(json!([2, 4])));
}

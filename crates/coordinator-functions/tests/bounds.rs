//! Every bound of the sandbox stops the script that would run past it, and
//! names itself in the error.
//!
//! Where it can, a test runs a finite script that merely exceeds the bound,
//! so removing the bound turns the test into a failed assertion rather than
//! a hang; every call also runs under a watchdog for the same reason.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use coordinator_functions::{Bound, CallError, Functions, Limits, MAX_VARIABLES};
use serde_json::{Value, json};

fn compile(source: &str) -> Functions {
    compile_with(source, Limits::default())
}

fn compile_with(source: &str, limits: Limits) -> Functions {
    Functions::compile(source, limits).expect("test source compiles")
}

fn lowered_entries(entries: usize) -> Limits {
    Limits { max_collection_entries: entries, ..Limits::default() }
}

/// Calls `name` and fails the test if the call has not returned within a
/// minute (a bound that no longer holds would otherwise hang the suite).
fn call(functions: &Functions, name: &str, args: &[Value]) -> Result<Value, CallError> {
    let (sender, receiver) = mpsc::channel();
    let (functions, name, args) = (functions.clone(), name.to_string(), args.to_vec());
    thread::spawn(move || sender.send(functions.call(&name, &args)));
    receiver.recv_timeout(Duration::from_secs(60)).expect("the call returns within a minute")
}

fn bound_of(result: Result<Value, CallError>) -> Bound {
    match result {
        Err(CallError::Bound { bound, .. }) => bound,
        other => panic!("expected a bound to stop the call, got {other:?}"),
    }
}

#[test]
fn an_endless_loop_is_stopped_by_the_operation_bound() {
    let functions = compile("fn spin() { loop { } }");
    assert_eq!(bound_of(call(&functions, "spin", &[])), Bound::Operations);
}

#[test]
fn a_long_loop_is_stopped_by_the_operation_bound() {
    let functions = compile("fn count() { let n = 0; for i in 0..200000 { n += 1; } n }");
    assert_eq!(bound_of(call(&functions, "count", &[])), Bound::Operations);
}

#[test]
fn try_catch_cannot_swallow_a_bound() {
    let functions = compile("fn spin() { let n = 0; try { for i in 0..200000 { n += 1; } } catch { return 1; } n }");
    assert_eq!(bound_of(call(&functions, "spin", &[])), Bound::Operations);
}

#[test]
fn deep_recursion_is_stopped_by_the_call_depth_bound() {
    let functions = compile("fn down(n) { if n == 0 { 0 } else { 1 + down(n - 1) } }");
    assert_eq!(call(&functions, "down", &[json!(30)]), Ok(json!(30)));
    assert_eq!(bound_of(call(&functions, "down", &[json!(100)])), Bound::CallDepth);
}

#[test]
fn string_doubling_is_stopped_by_the_string_size_bound() {
    let functions = compile(r#"fn grow() { let s = "x"; for i in 0..20 { s += s; } s.len() }"#);
    assert_eq!(bound_of(call(&functions, "grow", &[])), Bound::StringSize);
}

#[test]
fn string_padding_is_stopped_by_the_string_size_bound() {
    let functions = compile(r#"fn pad() { let s = ""; s.pad(1000000, 'x'); s.len() }"#);
    assert_eq!(bound_of(call(&functions, "pad", &[])), Bound::StringSize);
}

#[test]
fn array_doubling_is_stopped_by_the_collection_size_bound() {
    let functions = compile("fn grow() { let a = [1]; for i in 0..15 { a += a; } a.len() }");
    assert_eq!(bound_of(call(&functions, "grow", &[])), Bound::CollectionSize);
}

#[test]
fn array_pushing_is_stopped_by_the_collection_size_bound() {
    let source = "fn grow() { let a = []; for i in 0..101 { a.push(i); } a.len() }";
    let functions = compile_with(source, lowered_entries(100));
    assert_eq!(bound_of(call(&functions, "grow", &[])), Bound::CollectionSize);
}

#[test]
fn map_growth_is_stopped_by_the_collection_size_bound() {
    let source = "fn grow(n) { let m = #{}; for i in 0..n { m[`k${i}`] = i; } m.len() }";
    let functions = compile_with(source, lowered_entries(100));
    assert_eq!(call(&functions, "grow", &[json!(100)]), Ok(json!(100)));
    assert_eq!(bound_of(call(&functions, "grow", &[json!(101)])), Bound::CollectionSize);
}

/// Rhai 1.27 checks only the assigned value in `m[k] = v`, not the map it
/// lands in; without the sandbox's own check this loop held ~490 MB.
#[test]
fn index_assignment_cannot_grow_a_map_past_the_bounds() {
    let source = r#"fn fill() {
        let s = "x"; for j in 0..15 { s += s; }
        let m = #{};
        for i in 0..5000 { m[`${i}`] = s + i; }
        0
    }"#;
    assert_eq!(bound_of(call(&compile(source), "fill", &[])), Bound::StringSize);

    let source = "fn fill() { let m = #{}; for i in 0..1000 { m[`${i}`] = i; } 0 }";
    let functions = compile_with(source, lowered_entries(100));
    assert_eq!(bound_of(call(&functions, "fill", &[])), Bound::CollectionSize);
}

#[test]
fn index_assignment_cannot_grow_an_array_or_nested_container_past_the_bounds() {
    let prelude = r#"let s = "x"; for j in 0..15 { s += s; }"#;
    let bodies = [
        "let a = []; a.pad(5000, ()); for i in 0..5000 { a[i] = s + i; } 0",
        "let a = [#{}]; for i in 0..5000 { a[0][`${i}`] = s + i; } 0",
        "let m = #{}; m[\"x\"] = []; m.x.pad(5000, ()); for i in 0..5000 { m[\"x\"][i] = s + i; } 0",
        "let m = #{}; for i in 0..5000 { m[`${i}`] = \"\"; m[`${i}`] += s; } 0",
        "let m = #{}; let put = |k, v| m[k] = v; for i in 0..5000 { put.call(`${i}`, s + i); } 0",
    ];
    for body in bodies {
        let functions = compile(&format!("fn fill() {{ {prelude} {body} }}"));
        assert_eq!(bound_of(call(&functions, "fill", &[])), Bound::StringSize, "{body}");
    }
}

#[test]
fn this_is_refused_so_methods_cannot_grow_their_object_unseen() {
    let error =
        Functions::compile("fn put(k, v) { this[k] = v; }", Limits::default()).expect_err("`this` must not compile");
    assert_eq!((error.line, error.column), (1, 16), "{error}");
}

/// Rhai evaluates by native recursion; at the default bounds these used up to
/// 16 MiB of stack in a debug build and aborted the process on a 2 MiB thread.
#[test]
fn the_deepest_evaluation_the_bounds_allow_does_not_overflow_the_native_stack() {
    let sums = " + n".repeat(50);
    let wraps = format!("{}down(n + 1){}", "id(".repeat(20), ")".repeat(20));
    let arrays = format!("{}down(n + 1){}", "[".repeat(19), "]".repeat(19));
    let sources = [
        format!("fn down(n) {{ down(n + 1){sums} }}"),
        format!("fn id(x) {{ x }} fn down(n) {{ {wraps} }}"),
        format!("fn id(x) {{ x }} fn down(n) {{ [n].map(|n| {wraps}) }}"),
        format!("fn down(n) {{ {arrays} }}"),
    ];
    for source in sources {
        let functions = compile(&source);
        // A default thread has 2 MiB; the call must not depend on its caller's stack.
        let result = thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || functions.call("down", &[json!(0)]))
            .expect("thread starts")
            .join()
            .expect("the call returns instead of overflowing");
        assert_eq!(bound_of(result), Bound::CallDepth);
    }
}

#[test]
fn too_many_live_variables_are_stopped_by_the_variable_bound() {
    let declare = |count: usize| {
        let lets: String = (0..count).map(|i| format!("let v{i} = n + {i};\n")).collect();
        let uses = (0..count).map(|i| format!("v{i}")).collect::<Vec<_>>().join(", ");
        compile(&format!("fn many(n) {{\n{lets}[{uses}].len() }}"))
    };
    let within = MAX_VARIABLES - 1;
    assert_eq!(call(&declare(within), "many", &[json!(0)]), Ok(json!(within)));
    let past = MAX_VARIABLES + 1;
    assert_eq!(bound_of(call(&declare(past), "many", &[json!(0)])), Bound::Variables);
}

#[test]
fn an_oversized_argument_is_refused_before_the_function_runs() {
    let functions = compile("fn echo(x) { x }");
    let big = "x".repeat(Limits::DEFAULT_MAX_STRING_BYTES + 1);
    assert_eq!(bound_of(call(&functions, "echo", &[json!({ "text": big })])), Bound::StringSize);
    let many: Vec<u32> = (0..=10_000).collect();
    assert_eq!(bound_of(call(&functions, "echo", &[json!(many)])), Bound::CollectionSize);
}

#[test]
fn expressions_nested_past_the_bound_do_not_compile() {
    let nested = format!("fn deep() {{ {}1{} }}", "(".repeat(100), ")".repeat(100));
    let error = Functions::compile(&nested, Limits::default()).expect_err("too deep to compile");
    assert!(error.message.contains("expression depth bound: 64"), "{error}");
    let shallow = format!("fn deep() {{ {}1{} }}", "(".repeat(20), ")".repeat(20));
    assert!(Functions::compile(&shallow, Limits::default()).is_ok());
}

#[test]
fn lowered_limits_stop_a_loop_the_defaults_allow() {
    let source = "fn count() { let n = 0; for i in 0..2000 { n += i; } n }";
    assert_eq!(call(&compile(source), "count", &[]), Ok(json!(1_999_000)));

    let lowered = Limits { max_operations: 1_000, ..Limits::default() };
    let functions = compile_with(source, lowered);
    assert_eq!(bound_of(call(&functions, "count", &[])), Bound::Operations);
}

#[test]
fn a_zero_limit_is_the_tightest_bound_not_unlimited() {
    let zero = Limits { max_operations: 0, ..Limits::default() };
    let functions = compile_with("fn count() { let n = 0; for i in 0..10 { n += 1; } n }", zero);
    assert_eq!(bound_of(call(&functions, "count", &[])), Bound::Operations);
}

#[test]
fn the_operation_count_starts_afresh_for_every_call() {
    let lowered = Limits { max_operations: 1_000, ..Limits::default() };
    let source = "fn count() { let n = 0; for i in 0..100 { n += i; } n }";
    let functions = compile_with(source, lowered);
    for _ in 0..50 {
        assert_eq!(functions.call("count", &[]), Ok(json!(4950)));
    }
}

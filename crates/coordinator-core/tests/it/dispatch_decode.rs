//! `dispatch: {redis: {url}}` in `runtime.yaml`: it decodes to the reference,
//! each mistake is reported where it is, a URL written as a value (it may
//! carry a password) is refused without being repeated and masked in
//! excerpts, and `--environment` probes the reference like the others.

use coordinator_core::check::runtime::{self, RuntimeInput, SecretProbe, SecretProblem};
use coordinator_core::decode::runtime::{decode, redact};
use coordinator_core::model::runtime::{RuntimeFile, SecretRef};
use coordinator_core::yaml;

use crate::support::{PACKAGE, RUNTIME_HEAD, decode_file, positions};

/// A runtime file whose line 6 is `dispatch` (an empty line 6 when `None`).
fn runtime_with(dispatch: Option<&str>) -> String {
    format!(
        "\
{RUNTIME_HEAD}{}
{PACKAGE}
connections: {{}}
access: {{}}
",
        dispatch.unwrap_or("")
    )
}

fn decoded(text: &str) -> (Option<RuntimeFile>, Vec<String>) {
    let (file, diagnostics) = decode_file("runtime.yaml", text, decode);
    assert!(
        diagnostics.iter().all(|d| !d.message.contains("hunter2") && !d.help.contains("hunter2")),
        "{diagnostics:?}"
    );
    (file, positions(&diagnostics))
}

#[test]
fn the_redis_url_is_a_reference_and_optional() {
    let (file, diagnostics) = decoded(&runtime_with(Some("dispatch: {redis: {url: file:redis-url}}")));
    assert_eq!(diagnostics, Vec::<String>::new());
    let redis = file.and_then(|f| f.dispatch).map(|d| d.redis.url);
    assert_eq!(redis.as_ref().map(SecretRef::as_str), Some("file:redis-url"));
    let (file, diagnostics) = decoded(&runtime_with(None));
    assert_eq!(diagnostics, Vec::<String>::new());
    assert_eq!(file.map(|f| f.dispatch), Some(None), "no dispatch: none");
}

/// Each mistake in `dispatch` (line 6 of [`runtime_with`]) and where it is reported.
const MISTAKES: &[(&str, &str)] = &[
    ("dispatch: {redis: {url: \"redis://:hunter2@cache:6379\"}}", "6:25 schema.invalid-value"),
    ("dispatch: {redis: {url: \"env:\"}}", "6:25 schema.invalid-value"),
    ("dispatch: {redis: {url: env:1X}}", "6:25 schema.invalid-value"),
    ("dispatch: {redis: {}}", "6:12 schema.missing-field"),
    ("dispatch: {}", "6:1 schema.missing-field"),
    ("dispatch: {redis: {url: env:R}, kafka: {}}", "6:33 schema.unknown-field"),
    ("dispatch: {redis: {url: env:R, password: hunter2}}", "6:32 schema.unknown-field"),
    ("dispatch: redis", "6:11 schema.invalid-value"),
];

#[test]
fn every_mistake_in_dispatch_is_reported_where_it_is() {
    for (dispatch, expected) in MISTAKES {
        let (_, diagnostics) = decoded(&runtime_with(Some(dispatch)));
        assert_eq!(diagnostics, [*expected], "{dispatch}");
    }
}

#[test]
fn a_literal_url_is_masked_in_excerpts() {
    let text = runtime_with(Some("dispatch: {redis: {url: \"redis://:hunter2@cache:6379\"}}"));
    let root = yaml::parse("runtime.yaml", &text).unwrap_or_else(|d| panic!("{d:?}"));
    let shown = redact(&root, &text);
    assert!(!shown.contains("hunter2") && !shown.contains("cache:6379"), "{shown}");
    assert_eq!(shown.lines().count(), text.lines().count());
    let referenced = runtime_with(Some("dispatch: {redis: {url: env:REDIS_URL}}"));
    let root = yaml::parse("runtime.yaml", &referenced).unwrap_or_else(|d| panic!("{d:?}"));
    assert!(redact(&root, &referenced).contains("env:REDIS_URL"), "a reference is shown");
}

/// A pretend environment where nothing is set.
struct NothingSet;

impl SecretProbe for NothingSet {
    fn probe(&self, _: &SecretRef) -> Result<(), SecretProblem> {
        Err(SecretProblem::NotSet)
    }
}

#[test]
fn the_redis_url_is_probed_with_the_other_references() {
    let text = runtime_with(Some("dispatch: {redis: {url: env:REDIS_URL}}"));
    let mut out = Vec::new();
    let input = RuntimeInput { file: "runtime.yaml", text: &text, secrets: Some(&NothingSet), package: None };
    let _ = runtime::load(&input, &mut out);
    let redis: Vec<_> = out.iter().filter(|d| d.line == 6).collect();
    assert_eq!(redis.len(), 1, "{out:?}");
    assert_eq!((redis[0].column, redis[0].code.as_str()), (25, "runtime.secret-unavailable"));
    assert!(redis[0].message.contains("REDIS_URL") && redis[0].message.contains("Redis URL"), "{}", redis[0].message);
}

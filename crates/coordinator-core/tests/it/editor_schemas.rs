//! The JSON Schemas committed under `schemas/` are the ones generated from the
//! model types, and the shipped files validate against them.
//! Regenerate with `UPDATE_SCHEMAS=1 cargo test -p coordinator-core --test it -- editor_schemas::`.

use coordinator_core::{editor_schema, json_schema};

use crate::support::repo;

#[test]
fn committed_schemas_are_current() {
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some();
    let mut stale = Vec::new();
    for (name, schema) in editor_schema::all() {
        let path = repo().join("schemas").join(name);
        let expected = editor_schema::text(&schema);
        if update {
            if let Err(e) =
                std::fs::create_dir_all(repo().join("schemas")).and_then(|()| std::fs::write(&path, &expected))
            {
                panic!("cannot write {}: {e}", path.display());
            }
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(expected.as_str()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "stale schemas {stale:?}: run UPDATE_SCHEMAS=1 cargo test -p coordinator-core --test it -- editor_schemas::"
    );
}

fn yaml_as_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    match coordinator_core::yaml::parse("x.yaml", &text) {
        Ok(node) => node.to_json(),
        Err(d) => panic!("{}: {d:?}", path.display()),
    }
}

fn schema(name: &str) -> jsonschema::Validator {
    let all = editor_schema::all();
    let Some((_, schema)) = all.iter().find(|(n, _)| *n == name) else { panic!("no schema {name}") };
    match json_schema::compile(schema) {
        Ok(v) => v,
        Err(e) => panic!("{name} does not compile: {e}"),
    }
}

#[test]
fn shipped_files_validate_against_the_generated_schemas() {
    let workflow = schema("workflow.schema.json");
    for example in ["reviewed-notice", "appointment-reminder", "permit-check", "desk-digest"] {
        let doc = yaml_as_json(&repo().join("examples").join(example).join("workflow.yaml"));
        let errors = json_schema::violations(&workflow, &doc);
        assert!(errors.is_empty(), "{example}: {errors:?}");
    }
    let catalog = schema("catalog.schema.json");
    let dir = repo().join("crates/coordinator-core/catalog");
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect()).unwrap_or_default();
    files.push(repo().join("examples/permit-check/catalog/permits.yaml"));
    assert!(files.len() >= 6);
    for file in files {
        let errors = json_schema::violations(&catalog, &yaml_as_json(&file));
        assert!(errors.is_empty(), "{}: {errors:?}", file.display());
    }
}

#[test]
fn sample_scenarios_and_runtime_files_validate_against_the_generated_schemas() {
    let fixtures = repo().join("crates/coordinator-core/tests/fixtures");
    for (file, name) in [
        ("scenarios.yaml", "scenarios.schema.json"),
        ("runtime.yaml", "runtime.schema.json"),
        ("runtime-remote.yaml", "runtime.schema.json"),
        ("worker.yaml", "worker.schema.json"),
    ] {
        let errors = json_schema::violations(&schema(name), &yaml_as_json(&fixtures.join(file)));
        assert!(errors.is_empty(), "{file}: {errors:?}");
    }
}

#[test]
fn the_runtime_schema_refuses_literal_secrets() {
    let mut doc = yaml_as_json(&repo().join("crates/coordinator-core/tests/fixtures/runtime.yaml"));
    doc["database"]["url"] = serde_json::json!("postgres://coordinator:hunter2@db/coordinator");
    assert!(!json_schema::violations(&schema("runtime.schema.json"), &doc).is_empty());
}

#[test]
fn the_schemas_hold_connections_to_their_dispatch_like_the_checker() {
    let fixtures = repo().join("crates/coordinator-core/tests/fixtures");
    let runtime = schema("runtime.schema.json");
    let remote = yaml_as_json(&fixtures.join("runtime-remote.yaml"));
    let edited = |doc: &serde_json::Value, pointer: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut doc = doc.clone();
        if let Some(value) = doc.pointer_mut(pointer) {
            edit(value);
        }
        doc
    };
    let with_url = edited(&remote, "/connections/registry", &|c| c["baseUrl"] = serde_json::json!("https://b.example"));
    let without_workers = edited(&remote, "/connections/registry", &|c| {
        c.as_object_mut().map(|c| c.remove("workers"));
    });
    let in_process_workers = edited(&remote, "/connections/casework", &|c| c["workers"] = serde_json::json!(["w"]));
    let in_process_no_url = edited(&remote, "/connections/casework", &|c| {
        c.as_object_mut().map(|c| c.remove("baseUrl"));
    });
    for doc in [&with_url, &without_workers, &in_process_workers, &in_process_no_url] {
        assert!(!json_schema::violations(&runtime, doc).is_empty(), "{doc}");
    }
    let worker = schema("worker.schema.json");
    let sample = yaml_as_json(&fixtures.join("worker.yaml"));
    for field in ["dispatch", "workers", "eventSigningSecret"] {
        let doc = edited(&sample, "/connections/registry", &|c| c[field] = serde_json::json!("remote"));
        assert!(!json_schema::violations(&worker, &doc).is_empty(), "{field}");
    }
}

#[test]
fn the_schema_refuses_unknown_fields_like_the_checker() {
    let workflow = schema("workflow.schema.json");
    let mut doc = yaml_as_json(&repo().join("examples/reviewed-notice/workflow.yaml"));
    if let Some(step) = doc.pointer_mut("/steps/send-notice") {
        step["nxt"] = serde_json::json!("x");
    }
    assert!(!json_schema::violations(&workflow, &doc).is_empty());
}

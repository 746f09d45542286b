//! `coordinatorctl init`: a starter project that checks clean, with editor
//! schema modelines pointing at schemas written into the project.

use std::path::Path;

use coordinator_core::decode::is_name;
use coordinator_core::editor_schema;

use crate::Exit;

const WORKFLOW: &str = include_str!("starter/workflow.yaml");
const FUNCTIONS: &str = include_str!("starter/functions.rhai");
const INPUT: &str = include_str!("starter/input.json");
const SCENARIOS: &str = include_str!("starter/scenarios.yaml");

/// Runs `init`.
pub fn run(directory: &Path, workflow: Option<&str>) -> Exit {
    if directory.exists() {
        eprintln!("error: {} already exists; init only creates a new directory", directory.display());
        eprintln!("help: choose a directory that does not exist yet");
        return Exit::Refused;
    }
    let id = match workflow {
        Some(id) => id.to_owned(),
        None => directory.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default(),
    };
    if !is_name(&id) {
        eprintln!("error: `{id}` is not a valid workflow id");
        eprintln!("help: pass --workflow with 1 to 64 letters, digits, `-` or `_`");
        return Exit::Refused;
    }
    let mut files = vec![
        ("workflow.yaml".to_owned(), WORKFLOW.replace("{{id}}", &id)),
        ("functions.rhai".to_owned(), FUNCTIONS.to_owned()),
        ("input.json".to_owned(), INPUT.to_owned()),
        ("scenarios.yaml".to_owned(), SCENARIOS.to_owned()),
    ];
    for (name, schema) in editor_schema::all() {
        files.push((format!("schemas/{name}"), editor_schema::text(&schema)));
    }
    for (path, text) in &files {
        let full = directory.join(path);
        let written = full.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&full, text));
        if let Err(e) = written {
            eprintln!("error: cannot write {}: {e}", full.display());
            return Exit::Unavailable;
        }
    }
    crate::render::out(&format!("created {} (workflow `{id}`)\n", directory.display()));
    crate::render::out(&format!("next: coordinatorctl check --project {}\n", directory.display()));
    crate::render::out(&format!("      coordinatorctl test --project {}\n", directory.display()));
    Exit::Ok
}

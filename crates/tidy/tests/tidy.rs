//! Repository rules as tests (formatting, lints, the pure core's dependencies,
//! no ignored tests), so the one test command enforces them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(repo());
    cmd
}

fn run(mut cmd: Command, what: &str) {
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {what}: {e}"),
    };
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn code_is_formatted() {
    let mut cmd = cargo();
    cmd.args(["fmt", "--all", "--check"]);
    run(cmd, "cargo fmt --check");
}

#[test]
fn clippy_is_clean() {
    let mut cmd = cargo();
    // A separate target directory: the test binary runs while cargo holds the main one.
    cmd.args(["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"])
        .env("CARGO_TARGET_DIR", repo().join("target/tidy"));
    run(cmd, "cargo clippy");
}

/// Crates that would let the pure core do IO or read a clock.
const BANNED_IN_CORE: &[&str] = &[
    "tokio",
    "async-std",
    "smol",
    "sqlx",
    "rusqlite",
    "reqwest",
    "hyper",
    "axum",
    "tonic",
    "redis",
    "mio",
    "chrono-tz",
    "socket2",
];

#[test]
fn the_pure_core_has_no_io_dependency() {
    let out = cargo().args(["metadata", "--format-version", "1", "--locked"]).output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        other => panic!("cargo metadata failed: {other:?}"),
    };
    let meta: serde_json::Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(e) => panic!("cargo metadata output: {e}"),
    };
    let nodes = meta["resolve"]["nodes"].as_array().cloned().unwrap_or_default();
    let name_of = |id: &str| id.split(['#', '@']).rev().find(|p| !p.is_empty()).map(str::to_owned).unwrap_or_default();
    // coordinator-graph draws for the offline tool and the service alike and does no IO either.
    for root in ["coordinator-core", "coordinator-functions", "coordinator-graph"] {
        let Some(start) = nodes.iter().find(|n| {
            n["id"]
                .as_str()
                .is_some_and(|id| id.contains(&format!("/{root}#")) || id.contains(&format!("crates/{root}")))
        }) else {
            panic!("{root} not in cargo metadata");
        };
        // Walk the normal (non-dev) dependency closure.
        let mut todo = vec![start.clone()];
        let mut seen = std::collections::BTreeSet::new();
        while let Some(node) = todo.pop() {
            let id = node["id"].as_str().unwrap_or_default().to_owned();
            if !seen.insert(id) {
                continue;
            }
            for dep in node["deps"].as_array().cloned().unwrap_or_default() {
                let normal = dep["dep_kinds"].as_array().is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()));
                if !normal {
                    continue;
                }
                let dep_id = dep["pkg"].as_str().unwrap_or_default();
                let crate_name = dep["name"].as_str().unwrap_or_default().replace('_', "-");
                assert!(
                    !BANNED_IN_CORE.contains(&crate_name.as_str()),
                    "{root} depends (through {}) on {crate_name}: it must not do IO",
                    name_of(node["id"].as_str().unwrap_or_default())
                );
                if let Some(next) = nodes.iter().find(|n| n["id"].as_str() == Some(dep_id)) {
                    todo.push(next.clone());
                }
            }
        }
    }
}

#[test]
fn no_test_is_ignored() {
    let mut offenders = Vec::new();
    visit(&repo().join("crates"), &mut |path, text| {
        let marker = ["#[", "ignore]"].concat();
        if text.contains(&marker) && !path.ends_with("tidy.rs") {
            offenders.push(path.display().to_string());
        }
    });
    assert!(offenders.is_empty(), "ignored tests in {offenders:?}: a test that does not run proves nothing");
}

fn visit(dir: &Path, f: &mut dyn FnMut(&Path, &str)) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("target") {
                visit(&path, f);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            f(&path, &text);
        }
    }
}

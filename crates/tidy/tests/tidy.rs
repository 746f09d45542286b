//! Repository rules as tests (formatting, lints, intra-doc links, the pure
//! core's dependencies, no ignored tests), so the one test command enforces
//! them.

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

#[test]
fn docs_have_no_broken_intra_doc_links() {
    let mut cmd = cargo();
    // Every intra-doc link must resolve, so a rename that leaves a stale reference fails here. Private
    // items are documented too, so a link to one is fine.
    cmd.args(["doc", "--workspace", "--no-deps", "--document-private-items", "--locked"])
        .env("RUSTDOCFLAGS", "-D rustdoc::broken_intra_doc_links -A rustdoc::private_intra_doc_links")
        .env_remove("CARGO_ENCODED_RUSTDOCFLAGS")
        // The clippy test's target directory (the test binary runs while cargo holds the main
        // one): the dependencies' metadata both need is built once.
        .env("CARGO_TARGET_DIR", repo().join("target/tidy"));
    run(cmd, "cargo doc");
}

/// Crates that would let the pure core do IO or read a clock. (`chrono-tz` is
/// not one: its IANA database is compiled in as data, and the core's calendars
/// need it; `iana-time-zone`, which asks the host for its zone, is.)
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
    "iana-time-zone",
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

/// No doc comment holds an example rustdoc would run as a doctest: the suite
/// runs under nextest, which runs none.
#[test]
fn no_doc_example_is_a_doctest() {
    let mut found = Vec::new();
    for dir in ["crates", "bench", "fuzz"] {
        visit(&repo().join(dir), &mut |path, text| {
            for line in tidy::doctests(text) {
                found.push(format!("{}:{line}", path.display()));
            }
        });
    }
    assert!(
        found.is_empty(),
        "these doc-comment code blocks would be doctests, which the suite (nextest) never runs; move the example into a test, or mark the block with its language (```text): {found:#?}"
    );
}

/// The source text of every `.rs` file below `dir`, comments left out (a doc
/// link is no dependency), by path.
fn code_below(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    visit(dir, &mut |path, text| {
        let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
        files.push((path.to_path_buf(), code.join("\n")));
    });
    files
}

#[test]
fn every_crate_map_names_all_its_modules() {
    let mut omissions = Vec::new();
    let Ok(crates) = std::fs::read_dir(repo().join("crates")) else { panic!("no crates/ folder") };
    for krate in crates.filter_map(Result::ok) {
        let root = krate.path().join("src/lib.rs");
        let Ok(text) = std::fs::read_to_string(&root) else { continue };
        for module in tidy::map_omissions(&text) {
            omissions.push(format!("{}: `{module}`", root.display()));
        }
    }
    assert!(
        omissions.is_empty(),
        "a crate's lib.rs map (its //! block) does not name these modules; add a line saying what each owns: {omissions:#?}"
    );
}

/// The store's bottom layer (`db/`) imports nothing above it, only the
/// leaves (`types`, `error` and `StoreError` re-exported from it); the
/// leaves import nothing of the crate but each other.
#[test]
fn the_store_bottom_layer_and_leaves_import_nothing_above_them() {
    let src = repo().join("crates/coordinator-store/src");
    let mut violations = Vec::new();
    for (path, code) in code_below(&src.join("db")) {
        for module in tidy::layer_violations(&code, &["db", "types", "error", "StoreError"]) {
            violations.push(format!("{}: crate::{module}", path.display()));
        }
    }
    for leaf in ["types.rs", "error.rs"] {
        let path = src.join(leaf);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
        for module in tidy::layer_violations(&code.join("\n"), &["types", "error", "StoreError"]) {
            violations.push(format!("{}: crate::{module}", path.display()));
        }
    }
    assert!(
        violations.is_empty(),
        "the store's db/ layer and its leaves must not import the modules above them (pass what they need in from above, as the pool's connect check is): {violations:#?}"
    );
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

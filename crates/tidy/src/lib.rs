//! Repository rules, checked by the tests in `tests/`, so that the test
//! suite (`cargo nextest run --workspace`) enforces them. The rules that read source text
//! are functions here, each tested on a planted violation: a rule that cannot
//! fail proves nothing.

/// The top-level modules a crate root declares (`mod x;`, `pub mod x;`,
/// `pub(crate) mod x;`), in order. Inline modules (`mod tests { … }`) are
/// not files of the crate's map and are left out.
pub fn declared_modules(root: &str) -> Vec<String> {
    let mut modules = Vec::new();
    for line in root.lines() {
        let line = line.trim_start();
        let rest = ["pub(crate) mod ", "pub(super) mod ", "pub mod ", "mod "].iter().find_map(|p| line.strip_prefix(p));
        if let Some(name) = rest.and_then(|r| r.strip_suffix(';')) {
            modules.push(name.trim().to_owned());
        }
    }
    modules
}

/// The modules a crate root declares that its `//!` map does not name. A
/// module is named when the map holds it in backticks (`` `name` ``, as
/// text or as an intra-doc link, or as the start of a path `` `name::…` ``).
pub fn map_omissions(root: &str) -> Vec<String> {
    let map: String = root.lines().filter_map(|l| l.trim_start().strip_prefix("//!")).collect::<Vec<_>>().join("\n");
    declared_modules(root)
        .into_iter()
        .filter(|m| !map.contains(&format!("`{m}`")) && !map.contains(&format!("`{m}::")))
        .collect()
}

/// The paths into the crate (`crate::name…`) that `text` uses, by their
/// first segment.
pub fn crate_imports(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "crate::".len()..];
        rest = after;
        // `coordinator_store::crate::` is no path; `$crate::` is a macro's.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let segment: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if segment.is_empty() {
            // `crate::{a, b}`: every name in the group.
            if let Some(group) = after.strip_prefix('{').and_then(|g| g.split_once('}')).map(|(g, _)| g) {
                for name in group.split(',') {
                    let first: String = name.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if !first.is_empty() {
                        found.push(first);
                    }
                }
            }
        } else {
            found.push(segment);
        }
    }
    found
}

/// The imports of a bottom-layer file that reach above the layer: every
/// `crate::X` whose `X` is not in `allowed`.
pub fn layer_violations(text: &str, allowed: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = crate_imports(text).into_iter().filter(|s| !allowed.contains(&s.as_str())).collect();
    out.sort();
    out.dedup();
    out
}

/// The lines (1-based) of `text` that open a doc-comment code block rustdoc
/// would compile as a doctest: a fence whose info string is empty or holds
/// only Rust's own words (`rust`, `no_run`, `should_panic`, …). The suite runs
/// under nextest, which runs no doctest, so such an example would never run:
/// it belongs in a test, or in a block marked with its language (`text`).
pub fn doctests(text: &str) -> Vec<usize> {
    const RUST_WORDS: &[&str] =
        &["rust", "ignore", "no_run", "should_panic", "compile_fail", "test_harness", "standalone_crate"];
    let mut found = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let Some(doc) = line.trim_start().strip_prefix("///").or_else(|| line.trim_start().strip_prefix("//!")) else {
            continue;
        };
        let Some(info) = doc.trim_start().strip_prefix("```") else { continue };
        if open {
            open = false;
            continue;
        }
        open = true;
        let rust = info
            .split([',', ' ', '\t'])
            .filter(|w| !w.is_empty())
            .all(|w| RUST_WORDS.contains(&w) || w.starts_with("edition"));
        if rust {
            found.push(i + 1);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "//! The crate.\n//!\n//! - [`alpha`]: the first.\n//! - `beta::Thing` does it.\n\npub mod alpha;\nmod beta;\npub(crate) mod gamma;\n\n#[cfg(test)]\nmod tests {\n}\n";

    #[test]
    fn a_map_that_omits_a_module_is_caught() {
        assert_eq!(declared_modules(ROOT), ["alpha", "beta", "gamma"]);
        assert_eq!(map_omissions(ROOT), ["gamma"]);
        let whole = ROOT.replace("does it.", "does it; [`gamma`] too.");
        assert!(map_omissions(&whole).is_empty());
    }

    #[test]
    fn an_import_from_above_the_layer_is_caught() {
        let text =
            "use crate::db::Pool;\nuse crate::{StoreError, fence::on_connect};\nfn f() { crate::types::Row::new(); }\n";
        assert_eq!(crate_imports(text), ["db", "StoreError", "fence", "types"]);
        assert_eq!(layer_violations(text, &["db", "StoreError", "types"]), ["fence"]);
        assert!(layer_violations("use crate::db::x;\nmacro_rules! m { () => { $crate::db::y } }", &["db"]).is_empty());
    }

    #[test]
    fn a_doc_example_rustdoc_would_run_is_caught() {
        let text = "//! Map.\n//!\n//! ```\n//! let a = 1;\n//! ```\n/// Thing.\n/// ```text\n/// GET /x\n/// ```\n///    ```rust,no_run\n/// f();\n/// ```\n// ```\nfn f() {}\n";
        assert_eq!(doctests(text), [3, 10]);
        assert!(doctests("/// ```sh\n/// ls\n/// ```\n/// ```yaml\n/// a: 1\n/// ```\n").is_empty());
    }
}

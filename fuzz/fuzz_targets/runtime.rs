//! A deployment's `runtime.yaml` from bytes, decoded and checked with an
//! example project (`check::check_project_with_runtime`, as `coordinatorctl
//! check --runtime --environment` does), its secrets probed and its package
//! read from memory. Every diagnostic points inside the file it names; the
//! text shown in excerpts keeps every line and column (only `*` replaces
//! characters, never whitespace); a secret written in place of a reference
//! is repeated by no diagnostic and not shown in the excerpt text.
#![no_main]

use std::sync::LazyLock;

use coordinator_core::check::runtime::{PackageSource, RuntimeInput, SecretProbe, SecretProblem};
use coordinator_core::check::{self, MemoryProject, ProjectSource};
use coordinator_core::model::runtime::{SecretRef, SecretSource};
use coordinator_core::package;
use coordinator_core::yaml::{self, Node, NodeValue};
use coordinator_fuzz::{EXAMPLES, assert_spans_inside};
use libfuzzer_sys::fuzz_target;

const RUNTIME_FILE: &str = "runtime.yaml";

/// Fields whose value is a secret reference (a literal there is a secret).
const SECRET_FIELDS: &[&str] = &["url", "eventSigningSecret", "clientSecret", "privateKey", "token"];

/// Each example with the bytes of its package.
static PROJECTS: LazyLock<Vec<(MemoryProject, Vec<u8>)>> = LazyLock::new(|| {
    EXAMPLES
        .iter()
        .map(|example| {
            let project = MemoryProject::of(example.files.iter().copied());
            let report = check::check_project(&project).unwrap_or_else(|e| panic!("{}: {e}", example.name));
            let checked = report.checked.unwrap_or_else(|| panic!("{} is refused", example.name));
            let built = package::build(&checked, "fuzz").unwrap_or_else(|e| panic!("{}: {e}", example.name));
            (project, built.bytes)
        })
        .collect()
});

/// A pretend environment: `env:…_UNSET` is not set, `env:…_EMPTY` is empty,
/// a `file:` path with `missing` in it cannot be read; the rest resolves.
struct Environment<'a> {
    package: &'a [u8],
}

impl SecretProbe for Environment<'_> {
    fn probe(&self, reference: &SecretRef) -> Result<(), SecretProblem> {
        match reference.source() {
            SecretSource::Env(name) if name.ends_with("_UNSET") => Err(SecretProblem::NotSet),
            SecretSource::Env(name) if name.ends_with("_EMPTY") => Err(SecretProblem::Empty),
            SecretSource::File(path) if path.contains("missing") => {
                Err(SecretProblem::Unreadable("No such file or directory".to_owned()))
            }
            SecretSource::Env(_) | SecretSource::File(_) => Ok(()),
        }
    }
}

impl PackageSource for Environment<'_> {
    fn read_package(&self, path: &str) -> Result<Vec<u8>, String> {
        if path.contains("missing") { Err("No such file or directory".to_owned()) } else { Ok(self.package.to_vec()) }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let (project, package) = &PROJECTS[usize::from(which) % PROJECTS.len()];
    let environment = Environment { package };
    let input = RuntimeInput { file: RUNTIME_FILE, text, secrets: Some(&environment), package: Some(&environment) };
    let Ok(report) = check::check_project_with_runtime(project, &input) else { return };
    let files =
        |file: &str| if file == RUNTIME_FILE { Some(text.to_owned()) } else { project.read(file).ok().flatten() };
    assert_spans_inside(&report.diagnostics, &files);

    let shown = report.files.iter().find(|(file, _)| file == RUNTIME_FILE).map(|(_, shown)| shown.as_str());
    if let Some(shown) = shown {
        assert_eq!(shown.chars().count(), text.chars().count(), "the excerpt text changed length");
        for (was, now) in text.chars().zip(shown.chars()) {
            assert!(was == now || (now == '*' && !was.is_whitespace()), "the excerpt text changed {was:?} to {now:?}");
        }
    }
    let Ok(root) = yaml::parse(RUNTIME_FILE, text) else { return };
    let mut secrets = Vec::new();
    literal_secrets(&root, None, false, &mut secrets);
    for secret in secrets.into_iter().filter(|s| s.chars().count() >= 8 && text.matches(s.as_str()).count() == 1) {
        for d in &report.diagnostics {
            let repeated = d.message.contains(&secret) || d.help.contains(&secret);
            assert!(!repeated, "{} repeats a secret written in the file", d.code.as_str());
        }
        assert!(shown.is_none_or(|shown| !shown.contains(&secret)), "the excerpt text shows a secret");
    }
});

/// The strings written where a secret reference belongs (`payloadKeys.keys`
/// entries and the [`SECRET_FIELDS`]) that are not references.
fn literal_secrets(node: &Node, key: Option<&str>, in_keys: bool, out: &mut Vec<String>) {
    match &node.value {
        NodeValue::Map(entries) => {
            for (k, v) in entries {
                literal_secrets(v, Some(&k.text), key == Some("keys"), out);
            }
        }
        NodeValue::Seq(items) => items.iter().for_each(|item| literal_secrets(item, key, in_keys, out)),
        NodeValue::String(s)
            if SecretRef::parse(s).is_err() && (in_keys || key.is_some_and(|k| SECRET_FIELDS.contains(&k))) =>
        {
            out.push(s.clone());
        }
        NodeValue::String(_) | NodeValue::Null | NodeValue::Bool(_) | NodeValue::Number(_) => {}
    }
}

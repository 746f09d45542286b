//! Test support shared by the modules of this binary: running the real
//! `coordinatorctl` and reading what it printed, project directories copied
//! and edited, and the in-process `coordinator dev` stack the operating
//! commands are run against ([`stack`]).

pub mod stack;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The dev stack's operator token: no output of the tool may show it.
pub const TOKEN: &str = "ctl-operate-token-5f2a9c41";
/// A token the service does not know: no output may show it either.
pub const WRONG_TOKEN: &str = "not-the-token-0b7e";

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// An example project's directory, as an argument.
pub fn example(name: &str) -> String {
    repo().join("examples").join(name).display().to_string()
}

/// Runs `coordinatorctl` with these arguments ([`ctl_in`] in this directory, with no other environment).
pub fn ctl(args: &[&str]) -> Output {
    ctl_in(None, args, &[])
}

/// Runs `coordinatorctl` with `args` in `dir` (when given), without colour,
/// without the caller's `COORDINATOR_*` defaults, with `env` set (`None`:
/// removed); checks that no output shows a token of these tests.
pub fn ctl_in(dir: Option<&Path>, args: &[&str], env: &[(&str, Option<&str>)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_coordinatorctl"));
    command.args(args).env("NO_COLOR", "1").env_remove("COORDINATOR_URL").env_remove("COORDINATOR_TOKEN_FILE");
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let out = command.output().unwrap_or_else(|e| panic!("cannot run coordinatorctl: {e}"));
    for secret in [TOKEN, WRONG_TOKEN] {
        assert!(!printed(&out).contains(secret), "{args:?} printed a token");
    }
    out
}

/// The exit code (-1 if killed by a signal).
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Standard output as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Standard output and standard error together.
pub fn printed(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// Standard output as JSON.
pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", printed(out)))
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// A file's text.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Writes a file (and the directories it is in).
pub fn write(path: &Path, text: &str) {
    let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(path, text));
    written.unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// Replaces `from` (which must be there) by `to`, once, in a file.
pub fn edit(path: &Path, from: &str, to: &str) {
    let text = read(path);
    assert!(text.contains(from), "{} does not contain {from:?}", path.display());
    write(path, &text.replacen(from, to, 1));
}

/// Copies a directory (files and subdirectories) into `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("cannot create {}: {e}", to.display()));
    let entries = std::fs::read_dir(from).unwrap_or_else(|e| panic!("cannot list {}: {e}", from.display()));
    for entry in entries.filter_map(Result::ok) {
        let (path, target) = (entry.path(), to.join(entry.file_name()));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap_or_else(|e| panic!("cannot copy {}: {e}", path.display()));
        }
    }
}

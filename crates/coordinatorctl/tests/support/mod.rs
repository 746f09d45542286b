//! Helpers shared by the binary's integration tests: running the real
//! `coordinatorctl` and reading what it printed.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `coordinatorctl` with these arguments, without colour.
pub fn ctl(args: &[&str]) -> Output {
    match Command::new(env!("CARGO_BIN_EXE_coordinatorctl")).args(args).env("NO_COLOR", "1").output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run coordinatorctl: {e}"),
    }
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

/// Standard output as JSON.
pub fn json(out: &Output) -> serde_json::Value {
    match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(e) => panic!("not JSON ({e}): {}{}", stdout(out), stderr(out)),
    }
}

/// An example project's directory, as an argument.
pub fn example(name: &str) -> String {
    repo().join("examples").join(name).display().to_string()
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    }
}

/// A file's text.
pub fn read(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => panic!("cannot read {}: {e}", path.display()),
    }
}

/// Writes a file.
pub fn write(path: &Path, text: &str) {
    if let Err(e) = std::fs::write(path, text) {
        panic!("cannot write {}: {e}", path.display());
    }
}

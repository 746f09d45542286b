//! `check --runtime FILE --environment`: whether each secret reference of the
//! runtime file resolves on this machine, and the package file it pins.
//!
//! Owns the only reading of the environment, of secret files and of the
//! pinned package in `coordinatorctl`. It looks at secrets without showing
//! them: a variable is only tested for being set and non-empty, a file is
//! opened for its metadata and never read, and nothing it finds is printed.
//! The package is read whole (the core checks its digest).

use std::path::{Path, PathBuf};

use coordinator_core::check::runtime::{PackageSource, SecretProbe, SecretProblem};
use coordinator_core::model::runtime::{SecretRef, SecretSource};

/// This process's environment and file system, as the service would see them
/// if started here with the same runtime file.
pub struct Environment {
    /// The runtime file's directory: a relative `file:` path is relative to it.
    base: PathBuf,
}

impl Environment {
    /// Resolves references of the runtime file at `runtime_file`.
    pub fn new(runtime_file: &Path) -> Self {
        Environment { base: runtime_file.parent().map(Path::to_path_buf).unwrap_or_default() }
    }
}

impl SecretProbe for Environment {
    fn probe(&self, reference: &SecretRef) -> Result<(), SecretProblem> {
        match reference.source() {
            SecretSource::Env(name) => match std::env::var_os(name) {
                None => Err(SecretProblem::NotSet),
                Some(value) if value.is_empty() => Err(SecretProblem::Empty),
                Some(_) => Ok(()),
            },
            SecretSource::File(path) => {
                // `join` keeps an absolute path as it is.
                match std::fs::File::open(self.base.join(path)).and_then(|file| file.metadata()) {
                    Ok(meta) if meta.is_dir() => Err(SecretProblem::Unreadable("it is a directory".to_owned())),
                    Ok(meta) if meta.is_file() && meta.len() == 0 => Err(SecretProblem::Empty),
                    Ok(_) => Ok(()),
                    Err(e) => Err(SecretProblem::Unreadable(e.to_string())),
                }
            }
        }
    }
}

impl PackageSource for Environment {
    fn read_package(&self, path: &str) -> Result<Vec<u8>, String> {
        // `join` keeps an absolute path as it is.
        std::fs::read(self.base.join(path)).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(text: &str) -> SecretRef {
        match SecretRef::parse(text) {
            Ok(r) => r,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    #[test]
    fn relative_files_resolve_next_to_the_runtime_file() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("tempdir: {e}"),
        };
        let written =
            std::fs::write(dir.path().join("key"), "k").and_then(|()| std::fs::write(dir.path().join("empty"), ""));
        assert!(written.is_ok());
        let env = Environment::new(&dir.path().join("runtime.yaml"));
        assert_eq!(env.probe(&reference("file:key")), Ok(()));
        assert_eq!(env.probe(&reference("file:empty")), Err(SecretProblem::Empty));
        assert!(matches!(env.probe(&reference("file:missing")), Err(SecretProblem::Unreadable(_))));
        let absolute = format!("file:{}", dir.path().join("key").display());
        assert_eq!(Environment::new(Path::new("runtime.yaml")).probe(&reference(&absolute)), Ok(()));
        assert_eq!(env.probe(&reference("env:COORDINATORCTL_TEST_SURELY_UNSET_VARIABLE")), Err(SecretProblem::NotSet));
    }
}

//! A project directory on disk as the checker's [`ProjectSource`]: the one
//! reader of project files in the service (`coordinator dev`) and its tests.
//! It reads; the checker decides.

use std::path::{Path, PathBuf};

use coordinator_core::check::{ProjectSource, SourceError};

/// A project directory on disk, for the checker.
#[derive(Debug, Clone)]
pub struct ProjectDir(PathBuf);

impl ProjectDir {
    /// The project in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ProjectDir(dir.into())
    }
}

impl ProjectSource for ProjectDir {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        read_optional(&self.0.join(path), path)
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        let unreadable = |e: std::io::Error| SourceError::Unreadable { path: "catalog/".into(), reason: e.to_string() };
        let entries = match std::fs::read_dir(self.0.join("catalog")) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(unreadable(e)),
        };
        let mut files = Vec::new();
        for entry in entries {
            let name = entry.map_err(unreadable)?.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") || name.ends_with(".yml") {
                files.push(format!("catalog/{name}"));
            }
        }
        files.sort();
        Ok(files)
    }
}

fn read_optional(file: &Path, path: &str) -> Result<Option<String>, SourceError> {
    match std::fs::read_to_string(file) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SourceError::Unreadable { path: path.to_owned(), reason: e.to_string() }),
    }
}

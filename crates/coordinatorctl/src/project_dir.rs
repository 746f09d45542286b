//! Reads a project from a directory on disk for the core checker.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use coordinator_core::check::{ProjectSource, SourceError};

/// A project directory.
pub struct ProjectDir {
    root: PathBuf,
}

impl ProjectDir {
    /// The project at `root`.
    pub fn new(root: &Path) -> Self {
        ProjectDir { root: root.to_path_buf() }
    }
}

impl ProjectSource for ProjectDir {
    fn read(&self, path: &str) -> Result<Option<String>, SourceError> {
        match std::fs::read_to_string(self.root.join(path)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SourceError::Unreadable { path: path.to_owned(), reason: e.to_string() }),
        }
    }

    fn catalog_files(&self) -> Result<Vec<String>, SourceError> {
        let dir = self.root.join("catalog");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(SourceError::Unreadable { path: "catalog/".to_owned(), reason: e.to_string() }),
        };
        let mut files = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| SourceError::Unreadable { path: "catalog/".to_owned(), reason: e.to_string() })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") || name.ends_with(".yml") {
                files.push(format!("catalog/{name}"));
            }
        }
        files.sort();
        Ok(files)
    }
}

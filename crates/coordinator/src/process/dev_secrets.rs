//! The secrets `coordinator dev` generates — the payload key, the operator
//! token, the event signing secret — kept in its data directory, so that
//! `dev --data DIR` started again opens every run it sealed before (with a
//! new key each start, every earlier run was unreadable: `500 internal`).
//!
//! Each is a file of one hex line, readable by its owner only:
//! `dev-payload-key` (32 bytes), `dev-operator-token`, `dev-event-secret`.
//! A file that is there is used; one that is not is generated and written
//! (to a temporary name, then renamed, so a stop half-way leaves none). A
//! `--token` given on the command line is used for that start and not kept.
//! A file that does not hold what it should is refused with its path, and
//! nothing is overwritten: deleting it starts over (runs sealed under an old
//! payload key then stay unreadable).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::process::dev::DevError;

/// The file of the payload key.
pub const PAYLOAD_KEY: &str = "dev-payload-key";
/// The file of the operator token.
pub const OPERATOR_TOKEN: &str = "dev-operator-token";
/// The file of the event signing secret.
pub const EVENT_SECRET: &str = "dev-event-secret";

/// The 32 random bytes kept in `dir/name` as hex: read, or generated and written.
pub fn kept(dir: &Path, name: &str) -> Result<Vec<u8>, DevError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(&path, text.trim()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let bytes = random_bytes()?;
            write(&path, &hex::encode(&bytes))?;
            Ok(bytes)
        }
        Err(e) => Err(DevError::Io(format!("{}: {e}", path.display()))),
    }
}

fn parse(path: &Path, text: &str) -> Result<Vec<u8>, DevError> {
    let refused = || {
        DevError::Io(format!(
            "{} does not hold 64 hex digits (32 bytes) as coordinator dev wrote it: restore it, or delete it to \
             start over (runs sealed under the old key then stay unreadable)",
            path.display()
        ))
    };
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(refused());
    }
    (0..32).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| refused())).collect()
}

fn write(path: &Path, text: &str) -> Result<(), DevError> {
    let fail = |e: std::io::Error| DevError::Io(format!("{}: {e}", path.display()));
    let temporary: PathBuf = path.with_extension("partial");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(&temporary).map_err(fail)?;
    file.write_all(format!("{text}\n").as_bytes()).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    std::fs::rename(&temporary, path).map_err(fail)
}

/// 32 random bytes.
pub fn random_bytes() -> Result<Vec<u8>, DevError> {
    let mut key = vec![0u8; 32];
    getrandom::fill(&mut key).map_err(|e| DevError::Io(format!("no randomness: {e}")))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_generated_once_then_read_back() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let first = kept(dir.path(), PAYLOAD_KEY).unwrap_or_else(|e| panic!("{e}"));
        let again = kept(dir.path(), PAYLOAD_KEY).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((first.len(), &first), (32, &again));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join(PAYLOAD_KEY)).map(|m| m.permissions().mode() & 0o777);
            assert_eq!(mode.ok(), Some(0o600));
        }
    }

    #[test]
    fn a_damaged_secret_is_refused_with_its_path_and_kept() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(PAYLOAD_KEY);
        std::fs::write(&path, "not hex\n").unwrap_or_else(|e| panic!("{e}"));
        let refused = kept(dir.path(), PAYLOAD_KEY).map(|_| ()).map_err(|e| e.to_string());
        assert!(refused.as_ref().is_err_and(|m| m.contains(PAYLOAD_KEY) && m.contains("delete it")), "{refused:?}");
        assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some("not hex\n"));
    }
}

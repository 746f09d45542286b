//! This process's lease owner id: the name its worker's leases are written
//! under (`outbox.lease_owner`, `timers.lease_owner`), the consumer name of
//! its Redis hints and the `owner` of its `serving` log line.
//!
//! A fresh UUIDv7 per process, written as `c` and its 16 bytes in unpadded
//! base64url (23 characters): it is in every row the worker leases and in
//! every claim's update, so its length is WAL per run (the hyphenated
//! `coordinator-<uuid>` it replaced took 48). Nothing reads a meaning into
//! it; it only has to differ between processes.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// A fresh lease owner id.
pub fn fresh() -> String {
    format!("c{}", URL_SAFE_NO_PAD.encode(uuid::Uuid::now_v7().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_short_url_safe_and_new_each_time() {
        let (a, b) = (fresh(), fresh());
        assert_eq!(a.len(), 23, "{a}");
        assert!(a.starts_with('c'), "{a}");
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{a}");
        assert_ne!(a, b);
    }
}

//! The bytes a run's snapshot is sealed as: its JSON, deflated.
//!
//! A snapshot is rewritten with every decision, so its size is most of what a
//! run costs the database (WAL, heap pages, whether an update fits beside the
//! old row). Its JSON repeats field names and step names and compresses to
//! about half; the sealed bytes are encrypted and do not compress at all, so
//! compressing happens here, before sealing. The sealed value's length is
//! visible to whoever reads the table (as it was before); nothing else is.
//!
//! Format of the plaintext: `0x01` then raw DEFLATE of the JSON. Anything else
//! is the JSON itself — snapshots written before compression start with `{`,
//! and stay readable. Decompression is bounded ([`MAX_SNAPSHOT`]), so a
//! corrupt value cannot make it allocate without limit.

use miniz_oxide::deflate::compress_to_vec;
use miniz_oxide::inflate::decompress_to_vec_with_limit;

/// The marker of a deflated snapshot (a JSON text never starts with it).
const DEFLATED: u8 = 0x01;
/// miniz's fastest level: most of the size saved for a fraction of the time.
const LEVEL: u8 = 1;
/// The largest snapshot JSON accepted when inflating (inputs are at most a
/// megabyte; a run's recorded answers and commands stay well below this).
pub const MAX_SNAPSHOT: usize = 64 << 20;

/// What [`decode`] refuses.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotBytesError {
    /// The deflated bytes do not inflate within the bound.
    #[error("the deflated snapshot does not inflate ({0})")]
    Inflate(String),
}

/// The plaintext to seal for a snapshot's JSON.
pub fn encode(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() / 2 + 1);
    out.push(DEFLATED);
    out.extend_from_slice(&compress_to_vec(json, LEVEL));
    out
}

/// The snapshot's JSON from an opened plaintext (deflated or, if written
/// before compression, the JSON itself).
pub fn decode(plain: Vec<u8>) -> Result<Vec<u8>, SnapshotBytesError> {
    match plain.split_first() {
        Some((&DEFLATED, deflated)) => decompress_to_vec_with_limit(deflated, MAX_SNAPSHOT)
            .map_err(|e| SnapshotBytesError::Inflate(format!("{:?}", e.status))),
        _ => Ok(plain),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deflated_snapshots_round_trip_and_old_ones_still_read() {
        let json = br#"{"id":"r","steps":{"a":{"type":"call"},"b":{"type":"call"},"c":{"type":"call"}}}"#.repeat(20);
        let encoded = encode(&json);
        assert!(encoded.len() < json.len() / 2, "{} of {}", encoded.len(), json.len());
        assert_eq!(decode(encoded).ok(), Some(json.clone()));
        assert_eq!(decode(json.clone()).ok(), Some(json));
    }

    #[test]
    fn corrupt_deflated_bytes_are_refused() {
        assert!(decode(vec![DEFLATED, 0xff, 0xff, 0xff]).is_err());
    }
}

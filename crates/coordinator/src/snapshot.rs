//! The bytes a run's snapshot is sealed as: its JSON, LZ4-compressed.
//!
//! A snapshot is rewritten with every decision, so its size is most of what a
//! run costs the database (WAL, heap pages, whether an update fits beside the
//! old row). Its JSON repeats field names and step names and compresses to
//! about half; the sealed bytes are encrypted and do not compress at all, so
//! compressing happens here, before sealing. The sealed value's length is
//! visible to whoever reads the table (as it was before); nothing else is.
//! LZ4 rather than DEFLATE: DEFLATE (miniz, level 1) saved a little more but
//! cost 7 % of the coordinator's CPU in the throughput bench, mostly setting
//! up its tables for every snapshot.
//!
//! Format of the plaintext: `0x02`, the JSON's length (4 bytes, little
//! endian), then one LZ4 block of the JSON. Anything else is the JSON itself
//! — snapshots written before compression start with `{`, and stay readable.
//! The length is checked against [`MAX_SNAPSHOT`] before anything is
//! allocated, so a corrupt value cannot make decoding allocate without limit.

/// The marker of an LZ4 snapshot (a JSON text never starts with it).
const LZ4: u8 = 0x02;
/// The largest snapshot JSON accepted when decoding (inputs are at most a
/// megabyte; a run's recorded answers and commands stay well below this).
pub const MAX_SNAPSHOT: usize = 64 << 20;

/// What [`decode`] refuses.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotBytesError {
    /// The compressed bytes are cut short or do not decompress to their stated length.
    #[error("the compressed snapshot does not decompress ({0})")]
    Decompress(String),
    /// The stated length is over the bound.
    #[error("the compressed snapshot claims {0} bytes, more than {MAX_SNAPSHOT}")]
    TooLarge(usize),
}

/// The plaintext to seal for a snapshot's JSON.
pub fn encode(json: &[u8]) -> Vec<u8> {
    let block = lz4_flex::block::compress(json);
    let length = u32::try_from(json.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(5 + block.len());
    out.push(LZ4);
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&block);
    out
}

/// The snapshot's JSON from an opened plaintext (compressed or, if written
/// before compression, the JSON itself).
pub fn decode(plain: Vec<u8>) -> Result<Vec<u8>, SnapshotBytesError> {
    let Some((&LZ4, rest)) = plain.split_first() else { return Ok(plain) };
    let (length, block) = rest.split_at_checked(4).ok_or_else(|| SnapshotBytesError::Decompress("no length".into()))?;
    let length = u32::from_le_bytes([length[0], length[1], length[2], length[3]]);
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    if length > MAX_SNAPSHOT {
        return Err(SnapshotBytesError::TooLarge(length));
    }
    let json = lz4_flex::block::decompress(block, length).map_err(|e| SnapshotBytesError::Decompress(e.to_string()))?;
    if json.len() != length {
        return Err(SnapshotBytesError::Decompress(format!("{} bytes, not {length}", json.len())));
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_snapshots_round_trip_and_old_ones_still_read() {
        let json = br#"{"id":"r","steps":{"a":{"type":"call"},"b":{"type":"call"},"c":{"type":"call"}}}"#.repeat(20);
        let encoded = encode(&json);
        assert!(encoded.len() < json.len() / 2, "{} of {}", encoded.len(), json.len());
        assert_eq!(decode(encoded).ok(), Some(json.clone()));
        assert_eq!(decode(json.clone()).ok(), Some(json));
    }

    #[test]
    fn corrupt_or_oversized_bytes_are_refused() {
        let mut encoded = encode(br#"{"id":"r","input":{"a":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}"#);
        assert!(matches!(decode(vec![LZ4, 1, 0]), Err(SnapshotBytesError::Decompress(_))));
        let huge = u32::try_from(MAX_SNAPSHOT + 1).unwrap_or(u32::MAX).to_le_bytes();
        assert!(matches!(decode([&[LZ4][..], &huge, &[0]].concat()), Err(SnapshotBytesError::TooLarge(_))));
        encoded.truncate(encoded.len() - 3);
        assert!(decode(encoded).is_err());
    }
}

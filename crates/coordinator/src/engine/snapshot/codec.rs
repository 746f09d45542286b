//! The bytes a run's snapshot is sealed as: its JSON, LZ4-compressed against
//! a dictionary.
//!
//! A snapshot is rewritten with every decision, so its size is most of what a
//! run costs the database (WAL, heap pages, whether an update fits beside the
//! old row). The sealed bytes are encrypted and do not compress at all, so
//! compressing happens here, before sealing. The sealed value's length is
//! visible to whoever reads the table (as it was before); nothing else is.
//! LZ4 rather than DEFLATE: DEFLATE (miniz, level 1) saved a little more but
//! cost 7 % of the coordinator's CPU in the throughput bench, mostly setting
//! up its tables for every snapshot.
//!
//! A snapshot is a small JSON text (a 3-call run's is ~1.8 KB) whose field
//! names, enum spellings and run id LZ4 can only refer back to once they have
//! appeared in it; on its own it compresses to about 45 %. Compressed against
//! [`dictionary`] — the spellings of every snapshot field and variant
//! ([`STATIC_DICTIONARY`], frozen: changing one byte would make every
//! snapshot written with it unreadable) followed by the run's id (which the
//! reader knows: it is the row's key and the seal's binding) — a 3-call run's
//! finished snapshot takes 38 % less (506 bytes against 818; the test
//! `the_dictionary_takes_a_fifth_off_a_finished_three_call_run`), for the same CPU.
//!
//! Format of the plaintext, by its first byte:
//! - `0x03`: the JSON's length (4 bytes, little endian), then one LZ4 block
//!   compressed against [`dictionary`] of the run's id;
//! - `0x02`: the same without a dictionary (written before it, still read);
//! - `0x04` (a delta, sealed on its own): the first 16 bytes of the SHA-256
//!   of the sealed value it was written against ([`digest_of`]), the JSON's
//!   length (4 bytes, little endian), then one LZ4 block compressed against
//!   [`dictionary`] of the run's id followed by that value's JSON;
//! - anything else is the JSON itself — snapshots written before compression
//!   start with `{`, and stay readable.
//!
//! The length is checked against [`MAX_SNAPSHOT`] before anything is
//! allocated, so a corrupt value cannot make decoding allocate without limit.
//!
//! A delta: the store keeps a run's snapshot as a base, sealed rarely, and a
//! head sealed with every decision ([`crate::engine::snapshot::sealed`]). The head is a
//! delta: the whole snapshot compressed against the base's JSON, so it costs
//! about what changed since the base. It names what it was written against by
//! digest, so a head set beside another base (a row edited in the database)
//! does not decode as the run's snapshot.

use sha2::{Digest, Sha256};

/// The marker of an LZ4 snapshot without a dictionary (a JSON text never starts with it).
const LZ4: u8 = 0x02;
/// The marker of an LZ4 snapshot compressed against [`dictionary`].
const LZ4_DICTIONARY: u8 = 0x03;
/// The largest snapshot JSON accepted when decoding (inputs are at most a
/// megabyte; a run's recorded answers and commands stay well below this).
pub const MAX_SNAPSHOT: usize = 64 << 20;

/// The fixed part of the dictionary of [`LZ4_DICTIONARY`] snapshots: the
/// snapshot's spellings ([`coordinator_core::machine::run::Run`] as serde writes
/// it), the most common last (LZ4 refers back to any of it alike). Frozen: a
/// test pins its digest. A new spelling goes into a new dictionary with a new
/// marker, never into this one.
pub const STATIC_DICTIONARY: &str = concat!(
    r#""cancelled","cancelled-after-effect","cancel-requested","expired","failed","timed-out","completed","#,
    r#""settling","route","deferred","unknown","refused","none","#,
    r#"{"reason":"unknown-effect","step":"},{"reason":"restore-hold"},{"code":"","step":"","message":""},"#,
    r#"{"type":"wait-until","until":,"resolution":null},"#,
    r#"{"type":"wait-for","reference":"","started_at":,"interval_seconds":,"timeout_at":,"seq":,"observing":false,"#,
    r#""observations":,"last_observation_at":null,"resolution":null,"value":null},"#,
    r#"{"type":"attempt","not_before":},{"type":"receipt"},"#,
    r#"[{"timer":{"type":"wait-until","step":""},"at":},{"timer":{"type":"observation","step":""},"at":},"#,
    r#"{"timer":{"type":"wait-timeout","step":""},"at":},{"timer":{"type":"run-deadline"},"at":}],"#,
    r#""state":"attention","state":"finished","#,
    r#","timers":[],"cancel":null,"held":false,"attention":null,"outcome":null,"output":null,"failure":null}"#,
    r#"{"type":"entered"},"#,
    r#","attempt":1,"effect":"accepted","pending":{"type":"nothing"},"output":{},"completions":{},"refusal":null,"receipt":null},"#,
    r#"{"id":"","revision":"sha256:","admitted_at":1,"input":{},"state":"running","current":"","path":[""],"#,
    r#""steps":{"":{"type":"call","command":{"input":{},"idempotency_key":""#,
);

/// The dictionary a run's snapshot is compressed against: [`STATIC_DICTIONARY`],
/// the run's id and `:` (a call's idempotency key is `<run id>:<step>`).
fn dictionary(run_id: &str) -> Vec<u8> {
    let mut dictionary = Vec::with_capacity(STATIC_DICTIONARY.len() + run_id.len() + 1);
    dictionary.extend_from_slice(STATIC_DICTIONARY.as_bytes());
    dictionary.extend_from_slice(run_id.as_bytes());
    dictionary.push(b':');
    dictionary
}

/// The marker of a delta (see the module doc).
const DELTA: u8 = 0x04;
/// How many bytes of a digest a delta holds.
pub const DIGEST: usize = 16;

/// The digest a delta names what it was written against by: the first
/// [`DIGEST`] bytes of the SHA-256 of that sealed value (its fresh nonce
/// makes it unique).
pub fn digest_of(sealed: &[u8]) -> [u8; DIGEST] {
    let digest = Sha256::digest(sealed);
    let mut out = [0; DIGEST];
    out.copy_from_slice(&digest[..DIGEST]);
    out
}

/// The dictionary of a delta: [`dictionary`] of the run, then the JSON before it.
fn delta_dictionary(run_id: &str, before: &[u8]) -> Vec<u8> {
    let mut dictionary = dictionary(run_id);
    dictionary.extend_from_slice(before);
    dictionary
}

/// The plaintext to seal as the delta of the snapshot JSON `json` of run
/// `run_id` against a snapshot whose JSON is `before` and whose sealed value
/// has digest `against`.
pub fn encode_delta(json: &[u8], run_id: &str, before: &[u8], against: &[u8; DIGEST]) -> Vec<u8> {
    compressed(DELTA, against, json, &delta_dictionary(run_id, before))
}

/// `marker`, `named`, the JSON's length (4 bytes, little endian) and one LZ4
/// block of `json` compressed against `dictionary`: every compressed form.
fn compressed(marker: u8, named: &[u8], json: &[u8], dictionary: &[u8]) -> Vec<u8> {
    let block = lz4_flex::block::compress_with_dict(json, dictionary);
    let length = u32::try_from(json.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(5 + named.len() + block.len());
    out.push(marker);
    out.extend_from_slice(named);
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&block);
    out
}

/// The snapshot JSON of run `run_id` from an opened delta, which must have
/// been written against the snapshot whose JSON is `before` and whose sealed
/// value has digest `against`.
pub fn decode_delta(
    plain: &[u8],
    run_id: &str,
    before: &[u8],
    against: &[u8; DIGEST],
) -> Result<Vec<u8>, SnapshotBytesError> {
    let rest = plain.strip_prefix(&[DELTA]).ok_or_else(|| SnapshotBytesError::Decompress("not a delta".into()))?;
    let (named, rest) =
        rest.split_first_chunk::<DIGEST>().ok_or_else(|| SnapshotBytesError::Decompress("no digest".into()))?;
    if named != against {
        return Err(SnapshotBytesError::OtherBase);
    }
    decompress(rest, Some(&delta_dictionary(run_id, before)))
}

/// What [`decode`] refuses.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotBytesError {
    /// The compressed bytes are cut short or do not decompress to their stated length.
    #[error("the compressed snapshot does not decompress ({0})")]
    Decompress(String),
    /// A delta beside another snapshot than the one it was written against.
    #[error("the snapshot's head was written against another base")]
    OtherBase,
    /// The stated length is over the bound.
    #[error("the compressed snapshot claims {0} bytes, more than {MAX_SNAPSHOT}")]
    TooLarge(usize),
}

/// The plaintext to seal for the snapshot JSON of run `run_id`.
pub fn encode(json: &[u8], run_id: &str) -> Vec<u8> {
    compressed(LZ4_DICTIONARY, &[], json, &dictionary(run_id))
}

/// The snapshot JSON of run `run_id` from an opened plaintext (compressed in
/// either form or, if written before compression, the JSON itself).
pub fn decode(plain: Vec<u8>, run_id: &str) -> Result<Vec<u8>, SnapshotBytesError> {
    let dictionary = match plain.first() {
        Some(&LZ4_DICTIONARY) => Some(dictionary(run_id)),
        Some(&LZ4) => None,
        _ => return Ok(plain),
    };
    decompress(&plain[1..], dictionary.as_deref())
}

/// The JSON of a stated length (4 bytes, little endian) and an LZ4 block.
fn decompress(stated: &[u8], dictionary: Option<&[u8]>) -> Result<Vec<u8>, SnapshotBytesError> {
    let (length, block) =
        stated.split_first_chunk::<4>().ok_or_else(|| SnapshotBytesError::Decompress("no length".into()))?;
    let length = u32::from_le_bytes(*length);
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    if length > MAX_SNAPSHOT {
        return Err(SnapshotBytesError::TooLarge(length));
    }
    let json = match dictionary {
        Some(dictionary) => lz4_flex::block::decompress_with_dict(block, length, dictionary),
        None => lz4_flex::block::decompress(block, length),
    }
    .map_err(|e| SnapshotBytesError::Decompress(e.to_string()))?;
    if json.len() != length {
        return Err(SnapshotBytesError::Decompress(format!("{} bytes, not {length}", json.len())));
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "01a243cf-1bdd-726e-a96b-d8e6ef9aaf8b";
    /// A finished 3-call run of the service bench (bench/fixtures/three-calls), as the engine wrote it.
    const FINISHED: &str = include_str!("snapshot_sample.json");

    #[test]
    fn snapshots_round_trip_and_those_written_before_still_read() {
        let json = FINISHED.trim_end().as_bytes();
        let encoded = encode(json, RUN);
        assert_eq!(encoded.first(), Some(&LZ4_DICTIONARY));
        assert_eq!(decode(encoded, RUN).ok().as_deref(), Some(json));
        // Written before the dictionary: LZ4 alone, and before that the JSON itself.
        let block = lz4_flex::block::compress(json);
        let before = [&[LZ4][..], &u32::try_from(json.len()).unwrap_or(0).to_le_bytes(), &block].concat();
        assert_eq!(decode(before, RUN).ok().as_deref(), Some(json));
        assert_eq!(decode(json.to_vec(), RUN).ok().as_deref(), Some(json));
    }

    #[test]
    fn the_dictionary_takes_a_fifth_off_a_finished_three_call_run() {
        let json = FINISHED.trim_end().as_bytes();
        let with = encode(json, RUN).len();
        let without = lz4_flex::block::compress(json).len() + 5;
        assert!(with * 5 <= without * 4, "{with} bytes against {without} without the dictionary");
    }

    #[test]
    fn a_snapshot_does_not_decode_as_another_runs() {
        let json = FINISHED.trim_end().as_bytes();
        let other = "01a243cf-1bdd-726e-a96b-d8e6ef9aaf8c";
        assert_ne!(decode(encode(json, RUN), other).ok().as_deref(), Some(json));
    }

    #[test]
    fn the_static_dictionary_is_frozen() {
        // Every snapshot written with marker 0x03 needs these exact bytes to be read back.
        let digest = Sha256::digest(STATIC_DICTIONARY.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "bcbfbc47c3821583f7f2460380a30d252c21ea21fc9669e28ddef0ad0b4e4bf5");
    }

    #[test]
    fn corrupt_or_oversized_bytes_are_refused() {
        let mut encoded = encode(br#"{"id":"r","input":{"a":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}"#, "r");
        let huge = u32::try_from(MAX_SNAPSHOT + 1).unwrap_or(u32::MAX).to_le_bytes();
        for marker in [LZ4, LZ4_DICTIONARY] {
            assert!(matches!(decode(vec![marker, 1, 0], "r"), Err(SnapshotBytesError::Decompress(_))));
            assert!(matches!(decode([&[marker][..], &huge, &[0]].concat(), "r"), Err(SnapshotBytesError::TooLarge(_))));
        }
        encoded.truncate(encoded.len() - 3);
        assert!(decode(encoded, "r").is_err());
    }
}

//! A run's snapshot as one byte string above the store, two columns in it
//! (migration 0018): `snapshot_base`, a part written rarely, and `snapshot`,
//! the head written with every decision. What the parts mean is the
//! engine's business; the store only keeps them apart, so an update that
//! keeps the base leaves its bytes untouched (on PostgreSQL the row's last
//! column: a HOT update logs the new row without the bytes it shares with
//! the old one at either end, so the base costs no WAL after the insert).
//!
//! The frame: a row without a base (written before migration 0018, or by a
//! caller that gives none) is its `snapshot` bytes as they are; with a base
//! it is [`MARK`], the base's length (4 bytes, little endian), the base and
//! then the head. A snapshot without a base must not start with [`MARK`]
//! (sealed values start with their format version, 1).

use crate::StoreError;

/// The first byte of a frame with a base.
pub const MARK: u8 = 0xB5;

/// The frame of a row's `snapshot_base` (`base`) and `snapshot` (`head`).
pub fn join(base: Option<Vec<u8>>, head: Vec<u8>) -> Vec<u8> {
    let Some(base) = base else { return head };
    let length = u32::try_from(base.len()).unwrap_or(u32::MAX);
    let mut frame = Vec::with_capacity(5 + base.len() + head.len());
    frame.push(MARK);
    frame.extend_from_slice(&length.to_le_bytes());
    frame.extend_from_slice(&base);
    frame.extend_from_slice(&head);
    frame
}

/// The base and head of a frame, as [`join`] made it.
///
/// # Errors
/// [`StoreError::Corrupt`] for a frame cut short.
pub fn split(frame: &[u8]) -> Result<(Option<&[u8]>, &[u8]), StoreError> {
    let Some(rest) = frame.strip_prefix(&[MARK]) else { return Ok((None, frame)) };
    let cut = || StoreError::Corrupt("a snapshot frame is cut short".into());
    let (length, rest) = rest.split_first_chunk::<4>().ok_or_else(cut)?;
    let length = usize::try_from(u32::from_le_bytes(*length)).map_err(|_| cut())?;
    let (base, head) = rest.split_at_checked(length).ok_or_else(cut)?;
    Ok((Some(base), head))
}

/// The columns to write for `frame`: `snapshot` (the head) and `snapshot_base`.
pub(crate) fn columns(frame: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>), StoreError> {
    let (base, head) = split(frame)?;
    Ok((head.to_vec(), base.map(<[u8]>::to_vec)))
}

/// The frame of the row columns `snapshot` at `head` and `snapshot_base` at `base`.
pub(crate) fn read(row: &crate::db::Row, head: usize, base: usize) -> Result<Vec<u8>, StoreError> {
    Ok(join(row.get(base)?, row.get(head)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_snapshot_without_a_base_is_itself() {
        for (base, head) in
            [(Some(b"base".to_vec()), b"head".to_vec()), (Some(Vec::new()), Vec::new()), (None, vec![1, 2])]
        {
            let frame = join(base.clone(), head.clone());
            let (b, h) = split(&frame).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!((b.map(<[u8]>::to_vec), h.to_vec()), (base.clone(), head.clone()));
            assert_eq!(columns(&frame).unwrap_or_else(|e| panic!("{e}")), (head, base));
        }
        assert_eq!(join(None, vec![1, 7]), vec![1, 7]);
    }

    #[test]
    fn a_frame_cut_short_is_corrupt() {
        let frame = join(Some(b"base".to_vec()), b"head".to_vec());
        for cut in [1, 3, 7] {
            assert!(matches!(split(&frame[..cut]), Err(StoreError::Corrupt(_))), "{cut}");
        }
    }
}

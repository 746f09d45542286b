//! Signed product events (docs/reference/runs.md#admission): the
//! `Coordinator-Signature` header, `t=UNIX,v1=HEX[,v1=HEX…]`, where each `v1`
//! is the lowercase or uppercase hex HMAC-SHA256 of `t + "." + body` (the raw
//! body bytes) under the connection's `eventSigningSecret` (its text, as UTF-8
//! bytes). A product rotating its secret sends one `v1` per secret; one match
//! is enough. Other schemes (`v0=…`) are ignored, so a sender may add newer
//! ones. The timestamp must be within [`TOLERANCE_SECONDS`] of the
//! coordinator's clock either way. Tags are compared in constant time
//! (`subtle`), and every candidate is compared, whichever matches.
//!
//! Messages say which rule failed, never the header's or the body's content.
//! Pure (the clock is an argument): the service verifies with it through
//! [`coordinator_core::signature`](crate::signature), and the fuzz targets reach it without the service.

use hmac::{KeyInit, Mac};
use sha2::Sha256;
use subtle::{Choice, ConstantTimeEq};

/// The header that carries the signature.
pub const HEADER: &str = "coordinator-signature";

/// How far the signed timestamp may be from the coordinator's clock, seconds.
pub const TOLERANCE_SECONDS: i64 = 300;

/// The most `v1` entries looked at (a rotation needs two).
const MAX_SIGNATURES: usize = 8;

/// The longest header accepted, bytes.
const MAX_HEADER_BYTES: usize = 2048;

/// Why a signature does not verify (`401 event.signature-invalid`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureProblem {
    /// No `Coordinator-Signature` header.
    #[error("the Coordinator-Signature header is missing")]
    Missing,
    /// The header is not `t=UNIX,v1=HEX`.
    #[error("the Coordinator-Signature header is malformed: {0} (expected `t=UNIX,v1=HEX`)")]
    Malformed(&'static str),
    /// The timestamp is outside the tolerance.
    #[error("the signature's timestamp is stale: more than {TOLERANCE_SECONDS} s from the coordinator's clock")]
    Stale,
    /// No `v1` signature matches the body under the connection's secret.
    #[error("the signature does not match the body (no v1 entry verifies under the connection's signing secret)")]
    Mismatch,
    /// The deployment has no signing secret for the trigger's connection.
    #[error("connection `{0}` has no eventSigningSecret in this deployment, so no event of it can be verified")]
    NoSecret(String),
}

/// A parsed header: the timestamp and the candidate tags.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed {
    timestamp: i64,
    tags: Vec<[u8; 32]>,
}

/// Verifies `header` over `body` with `secret` at `now_seconds` (Unix time).
///
/// # Errors
/// [`SignatureProblem`] naming the rule that failed.
pub fn verify(header: Option<&str>, body: &[u8], secret: &[u8], now_seconds: i64) -> Result<(), SignatureProblem> {
    let parsed = parse(header.ok_or(SignatureProblem::Missing)?)?;
    if parsed.timestamp.abs_diff(now_seconds) > TOLERANCE_SECONDS.unsigned_abs() {
        return Err(SignatureProblem::Stale);
    }
    let expected = tag(secret, parsed.timestamp, body);
    let matched = parsed.tags.iter().fold(Choice::from(0), |any, candidate| any | candidate.ct_eq(&expected));
    if bool::from(matched) { Ok(()) } else { Err(SignatureProblem::Mismatch) }
}

/// The header a sender writes for `body` at `timestamp` (one `v1` entry).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("t={timestamp},v1={}", hex::encode(tag(secret, timestamp, body)))
}

/// HMAC-SHA256 of `t + "." + body`.
fn tag(secret: &[u8], timestamp: i64, body: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
    let mut mac = match <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => return [0; 32],
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

fn parse(header: &str) -> Result<Parsed, SignatureProblem> {
    if header.len() > MAX_HEADER_BYTES {
        return Err(SignatureProblem::Malformed("too long"));
    }
    let mut timestamp = None;
    let mut tags = Vec::new();
    for part in header.split(',') {
        let (key, value) =
            part.trim().split_once('=').ok_or(SignatureProblem::Malformed("an entry is not `key=value`"))?;
        match key {
            "t" if timestamp.is_some() => return Err(SignatureProblem::Malformed("`t` appears twice")),
            "t" => {
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(SignatureProblem::Malformed("`t` is not a Unix time in seconds"));
                }
                let seconds = value
                    .parse::<i64>()
                    .map_err(|_| SignatureProblem::Malformed("`t` is not a Unix time in seconds"))?;
                timestamp = Some(seconds);
            }
            "v1" => {
                let tag = decode_tag(value).ok_or(SignatureProblem::Malformed("a `v1` is not 64 hex digits"))?;
                if tags.len() < MAX_SIGNATURES {
                    tags.push(tag);
                }
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureProblem::Malformed("no `t`"))?;
    if tags.is_empty() {
        return Err(SignatureProblem::Malformed("no `v1`"));
    }
    Ok(Parsed { timestamp, tags })
}

fn decode_tag(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec-test";
    const BODY: &[u8] = br#"{"eventId":"e-1"}"#;
    const T: i64 = 1_700_000_000;

    #[test]
    fn a_signed_body_verifies_within_the_window() {
        let header = sign(SECRET, T, BODY);
        assert_eq!(verify(Some(&header), BODY, SECRET, T), Ok(()));
        assert_eq!(verify(Some(&header), BODY, SECRET, T + 300), Ok(()));
        assert_eq!(verify(Some(&header), BODY, SECRET, T - 300), Ok(()));
        assert_eq!(verify(Some(&header), BODY, SECRET, T + 301), Err(SignatureProblem::Stale));
        assert_eq!(verify(Some(&header), BODY, SECRET, T - 301), Err(SignatureProblem::Stale));
    }

    #[test]
    fn the_tag_is_the_openssl_hmac_of_t_dot_body() {
        // printf '%s' '1700000000.{"eventId":"e-1"}' | openssl dgst -sha256 -hmac whsec-test
        let header = sign(SECRET, T, BODY);
        assert_eq!(header, "t=1700000000,v1=afc2905e78a109bb38d00fb7c88758183c7321935a25193b59a5e24c51000254");
    }

    #[test]
    fn the_worked_example_of_docs_api_md_holds() {
        let body = br#"{"eventId":"0199c8a0-0000-7000-8000-000000000001","recordType":"application","recordId":"0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10","revision":1,"occurredAt":"2026-01-05T10:00:00Z"}"#;
        let header = sign(b"whsec-example", 1_767_607_200, body);
        assert_eq!(header, "t=1767607200,v1=7771f9014f1706bd377b52ea9a57e0a648df79535bfc2ea41d37764d4af26856");
    }

    #[test]
    fn any_v1_entry_may_match_and_others_are_ignored() {
        let good = sign(SECRET, T, BODY);
        let good_tag = good.split_once(",v1=").map(|(_, t)| t.to_owned()).unwrap_or_default();
        let other = sign(b"old-secret", T, BODY);
        let other_tag = other.split_once(",v1=").map(|(_, t)| t.to_owned()).unwrap_or_default();
        let rotated = format!("t={T},v1={other_tag},v0=zz,v1={}", good_tag.to_uppercase());
        assert_eq!(verify(Some(&rotated), BODY, SECRET, T), Ok(()));
        let none = format!("t={T}, v1={other_tag}");
        assert_eq!(verify(Some(&none), BODY, SECRET, T), Err(SignatureProblem::Mismatch));
    }

    #[test]
    fn a_changed_body_or_timestamp_does_not_verify() {
        let header = sign(SECRET, T, BODY);
        assert_eq!(verify(Some(&header), br#"{"eventId":"e-2"}"#, SECRET, T), Err(SignatureProblem::Mismatch));
        let moved = header.replacen(&T.to_string(), &(T + 1).to_string(), 1);
        assert_eq!(verify(Some(&moved), BODY, SECRET, T), Err(SignatureProblem::Mismatch));
        assert_eq!(verify(Some(&header), BODY, b"other", T), Err(SignatureProblem::Mismatch));
    }

    #[test]
    fn malformed_headers_say_what_is_wrong() {
        assert_eq!(verify(None, BODY, SECRET, T), Err(SignatureProblem::Missing));
        let tag = "a".repeat(64);
        for header in [
            String::new(),
            format!("v1={tag}"),
            format!("t={T}"),
            format!("t=-5,v1={tag}"),
            format!("t={T},t={T},v1={tag}"),
            format!("t={T},v1=abc"),
            format!("t={T},v1={}", "g".repeat(64)),
            format!("t={T};v1={tag}"),
            "x".repeat(MAX_HEADER_BYTES + 1),
        ] {
            assert!(matches!(verify(Some(&header), BODY, SECRET, T), Err(SignatureProblem::Malformed(_))), "{header}");
        }
    }
}

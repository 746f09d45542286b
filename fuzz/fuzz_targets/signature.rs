//! The signed-event verifier (`coordinator_core::signature::verify`, which
//! the service reaches as `coordinator_core::signature`). A header of any bytes
//! verifies only if it carries, for a timestamp within the tolerance, the
//! true HMAC of that timestamp and the body; a header the sender signed
//! verifies within the tolerance, never outside it, and never for another
//! body or secret.
#![no_main]

use coordinator_core::signature::{SignatureProblem, TOLERANCE_SECONDS, sign, verify};
use libfuzzer_sys::fuzz_target;

const SECRET: &[u8] = b"whsec-fuzz";
const NOW: i64 = 1_767_607_200;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode % 2 == 0 {
        any_header(rest);
    } else {
        signed_header(rest);
    }
});

/// `header\nbody`: whatever the header, success means it holds the true tag.
fn any_header(data: &[u8]) {
    let (header, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(header) = std::str::from_utf8(header) else { return };
    if verify(Some(header), body, SECRET, NOW).is_err() {
        return;
    }
    let timestamps: Vec<i64> =
        header.split(',').filter_map(|part| part.trim().strip_prefix("t=")).filter_map(|t| t.parse().ok()).collect();
    let [t] = timestamps[..] else { panic!("a header verified without exactly one `t`: {header:?}") };
    assert!(t.abs_diff(NOW) <= TOLERANCE_SECONDS.unsigned_abs(), "a stale header verified");
    let tag = sign(SECRET, t, body).split_once(",v1=").map(|(_, tag)| tag.to_owned()).unwrap_or_default();
    let tags: Vec<String> =
        header.split(',').filter_map(|part| part.trim().strip_prefix("v1=")).map(str::to_ascii_lowercase).collect();
    assert!(tags.contains(&tag), "a header verified without the true tag: {header:?}");
}

/// Two bytes of clock skew, a byte choosing what to change, then the body.
fn signed_header(data: &[u8]) {
    let [a, b, change, body @ ..] = data else { return };
    let skew = i64::from(i16::from_le_bytes([*a, *b]));
    let header = sign(SECRET, NOW + skew, body);
    let fresh = skew.abs() <= TOLERANCE_SECONDS;
    let result = verify(Some(&header), body, SECRET, NOW);
    assert_eq!(result.is_ok(), fresh, "skew {skew}: {result:?}");
    if !fresh {
        assert_eq!(result, Err(SignatureProblem::Stale));
    }
    match change % 3 {
        0 => {
            let mut other = body.to_vec();
            other.push(*change);
            assert!(verify(Some(&header), &other, SECRET, NOW).is_err(), "another body verified");
        }
        1 => assert!(verify(Some(&header), body, b"whsec-other", NOW).is_err(), "another secret verified"),
        _ => {
            let upper = header.to_ascii_uppercase().replace("T=", "t=").replace("V1=", "v1=");
            assert_eq!(verify(Some(&upper), body, SECRET, NOW).is_ok(), fresh, "an uppercase tag is refused");
        }
    }
}

//! The W3C Trace Context `traceparent` header (version `00`): parsed from a
//! caller, written on every product request so the product's own traces join
//! the run's. Only the syntax lives here; which trace a request belongs to is
//! the service's business.

use std::fmt;

/// A `traceparent` value: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Traceparent {
    /// The trace id (never all zero).
    pub trace_id: [u8; 16],
    /// The id of the span the request is made from (never all zero).
    pub parent_id: [u8; 8],
    /// Trace flags; bit 0 is "sampled".
    pub flags: u8,
}

impl Traceparent {
    /// The header's name.
    pub const HEADER: &'static str = "traceparent";

    /// Parses a header value. Per the recommendation, version `00` must be
    /// exactly 55 characters of lowercase hex in its four fields; a later
    /// version is read by its first four fields; `ff`, all-zero ids and
    /// anything else are `None` (an invalid header is ignored, not refused).
    pub fn parse(text: &str) -> Option<Traceparent> {
        let text = text.trim();
        let mut parts = text.split('-');
        let (version, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let version = hex::<1>(version)?[0];
        if version == 0xff || (version == 0 && (parts.next().is_some() || text.len() != 55)) {
            return None;
        }
        let trace_id = hex::<16>(trace)?;
        let parent_id = hex::<8>(parent)?;
        let flags = hex::<1>(flags)?[0];
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(Traceparent { trace_id, parent_id, flags })
    }

    /// Whether the sampled flag is set.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

impl fmt::Display for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("00-")?;
        write_hex(f, &self.trace_id)?;
        f.write_str("-")?;
        write_hex(f, &self.parent_id)?;
        write!(f, "-{:02x}", self.flags)
    }
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
}

/// Exactly `2 * N` lowercase hex digits.
fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_header_round_trips() {
        let parsed = Traceparent::parse(SAMPLE);
        assert!(parsed.is_some_and(|t| t.sampled() && t.to_string() == SAMPLE), "{parsed:?}");
        let unsampled = Traceparent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert!(unsampled.is_some_and(|t| !t.sampled()));
    }

    #[test]
    fn invalid_headers_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ] {
            assert_eq!(Traceparent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_first_four_fields() {
        let later = Traceparent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever");
        assert!(later.is_some());
    }
}

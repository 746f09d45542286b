//! The streams hints go on and what an entry says: one stream per lane
//! (`coordinator:due:in-process` for in-process work and timers,
//! `coordinator:due:<connection>` for a remote connection's lane), each read
//! by the consumer group [`GROUP`] and trimmed to about [`MAX_LENGTH`]
//! entries as it is written (`XADD … MAXLEN ~ N`).
//!
//! An entry carries no payload and nothing about a run: only who announced
//! it (`from`, the announcing process's lease owner id) and when (`at`, ms).
//! A reader that cannot decode an entry still takes it as a hint.

use redis::streams::StreamReadReply;

/// The first part of every stream's key.
pub(crate) const PREFIX: &str = "coordinator:due:";
/// The consumer group every serve process reads with (one hint wakes one process).
pub(crate) const GROUP: &str = "coordinator";
/// About how many entries a stream keeps (`MAXLEN ~`): older ones are hints nobody needs.
pub(crate) const MAX_LENGTH: usize = 1000;

/// Where a hint goes: the in-process workers' stream, or a remote connection's lane.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Lane {
    /// In-process work and timers: every serve process's worker.
    InProcess,
    /// A remote connection's lane: the polls of its workers.
    Remote(String),
}

impl Lane {
    /// The stream's key.
    pub(crate) fn key(&self) -> String {
        match self {
            Lane::InProcess => format!("{PREFIX}in-process"),
            Lane::Remote(connection) => format!("{PREFIX}{connection}"),
        }
    }
}

/// `XADD <key> MAXLEN ~ <MAX_LENGTH> * from <from> at <at>`: one hint on `lane`.
pub(crate) fn xadd(lane: &Lane, from: &str, at: i64) -> redis::Cmd {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(lane.key()).arg("MAXLEN").arg("~").arg(MAX_LENGTH).arg("*").arg("from").arg(from).arg("at").arg(at);
    cmd
}

/// One entry read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The entry's id (what `XACK` takes).
    pub(crate) id: String,
    /// Who announced it, when it says.
    pub(crate) from: Option<String>,
    /// When it was announced (ms), when it says.
    pub(crate) at: Option<i64>,
}

/// The entries of an `XREADGROUP` reply, in order.
pub(crate) fn entries(reply: StreamReadReply) -> Vec<Entry> {
    let text = |value: Option<&redis::Value>| match value {
        Some(redis::Value::BulkString(bytes)) => String::from_utf8(bytes.clone()).ok(),
        Some(redis::Value::SimpleString(s)) => Some(s.clone()),
        _ => None,
    };
    let mut out = Vec::new();
    for key in reply.keys {
        for id in key.ids {
            let from = text(id.map.get("from"));
            let at = text(id.map.get("at")).and_then(|t| t.parse().ok());
            out.push(Entry { id: id.id, from, at });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn each_lane_has_its_stream() {
        assert_eq!(Lane::InProcess.key(), "coordinator:due:in-process");
        assert_eq!(Lane::Remote("registry".into()).key(), "coordinator:due:registry");
    }

    #[test]
    fn a_hint_is_an_xadd_trimmed_about_its_length_with_who_and_when() {
        let cmd = xadd(&Lane::Remote("registry".into()), "coordinator-1", 1_700_000_000_123);
        let args: Vec<String> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => "<not simple>".to_owned(),
            })
            .collect();
        assert_eq!(
            args,
            [
                "XADD",
                "coordinator:due:registry",
                "MAXLEN",
                "~",
                "1000",
                "*",
                "from",
                "coordinator-1",
                "at",
                "1700000000123"
            ]
        );
    }

    #[test]
    fn entries_decode_from_the_wire_and_a_strange_one_is_still_a_hint() {
        // XREADGROUP's RESP2 reply: [[key, [[id, [field, value, …]], …]]].
        let reply = Value::Array(vec![Value::Array(vec![
            bulk("coordinator:due:in-process"),
            Value::Array(vec![
                Value::Array(vec![
                    bulk("1-0"),
                    Value::Array(vec![bulk("from"), bulk("coordinator-a"), bulk("at"), bulk("42")]),
                ]),
                Value::Array(vec![bulk("2-0"), Value::Array(vec![bulk("at"), bulk("not a number")])]),
            ]),
        ])]);
        let reply: StreamReadReply = redis::from_redis_value(reply).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            entries(reply),
            [
                Entry { id: "1-0".into(), from: Some("coordinator-a".into()), at: Some(42) },
                Entry { id: "2-0".into(), from: None, at: None },
            ]
        );
    }
}

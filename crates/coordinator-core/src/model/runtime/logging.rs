//! `logging:` of `runtime.yaml`: which log lines the service writes and in
//! which format.
//!
//! Plain data and the syntax check of a filter. Installing a subscriber, and
//! deciding how the filter combines with the environment, belong to the
//! service; this module must not read the environment.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// `logging:` — both fields optional.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Logging {
    /// Which lines are written, in `RUST_LOG` syntax (`info,coordinator=debug,sqlx=warn`);
    /// without it, `info`. The `RUST_LOG` environment variable, when set, takes precedence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<LogFilter>,
    /// How each line is written; without it, `human` when standard error is a
    /// terminal and `json` otherwise. The `--log-format` flag takes precedence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<LogFormat>,
}

impl Logging {
    /// The filter in force: the configured one or `info`.
    pub fn effective_filter(&self) -> LogFilter {
        self.filter.clone().unwrap_or_default()
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// One readable line per event, for a terminal.
    Human,
    /// One JSON object per line, for a log collector.
    Json,
}

impl LogFormat {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Human => "human",
            LogFormat::Json => "json",
        }
    }
}

/// A log filter in a strict subset of the `RUST_LOG` (tracing `EnvFilter`)
/// syntax: comma-separated directives, each `LEVEL` or `TARGET=LEVEL`, where
/// LEVEL is `trace`, `debug`, `info`, `warn`, `error` or `off` (in any case)
/// and TARGET a module path (`coordinator::dispatch::worker`). Whitespace around a
/// directive is allowed; an empty directive is not. What `EnvFilter` accepts
/// beyond this (spans, fields, bare targets) is refused, so that every filter
/// written here means the same to any version of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LogFilter(String);

/// Why a text is not a [`LogFilter`]; names the directive (1-based) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogFilterError {
    /// Nothing between two commas, before the first or after the last.
    #[error("directive {number} is empty")]
    EmptyDirective {
        /// The directive's place in the list, from 1.
        number: usize,
    },
    /// The level (the whole directive, or what follows `=`) is not a level.
    #[error(
        "directive {number} (`{}`): `{}` is not one of trace, debug, info, warn, error, off",
        .directive.escape_default(),
        .level.escape_default()
    )]
    UnknownLevel {
        /// The directive's place in the list, from 1.
        number: usize,
        /// The directive as written, trimmed.
        directive: String,
        /// The part that should be a level.
        level: String,
    },
    /// The part before `=` is not a module path.
    #[error(
        "directive {number} (`{}`): the target `{}` is not a module path \
         (letters, digits and `_`, in segments joined by `::`)",
        .directive.escape_default(),
        .target.escape_default()
    )]
    BadTarget {
        /// The directive's place in the list, from 1.
        number: usize,
        /// The directive as written, trimmed.
        directive: String,
        /// The part before `=`.
        target: String,
    },
}

/// The levels a directive may name, lowercase (they are matched in any case).
const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

impl LogFilter {
    /// The filter when `logging.filter` is not set.
    pub const DEFAULT: &'static str = "info";

    /// The pattern every filter matches (also the JSON Schema `pattern`). The
    /// levels are spelt letter by letter because JSON Schema regexes (ECMA 262)
    /// have no inline case-insensitive flag.
    pub const PATTERN: &'static str = concat!(
        r"^\s*(?:[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*=)?",
        r"(?:[Tt][Rr][Aa][Cc][Ee]|[Dd][Ee][Bb][Uu][Gg]|[Ii][Nn][Ff][Oo]|[Ww][Aa][Rr][Nn]|[Ee][Rr][Rr][Oo][Rr]|[Oo][Ff][Ff])\s*",
        r"(?:,\s*(?:[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*=)?",
        r"(?:[Tt][Rr][Aa][Cc][Ee]|[Dd][Ee][Bb][Uu][Gg]|[Ii][Nn][Ff][Oo]|[Ww][Aa][Rr][Nn]|[Ee][Rr][Rr][Oo][Rr]|[Oo][Ff][Ff])\s*)*$",
    );

    /// Checks the syntax of a filter; the text is kept as written.
    ///
    /// # Errors
    /// [`LogFilterError`] for the first directive that is empty, names no
    /// level, or has a target that is not a module path.
    pub fn parse(text: &str) -> Result<LogFilter, LogFilterError> {
        for (index, directive) in text.split(',').enumerate() {
            let number = index + 1;
            let directive = directive.trim();
            if directive.is_empty() {
                return Err(LogFilterError::EmptyDirective { number });
            }
            let (target, level) = match directive.split_once('=') {
                Some((target, level)) => (Some(target), level),
                None => (None, directive),
            };
            if let Some(target) = target
                && !is_module_path(target)
            {
                return Err(LogFilterError::BadTarget {
                    number,
                    directive: directive.to_owned(),
                    target: target.to_owned(),
                });
            }
            if !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level)) {
                return Err(LogFilterError::UnknownLevel {
                    number,
                    directive: directive.to_owned(),
                    level: level.to_owned(),
                });
            }
        }
        Ok(LogFilter(text.to_owned()))
    }

    /// The filter as written, for `EnvFilter::try_new` or the like.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `text` is `[A-Za-z0-9_]+` segments joined by `::`.
fn is_module_path(text: &str) -> bool {
    text.split("::")
        .all(|segment| !segment.is_empty() && segment.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

impl Default for LogFilter {
    fn default() -> Self {
        LogFilter(Self::DEFAULT.to_owned())
    }
}

impl TryFrom<String> for LogFilter {
    type Error = LogFilterError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        LogFilter::parse(&text)
    }
}

impl From<LogFilter> for String {
    fn from(filter: LogFilter) -> String {
        filter.0
    }
}

impl std::fmt::Display for LogFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for LogFilter {
    fn schema_name() -> Cow<'static, str> {
        "LogFilter".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": LogFilter::PATTERN,
            "description": "Comma-separated `LEVEL` or `TARGET=LEVEL` directives \
                (`info,coordinator=debug,sqlx=warn`); levels: trace, debug, info, warn, error, off."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &[&str] = &[
        "info",
        "INFO",
        "info,coordinator=debug,sqlx=warn",
        " info , coordinator::dispatch::worker=Trace ",
        "off",
        "h2=error,tower_http=warn",
        "0=debug",
    ];
    const BAD: &[&str] = &[
        "",
        " ",
        "info,",
        ",info",
        "info,,warn",
        "coordinator=loud",
        "loud",
        "coordinator",
        "coord-inator=info",
        "=info",
        "a::=info",
        "::a=info",
        "a:b=info",
        "coordinator=",
        "coordinator = debug",
        "a=b=info",
        "coordinator[span]=debug",
        "info\ncoordinator=debug",
    ];

    #[test]
    fn filters_are_level_or_target_level_directives() {
        for good in GOOD {
            assert_eq!(LogFilter::parse(good).map(|f| f.as_str().to_owned()), Ok((*good).to_owned()), "{good}");
        }
        for bad in BAD {
            assert!(LogFilter::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_error_names_the_directive_and_what_is_wrong() {
        let message = |text: &str| LogFilter::parse(text).err().map(|e| e.to_string());
        assert_eq!(message("info,"), Some("directive 2 is empty".to_owned()));
        assert_eq!(
            message("info, coordinator=loud"),
            Some("directive 2 (`coordinator=loud`): `loud` is not one of trace, debug, info, warn, error, off".into())
        );
        assert_eq!(
            message("coord-inator=info"),
            Some(
                "directive 1 (`coord-inator=info`): the target `coord-inator` is not a module path \
                 (letters, digits and `_`, in segments joined by `::`)"
                    .into()
            )
        );
    }

    #[test]
    fn the_schema_pattern_agrees_with_parse() {
        let schema = serde_json::json!({"type": "string", "pattern": LogFilter::PATTERN});
        let validator = match crate::json_schema::compile(&schema) {
            Ok(v) => v,
            Err(e) => panic!("the pattern does not compile: {e}"),
        };
        for text in GOOD.iter().chain(BAD) {
            let by_schema = crate::json_schema::violations(&validator, &serde_json::json!(text)).is_empty();
            assert_eq!(by_schema, LogFilter::parse(text).is_ok(), "{text:?}");
        }
    }

    #[test]
    fn serde_refuses_a_bad_filter_and_the_default_filter_is_info() {
        let bad: Result<Logging, _> = serde_json::from_value(serde_json::json!({"filter": "info,"}));
        assert!(bad.is_err());
        let logging = Logging::default();
        assert_eq!(logging.effective_filter().as_str(), "info");
        assert_eq!(logging.format, None);
    }
}

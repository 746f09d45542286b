//! The service's one logging layer: `tracing` events written by
//! `tracing-subscriber` to standard error, as readable lines on a terminal
//! and as one JSON object per line otherwise (`--log-format human|json`, or
//! `logging.format` in runtime.yaml), filtered like `RUST_LOG` (the variable
//! when set, else `logging.filter`, else `info`).
//!
//! Lines are formatted where they are logged and written by a thread of
//! their own (`tracing-appender`'s non-blocking writer): a write to standard
//! error that waits — a file system committing its journal, a slow pipe to
//! a collector — holds no request, decision or commit up. Nothing is dropped:
//! when [`QUEUED_LINES`] wait, the next line waits for room. [`flush`] writes
//! what is queued before the process exits; a process killed outright loses
//! the lines still queued (those of its last moment).
//!
//! JSON lines are flat: each event carries its own fields (`run_id`,
//! `workflow`, `revision`, `step`, `attempt`, `event`, `outcome` on every
//! line about a run), so a collector needs no span context to index them.
//! Nothing here decides what is logged; **invariant:** no caller passes an
//! input, a command, a product response, a token, a secret, a signature or a
//! payload key as a field or in a message.

use std::io::IsTerminal;
use std::sync::{Mutex, PoisonError};

use coordinator_core::model::runtime::{LogFormat, Logging};
use tracing::field::Field;
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::format::{Writer, debug_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The filter used when neither `RUST_LOG` nor runtime.yaml names one.
pub const DEFAULT_FILTER: &str = "info";

/// Where the filter in force comes from (named in an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterSource {
    /// The `RUST_LOG` environment variable.
    Environment,
    /// `logging.filter` in runtime.yaml.
    RuntimeFile,
    /// [`DEFAULT_FILTER`].
    Default,
}

/// How the service logs: the filter and the format in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// The filter directives.
    pub filter: String,
    /// Where they come from.
    pub source: FilterSource,
    /// The format.
    pub format: LogFormat,
}

impl LogSettings {
    /// The settings in force: the filter from `rust_log` (the environment's
    /// `RUST_LOG`, when set and not blank), else `file`'s, else
    /// [`DEFAULT_FILTER`]; the format from `flag`, else `file`'s, else human
    /// when standard error is a terminal and JSON otherwise.
    pub fn resolve(rust_log: Option<String>, flag: Option<LogFormat>, file: Option<&Logging>) -> LogSettings {
        let from_file = file.and_then(|l| l.filter.as_ref()).map(|f| f.as_str().to_owned());
        let (filter, source) = match (rust_log.filter(|v| !v.trim().is_empty()), from_file) {
            (Some(env), _) => (env, FilterSource::Environment),
            (None, Some(file)) => (file, FilterSource::RuntimeFile),
            (None, None) => (DEFAULT_FILTER.to_owned(), FilterSource::Default),
        };
        let terminal = if std::io::stderr().is_terminal() { LogFormat::Human } else { LogFormat::Json };
        let format = flag.or_else(|| file.and_then(|l| l.format)).unwrap_or(terminal);
        LogSettings { filter, source, format }
    }
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// The filter is not valid `RUST_LOG` syntax.
    #[error("{}: the log filter is not valid ({reason}); write e.g. `info,coordinator=debug`", source_name(*.origin))]
    Filter {
        /// Where it came from.
        origin: FilterSource,
        /// The parser's reason.
        reason: String,
    },
    /// A subscriber was installed already (only in a process that sets logging up twice).
    #[error("logging is set up already")]
    AlreadySet,
}

fn source_name(source: FilterSource) -> &'static str {
    match source {
        FilterSource::Environment => "RUST_LOG",
        FilterSource::RuntimeFile => "runtime.yaml `logging.filter`",
        FilterSource::Default => "the default filter",
    }
}

/// Lines formatted and waiting for the writing thread at most; a line
/// logged when this many wait waits for room (none is dropped).
pub const QUEUED_LINES: usize = 65_536;

/// The writing thread's guard, held from [`install`] to [`flush`].
static WRITER: Mutex<Option<WorkerGuard>> = Mutex::new(None);

/// Installs the process's subscriber (once per process: the binary's edge),
/// its lines written by a thread of its own (see the module doc).
///
/// # Errors
/// [`LoggingError`] for a filter that does not parse or a second installation.
pub fn install(settings: &LogSettings) -> Result<(), LoggingError> {
    let filter = EnvFilter::try_new(&settings.filter)
        .map_err(|e| LoggingError::Filter { origin: settings.source, reason: e.to_string() })?;
    let registry = tracing_subscriber::registry().with(filter);
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(QUEUED_LINES)
        .thread_name("coordinator-log")
        .finish(std::io::stderr());
    let installed = match settings.format {
        LogFormat::Human => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .fmt_fields(debug_fn(human_field).delimited(" "))
                    .with_writer(writer)
                    .with_target(false)
                    .with_ansi(std::io::stderr().is_terminal()),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_writer(writer),
            )
            .try_init(),
    };
    installed.map_err(|_| LoggingError::AlreadySet)?;
    *WRITER.lock().unwrap_or_else(PoisonError::into_inner) = Some(guard);
    Ok(())
}

/// Writes every line logged so far and stops the writing thread; lines
/// logged afterwards are not written. Call it last, before the process
/// exits (returning from `main` or `std::process::exit`).
pub fn flush() {
    let guard = WRITER.lock().unwrap_or_else(PoisonError::into_inner).take();
    drop(guard);
}

/// One field of a human line: plain words unquoted, a revision shortened to
/// `sha256:` and 12 digits (JSON lines and the API carry it whole).
fn human_field(writer: &mut Writer<'_>, field: &Field, value: &dyn std::fmt::Debug) -> std::fmt::Result {
    let text = format!("{value:?}");
    match field.name() {
        "message" => writer.write_str(&text),
        name => write!(writer, "{name}={}", human_value(name, &text)),
    }
}

fn human_value<'a>(name: &str, debug: &'a str) -> std::borrow::Cow<'a, str> {
    let plain = debug
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|t| !t.is_empty() && !t.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '='));
    match plain {
        Some(text) if name == "revision" && text.starts_with("sha256:") && text.len() > 19 => {
            format!("{}…", &text[..19]).into()
        }
        Some(text) => text.into(),
        None => debug.into(),
    }
}

#[cfg(test)]
mod tests {
    use coordinator_core::model::runtime::LogFilter;

    use super::*;

    fn file(filter: Option<&str>, format: Option<LogFormat>) -> Logging {
        Logging { filter: filter.and_then(|f| LogFilter::parse(f).ok()), format }
    }

    #[test]
    fn the_environment_wins_over_the_file_and_the_flag_over_both() {
        let logging = file(Some("warn"), Some(LogFormat::Human));
        let env = LogSettings::resolve(Some("debug".into()), Some(LogFormat::Json), Some(&logging));
        assert_eq!(
            (env.filter.as_str(), env.source, env.format),
            ("debug", FilterSource::Environment, LogFormat::Json)
        );
        let from_file = LogSettings::resolve(Some("  ".into()), None, Some(&logging));
        assert_eq!(
            (from_file.filter.as_str(), from_file.source, from_file.format),
            ("warn", FilterSource::RuntimeFile, LogFormat::Human)
        );
        let default = LogSettings::resolve(None, Some(LogFormat::Json), None);
        assert_eq!((default.filter.as_str(), default.source), (DEFAULT_FILTER, FilterSource::Default));
    }

    #[test]
    fn human_lines_show_plain_words_unquoted_and_revisions_short() {
        let revision = format!("{:?}", format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(human_value("revision", &revision), "sha256:abababababab…");
        assert_eq!(human_value("step", "\"send-notice\""), "send-notice");
        assert_eq!(human_value("error", "\"two words\""), "\"two words\"");
        assert_eq!(human_value("attempt", "3"), "3");
        assert_eq!(human_value("step", "\"\""), "\"\"");
    }

    #[test]
    fn a_bad_filter_names_where_it_came_from() {
        let settings = LogSettings {
            filter: "coordinator=[".to_owned(),
            source: FilterSource::Environment,
            format: LogFormat::Json,
        };
        let error = install(&settings).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.starts_with("RUST_LOG: the log filter is not valid"), "{error}");
    }
}

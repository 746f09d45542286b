//! `coordinatorctl`: the tool for Coordinator projects. Offline it inits,
//! checks, explains, draws, tests and packages a project; against a running
//! service it operates runs over the HTTP API (`status`, `inspect`, `list`,
//! `cancel`, `retry-same`, `reconcile`, `batch`, `restore-hold`, `activate`,
//! `audit verify`).
//!
//! Owns argument parsing, reading project files from disk, the HTTP client
//! ([`client`]), and printing (human or JSON). It decides nothing about projects
//! or runs itself: every proof and value comes from `coordinator-core`, every
//! operating decision from the service.
//!
//! Exit codes (every command): 0 accepted, 1 refused (the input is wrong),
//! 2 usage error, 3 a needed resource is unavailable (see [`operate`] for how
//! the service's answers map to them).

mod client;
mod cmd_activate;
mod cmd_audit;
mod cmd_batch;
mod cmd_check;
mod cmd_connections;
mod cmd_explain;
mod cmd_graph;
mod cmd_hold;
mod cmd_init;
mod cmd_inspect;
mod cmd_package;
mod cmd_runs;
mod cmd_schedules;
mod cmd_test;
mod environment;
mod explain;
mod explain_schedules;
mod operate;
mod project_dir;
mod render;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::PossibleValuesParser;
use clap::{Parser, Subcommand, ValueEnum};
use coordinator_core::model::run::RunState;

use client::ServiceArgs;
use cmd_hold::HoldAction;
use cmd_runs::{ListArgs, Operator};

/// Command-line interface.
#[derive(Parser)]
#[command(
    name = "coordinatorctl",
    version,
    about = "Check, explain, draw, test and package Coordinator projects (offline); operate a running service."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a starter project that checks clean.
    Init {
        /// The directory to create (must not exist).
        #[arg(long)]
        directory: PathBuf,
        /// The workflow id of the new project (default: the directory name).
        #[arg(long)]
        workflow: Option<String>,
    },
    /// Prove a project offline and print its revision.
    Check {
        /// The project directory.
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Refuse the project when there is any warning.
        #[arg(long)]
        deny_warnings: bool,
        /// Also check this deployment's runtime.yaml, and the project's connections against it (offline:
        /// secrets are not looked at).
        #[arg(long, value_name = "FILE")]
        runtime: Option<PathBuf>,
        /// With --runtime: require every secret reference to resolve here (env: variables set, file: files
        /// readable). No secret is ever printed.
        #[arg(long, requires = "runtime")]
        environment: bool,
    },
    /// Describe each call: product, effect, recovery, receipt, completions, refusals, routes.
    Explain {
        /// The project directory.
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Draw the step graph with labelled routes.
    Graph {
        /// The project directory.
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// Drawing format.
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
        /// Write to this file instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Run the project's scenarios (scenarios.yaml) on a virtual clock.
    Test {
        /// The project directory.
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Freeze a checked project into an immutable package.
    Package {
        /// The project directory.
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// The package file to write.
        #[arg(long)]
        output: PathBuf,
        /// Output format of the summary.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Show a run: state, outcome, published output, failure (GET /v1/runs/{id}).
    Status {
        /// The run id.
        run: String,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Show a run's steps, effects, waits and the recovery actions that apply now.
    Inspect {
        /// The run id.
        run: String,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// List runs, oldest first.
    List {
        /// Only runs of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// Only runs in this state.
        #[arg(long, value_parser = PossibleValuesParser::new(RunState::ALL.map(RunState::as_str)))]
        state: Option<String>,
        /// Runs per page (1-500; the service's default is 50, with --all 500).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=500))]
        limit: Option<u32>,
        /// Start after this cursor (the `next` of an earlier page).
        #[arg(long)]
        cursor: Option<String>,
        /// Follow the cursor to the last page.
        #[arg(long)]
        all: bool,
        /// Only runs whose search key NAME is exactly VALUE (`NAME=VALUE`; repeat for several keys).
        #[arg(long = "key", value_name = "NAME=VALUE", value_parser = search_key)]
        keys: Vec<(String, String)>,
        /// Only runs admitted with this idempotency key.
        #[arg(long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Cancel a run (its cancel route, or settling an unknown effect).
    Cancel {
        /// The run id.
        run: String,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Resend a step's saved command with its original idempotency key (settles an unknown effect).
    RetrySame {
        /// The run id.
        run: String,
        /// The call step whose effect is unknown.
        step: String,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Look up the receipt of a step's original key (settles an unknown effect).
    Reconcile {
        /// The run id.
        run: String,
        /// The call step whose effect is unknown.
        step: String,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Show, place or release the deployment's restore hold (no run dispatches while it is placed).
    RestoreHold {
        /// What to do.
        #[arg(value_enum, default_value_t = HoldAction::Show)]
        action: HoldAction,
        /// Why (place or release): kept with the hold and journaled with the change.
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// The deployment's connections: list them, pause one (nothing is sent to it), resume it.
    Connections {
        #[command(subcommand)]
        action: Option<ConnectionsCommand>,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// The schedules of the active revisions: list them, pause one (it fires nothing), resume it.
    Schedules {
        #[command(subcommand)]
        action: Option<SchedulesCommand>,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Durable batches: one operator command over every run a filter matches, worked by the service.
    Batch {
        #[command(subcommand)]
        action: BatchCommand,
    },
    /// The service's hash-chained audit journal.
    Audit {
        #[command(subcommand)]
        action: AuditCommand,
    },
    /// Activate a package written by `coordinatorctl package` (POST /v1/packages).
    Activate {
        /// The package file.
        #[arg(long, value_name = "FILE")]
        package: PathBuf,
        /// The digest to pin (sha256: and 64 hex digits); default: the digest of the file.
        #[arg(long)]
        digest: Option<String>,
        #[command(flatten)]
        service: ServiceArgs,
    },
}

/// `coordinatorctl connections …`.
#[derive(Subcommand)]
enum ConnectionsCommand {
    /// Every connection, how it is served, the workflows using it, and whether it is paused (the default).
    List,
    /// Pause a connection: no process sends it anything until it is resumed (journaled with the reason).
    Pause {
        /// The connection's name in runtime.yaml.
        name: String,
        /// Why (1-500 characters; journaled).
        #[arg(long)]
        reason: String,
    },
    /// Resume a paused connection: its due work is sent again at once (journaled with the reason).
    Resume {
        /// The connection's name in runtime.yaml.
        name: String,
        /// Why (1-500 characters; journaled).
        #[arg(long)]
        reason: String,
    },
}

/// `coordinatorctl schedules …`.
#[derive(Subcommand)]
enum SchedulesCommand {
    /// Every schedule, its calendar, next and last firing, and whether it is paused (the default).
    List,
    /// Pause a schedule: no process fires it until it is resumed (journaled with the reason).
    Pause {
        /// The workflow.
        workflow: String,
        /// The schedule's id in workflow.yaml.
        id: String,
        /// Why (1-500 characters; journaled).
        #[arg(long)]
        reason: String,
    },
    /// Resume a paused schedule from its next instant; the ones it missed are not fired (journaled).
    Resume {
        /// The workflow.
        workflow: String,
        /// The schedule's id in workflow.yaml.
        id: String,
        /// Why (1-500 characters; journaled).
        #[arg(long)]
        reason: String,
    },
}

/// `coordinatorctl batch …`.
#[derive(Subcommand)]
enum BatchCommand {
    /// Start a batch (or, with --dry-run, see what it would do to each run; nothing is written).
    Start(Box<BatchStart>),
    /// A batch's progress: matched, done, refused by code, remaining.
    Status {
        /// The batch id.
        id: String,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// A batch's runs with what it did to each (--outcome refused: the runs left to look at by hand).
    Runs {
        /// The batch id.
        id: String,
        /// Only the runs with this outcome.
        #[arg(long, value_parser = PossibleValuesParser::new(["done", "refused", "pending"]))]
        outcome: Option<String>,
        /// The page after this run id (the `next` a page ends with).
        #[arg(long)]
        after: Option<String>,
        /// The most runs on the page (1 to 500).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=500))]
        limit: u32,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Stop a batch: runs not acted on yet stay as they are.
    Cancel {
        /// The batch id.
        id: String,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// The newest batches.
    List {
        #[command(flatten)]
        service: ServiceArgs,
    },
}

/// `coordinatorctl batch start …`.
#[derive(clap::Args)]
struct BatchStart {
    /// What to do to each run.
    #[arg(long, value_parser = PossibleValuesParser::new(["reconcile", "retry-same", "cancel"]))]
    action: String,
    /// Why (1-500 characters; journaled with each command).
    #[arg(long)]
    reason: String,
    /// Only runs of this workflow (without it, the caller must operate every workflow).
    #[arg(long)]
    workflow: Option<String>,
    /// Only runs in this state.
    #[arg(long, value_parser = PossibleValuesParser::new(RunState::ALL.map(RunState::as_str)))]
    state: Option<String>,
    /// Only runs in attention for this reason.
    #[arg(long = "attention-reason", value_parser = PossibleValuesParser::new(["unknown-effect", "restore-hold"]))]
    attention_reason: Option<String>,
    /// Only runs whose effect is unknown at this step.
    #[arg(long)]
    step: Option<String>,
    /// Only runs pinned to this revision.
    #[arg(long)]
    revision: Option<String>,
    /// Only runs admitted at or after this instant (RFC 3339).
    #[arg(long)]
    from: Option<String>,
    /// Only runs admitted before this instant (RFC 3339).
    #[arg(long)]
    to: Option<String>,
    /// Only runs whose search key NAME is exactly VALUE (repeat for several keys).
    #[arg(long = "key", value_name = "NAME=VALUE", value_parser = search_key)]
    keys: Vec<(String, String)>,
    /// See what it would do; write nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    service: ServiceArgs,
}

/// `coordinatorctl audit …`.
#[derive(Subcommand)]
enum AuditCommand {
    /// Read the whole journal (GET /v1/audit) and recompute its hash chain: exit 0 intact, 1 tampered
    /// with (the first broken position is named), 3 unavailable.
    Verify {
        #[command(flatten)]
        service: ServiceArgs,
    },
}

/// Human or machine output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people: compiler-style diagnostics, colour on a terminal.
    Human,
    /// JSON for scripts: the report of docs/reference/checker.md; for the operating commands, the service's answer with
    /// `ok` and `command`.
    Json,
}

/// Graph drawing formats.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Mermaid flowchart text.
    Mermaid,
    /// Graphviz DOT text.
    Dot,
    /// A rendered SVG image.
    Svg,
}

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Accepted.
    Ok = 0,
    /// Refused: the input is wrong.
    Refused = 1,
    /// A needed resource is unavailable (a file cannot be read or written, the
    /// service cannot be reached or does not accept the credential).
    Unavailable = 3,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let exit = match cli.command {
        Command::Init { directory, workflow } => cmd_init::run(&directory, workflow.as_deref()),
        Command::Check { project, format, deny_warnings, runtime, environment } => {
            let runtime = runtime.as_deref().map(|file| cmd_check::RuntimeArgs { file, environment });
            cmd_check::run(&project, runtime.as_ref(), format, deny_warnings)
        }
        Command::Explain { project, format } => cmd_explain::run(&project, format),
        Command::Graph { project, format, output } => cmd_graph::run(&project, format, output.as_deref()),
        Command::Package { project, output, format } => cmd_package::run(&project, &output, format),
        Command::Test { project, format } => cmd_test::run(&project, format),
        Command::Status { run, service } => cmd_runs::status(&service, &run),
        Command::Inspect { run, service } => cmd_inspect::run(&service, &run),
        Command::List { workflow, state, limit, cursor, all, keys, idempotency_key, service } => {
            cmd_runs::list(&service, &ListArgs { workflow, state, limit, cursor, all, keys, idempotency_key })
        }
        Command::Cancel { run, service } => cmd_runs::command(&service, &run, Operator::Cancel),
        Command::RetrySame { run, step, service } => cmd_runs::command(&service, &run, Operator::RetrySame(&step)),
        Command::Reconcile { run, step, service } => cmd_runs::command(&service, &run, Operator::Reconcile(&step)),
        Command::RestoreHold { action, reason, service } => cmd_hold::run(&service, action, reason.as_deref()),
        Command::Schedules { action, service } => match action {
            None | Some(SchedulesCommand::List) => cmd_schedules::list(&service),
            Some(SchedulesCommand::Pause { workflow, id, reason }) => {
                cmd_schedules::steer(&service, &workflow, &id, cmd_connections::Steer::Pause, &reason)
            }
            Some(SchedulesCommand::Resume { workflow, id, reason }) => {
                cmd_schedules::steer(&service, &workflow, &id, cmd_connections::Steer::Resume, &reason)
            }
        },
        Command::Connections { action, service } => match action {
            None | Some(ConnectionsCommand::List) => cmd_connections::list(&service),
            Some(ConnectionsCommand::Pause { name, reason }) => {
                cmd_connections::steer(&service, &name, cmd_connections::Steer::Pause, &reason)
            }
            Some(ConnectionsCommand::Resume { name, reason }) => {
                cmd_connections::steer(&service, &name, cmd_connections::Steer::Resume, &reason)
            }
        },
        Command::Batch { action } => match action {
            BatchCommand::Start(start) => {
                let BatchStart {
                    action,
                    reason,
                    workflow,
                    state,
                    attention_reason,
                    step,
                    revision,
                    from,
                    to,
                    keys,
                    dry_run,
                    service,
                } = *start;
                let filter = vec![
                    ("workflow", workflow),
                    ("state", state),
                    ("reason", attention_reason),
                    ("step", step),
                    ("revision", revision),
                    ("from", from),
                    ("to", to),
                ];
                cmd_batch::start(&service, &cmd_batch::StartArgs { action, filter, keys, reason, dry_run })
            }
            BatchCommand::Status { id, service } => cmd_batch::status(&service, &id),
            BatchCommand::Runs { id, outcome, after, limit, service } => {
                cmd_batch::runs(&service, &id, outcome.as_deref(), after.as_deref(), limit)
            }
            BatchCommand::Cancel { id, service } => cmd_batch::cancel(&service, &id),
            BatchCommand::List { service } => cmd_batch::list(&service),
        },
        Command::Audit { action: AuditCommand::Verify { service } } => cmd_audit::verify(&service),
        Command::Activate { package, digest, service } => cmd_activate::run(&service, &package, digest.as_deref()),
    };
    exit.into()
}

/// A `--key NAME=VALUE` search key filter.
fn search_key(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() && !value.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => {
            Err("write NAME=VALUE, NAME a search key the workflow declares (e.g. applicationId=0199c8a0-…)".to_owned())
        }
    }
}

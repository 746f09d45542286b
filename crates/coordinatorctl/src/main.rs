//! `coordinatorctl`: the offline tool for Coordinator projects.
//!
//! Owns argument parsing, reading project files from disk, and printing
//! (human or JSON). It decides nothing about projects itself: every proof and
//! every computed value comes from `coordinator-core`.
//!
//! Exit codes (every command): 0 accepted, 1 refused (the input is wrong),
//! 2 usage error, 3 a needed resource is unavailable.

mod cmd_check;
mod cmd_explain;
mod cmd_graph;
mod cmd_init;
mod cmd_package;
mod cmd_test;
mod environment;
mod explain;
mod graph;
mod project_dir;
mod render;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Command-line interface.
#[derive(Parser)]
#[command(name = "coordinatorctl", version, about = "Check, explain, draw and package Coordinator projects (offline).")]
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
}

/// Human or machine output.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people: compiler-style diagnostics, colour on a terminal.
    Human,
    /// The JSON report of SPEC §2.3.
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
    /// A needed resource is unavailable (a file cannot be read or written).
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
    };
    exit.into()
}

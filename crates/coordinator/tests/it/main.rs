//! The service crate's integration tests, one test binary (`cargo test -p
//! coordinator --test it`; one module: `-- access::`). Each module opens with
//! what it proves; `support` is what they share: the dev stack in this
//! process, deployments set up as an operator would, `coordinator` child
//! processes, databases, Redis and OTLP receivers of a test's own.
//!
//! The tests run as threads of this one process, so none may change what
//! the process shares: no environment variable is set, no subscriber or
//! recorder is installed (each engine records its metrics locally), no
//! working directory is changed, and every listener takes a port of its own
//! (`127.0.0.1:0`, or `support::deploy::free_port` for a child process).
//! Child processes get their environment on their command line.

mod support;

mod access;
mod admission;
mod api_errors;
mod at_rest;
mod audit;
mod batches;
mod batches_kill;
mod chaos;
mod connections;
mod console;
mod console_browser;
mod contract;
mod crash;
mod credentials;
mod dev_restart;
mod drain;
mod end_to_end;
mod events;
mod faults;
mod fence;
mod inspection;
mod listing;
mod metrics;
mod oidc;
mod openapi;
mod operator;
mod pace;
mod packages;
mod parity;
mod pause_two_processes;
mod payload_keys;
mod permits;
mod probes;
mod redaction;
mod redis_hints;
mod redispatch;
mod remote_api;
mod remote_pace;
mod remote_workers;
mod restore_drill;
mod schedules;
mod schedules_two_processes;
mod search_keys;
mod serve;
mod traces;
mod transition_log;
mod two_processes;

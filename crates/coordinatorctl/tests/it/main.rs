//! The `coordinatorctl` binary's integration tests, one test binary (`cargo
//! test -p coordinatorctl --test it`; one module: `-- cli::`): each module
//! runs the real binary and opens with what it proves; `support` is what
//! they share (running it, project copies, the in-process `coordinator dev`
//! stack the operating commands are run against).

mod support;

mod audit;
mod cli;
mod operate;
mod runtime_check;
mod test_command;

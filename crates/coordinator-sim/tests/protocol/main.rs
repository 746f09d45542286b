//! The simulators against a real server on `127.0.0.1:0`, driven over HTTP with
//! reqwest exactly as the coordinator's adapters will drive them.

mod auth;
mod casework;
mod catalog;
mod faults;
mod harness;
mod idempotency;
mod load;
mod receipts;
mod refusals;

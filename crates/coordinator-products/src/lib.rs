//! The client side of the product protocol (docs/reference/products.md): what
//! the coordinator's dispatcher calls for each outbox row.
//! [`ProductClient::call`] runs one attempt of an operation,
//! [`ProductClient::receipt`] looks up the result of an original idempotency
//! key, [`ProductClient::observe`] looks at a completion. Each acquires a fresh
//! credential ([`TokenSource`]) and returns the classified answer the state
//! machine consumes ([`coordinator_core::machine::event`]).
//!
//! **Architecture invariant:** a lost response after sending is *uncertain*, never
//! *retryable*. Only a failure before any byte of the request left (no credential,
//! connection refused, DNS, TLS, connect timeout) or a status the product chose
//! (429, 503) is a definite "not done"; classifying a lost answer as retryable
//! would send a mutation twice.
//!
//! Every request can carry the W3C `traceparent` of the run's trace
//! ([`Traceparent`], the `*_traced` variants).
//!
//! This crate owns no state and decides nothing about runs. It never logs; secrets
//! ([`Secret`]) and payloads never appear in a `Debug` or `Display` rendering of
//! anything it returns ([`Reason`] carries kinds and statuses only).
//!
//! Modules (private; their items are re-exported here):
//! - [`client`]: [`ProductClient`], the three requests of the protocol, each
//!   with a fresh token and a classified answer.
//! - [`classify`]: the classification rules as pure functions: what a status
//!   says, how the protocol's bodies parse, why an answer is what it is.
//! - [`body`]: reading a response body whole within a size limit; a body cut
//!   short is an error, never a short success.
//! - [`connection`]: [`Connection`], where one product lives and how a fresh
//!   credential for it is acquired ([`TokenSource`]).
//! - [`endpoint`]: [`HttpUrl`], a checked base URL or token endpoint and the
//!   request URLs built from it.
//! - [`token`]: acquiring the bearer token for one attempt (OAuth 2.0 client
//!   credentials), never cached, stored or logged.
//! - [`assertion`]: `private_key_jwt` client authentication, a fresh signed JWT
//!   for every token request.
//! - [`secret`]: [`Secret`], a credential that never reaches a `Debug` or
//!   `Display` rendering.
//! - [`traceparent`]: the W3C `traceparent` header ([`Traceparent`]) written
//!   on every product request.

mod assertion;
mod body;
mod classify;
mod client;
mod connection;
mod endpoint;
mod secret;
mod token;
mod traceparent;

pub use assertion::{ASSERTION_TYPE, AssertionKey, SigningFailed, UnusableKey};
pub use classify::{AnswerKind, BodyFailure, Explained, Reason, UNSENDABLE, retry_after_ms};
pub use client::{ProductClient, Sending};
pub use connection::{Connection, TokenSource};
pub use endpoint::{HttpUrl, UrlError};
pub use secret::Secret;
pub use token::TokenError;
pub use traceparent::Traceparent;

//! The product protocol's client against small test products: every row of the
//! classification (docs/reference/runs.md#calls-and-prepared-commands), fresh tokens, headers, receipts, observations, and
//! that no secret, token or payload leaks into anything returned.

mod call;
mod lookups;
mod secrets;
mod support;
mod token;
mod trace;

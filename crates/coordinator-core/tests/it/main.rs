//! The pure core's integration tests, one test binary (`cargo test -p
//! coordinator-core --test it`; one module: `-- corpus::`). Each module
//! opens with what it proves; `support` is what they share: projects read
//! into memory, a file decoded with one of the crate's decoders, the files
//! of `tests/fixtures/`. The data stay beside this binary's sources:
//! `tests/corpus/` (one project per diagnostic code), `tests/fixtures/`
//! (sample runtime, worker and scenarios files) and `tests/properties/mix/`
//! (a project the properties drive).

mod support;

mod corpus;
mod dispatch_decode;
mod editor_schemas;
mod examples;
mod machine;
mod properties;
mod remote_check;
mod remote_decode;
mod revision;
mod runtime_decode;
mod scenarios_decode;

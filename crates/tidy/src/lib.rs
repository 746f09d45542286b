//! Repository rules, checked by the tests in `tests/`. The crate has no code of
//! its own: it exists so that `cargo test --workspace` enforces the rules.

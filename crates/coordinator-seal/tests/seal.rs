//! Sealing: round trips, fresh nonces, bindings, tampering, rotation, and no plaintext at rest.

use coordinator_seal::{Binding, Keyring, Purpose, SealError};

fn key(byte: u8) -> Vec<u8> {
    vec![byte; 32]
}

fn ring() -> Keyring {
    match Keyring::new("k1", [("k1".to_owned(), key(1))]) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

const SECRET: &[u8] = br#"{"recipient":"person-4711","text":"a confidential decision"}"#;

fn binding() -> Binding<'static> {
    Binding { run: "run-1", purpose: Purpose::Command, step: Some("send-notice") }
}

#[test]
fn a_sealed_value_opens_for_its_binding_and_shows_no_plaintext() {
    let ring = ring();
    let sealed = ring.seal(binding(), SECRET).unwrap_or_default();
    assert!(!sealed.windows(9).any(|w| w == b"person-47"), "no plaintext in the sealed bytes");
    assert_eq!(ring.open(binding(), &sealed).ok().as_deref(), Some(SECRET));
    assert_eq!(Keyring::key_of(&sealed), Ok("k1"));
}

#[test]
fn every_seal_uses_a_fresh_nonce() {
    let ring = ring();
    let a = ring.seal(binding(), SECRET).unwrap_or_default();
    let b = ring.seal(binding(), SECRET).unwrap_or_default();
    assert_ne!(a, b);
    assert_ne!(a[4..16], b[4..16], "nonces differ");
}

#[test]
fn a_value_does_not_open_for_another_run_purpose_or_step() {
    let ring = ring();
    let sealed = ring.seal(binding(), SECRET).unwrap_or_default();
    let others = [
        Binding { run: "run-2", ..binding() },
        Binding { purpose: Purpose::Response, ..binding() },
        Binding { step: Some("request-review"), ..binding() },
        Binding { step: None, ..binding() },
    ];
    for other in others {
        assert_eq!(ring.open(other, &sealed), Err(SealError::Tampered), "{other:?}");
    }
}

#[test]
fn an_altered_value_does_not_open() {
    let ring = ring();
    let sealed = ring.seal(binding(), SECRET).unwrap_or_default();
    for i in 4..sealed.len() {
        let mut bad = sealed.clone();
        bad[i] ^= 0x01;
        assert!(ring.open(binding(), &bad).is_err(), "byte {i} altered");
    }
    assert_eq!(ring.open(binding(), &sealed[..10]), Err(SealError::Malformed));
}

#[test]
fn rotated_keys_keep_old_values_open_and_unknown_keys_are_named() {
    let old = ring();
    let sealed = old.seal(binding(), SECRET).unwrap_or_default();
    let rotated = match Keyring::new("k2", [("k1".to_owned(), key(1)), ("k2".to_owned(), key(2))]) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(rotated.open(binding(), &sealed).ok().as_deref(), Some(SECRET));
    let fresh = rotated.seal(binding(), SECRET).unwrap_or_default();
    assert_eq!(Keyring::key_of(&fresh), Ok("k2"));
    assert_eq!(old.open(binding(), &fresh), Err(SealError::UnknownKey("k2".into())));
}

#[test]
fn bad_keys_are_refused_without_showing_them() {
    let short = Keyring::new("k1", [("k1".to_owned(), vec![7; 16])]);
    assert_eq!(short.err(), Some(SealError::KeyLength { id: "k1".into(), len: 16 }));
    let missing = Keyring::new("k9", [("k1".to_owned(), key(1))]);
    assert_eq!(missing.err(), Some(SealError::NoActiveKey("k9".into())));
    let debug = format!("{:?}", ring());
    assert!(!debug.contains("[1, 1"), "{debug}");
}

#[test]
fn derived_keys_follow_the_active_key_and_the_purpose() {
    let a = ring();
    let same = ring();
    assert_eq!(a.derive("console-session.v1"), same.derive("console-session.v1"), "every process derives the same");
    assert_ne!(a.derive("console-session.v1"), a.derive("console-csrf.v1"), "one key per purpose");
    let rotated =
        Keyring::new("k2", [("k1".to_owned(), key(1)), ("k2".to_owned(), key(2))]).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(a.derive("console-session.v1"), rotated.derive("console-session.v1"), "rotation changes it");
    assert!(!a.derive("x").iter().all(|b| *b == 0));
}

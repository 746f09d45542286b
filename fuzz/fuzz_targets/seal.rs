//! The sealed-payload opener (`coordinator_seal::Keyring::open`, `key_of`).
//! Bytes that were not sealed never open, whatever they are: `key_of`
//! names the id the format says, and `open` refuses them as malformed, under
//! an unknown key, or tampered, consistently with it. A value that was
//! sealed opens to its plaintext for its own binding only, and changing any
//! one of its bytes makes it refuse to open.
#![no_main]

use std::sync::LazyLock;

use coordinator_seal::{Binding, Keyring, Purpose, SealError};
use libfuzzer_sys::fuzz_target;

static KEYRING: LazyLock<Keyring> =
    LazyLock::new(|| Keyring::new("k1", [("k1".to_owned(), vec![7; 32]), ("k2".to_owned(), vec![9; 32])]).unwrap());

const PURPOSES: [Purpose; 8] = [
    Purpose::Definition,
    Purpose::Input,
    Purpose::Command,
    Purpose::Response,
    Purpose::Completion,
    Purpose::Output,
    Purpose::Snapshot,
    Purpose::Package,
];

fn binding(selector: u8) -> Binding<'static> {
    let step = [None, Some("read"), Some("send")][usize::from(selector / 8) % 3];
    Binding { run: "0199c8a0-0000-7000-8000-000000000001", purpose: PURPOSES[usize::from(selector) % 8], step }
}

fuzz_target!(|data: &[u8]| {
    let [mode, selector, rest @ ..] = data else { return };
    if mode % 2 == 0 { foreign(binding(*selector), rest) } else { sealed(*selector, rest) }
});

/// Bytes nobody sealed.
fn foreign(binding: Binding<'_>, bytes: &[u8]) {
    let opened = KEYRING.open(binding, bytes);
    assert!(opened.is_err(), "bytes nobody sealed opened");
    match Keyring::key_of(bytes) {
        Ok(id) => {
            let len = usize::from(bytes[1]);
            assert_eq!(bytes[0], 1, "a value of another version has a key id");
            assert_eq!(id.as_bytes(), &bytes[2..2 + len]);
            assert!(bytes.len() >= 2 + len + 12 + 16, "a value too short for a nonce and a tag has a key id");
            let expected = if KEYRING.holds(id) { SealError::Tampered } else { SealError::UnknownKey(id.to_owned()) };
            assert_eq!(opened, Err(expected));
        }
        Err(e) => {
            assert_eq!(e, SealError::Malformed);
            assert_eq!(opened, Err(SealError::Malformed));
        }
    }
}

/// A value sealed here: the plaintext is the rest of the input after two
/// bytes choosing which byte to change.
fn sealed(selector: u8, data: &[u8]) {
    let [at_low, at_high, flip, plaintext @ ..] = data else { return };
    let binding = binding(selector);
    let sealed = KEYRING.seal(binding, plaintext).unwrap();
    assert_eq!(Keyring::key_of(&sealed), Ok("k1"));
    assert_eq!(KEYRING.open(binding, &sealed).as_deref(), Ok(plaintext));
    let other = self::binding(selector.wrapping_add(1 + flip % 23));
    if other != binding {
        assert_eq!(KEYRING.open(other, &sealed), Err(SealError::Tampered), "opened under another binding");
    }
    let mut changed = sealed.clone();
    let at = usize::from(u16::from_le_bytes([*at_low, *at_high])) % changed.len();
    changed[at] ^= (*flip).max(1);
    assert!(KEYRING.open(binding, &changed).is_err(), "a changed byte at {at} still opens");
    changed.truncate(at);
    assert!(KEYRING.open(binding, &changed).is_err(), "a value cut at {at} still opens");
}

//! Sealing protected payloads at rest
//! (docs/reference/protection.md#payloads-sealed-at-rest).
//!
//! Owns AES-256-GCM sealing of run definitions, inputs, prepared commands,
//! product responses and completion values, and of stored packages: a fresh random 96-bit nonce per
//! seal, the key's id stored beside the ciphertext (so keys can be rotated:
//! new seals use the active key, old ones open with the key they name), and
//! associated data that binds each ciphertext to its run, its purpose and its
//! step, so a sealed value copied to another row does not open. It does not
//! read keys from anywhere: the caller resolves the deployment's key
//! references and hands the bytes in.
//!
//! Sealed format (version 1): `0x01`, key-id length (1 byte), key id (UTF-8),
//! nonce (12 bytes), ciphertext with its 16-byte tag.

use std::collections::BTreeMap;
use std::fmt;

use aes_gcm::aead::{Aead, Generate, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;

/// What a sealed value is, bound into its associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The run's definition snapshot.
    Definition,
    /// The run input.
    Input,
    /// A call's prepared command.
    Command,
    /// A product's response (an accepted output).
    Response,
    /// A completion value.
    Completion,
    /// The output a finished run publishes.
    Output,
    /// A run's whole state snapshot (it carries the input, commands, outputs and values above).
    Snapshot,
    /// What a run's snapshot changed since its base (a [`Purpose::Snapshot`]
    /// sealed earlier): the same content, written with every decision.
    SnapshotDelta,
    /// A stored package (a workflow's definition and function source); its
    /// binding's `run` is the package's revision.
    Package,
}

impl Purpose {
    fn as_str(self) -> &'static str {
        match self {
            Purpose::Definition => "definition",
            Purpose::Input => "input",
            Purpose::Command => "command",
            Purpose::Response => "response",
            Purpose::Completion => "completion",
            Purpose::Output => "output",
            Purpose::Snapshot => "snapshot",
            Purpose::SnapshotDelta => "snapshot-delta",
            Purpose::Package => "package",
        }
    }
}

/// Where a sealed value belongs: the associated data of its seal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The run.
    pub run: &'a str,
    /// What the value is.
    pub purpose: Purpose,
    /// The step, for per-step values.
    pub step: Option<&'a str>,
}

impl Binding<'_> {
    fn associated_data(&self) -> Vec<u8> {
        // Lengths first, so no two bindings share an encoding.
        let step = self.step.unwrap_or("");
        format!("coordinator/seal/v1|{}:{}|{}|{}:{}", self.run.len(), self.run, self.purpose.as_str(), step.len(), step)
            .into_bytes()
    }
}

/// Why sealing or opening failed. Never contains key material or plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// A key is not 32 bytes.
    #[error("payload key `{id}` must be 32 bytes, not {len}")]
    KeyLength {
        /// The key id.
        id: String,
        /// Its length.
        len: usize,
    },
    /// A key id is empty or longer than 255 bytes.
    #[error("payload key id `{0}` must be 1 to 255 bytes")]
    KeyId(String),
    /// The active key id names no key.
    #[error("the active payload key `{0}` is not among the keys")]
    NoActiveKey(String),
    /// The sealed value names a key the keyring does not have.
    #[error("the value was sealed with key `{0}`, which is not configured")]
    UnknownKey(String),
    /// The bytes are not a sealed value of a known version.
    #[error("not a sealed value")]
    Malformed,
    /// Authentication failed: the value was changed, or belongs to another run, purpose or step.
    #[error("the sealed value does not open: it was altered or belongs elsewhere")]
    Tampered,
    /// Encryption failed (only for absurdly large payloads).
    #[error("the value could not be sealed")]
    Seal,
}

/// The deployment's payload keys.
pub struct Keyring {
    active: String,
    keys: BTreeMap<String, Aes256Gcm>,
    /// The active key's bytes, only ever used as an HMAC key by [`Keyring::derive`].
    derivation: Vec<u8>,
    /// Every other key's bytes, likewise only for [`Keyring::derive_each`].
    others: Vec<Vec<u8>>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring").field("active", &self.active).field("keys", &self.keys.keys()).finish()
    }
}

impl Keyring {
    /// A keyring from key ids and their 32-byte keys, sealing with `active`.
    ///
    /// # Errors
    /// [`SealError`] for a key of the wrong length, a bad id, or an active id with no key.
    pub fn new(active: &str, keys: impl IntoIterator<Item = (String, Vec<u8>)>) -> Result<Keyring, SealError> {
        let mut ring = BTreeMap::new();
        let mut derivation = None;
        let mut others = Vec::new();
        for (id, bytes) in keys {
            if id == active {
                derivation = Some(bytes.clone());
            } else {
                others.push(bytes.clone());
            }
            if id.is_empty() || id.len() > 255 {
                return Err(SealError::KeyId(id));
            }
            let cipher = Aes256Gcm::new_from_slice(&bytes)
                .map_err(|_| SealError::KeyLength { id: id.clone(), len: bytes.len() })?;
            ring.insert(id, cipher);
        }
        let Some(derivation) = derivation.filter(|_| ring.contains_key(active)) else {
            return Err(SealError::NoActiveKey(active.to_owned()));
        };
        Ok(Keyring { active: active.to_owned(), keys: ring, derivation, others })
    }

    /// The id of the key new seals use.
    pub fn active(&self) -> &str {
        &self.active
    }

    /// Seals `plaintext` for `binding` with the active key and a fresh nonce.
    ///
    /// # Errors
    /// [`SealError::Seal`] if encryption fails.
    pub fn seal(&self, binding: Binding<'_>, plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let cipher = self.keys.get(&self.active).ok_or_else(|| SealError::NoActiveKey(self.active.clone()))?;
        let nonce = Nonce::generate();
        let aad = binding.associated_data();
        let ciphertext = cipher.encrypt(&nonce, Payload { msg: plaintext, aad: &aad }).map_err(|_| SealError::Seal)?;
        let id = self.active.as_bytes();
        let mut out = Vec::with_capacity(2 + id.len() + NONCE_LEN + ciphertext.len());
        out.push(VERSION);
        out.push(u8::try_from(id.len()).map_err(|_| SealError::KeyId(self.active.clone()))?);
        out.extend_from_slice(id);
        out.extend_from_slice(nonce.as_slice());
        out.extend_from_slice(&ciphertext);
        Ok(out)
    }

    /// Opens a sealed value for `binding`.
    ///
    /// # Errors
    /// [`SealError::Malformed`], [`SealError::UnknownKey`] or [`SealError::Tampered`].
    pub fn open(&self, binding: Binding<'_>, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let (id, nonce, ciphertext) = parts(sealed)?;
        let cipher = self.keys.get(id).ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let nonce = Nonce::try_from(nonce).map_err(|_| SealError::Malformed)?;
        let aad = binding.associated_data();
        cipher.decrypt(&nonce, Payload { msg: ciphertext, aad: &aad }).map_err(|_| SealError::Tampered)
    }

    /// A 32-byte key for `purpose` (e.g. signing console sessions), derived
    /// from the active key with HMAC-SHA256, so every process of a deployment
    /// derives the same one and no extra secret is needed. Rotating the active
    /// key changes it. The purpose should name what the key is for and a version.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        derive_from(&self.derivation, purpose)
    }

    /// [`Keyring::derive`] from every key the keyring holds, the active one
    /// first: what was derived before a rotation is among them while the old
    /// key is kept.
    pub fn derive_each(&self, purpose: &str) -> Vec<[u8; 32]> {
        std::iter::once(&self.derivation).chain(&self.others).map(|key| derive_from(key, purpose)).collect()
    }

    /// Whether the keyring holds the key with id `id`.
    pub fn holds(&self, id: &str) -> bool {
        self.keys.contains_key(id)
    }

    /// The key id a sealed value names (for rotation: which rows still use an old key).
    ///
    /// # Errors
    /// [`SealError::Malformed`] when the bytes are not a sealed value.
    pub fn key_of(sealed: &[u8]) -> Result<&str, SealError> {
        parts(sealed).map(|(id, _, _)| id)
    }
}

fn derive_from(key: &[u8], purpose: &str) -> [u8; 32] {
    // HMAC takes a key of any length: construction cannot fail.
    let Ok(mut mac) = <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(key) else {
        unreachable!("HMAC-SHA256 accepts keys of every length")
    };
    mac.update(b"coordinator.derive.v1\n");
    mac.update(purpose.as_bytes());
    mac.finalize().into_bytes().into()
}

fn parts(sealed: &[u8]) -> Result<(&str, &[u8], &[u8]), SealError> {
    let (&version, rest) = sealed.split_first().ok_or(SealError::Malformed)?;
    if version != VERSION {
        return Err(SealError::Malformed);
    }
    let (&id_len, rest) = rest.split_first().ok_or(SealError::Malformed)?;
    let id_len = usize::from(id_len);
    if rest.len() < id_len + NONCE_LEN + 16 {
        return Err(SealError::Malformed);
    }
    let (id, rest) = rest.split_at(id_len);
    let id = std::str::from_utf8(id).map_err(|_| SealError::Malformed)?;
    let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
    Ok((id, nonce, ciphertext))
}

//! Secrets and passwords: random tokens from the operating system, digests, generated and
//! validated passwords, Argon2id checks that reuse their memory.

use std::sync::{Mutex, OnceLock};

use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Algorithm, Argon2, Block, Params, PasswordHash, Version};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{GENERATED_PASSWORD_CHARS, MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS};
use crate::Error;

/// `n` random bytes from the operating system, hex-encoded.
pub(crate) fn random_hex(n: usize) -> Result<String, Error> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf)
        .map_err(|e| Error::Internal(format!("no randomness from the system: {e}")))?;
    Ok(hex(&buf))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// SHA-256 of a secret, hex-encoded: what the store keeps of session ids and API tokens.
pub(crate) fn digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// A new secret token (the executors' access token, the built-in API token): 256 bits from
/// the operating system's generator, hex-encoded.
pub fn generate_token() -> Result<String, Error> {
    random_hex(32)
}

/// The alphabet of generated passwords: no look-alikes (0 O 1 l I).
pub(super) const PASSWORD_ALPHABET: &[u8] =
    b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// A strong generated password: [`GENERATED_PASSWORD_CHARS`] characters of an alphabet
/// without look-alikes, each drawn uniformly from the operating system's generator.
pub fn generate_password() -> Result<String, Error> {
    let n = PASSWORD_ALPHABET.len();
    // Bytes at or above the largest multiple of the alphabet's size are dropped, so that
    // every letter is equally likely.
    let limit = (256 / n * n) as u8;
    let mut out = String::with_capacity(GENERATED_PASSWORD_CHARS);
    let mut buf = [0u8; 32];
    while out.len() < GENERATED_PASSWORD_CHARS {
        getrandom::fill(&mut buf)
            .map_err(|e| Error::Internal(format!("no randomness from the system: {e}")))?;
        out.extend(
            buf.iter()
                .filter(|b| **b < limit)
                .map(|b| PASSWORD_ALPHABET[*b as usize % n] as char)
                .take(GENERATED_PASSWORD_CHARS - out.len()),
        );
    }
    Ok(out)
}

/// Checks a password's length in characters: the longest is [`MAX_PASSWORD_CHARS`].
pub(super) fn check_password_max(password: &str) -> Result<(), Error> {
    if password.chars().count() > MAX_PASSWORD_CHARS {
        return Err(Error::invalid_field(
            "password",
            format!("must be at most {MAX_PASSWORD_CHARS} characters"),
        ));
    }
    Ok(())
}

/// Checks a new password's length.
pub fn validate_password(password: &str) -> Result<(), Error> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(Error::invalid_field(
            "password",
            format!("must be at least {MIN_PASSWORD_CHARS} characters"),
        ));
    }
    check_password_max(password)
}

/// Hashes a password with Argon2id on the blocking pool.
pub(crate) async fn hash_password(password: &str) -> Result<String, Error> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| Error::Internal(format!("password hashing failed: {e}")))
    })
    .await
    .map_err(|e| Error::Internal(format!("password hashing task failed: {e}")))?
}

/// Whether `password` matches the PHC string `hash`, checked on the blocking pool.
pub(crate) async fn verify_password(password: &str, hash: &str) -> Result<bool, Error> {
    let (password, hash) = (password.to_owned(), hash.to_owned());
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .verify_password(password.as_bytes(), hash.as_str())
            .is_ok()
    })
    .await
    .map_err(|e| Error::Internal(format!("password check task failed: {e}")))
}

/// A hash that matches no password, checked when the username is unknown so that a wrong
/// username takes as long as a wrong password. Its password needs no secrecy: it is checked
/// only for names without an account, which fail whatever the result.
static DECOY_HASH: OnceLock<String> = OnceLock::new();

/// Whether `password` matches the PHC string `hash` (the decoy when `None`), computed in
/// `memory`; blocking.
pub(super) fn verify_blocking(password: &str, hash: Option<&str>, memory: &mut Vec<Block>) -> bool {
    let hash = match hash {
        Some(h) => h,
        None => DECOY_HASH.get_or_init(|| {
            Argon2::default()
                .hash_password(b"decoy: no account has this password")
                .map(|h| h.to_string())
                .unwrap_or_default()
        }),
    };
    let Ok(hash) = PasswordHash::new(hash) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (&hash.salt, &hash.hash) else {
        return false;
    };
    let Ok(algorithm) = Algorithm::new(hash.algorithm.as_str()) else {
        return false;
    };
    let version = match hash.version.map(Version::try_from) {
        None => Version::default(),
        Some(Ok(v)) => v,
        Some(Err(_)) => return false,
    };
    let Ok(params) = Params::try_from(&hash) else {
        return false;
    };
    let blocks = params.block_count();
    if memory.len() < blocks {
        memory.resize(blocks, Block::default());
    }
    let mut out = vec![0u8; expected.as_bytes().len()];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(
            password.as_bytes(),
            salt.as_ref(),
            &mut out,
            &mut memory[..blocks],
        )
        .is_ok()
        && bool::from(out.as_slice().ct_eq(expected.as_bytes()))
}

/// Argon2's working memory for login checks, one buffer per check running and kept for the
/// next. Bounding the checks alone did not bound memory: every check on a new blocking
/// thread allocated 19 MiB afresh, and the allocator kept what each thread freed, so a
/// burst of logins left the admin at a gigabyte. Reused buffers hold it at
/// `max_concurrent_logins` of them.
#[derive(Default)]
pub(super) struct HashMemory {
    pub(super) free: Mutex<Vec<Vec<Block>>>,
}

impl HashMemory {
    pub(super) fn take(&self) -> Vec<Block> {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }

    pub(super) fn give_back(&self, memory: Vec<Block>) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(memory);
    }
}

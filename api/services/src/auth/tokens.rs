//! Random secrets: login tokens (stored only as SHA-256), access and secret keys.
use base64::Engine;
use rand::Rng;
use rand::distributions::Alphanumeric;
use sha2::{Digest, Sha256};

/// An opaque 256-bit token, URL-safe.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::thread_rng().r#gen();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Backend.AI-style access key: `AKIA` + 16 upper-case letters/digits (20 characters).
pub fn new_access_key() -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::thread_rng();
    let tail: String = (0..16)
        .map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char)
        .collect();
    format!("AKIA{tail}")
}

/// A 40-character secret key.
pub fn new_secret_key() -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(40)
        .map(char::from)
        .collect()
}

/// A random password that satisfies the password rules, for the first superadmin.
pub fn new_password() -> String {
    let body: String = rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(14)
        .map(char::from)
        .collect();
    format!("{body}-7a")
}

/// Compares two secrets in time independent of where they differ (`subtle`).
pub fn eq(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

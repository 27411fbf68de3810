//! The two authentication plugins' math, and the hashes an account stores.
//!
//! The server never holds a password, only what [`Credentials`] keeps:
//! - `mysql_native_password`: the client sends
//!   `SHA1(pw) XOR SHA1(nonce ‖ SHA1(SHA1(pw)))`; the server holds
//!   `SHA1(SHA1(pw))`, so it recovers `SHA1(pw)` by XOR and checks that its
//!   SHA1 is the stored hash.
//! - `caching_sha2_password` (fast auth): the client sends
//!   `SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) ‖ nonce)`; the server holds
//!   `SHA256(SHA256(pw))` and checks the same way. (MySQL keeps that hash in
//!   its cache after a first full authentication over TLS or RSA; Skarv
//!   stores it with the account, so fast auth always applies and full auth
//!   is never asked for.)

use std::fs::File;
use std::io::{self, Read};

use sha1::{Digest, Sha1};
use sha2::Sha256;

use crate::backend::Credentials;

/// The length of the scramble nonce a handshake sends.
pub const NONCE_BYTES: usize = 20;

/// An authentication plugin the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plugin {
    /// `mysql_native_password` (SHA1).
    Native,
    /// `caching_sha2_password` (SHA256, fast auth only).
    CachingSha2,
}

impl Plugin {
    /// The plugin's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Plugin::Native => "mysql_native_password",
            Plugin::CachingSha2 => "caching_sha2_password",
        }
    }

    /// The plugin of a name, None for one Skarv does not speak.
    pub fn from_name(name: &[u8]) -> Option<Plugin> {
        match name {
            b"mysql_native_password" => Some(Plugin::Native),
            b"caching_sha2_password" => Some(Plugin::CachingSha2),
            _ => None,
        }
    }
}

/// A fresh nonce from the kernel's random source. Like MySQL's, its bytes
/// are 7-bit and never NUL or `$`: old clients read the nonce as a
/// NUL-terminated string.
pub fn nonce() -> io::Result<[u8; NONCE_BYTES]> {
    let mut nonce = [0u8; NONCE_BYTES];
    File::open("/dev/urandom")?.read_exact(&mut nonce)?;
    for byte in &mut nonce {
        *byte &= 0x7f;
        if *byte == 0 || *byte == b'$' {
            *byte += 1;
        }
    }
    Ok(nonce)
}

/// What an account with `password` stores (empty: no password).
pub fn credentials_for(password: &[u8]) -> Credentials {
    Credentials {
        empty: password.is_empty(),
        native: sha1(&[&sha1(&[password])]),
        sha2: sha256(&[&sha256(&[password])]),
    }
}

/// The `mysql_native_password` answer a client computes.
pub fn native_scramble(password: &[u8], nonce: &[u8]) -> [u8; 20] {
    let stage1 = sha1(&[password]);
    let stage2 = sha1(&[&stage1]);
    xor(stage1, sha1(&[nonce, &stage2]))
}

/// The `caching_sha2_password` answer a client computes.
pub fn sha2_scramble(password: &[u8], nonce: &[u8]) -> [u8; 32] {
    let stage1 = sha256(&[password]);
    let stage2 = sha256(&[&stage1]);
    xor(stage1, sha256(&[&stage2, nonce]))
}

/// Whether `response` is the `mysql_native_password` answer of the
/// password whose SHA1(SHA1) is `stored`.
pub fn verify_native(stored: &[u8; 20], nonce: &[u8], response: &[u8]) -> bool {
    let Ok(response) = <[u8; 20]>::try_from(response) else {
        return false;
    };
    let stage1 = xor(response, sha1(&[nonce, stored]));
    equal(&sha1(&[&stage1]), stored)
}

/// Whether `response` is the `caching_sha2_password` answer of the
/// password whose SHA256(SHA256) is `stored`.
pub fn verify_sha2(stored: &[u8; 32], nonce: &[u8], response: &[u8]) -> bool {
    let Ok(response) = <[u8; 32]>::try_from(response) else {
        return false;
    };
    let stage1 = xor(response, sha256(&[stored, nonce]));
    equal(&sha256(&[&stage1]), stored)
}

/// Whether `response` (answered with `plugin` to `nonce`) proves the
/// account's password. An account without a password takes only an empty
/// answer; one with a password never takes it.
pub fn verify(credentials: &Credentials, plugin: Plugin, nonce: &[u8], response: &[u8]) -> bool {
    if credentials.empty || response.is_empty() {
        return credentials.empty && response.is_empty();
    }
    match plugin {
        Plugin::Native => verify_native(&credentials.native, nonce, response),
        Plugin::CachingSha2 => verify_sha2(&credentials.sha2, nonce, response),
    }
}

fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

fn xor<const N: usize>(mut a: [u8; N], b: [u8; N]) -> [u8; N] {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
    a
}

/// Compares without an early exit, so timing tells nothing of the hash.
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn stored_hashes_match_what_mysql_stores() {
        // MySQL's PASSWORD('secret') is '*' + hex(SHA1(SHA1('secret'))).
        let credentials = credentials_for(b"secret");
        assert_eq!(
            hex(&credentials.native).to_uppercase(),
            "14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
        );
        assert!(!credentials.empty);
        assert!(credentials_for(b"").empty);
    }

    #[test]
    fn native_scramble_matches_a_known_vector_and_verifies() {
        // Computed independently by PyMySQL's `_auth.scramble_native_password`.
        let nonce = *b"abcdefghijklmnopqrst";
        let scramble = native_scramble(b"secret", &nonce);
        assert_eq!(hex(&scramble), "8817c50fa779daef010ee7577825b0847df9842e");
        let stored = credentials_for(b"secret");
        assert!(verify(&stored, Plugin::Native, &nonce, &scramble));
        let wrong = native_scramble(b"Secret", &nonce);
        assert!(!verify(&stored, Plugin::Native, &nonce, &wrong));
        assert!(!verify(
            &stored,
            Plugin::Native,
            b"another nonce here!!",
            &scramble
        ));
        assert!(!verify(&stored, Plugin::Native, &nonce, &scramble[..19]));
    }

    #[test]
    fn sha2_scramble_matches_a_known_vector_and_verifies() {
        let nonce = *b"abcdefghijklmnopqrst";
        // Computed independently by PyMySQL's `_auth.scramble_caching_sha2`.
        let scramble = sha2_scramble(b"secret", &nonce);
        assert_eq!(
            hex(&scramble),
            "c76e2898612a4cf042c77fa8c4702c4c64c0c2c557c53c4d75595aaa6abae809"
        );
        let stored = credentials_for(b"secret");
        assert!(verify(&stored, Plugin::CachingSha2, &nonce, &scramble));
        let wrong = sha2_scramble(b"secreT", &nonce);
        assert!(!verify(&stored, Plugin::CachingSha2, &nonce, &wrong));
        // A native answer is not a sha2 one.
        let native = native_scramble(b"secret", &nonce);
        assert!(!verify(&stored, Plugin::CachingSha2, &nonce, &native));
    }

    #[test]
    fn empty_passwords_take_only_empty_answers() {
        let nonce = [1u8; NONCE_BYTES];
        let none = credentials_for(b"");
        assert!(verify(&none, Plugin::Native, &nonce, b""));
        assert!(!verify(
            &none,
            Plugin::Native,
            &nonce,
            &native_scramble(b"x", &nonce)
        ));
        let some = credentials_for(b"x");
        assert!(!verify(&some, Plugin::Native, &nonce, b""));
        assert!(!verify(&some, Plugin::CachingSha2, &nonce, b""));
    }

    #[test]
    fn nonces_are_fresh_and_printable_without_nul() {
        let a = nonce().unwrap();
        let b = nonce().unwrap();
        assert_ne!(a, b);
        assert!(a.iter().all(|&c| c != 0 && c != b'$' && c < 0x80));
    }
}

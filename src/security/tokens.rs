//! Opaque bearer tokens: `<id>|<secret>`, the secret 256 random bits in hex. Only
//! SHA-256(secret) is stored, so a leaked database does not leak usable tokens.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// 64 hex characters of fresh randomness.
pub fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Splits a presented token into its id and secret; `None` when it is not of our shape.
pub fn parse(token: &str) -> Option<(i64, &str)> {
    let (id, secret) = token.split_once('|')?;
    let id = id.parse::<i64>().ok().filter(|id| *id > 0)?;
    is_secret(secret).then_some((id, secret))
}

/// Whether `presented` is `prefix` and then a secret of [`random_secret`]'s shape (a display
/// or calendar key): anything else is refused before the database is asked.
pub fn is_prefixed_secret(presented: &str, prefix: &str) -> bool {
    presented.strip_prefix(prefix).is_some_and(is_secret)
}

fn is_secret(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Compares without an early exit, so timing does not reveal a matching prefix.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_well_formed_tokens() {
        let secret = random_secret();
        let token = format!("12|{secret}");
        assert_eq!(parse(&token), Some((12, secret.as_str())));
        assert_eq!(parse("12"), None);
        assert_eq!(parse("x|abc"), None);
        assert_eq!(parse(&format!("0|{secret}")), None);
        assert_eq!(parse("12|short"), None);
    }

    #[test]
    fn compares_hashes() {
        let h = hash_secret("a");
        assert!(constant_time_eq(&h, &hash_secret("a")));
        assert!(!constant_time_eq(&h, &hash_secret("b")));
    }
}

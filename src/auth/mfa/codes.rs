//! The codes of a second factor, apart from where they are kept: TOTP (RFC 6238, HMAC-SHA1, 6
//! digits, 30-second steps, through totp-rs), the `otpauth://` URI and its QR code as SVG,
//! and the one-time recovery codes.

use std::fmt::Write as _;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use qrcodegen::{QrCode, QrCodeEcc};
use rand::RngCore;
use totp_rs::{Algorithm, Builder, Secret, Totp};

use crate::security::tokens::hash_secret;

/// Seconds a code lasts.
pub const PERIOD: u64 = 30;
/// Steps before and after the current one whose codes are accepted: a phone's clock that is
/// half a minute out still works.
const SKEW: u16 = 1;
/// Bytes of a shared secret: 160 bits, as RFC 4226 recommends.
const SECRET_BYTES: usize = 20;
/// Recovery codes given when the factor is turned on.
pub const RECOVERY_CODES: usize = 10;
/// Bytes of a recovery code: 80 bits, 16 base32 characters.
const RECOVERY_BYTES: usize = 10;

/// A fresh shared secret.
pub fn new_secret() -> Vec<u8> {
    let mut bytes = vec![0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// The secret as authenticator apps take it typed in: base32 without padding.
pub fn secret_base32(secret: &[u8]) -> String {
    base32::encode(base32::Alphabet::Rfc4648 { padding: false }, secret)
}

fn totp(secret: &[u8]) -> Totp {
    Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(6)
        .with_skew(SKEW)
        .with_step_duration(PERIOD)
        .with_secret(Secret::from(secret.to_vec()))
        .build_noncompliant()
}

/// The time step `code` belongs to, when it is right at `unix_time` give or take one step.
pub fn matching_step(secret: &[u8], code: &str, unix_time: u64) -> Option<i64> {
    totp(secret).check(code, unix_time).and_then(|step| i64::try_from(step).ok())
}

/// The code of `unix_time` (for the unit tests).
#[cfg(test)]
fn code_at(secret: &[u8], unix_time: u64) -> String {
    totp(secret).generate(unix_time).to_string()
}

/// What the label and parameters of an otpauth URI escape: all but letters and digits, and
/// `-._~` left as they are.
const URI_ESCAPED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `otpauth://totp/<issuer>:<account>?secret=...&issuer=...&algorithm=SHA1&digits=6&period=30`,
/// the key-URI format authenticator apps read.
pub fn otpauth_uri(issuer: &str, account: &str, secret: &[u8]) -> String {
    let escape = |s: &str| utf8_percent_encode(s, URI_ESCAPED).to_string();
    format!(
        "otpauth://totp/{}:{}?secret={}&issuer={}&algorithm=SHA1&digits=6&period={PERIOD}",
        escape(issuer),
        escape(account),
        secret_base32(secret),
        escape(issuer),
    )
}

/// A QR code of `text` as an SVG document: one path of unit squares, four modules of quiet
/// zone, black on white.
pub fn qr_svg(text: &str) -> anyhow::Result<String> {
    let qr = QrCode::encode_text(text, QrCodeEcc::Medium)
        .map_err(|_| anyhow::anyhow!("the otpauth URI does not fit a QR code"))?;
    let border = 4;
    let side = qr.size() + 2 * border;
    let mut path = String::new();
    for y in 0..qr.size() {
        for x in 0..qr.size() {
            if qr.get_module(x, y) {
                let _ = write!(path, "M{},{}h1v1h-1z", x + border, y + border);
            }
        }
    }
    Ok(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" viewBox=\"0 0 {side} {side}\" \
         shape-rendering=\"crispEdges\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#FFFFFF\"/>\
         <path d=\"{path}\" fill=\"#000000\"/></svg>\n"
    ))
}

/// Ten fresh recovery codes, as shown: `XXXX-XXXX-XXXX-XXXX` (base32, 80 bits each).
pub fn new_recovery_codes() -> Vec<String> {
    (0..RECOVERY_CODES)
        .map(|_| {
            let mut bytes = [0u8; RECOVERY_BYTES];
            rand::rng().fill_bytes(&mut bytes);
            let plain = base32::encode(base32::Alphabet::Rfc4648 { padding: false }, &bytes);
            let groups: Vec<&str> = (0..4).map(|i| &plain[i * 4..i * 4 + 4]).collect();
            groups.join("-")
        })
        .collect()
}

/// The stored form of a recovery code: SHA-256 of the user and the code's 16 characters. A
/// fast hash is enough for 80 random bits (no one enumerates 2^80); binding the user makes
/// equal codes of two users differ.
pub fn recovery_hash(user_id: i64, normalized: &str) -> Vec<u8> {
    hash_secret(&format!("{user_id}:{normalized}"))
}

/// A code as sent: the 6 digits of the app, or a recovery code.
#[derive(Debug, PartialEq, Eq)]
pub enum Code {
    Totp(String),
    /// Its 16 characters, upper case, without separators.
    Recovery(String),
}

/// Reads a code as a person types it: spaces around or inside a TOTP code (`123 456`), a
/// recovery code in either case with or without its hyphens. `None` when it has neither shape.
pub fn parse(text: &str) -> Option<Code> {
    let bare: String = text.chars().filter(|c| !c.is_whitespace() && *c != '-').collect();
    if bare.len() == 6 && bare.bytes().all(|b| b.is_ascii_digit()) && !text.contains('-') {
        return Some(Code::Totp(bare));
    }
    let upper = bare.to_ascii_uppercase();
    let base32 = |b: u8| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b);
    (upper.len() == 16 && upper.bytes().all(base32)).then_some(Code::Recovery(upper))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238, appendix B: the SHA1 key, T = 59 -> 94287082 (8 digits; 6 take the last six).
    #[test]
    fn agrees_with_the_rfc_vector() {
        let secret = b"12345678901234567890";
        assert_eq!(code_at(secret, 59), "287082");
        assert_eq!(code_at(secret, 1111111109), "081804");
        assert_eq!(matching_step(secret, "287082", 59), Some(1));
        assert_eq!(matching_step(secret, "287082", 59 + 30), Some(1), "one step of skew");
        assert_eq!(matching_step(secret, "287082", 59 + 60), None, "two steps is too late");
    }

    #[test]
    fn recovery_codes_have_their_shape_and_parse() {
        let codes = new_recovery_codes();
        assert_eq!(codes.len(), 10);
        for code in &codes {
            assert_eq!(code.len(), 19);
            let bare = code.replace('-', "");
            assert_eq!(parse(code), Some(Code::Recovery(bare.clone())));
            assert_eq!(parse(&code.to_lowercase()), Some(Code::Recovery(bare)));
        }
        assert_eq!(parse(" 123 456 "), Some(Code::Totp("123456".into())));
        assert_eq!(parse("12345"), None);
        assert_eq!(parse("ABCD-EFGH-IJKL-MNO1"), None, "1 is not base32");
    }

    #[test]
    fn uri_and_qr() {
        let uri = otpauth_uri("clinic server", "ana@x", &[0u8; 20]);
        assert_eq!(
            uri,
            "otpauth://totp/clinic%20server:ana%40x?secret=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\
             &issuer=clinic%20server&algorithm=SHA1&digits=6&period=30"
        );
        let svg = qr_svg(&uri).unwrap();
        assert!(svg.contains("<svg") && svg.contains("<path d=\"M"), "{svg}");
    }
}

//! Secrets: password hashing and strength rules, bearer-token secrets, the CAs TLS clients trust.

pub mod password;
pub mod roots;
pub mod tokens;

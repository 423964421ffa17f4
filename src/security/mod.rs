//! Secrets: password hashing and strength rules, bearer-token secrets.

pub mod password;
pub mod tokens;

//! A user's account beyond the login: their sessions (listed, ended, idle), and how
//! their password is hashed (the floor, the rehash of weaker hashes).

mod passwords;
mod sessions;

//! clinic-server: a multi-branch clinic records server. See ARCHITECTURE.md for the map.

pub mod admin;
pub mod app;
pub mod auth;
pub mod cli;
pub mod clinical;
pub mod config;
pub mod db;
pub mod embedded_pg;
pub mod health;
pub mod http;
pub mod mail;
pub mod notify;
pub mod resource;
pub mod telemetry;
pub mod tenancy;

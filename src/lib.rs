//! clinic-server: a multi-branch clinic records server. See ARCHITECTURE.md for the map and
//! the layering rules (enforced by `tidy`).

pub mod admin;
pub mod app;
pub mod appointments;
pub mod auth;
pub mod billing;
pub mod bootstrap;
pub mod cache;
pub mod cli;
pub mod clinical;
pub mod config;
pub mod dashboard;
pub mod db;
pub mod embedded_pg;
pub mod enums;
pub mod exams;
pub mod fhir;
pub mod health;
pub mod http;
pub mod images;
pub mod mail;
pub mod master;
pub mod metrics;
pub mod notify;
pub mod pdf;
pub mod permissions;
pub mod pharmacy;
pub mod queue;
pub mod resource;
pub mod security;
pub mod state;
pub mod telemetry;
pub mod tenancy;

#[cfg(test)]
mod tidy;

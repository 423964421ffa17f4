//! The integration tests: one binary (each area a module), talking to the real server over
//! HTTP and to a real PostgreSQL. `support` spawns a server per test on its own database,
//! copied from a template migrated once per build.

mod support;

mod access_log;
mod accounts;
mod admin;
mod allergies;
mod appointments;
mod attachments;
mod audit_archive;
mod audit_chain;
mod auth;
mod billing;
mod cli;
mod compression;
mod conformance;
mod contract;
mod dashboard;
mod dashboard_rollups;
mod diagnoses;
mod display;
mod doctor;
mod documents;
mod drift;
mod edges;
mod exams;
mod fhir;
mod idempotency;
mod master;
mod metrics;
mod mfa;
mod openapi;
mod openapi_clients;
mod otlp;
mod parameters;
mod patients;
mod pharmacy;
mod prometheus;
mod queue;
mod read_audit;
mod readme;
mod reliability;
mod security;
mod servers;
mod telemetry;
mod tenancy;
mod tls;
mod visits;

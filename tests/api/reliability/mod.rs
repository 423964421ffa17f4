//! Reliability: PostgreSQL restarting under load, graceful shutdown, the orchestrators'
//! probes, the container image. Tests that need a database they may restart or stop start
//! their own PostgreSQL cluster under `var/` ([`Cluster`]) and remove it at the end.

mod errors;
mod probes;

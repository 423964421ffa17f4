//! How long taking a connection from a pool waits, and how often the wait runs out: the one
//! place that measures around a pool's `get()` (the registry pool's [`super::RegistryPool::get`]
//! and a branch pool's checkouts both go through [`Waits::measure`]).
//!
//! Pools are named as the OpenTelemetry conventions suggest when a pool has no name of its
//! own, `host:port/database`: the registry pool is `registry`, a branch pool is named by its
//! server. A name never carries a user or a password.

use std::sync::Arc;
use std::time::Instant;

use deadpool::managed::PoolError;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};

/// The attribute naming a pool on every pool metric.
pub const POOL_NAME: &str = "db.client.connection.pool.name";

/// Bucket bounds of the wait, in seconds: a healthy wait is well under a millisecond, a
/// starved one runs to the wait limit (`POOL_WAIT_TIMEOUT_MS`).
const WAIT_BOUNDS: &[f64] = &[0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The wait-time histogram and the timeout counter, with the name of the pool they measure.
#[derive(Clone)]
pub struct Waits {
    wait_time: Histogram<f64>,
    timeouts: Counter<u64>,
    name: Arc<str>,
    pool: Arc<[KeyValue]>,
}

impl Waits {
    pub fn new(meter: &Meter, pool: &str) -> Self {
        let wait_time = meter
            .f64_histogram("db.client.connection.wait_time")
            .with_unit("s")
            .with_description("The time it took to obtain an open connection from the pool")
            .with_boundaries(WAIT_BOUNDS.to_vec())
            .build();
        let timeouts = meter
            .u64_counter("db.client.connection.timeouts")
            .with_unit("{timeout}")
            .with_description("Waits for a connection that ran out before one was free")
            .build();
        Self { wait_time, timeouts, name: Arc::from(""), pool: Arc::new([]) }.named(pool)
    }

    /// The same instruments, for another pool (whose timeouts start at a zero that alerts
    /// can see, rather than at nothing).
    pub fn named(&self, pool: &str) -> Self {
        let named = Self {
            name: Arc::from(pool),
            pool: Arc::new([KeyValue::new(POOL_NAME, pool.to_owned())]),
            ..self.clone()
        };
        named.timeouts.add(0, &named.pool);
        named
    }

    /// The name of the pool measured.
    pub fn pool_name(&self) -> &str {
        &self.name
    }

    /// Runs `take` (a pool's `get()`), recording how long it waited and whether it timed out.
    pub async fn measure<T, E>(
        &self,
        take: impl Future<Output = Result<T, PoolError<E>>>,
    ) -> Result<T, PoolError<E>> {
        let started = Instant::now();
        let taken = take.await;
        self.wait_time.record(started.elapsed().as_secs_f64(), &self.pool);
        if let Err(PoolError::Timeout(_)) = &taken {
            self.timeouts.add(1, &self.pool);
        }
        taken
    }
}

/// A pool's name from its connection settings: `host:port/database` (several hosts joined
/// by commas, a socket folder as the host); never the user or the password.
pub fn pool_name(config: &tokio_postgres::Config) -> String {
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let host = match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            format!("{host}:{}", port(i))
        })
        .collect();
    let hosts = if hosts.is_empty() {
        config.get_hostaddrs().iter().enumerate().map(|(i, ip)| format!("{ip}:{}", port(i))).collect()
    } else {
        hosts
    };
    format!("{}/{}", hosts.join(","), config.get_dbname().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::pool_name;

    #[test]
    fn a_pool_is_named_by_its_server_and_database_without_credentials() {
        let named = |url: &str| pool_name(&url.parse().unwrap());
        assert_eq!(named("postgres://ana:secret@db.example:6432/clinic"), "db.example:6432/clinic");
        assert_eq!(named("postgres://ana@10.0.0.5/clinic"), "10.0.0.5:5432/clinic");
        assert_eq!(
            named("host=/run/postgresql port=5433 dbname=clinic user=x password=y"),
            "/run/postgresql:5433/clinic"
        );
        assert_eq!(named("postgres://a:b@h1:5432,h2:5433/c"), "h1:5432,h2:5433/c");
    }
}

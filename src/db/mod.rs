//! Connection pools.
//!
//! Two kinds of pool, both bounded and both with wait timeouts:
//! - the registry pool (`public` schema of `DATABASE_URL`): users, branches, master data;
//! - branch pools, one per database server that holds branch schemas (usually just the
//!   registry's), shared by every branch on that server. A branch connection starts with a
//!   search_path that names no schema; [`BranchConn::checkout`] points it at one branch.

pub mod directory;
pub mod migrate;
pub mod read_audit;
pub mod waits;
pub mod zones;

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use deadpool::managed::{self, Metrics, RecycleResult};
use deadpool_postgres::{ManagerConfig, RecyclingMethod, Runtime};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error as PgError, NoTls, Row, Statement, ToStatement};

use crate::config::Settings;
use waits::Waits;

/// The registry's pool: a deadpool pool whose `get()` is measured ([`Waits`]).
#[derive(Clone)]
pub struct RegistryPool {
    pool: deadpool_postgres::Pool,
    waits: Waits,
}

impl RegistryPool {
    /// A connection, waiting at most `POOL_WAIT_TIMEOUT_MS` for a free one.
    pub async fn get(&self) -> Result<deadpool_postgres::Object, deadpool_postgres::PoolError> {
        self.waits.measure(self.pool.get()).await
    }

    /// The measurements of this pool, for naming another pool's.
    pub fn waits(&self) -> &Waits {
        &self.waits
    }
}

impl Deref for RegistryPool {
    type Target = deadpool_postgres::Pool;
    fn deref(&self) -> &Self::Target {
        &self.pool
    }
}

/// Parses a connection URL and adds the session settings every connection of ours runs with.
pub fn pg_config(url: &str, search_path: &str) -> anyhow::Result<tokio_postgres::Config> {
    let mut config: tokio_postgres::Config =
        url.parse().context("DATABASE_URL is not a valid PostgreSQL connection URL")?;
    if config.get_application_name().is_none() {
        config.application_name("clinic-server");
    }
    // UTC so that timestamps render as RFC 3339 in UTC; search_path as a connection option
    // so that it survives recycling; random_page_cost for SSD-backed servers, without which
    // the planner prefers a sequential scan to the trigram index for name searches.
    config.options(format!("-c TimeZone=UTC -c search_path={search_path} -c random_page_cost=1.1"));
    config.connect_timeout(Duration::from_secs(10));
    Ok(config)
}

/// [`pg_config`] for a pool serving requests: no statement runs longer than the setting.
fn pool_config(url: &str, search_path: &str, settings: &Settings) -> anyhow::Result<tokio_postgres::Config> {
    let mut config = pg_config(url, search_path)?;
    let options = format!(
        "{} -c statement_timeout={}",
        config.get_options().unwrap_or_default(),
        settings.statement_timeout.as_millis()
    );
    config.options(options);
    Ok(config)
}

/// `host:port/database` of a connection URL: what operators see, never a password.
pub fn server_name(url: &str) -> String {
    let Ok(config) = url.parse::<tokio_postgres::Config>() else { return "(unparsable)".into() };
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}/{}", config.get_dbname().unwrap_or("postgres"))
}

/// Connects once, outside any pool (maintenance work, LISTEN).
pub async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let config = pg_config(url, "public")?;
    let (client, connection) = config.connect(NoTls).await.context("connecting to PostgreSQL")?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "maintenance connection closed");
        }
    });
    Ok(client)
}

/// The registry's pool, its waits measured by `meter`.
pub fn registry_pool(
    url: &str,
    settings: &Settings,
    meter: &opentelemetry::metrics::Meter,
) -> anyhow::Result<RegistryPool> {
    let manager = deadpool_postgres::Manager::from_config(
        pool_config(url, "public", settings)?,
        NoTls,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(settings.registry_pool_size)
        .wait_timeout(Some(settings.pool_wait))
        .create_timeout(Some(Duration::from_secs(10)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .runtime(Runtime::Tokio1)
        .build()
        .context("building the registry pool")?;
    Ok(RegistryPool { pool, waits: Waits::new(meter, "registry") })
}

/// A pooled connection of a branch pool, with the schema its search_path currently names.
pub struct SchemaClient {
    client: deadpool_postgres::ClientWrapper,
    /// Set only by [`BranchConn::checkout`] after the server confirmed the change.
    schema: Option<Arc<str>>,
}

/// The schema a fresh branch connection searches: one that never exists, so a query that
/// was not routed to a branch fails instead of reading the wrong rows.
const NO_SCHEMA: &str = "no_branch_selected";

pub struct BranchManager {
    inner: deadpool_postgres::Manager,
    /// Measures every checkout of this pool.
    waits: Waits,
}

impl BranchManager {
    /// The pool's name in its metrics: its server and database.
    pub fn name(&self) -> &str {
        self.waits.pool_name()
    }

    /// Drops every connection's prepared statements (after a migration changed tables).
    pub fn clear_statement_caches(&self) {
        self.inner.statement_caches.clear();
    }
}

impl managed::Manager for BranchManager {
    type Type = SchemaClient;
    type Error = tokio_postgres::Error;

    async fn create(&self) -> Result<SchemaClient, Self::Error> {
        Ok(SchemaClient { client: self.inner.create().await?, schema: None })
    }

    async fn recycle(&self, conn: &mut SchemaClient, metrics: &Metrics) -> RecycleResult<Self::Error> {
        self.inner.recycle(&mut conn.client, metrics).await
    }

    fn detach(&self, conn: &mut SchemaClient) {
        self.inner.detach(&mut conn.client)
    }
}

pub type BranchPool = managed::Pool<BranchManager>;

/// A branch pool, its waits measured as `waits` (named by the pool's server).
pub fn branch_pool(url: &str, settings: &Settings, waits: &Waits) -> anyhow::Result<BranchPool> {
    let config = pool_config(url, NO_SCHEMA, settings)?;
    let waits = waits.named(&waits::pool_name(&config));
    let inner = deadpool_postgres::Manager::from_config(
        config,
        NoTls,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    managed::Pool::builder(BranchManager { inner, waits })
        .max_size(settings.branch_pool_size)
        .wait_timeout(Some(settings.pool_wait))
        .create_timeout(Some(Duration::from_secs(10)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .runtime(Runtime::Tokio1)
        .build()
        .context("building a branch pool")
}

/// `name` as a quoted SQL identifier (schema names are made by the server; quoting keeps
/// that from being load-bearing).
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A connection whose search_path is exactly one branch's schema.
pub struct BranchConn {
    conn: managed::Object<BranchManager>,
    /// The branch's share of the pool this connection counts against (released with it).
    _share: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl BranchConn {
    /// Takes a connection from the pool and makes its search_path `schema`, unless this
    /// connection was already switched to `schema` by us (the switch is a round trip and makes
    /// PostgreSQL re-plan cached statements, so it is skipped when provably unneeded).
    pub async fn checkout(
        pool: &BranchPool,
        schema: &Arc<str>,
    ) -> Result<Self, deadpool_postgres::PoolError> {
        let mut conn = pool.manager().waits.measure(pool.get()).await?;
        if conn.schema.as_deref() != Some(&**schema) {
            // Forget the old schema first: if the switch fails halfway, the next checkout must
            // not trust this connection.
            conn.schema = None;
            // One simple-protocol round trip; an unnamed prepared statement would take two.
            conn.client.batch_execute(&format!("SET search_path TO {}", quote_ident(schema))).await?;
            conn.schema = Some(schema.clone());
        }
        Ok(Self { conn, _share: None })
    }

    /// Counts this connection against a branch's share until it is handed back.
    pub fn holding(mut self, permit: tokio::sync::OwnedSemaphorePermit) -> Self {
        self._share = Some(permit);
        self
    }

    /// A connection for maintenance work (provisioning, migrations) that picks its own
    /// schema; it is handed back marked as pointing nowhere.
    pub async fn unrouted(pool: &BranchPool) -> Result<Self, deadpool_postgres::PoolError> {
        let mut conn = pool.manager().waits.measure(pool.get()).await?;
        conn.schema = None;
        Ok(Self { conn, _share: None })
    }

    /// The raw client, for work that changes session state; forgets the recorded schema.
    pub fn client_mut(&mut self) -> &mut tokio_postgres::Client {
        self.conn.schema = None;
        &mut self.conn.client
    }
}

impl Deref for BranchConn {
    type Target = deadpool_postgres::ClientWrapper;
    fn deref(&self) -> &Self::Target {
        &self.conn.client
    }
}

impl DerefMut for BranchConn {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conn.client
    }
}

/// A pooled connection, a branch connection or a transaction: anything that runs statements
/// and caches them by text. The methods are tokio-postgres's, so code reads the same on all.
pub trait Queries: Sync {
    fn prepare_cached(&self, sql: &str) -> impl Future<Output = Result<Statement, PgError>> + Send;
    fn query<T: ?Sized + ToStatement + Sync>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Vec<Row>, PgError>> + Send;
    fn query_opt<T: ?Sized + ToStatement + Sync>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Option<Row>, PgError>> + Send;
    fn query_one<T: ?Sized + ToStatement + Sync>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Row, PgError>> + Send;
    fn execute<T: ?Sized + ToStatement + Sync>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<u64, PgError>> + Send;
}

/// `$cached` reaches the statement cache, `$pg` the tokio-postgres client or transaction.
macro_rules! impl_queries {
    ($ty:ty, |$s:ident, $sql:ident| $cached:expr, $pg:expr) => {
        impl Queries for $ty {
            fn prepare_cached(&self, $sql: &str) -> impl Future<Output = Result<Statement, PgError>> + Send {
                let $s = self;
                $cached
            }
            fn query<T: ?Sized + ToStatement + Sync>(
                &self,
                stmt: &T,
                params: &[&(dyn ToSql + Sync)],
            ) -> impl Future<Output = Result<Vec<Row>, PgError>> + Send {
                let $s = self;
                $pg.query(stmt, params)
            }
            fn query_opt<T: ?Sized + ToStatement + Sync>(
                &self,
                stmt: &T,
                params: &[&(dyn ToSql + Sync)],
            ) -> impl Future<Output = Result<Option<Row>, PgError>> + Send {
                let $s = self;
                $pg.query_opt(stmt, params)
            }
            fn query_one<T: ?Sized + ToStatement + Sync>(
                &self,
                stmt: &T,
                params: &[&(dyn ToSql + Sync)],
            ) -> impl Future<Output = Result<Row, PgError>> + Send {
                let $s = self;
                $pg.query_one(stmt, params)
            }
            fn execute<T: ?Sized + ToStatement + Sync>(
                &self,
                stmt: &T,
                params: &[&(dyn ToSql + Sync)],
            ) -> impl Future<Output = Result<u64, PgError>> + Send {
                let $s = self;
                $pg.execute(stmt, params)
            }
        }
    };
}
impl_queries!(
    deadpool_postgres::ClientWrapper,
    |c, sql| deadpool_postgres::ClientWrapper::prepare_cached(c, sql),
    &**c
);
impl_queries!(
    deadpool_postgres::Object,
    |c, sql| deadpool_postgres::ClientWrapper::prepare_cached(c, sql),
    &***c
);
impl_queries!(
    deadpool_postgres::Transaction<'_>,
    |c, sql| deadpool_postgres::Transaction::prepare_cached(c, sql),
    &**c
);

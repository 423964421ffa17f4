//! Connection pools.
//!
//! Two kinds of pool, both bounded and both with wait timeouts:
//! - the registry pool (`public` schema of `DATABASE_URL`): users, branches, master data;
//! - branch pools, one per database server that holds branch schemas (usually just the
//!   registry's), shared by every branch on that server. A branch connection starts with a
//!   search_path that names no schema; [`BranchConn::checkout`] points it at one branch.

pub mod branch_pool;
pub mod client;
pub mod directory;
pub mod doctor;
pub mod migrate;
pub mod read_audit;
pub mod sql;
pub mod tls;
pub mod waits;
pub mod zones;

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::pin::Pin;

use anyhow::Context;
use deadpool::managed;
use tokio::task::JoinHandle;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error as PgError, Row, Statement, ToStatement};

use crate::config::{DatabaseTls, Settings};
pub use branch_pool::{BranchPool, Lease, PoolSettings};
pub use client::{Client, Transaction};
use waits::Waits;

/// The registry's pool: a deadpool-postgres pool whose `get()` is measured ([`Waits`]) and
/// whose connections are [`Client`]s, as a branch pool's are.
#[derive(Clone)]
pub struct RegistryPool {
    pool: deadpool_postgres::Pool,
    waits: Waits,
}

/// A connection of the registry's pool: a [`Client`] on `public`, handed back when dropped.
pub type RegistryConn = Client;

/// What taking a connection from a pool can fail with.
pub type PoolError = managed::PoolError<PgError>;

impl RegistryPool {
    /// A connection, waiting at most `POOL_WAIT_TIMEOUT_MS` for a free one.
    pub async fn get(&self) -> Result<RegistryConn, PoolError> {
        self.waits.measure(self.pool.get()).await.map(Client::registry)
    }

    /// The measurements of this pool, for naming another pool's.
    pub fn waits(&self) -> &Waits {
        &self.waits
    }

    /// A connection within `timeouts` rather than the pool's own (the readiness probe).
    pub async fn timeout_get(&self, timeouts: &managed::Timeouts) -> Result<RegistryConn, PoolError> {
        self.pool.timeout_get(timeouts).await.map(Client::registry)
    }

    pub fn status(&self) -> deadpool::Status {
        self.pool.status()
    }

    pub fn close(&self) {
        self.pool.close()
    }
}

/// Opens the registry's connections through [`tls::Link::connect`], as every connection is.
struct RegistryConnect(tls::Link);

impl deadpool_postgres::Connect for RegistryConnect {
    fn connect(
        &self,
        _: &tokio_postgres::Config,
    ) -> Pin<Box<dyn Future<Output = Result<(tokio_postgres::Client, JoinHandle<()>), PgError>> + Send + '_>>
    {
        // Boxed: connecting's state is large, and inline it would be part of every `get`'s,
        // which nearly always finds an idle connection.
        Box::pin(async move {
            let (client, connection) = self.0.connect().await?;
            let task = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "registry connection closed");
                }
            });
            self.0.settle(&client, AUDIT_CHAIN).await?;
            Ok((client, task))
        })
    }
}

/// The setting under which the audit logs' trigger chains a new record.
pub const AUDIT_CHAIN: &str = "clinic.audit_chain";

/// Reads a connection URL ([`tls::Link`]: its TLS under `tls`) and adds the session
/// settings every connection of ours runs with.
pub fn link(url: &str, search_path: &str, tls: &DatabaseTls) -> anyhow::Result<tls::Link> {
    let mut link = tls::Link::parse(url, tls).context("the database URL")?;
    let config = &mut link.config;
    if config.get_application_name().is_none() {
        config.application_name("clinic-server");
    }
    // UTC so that timestamps render as RFC 3339 in UTC; search_path as a connection option
    // so that it holds from the start; random_page_cost for SSD-backed servers, without which
    // the planner prefers a sequential scan to the trigram index for name searches.
    // `clinic.audit_chain` has the audit logs' trigger link what this connection writes
    // (migrations V13 and tenants V21): a record written by any other session gets no link.
    config.options(format!(
        "-c TimeZone=UTC -c search_path={search_path} -c random_page_cost=1.1 -c {AUDIT_CHAIN}=on"
    ));
    config.connect_timeout(Duration::from_secs(10));
    Ok(link)
}

/// [`link`] for a pool serving requests: no statement runs longer than the setting.
fn pool_link(url: &str, search_path: &str, settings: &Settings) -> anyhow::Result<tls::Link> {
    let mut link = link(url, search_path, &settings.database_tls)?;
    let options = format!(
        "{} -c statement_timeout={}",
        link.config.get_options().unwrap_or_default(),
        settings.statement_timeout.as_millis()
    );
    link.config.options(options);
    Ok(link)
}

/// Marks key `id` of `table` (a display or a calendar key, in the registry) used now, at most
/// once a minute: bookkeeping like a session's, neither audited nor versioned.
pub async fn mark_key_used(client: &Client, table: &'static str, id: i64) -> Result<u64, PgError> {
    let sql = format!(
        "UPDATE {table} SET last_used_at = now()
          WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"
    );
    client.execute(&sql, &[&id]).await
}

/// `host:port/database` of a connection URL: what operators see, never a password.
pub fn server_name(url: &str) -> String {
    let Ok(config) = tls::plain_config(url) else { return "(unparsable)".into() };
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

/// Connects once, outside any pool (maintenance work), under `tls`.
pub async fn connect_with(url: &str, tls: &DatabaseTls) -> anyhow::Result<tokio_postgres::Client> {
    let link = link(url, "public", tls)?;
    let (client, connection) =
        link.connect().await.with_context(|| format!("connecting to PostgreSQL at {}", server_name(url)))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "maintenance connection closed");
        }
    });
    link.settle(&client, AUDIT_CHAIN).await.context("giving the connection its settings")?;
    Ok(client)
}

/// [`connect_with`] under the URL's own TLS settings alone (no `DATABASE_CA_FILE`): for
/// tools and tests; the server's own work passes its settings.
pub async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    connect_with(url, &DatabaseTls::default()).await
}

/// The registry's pool, its waits measured by `meter`.
pub fn registry_pool(
    url: &str,
    settings: &Settings,
    meter: &opentelemetry::metrics::Meter,
) -> anyhow::Result<RegistryPool> {
    let link = pool_link(url, "public", settings)?;
    // Fast recycling: a connection the server closed is not handed out again, and nothing
    // else is checked (no round trip per `get`).
    let recycling =
        deadpool_postgres::ManagerConfig { recycling_method: deadpool_postgres::RecyclingMethod::Fast };
    let manager =
        deadpool_postgres::Manager::from_connect(link.config.clone(), RegistryConnect(link), recycling);
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(settings.registry_pool_size)
        .wait_timeout(Some(settings.pool_wait))
        .create_timeout(Some(Duration::from_secs(10)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .runtime(deadpool::Runtime::Tokio1)
        .build()
        .context("building the registry pool")?;
    Ok(RegistryPool { pool, waits: Waits::new(meter, "registry") })
}

/// The schema a fresh branch connection searches: one that never exists, so a query that
/// was not routed to a branch fails instead of reading the wrong rows.
const NO_SCHEMA: &str = "no_branch_selected";

/// A branch pool, its waits measured as `waits` (named by the pool's server).
pub fn branch_pool(url: &str, settings: &Settings, waits: &Waits) -> anyhow::Result<BranchPool> {
    let link = pool_link(url, NO_SCHEMA, settings)?;
    let waits = waits.named(&waits::pool_name(&link.config));
    let sizes = PoolSettings {
        max_size: settings.branch_pool_size,
        wait_timeout: settings.pool_wait,
        create_timeout: Duration::from_secs(10),
    };
    Ok(BranchPool::new(link, sizes, waits))
}

/// Lowercase letters, digits and underscores only.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `name` as a quoted SQL identifier (schema names are made by the server; quoting keeps
/// that from being load-bearing).
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A connection whose search_path is exactly one branch's schema.
pub struct BranchConn {
    conn: Lease,
    /// The branch's share of the pool this connection counts against (released with it).
    _share: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl BranchConn {
    /// Takes a connection for `schema` from the pool (one that served it before, when free)
    /// and makes its search_path `schema`, unless this connection was already switched to
    /// `schema` by us (the switch is a round trip, so it is skipped when provably unneeded).
    pub async fn checkout(pool: &BranchPool, schema: &Arc<str>) -> Result<Self, PoolError> {
        Ok(Self::checkout_deferred(pool, schema).await?.switched().await?)
    }

    /// Like [`BranchConn::checkout`], but the switch to `schema` goes in the same round trip
    /// as the first statement run through [`PendingBranchConn::reads`] (a request that starts
    /// with a read saves a round trip).
    pub async fn checkout_deferred(
        pool: &BranchPool,
        schema: &Arc<str>,
    ) -> Result<PendingBranchConn, PoolError> {
        let conn = pool.waits().measure(pool.get(Some(schema))).await?;
        let switch_to = (conn.schema().as_deref() != Some(&**schema)).then(|| schema.clone());
        Ok(PendingBranchConn { conn: Self { conn, _share: None }, switch_to: Mutex::new(switch_to) })
    }

    /// A connection for maintenance work (provisioning, migrations) that picks its own
    /// schema; it is handed back marked as pointing nowhere.
    pub async fn unrouted(pool: &BranchPool) -> Result<Self, PoolError> {
        let conn = pool.waits().measure(pool.get(None)).await?;
        conn.set_schema(None);
        Ok(Self { conn, _share: None })
    }

    /// The raw client, for work that changes session state; forgets the recorded schema.
    pub fn client_mut(&mut self) -> &mut Client {
        let client = &mut **self;
        client.set_schema(None);
        client
    }

    /// The statements of a request, as [`PendingBranchConn::reads`] gives them (none has a
    /// switch to carry here).
    pub fn reads(&self) -> Reads<'_> {
        Reads::on(&self.conn)
    }
}

impl Deref for BranchConn {
    type Target = Client;
    fn deref(&self) -> &Self::Target {
        &self.conn
    }
}

impl DerefMut for BranchConn {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conn
    }
}

/// A branch connection whose switch to the branch's schema may not be sent yet
/// ([`BranchConn::checkout_deferred`]). Its connection is reached only through
/// [`PendingBranchConn::reads`], whose first statement carries the switch, or as the
/// [`BranchConn`] that [`PendingBranchConn::switched`] yields once the switch is sent: nothing
/// can run on it under the schema of the branch it served before:
///
/// ```compile_fail
/// # async fn misuse(conn: clinic_server::db::PendingBranchConn) {
/// conn.batch_execute("DELETE FROM patients").await.unwrap();
/// # }
/// ```
pub struct PendingBranchConn {
    conn: BranchConn,
    /// The switch not sent yet; `None` once the server confirmed it (or none was needed).
    switch_to: Mutex<Option<Arc<str>>>,
}

impl PendingBranchConn {
    /// Counts this connection against a branch's share until it is handed back.
    pub fn holding(mut self, permit: tokio::sync::OwnedSemaphorePermit) -> Self {
        self.conn._share = Some(permit);
        self
    }

    /// The statements of a request that starts with a read: the first carries the pending
    /// switch to the branch's schema, if there is one.
    pub fn reads(&self) -> Reads<'_> {
        Reads { client: &self.conn.conn, switch_to: Some(&self.switch_to) }
    }

    /// Whether the switch is still to be sent (no statement has carried it yet).
    pub fn switch_pending(&self) -> bool {
        self.switch_to.lock().expect("switch poisoned").is_some()
    }

    /// The connection, its switch sent on its own now if no statement carried it yet.
    pub async fn switched(self) -> Result<BranchConn, PgError> {
        self.reads().switch_now().await?;
        Ok(self.conn)
    }
}

/// The statements of a request on one connection whose switch to a branch's schema may still
/// be pending (a registry connection never has one).
///
/// Invariant: no statement runs under another schema than the one switched to. The first
/// prepared statement run with [`Queries::read`] goes in the switch's round trip, as
/// `BEGIN; SET search_path` (one message), the statement, `COMMIT`: if the switch fails, the
/// transaction is aborted and the statement refused, whatever it is. Everything else sends
/// the switch alone first. The switch counts as done only once the server confirmed it.
pub struct Reads<'a> {
    client: &'a Client,
    switch_to: Option<&'a Mutex<Option<Arc<str>>>>,
}

impl<'a> Reads<'a> {
    /// Statements on a connection with no switch to make.
    pub fn on(client: &'a Client) -> Self {
        Self { client, switch_to: None }
    }

    fn pending(&self) -> Option<Arc<str>> {
        self.switch_to.and_then(|switch| switch.lock().expect("switch poisoned").clone())
    }

    fn switched(&self, schema: Arc<str>) {
        self.client.set_schema(Some(schema));
        if let Some(switch) = self.switch_to {
            *switch.lock().expect("switch poisoned") = None;
        }
    }

    /// Sends the pending switch, if any, on its own.
    pub async fn switch_now(&self) -> Result<(), PgError> {
        let Some(schema) = self.pending() else { return Ok(()) };
        // Forget the old schema first: if the switch fails halfway, the next checkout must
        // not trust this connection.
        self.client.set_schema(None);
        // One simple-protocol round trip; an unnamed prepared statement would take two.
        self.client.batch_execute(&format!("SET search_path TO {}", quote_ident(&schema))).await?;
        self.switched(schema);
        Ok(())
    }
}

impl Queries for Reads<'_> {
    async fn prepare_cached(&self, sql: &str) -> Result<Statement, PgError> {
        if let Some(schema) = self.pending() {
            // Kept for the schema switched to: the switch can still go with the statement.
            if let Some(statement) = self.client.cached(&schema, sql) {
                return Ok(statement);
            }
            // Statements are parsed under the search_path they will run under.
            self.switch_now().await?;
        }
        self.client.prepare_cached(sql).await
    }

    async fn query<T: ?Sized + ToStatement + Sync>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, PgError> {
        self.switch_now().await?;
        self.client.query(stmt, params).await
    }

    async fn query_opt<T: ?Sized + ToStatement + Sync>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, PgError> {
        self.switch_now().await?;
        self.client.query_opt(stmt, params).await
    }

    async fn query_one<T: ?Sized + ToStatement + Sync>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, PgError> {
        self.switch_now().await?;
        self.client.query_one(stmt, params).await
    }

    async fn execute<T: ?Sized + ToStatement + Sync>(
        &self,
        stmt: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, PgError> {
        self.switch_now().await?;
        self.client.execute(stmt, params).await
    }

    async fn read(&self, stmt: &Statement, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, PgError> {
        self.in_one_trip(stmt, params, None).await
    }
}

impl Reads<'_> {
    /// The rows of one prepared statement run under its generic plan, in one round trip (with
    /// the switch, when pending): for a statement whose plan does not hang on its parameters'
    /// values and costs more to make than to run, which PostgreSQL would plan on every call.
    pub async fn read_generic(
        &self,
        stmt: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, PgError> {
        self.in_one_trip(stmt, params, Some("SET LOCAL plan_cache_mode = force_generic_plan")).await
    }

    /// `BEGIN`, the pending switch and `setting` (one message), the statement, `COMMIT`; or
    /// the statement alone when there is neither switch nor setting to send with it.
    async fn in_one_trip(
        &self,
        stmt: &Statement,
        params: &[&(dyn ToSql + Sync)],
        setting: Option<&str>,
    ) -> Result<Vec<Row>, PgError> {
        // Only a plain name (the server's own, `branch_7`) rides with the statement: nothing
        // in it can fail to encode or to parse, which would leave the BEGIN unsent or unrun.
        let schema = self.pending().filter(|schema| is_plain_name(schema));
        if schema.is_none() {
            self.switch_now().await?;
            if setting.is_none() {
                return self.client.query(stmt, params).await;
            }
        }
        if schema.is_some() {
            self.client.set_schema(None);
        }
        let switch = schema.as_ref().map(|schema| format!("SET search_path TO {}", quote_ident(schema)));
        let begin =
            ["BEGIN"].into_iter().chain(switch.as_deref()).chain(setting).collect::<Vec<_>>().join("; ");
        // In this order, each sent as it is first polled: all three in one round trip. A
        // prepared statement is sent at once (a text would wait for its own preparation and
        // could then run after the COMMIT).
        let (began, rows, committed) = tokio::join!(
            biased;
            self.client.batch_execute(&begin),
            self.client.query(stmt, params),
            self.client.batch_execute("COMMIT"),
        );
        began?;
        let rows = rows?;
        committed?;
        if let Some(schema) = schema {
            self.switched(schema);
        }
        Ok(rows)
    }
}

/// A pooled connection, a branch connection, a transaction or a request's [`Reads`]: anything
/// that runs statements and caches them by text. The methods are tokio-postgres's, so code
/// reads the same on all.
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
    /// The rows of one prepared statement. On [`Reads`] whose switch to a branch's schema is
    /// still pending, the switch goes in the same round trip.
    fn read(
        &self,
        stmt: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Vec<Row>, PgError>> + Send {
        self.query(stmt, params)
    }
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
impl_queries!(Client, |c, sql| Client::prepare_cached(c, sql), &**c);
impl_queries!(Transaction<'_>, |c, sql| Transaction::prepare_cached(c, sql), &**c);

#[cfg(test)]
mod tests {
    use super::{branch_pool, is_plain_name, registry_pool};

    /// Every request takes a connection, and its future holds the state of taking one: that
    /// state must not include making a connection (boxed where it starts), which alone was
    /// 12.9 KB, moved with every request.
    #[test]
    fn taking_a_connection_does_not_carry_the_state_of_making_one() {
        const MOST: usize = 4096;
        let url = "postgres://nobody@127.0.0.1:1/nothing";
        let settings = crate::config::Settings::for_database(url);
        let meter = opentelemetry::global::meter("test");
        let registry = registry_pool(url, &settings, &meter).expect("a pool is built without connecting");
        let branches =
            branch_pool(url, &settings, registry.waits()).expect("a pool is built without connecting");
        // Made, never polled: only their sizes are looked at.
        let registry_get = registry.get();
        let branch_get = branches.get(Some("branch_1"));
        assert!(size_of_val(&registry_get) <= MOST, "registry get: {} bytes", size_of_val(&registry_get));
        assert!(size_of_val(&branch_get) <= MOST, "branch get: {} bytes", size_of_val(&branch_get));
    }

    #[test]
    fn only_names_that_cannot_break_the_switch_message_ride_with_a_statement() {
        for plain in ["branch_7", "spare_branch_00ff", "b"] {
            assert!(is_plain_name(plain), "{plain}");
        }
        for other in ["", "Branch_7", "branch 7", "branch\"7", "branch;7", "brânch", "branch\u{0}7"] {
            assert!(!is_plain_name(other), "{other:?}");
        }
    }
}

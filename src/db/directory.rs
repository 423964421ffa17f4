//! The pool map: which schema, on which database server, serves a branch.
//!
//! Invariant: a query made for branch A runs on a connection whose search_path is exactly
//! A's schema. [`Directory::connect`] and [`Directory::connect_deferred`] are the only ways
//! handlers get a branch connection; both go through [`BranchConn::checkout_deferred`], whose
//! connection is reached only once its schema is set or verified (or by the read that sets it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::{BranchConn, BranchPool, PendingBranchConn, RegistryPool};
use crate::cache::FreshCache;
use crate::config::Settings;
use crate::http::error::{ApiError, ApiResult};

/// Everything needed to serve one branch.
pub struct BranchRoute {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub schema: Arc<str>,
    /// IANA time zone: the branch's "today" and local dates.
    pub timezone: String,
    pub pool: BranchPool,
    /// Set when the last migration of this branch failed: it answers 503 until fixed.
    pub migration_failed: bool,
    /// Set while a move makes its last copy: writes answer 503, reads go on.
    pub frozen: bool,
}

impl BranchRoute {
    /// The branch's local date now, by the database's clock: the one way the server knows a
    /// branch's "today" (queue days, document dates, dashboards, yearly numbers).
    pub async fn today(&self, client: &impl super::Queries) -> ApiResult<time::Date> {
        Ok(self.clock(client).await?.1)
    }

    /// The database's "now" (the transaction's start) and the branch's local date then.
    pub async fn clock(&self, client: &impl super::Queries) -> ApiResult<(time::OffsetDateTime, time::Date)> {
        let stmt = client.prepare_cached("SELECT now(), (now() AT TIME ZONE $1)::date").await?;
        let row = client.query_one(&stmt, &[&self.timezone]).await?;
        Ok((row.get(0), row.get(1)))
    }
}

/// The code of branch `id` and its local date now, read in the registry through `client` (a
/// registry write's own transaction: no other connection is taken while it holds one).
pub async fn code_and_today(client: &impl super::Queries, id: i64) -> ApiResult<(String, time::Date)> {
    let stmt = client
        .prepare_cached("SELECT code, (now() AT TIME ZONE timezone)::date FROM branches WHERE id = $1")
        .await?;
    let row = client.query_opt(&stmt, &[&id]).await?;
    let row = row.ok_or_else(|| ApiError::field("branch_id", "The branch does not exist."))?;
    Ok((row.get(0), row.get(1)))
}

impl std::fmt::Debug for BranchRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BranchRoute").field("id", &self.id).field("schema", &self.schema).finish()
    }
}

/// Why a branch id does not resolve to a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unroutable {
    /// No such branch, or it is archived or still being provisioned.
    Unknown,
}

pub struct Directory {
    registry: RegistryPool,
    registry_url: String,
    settings: Settings,
    /// One pool per database server URL, shared by all branches on it.
    pools: Mutex<HashMap<String, BranchPool>>,
    routes: FreshCache<i64, Option<Arc<BranchRoute>>>,
    /// Per branch, the connections it may hold at once (its fair share of its server's
    /// pool), so that one busy branch cannot starve the others. Kept apart from the routes so
    /// that reloading a route does not reset what a branch holds.
    shares: Mutex<HashMap<i64, Arc<Semaphore>>>,
}

impl Directory {
    pub fn new(registry: RegistryPool, registry_url: &str, settings: &Settings) -> anyhow::Result<Self> {
        // The time limit bounds how long another instance's archive or migration change can
        // go unseen if a notification is lost.
        let routes = FreshCache::new(10_000, Duration::from_secs(60), Some(Duration::from_secs(600)));
        let directory = Self {
            registry,
            registry_url: registry_url.to_owned(),
            settings: settings.clone(),
            pools: Mutex::new(HashMap::new()),
            routes,
            shares: Mutex::new(HashMap::new()),
        };
        directory.pool_for(None)?;
        Ok(directory)
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn registry(&self) -> &RegistryPool {
        &self.registry
    }

    /// The registry database's URL (holds credentials: never shown).
    pub fn registry_url(&self) -> &str {
        &self.registry_url
    }

    /// Whether a branch's own database URL names only hosts operators allowed
    /// (`BRANCH_DATABASE_HOSTS`, else the registry's own hosts): a request must not make the
    /// server connect wherever it says.
    pub fn allows_database_url(&self, url: &str) -> bool {
        let Ok(config) = super::tls::plain_config(url) else { return false };
        let registry_hosts =
            || super::tls::plain_config(&self.registry_url).map(|c| hosts_of(&c)).unwrap_or_default();
        let allowed: Vec<String> = match &self.settings.branch_database_hosts {
            Some(list) => list.iter().map(|h| h.to_ascii_lowercase()).collect(),
            None => registry_hosts(),
        };
        let named = hosts_of(&config);
        !named.is_empty() && named.iter().all(|host| allowed.contains(host))
    }

    /// The pool of the server that holds a branch: its own database, or the registry's.
    pub fn pool_for(&self, database_url: Option<&str>) -> anyhow::Result<BranchPool> {
        let url = database_url.unwrap_or(&self.registry_url);
        let mut pools = self.pools.lock().expect("pool map poisoned");
        if let Some(pool) = pools.get(url) {
            return Ok(pool.clone());
        }
        let pool = super::branch_pool(url, &self.settings, self.registry.waits())?;
        pools.insert(url.to_owned(), pool.clone());
        Ok(pool)
    }

    /// Resolves a branch id to its route. Concurrent first requests for one branch share
    /// one registry lookup.
    pub async fn route(&self, id: i64) -> ApiResult<Result<Arc<BranchRoute>, Unroutable>> {
        let loaded = self
            .routes
            .get_or_load(id, || async { Ok::<_, ApiError>(self.load_route(id).await?.map(Arc::new)) })
            .await
            .map_err(ApiError::from)?;
        Ok(loaded.ok_or(Unroutable::Unknown))
    }

    async fn load_route(&self, id: i64) -> ApiResult<Option<BranchRoute>> {
        let client = self.registry.get().await?;
        let row = client
            .query_opt(
                "SELECT code, name, schema_name, database_url, migration_state, timezone, frozen
                   FROM branches WHERE id = $1 AND status = 'active'",
                &[&id],
            )
            .await?;
        let Some(row) = row else { return Ok(None) };
        let database_url: Option<String> = row.get("database_url");
        Ok(Some(BranchRoute {
            id,
            code: row.get("code"),
            name: row.get("name"),
            schema: Arc::from(row.get::<_, String>("schema_name")),
            timezone: row.get("timezone"),
            // A URL that cannot be connected to as written (its CA file gone, a bad sslmode):
            // the branch's server is unreachable, as when it is down; the log says why.
            pool: self.pool_for(database_url.as_deref()).map_err(|e| {
                tracing::error!(
                    branch = id,
                    error = format!("{e:#}"),
                    "the branch's database URL cannot be used"
                );
                ApiError::database_unavailable()
            })?,
            migration_failed: row.get::<_, String>("migration_state") == "failed",
            frozen: row.get("frozen"),
        }))
    }

    /// Forgets a cached route (after a branch changes, or when told by another instance).
    pub async fn invalidate(&self, id: i64) {
        self.routes.invalidate(&id).await;
    }

    /// The semaphore bounding what branch `id` holds of its server's pool.
    fn share(&self, id: i64) -> Arc<Semaphore> {
        let mut shares = self.shares.lock().expect("share map poisoned");
        let permits = (self.settings.branch_pool_size * self.settings.branch_pool_share_percent / 100).max(1);
        shares.entry(id).or_insert_with(|| Arc::new(Semaphore::new(permits))).clone()
    }

    pub fn invalidate_all(&self) {
        self.routes.invalidate_all();
    }

    /// A connection for `route`, its search_path set to the branch's schema.
    pub async fn connect(&self, route: &BranchRoute) -> ApiResult<BranchConn> {
        let conn = self.connect_deferred(route).await?;
        // As a failure to take the connection, which the switch was part of.
        Ok(conn.switched().await.map_err(super::PoolError::Backend)?)
    }

    /// A connection for `route` whose switch to the branch's schema goes with its first read
    /// ([`BranchConn::checkout_deferred`]).
    pub async fn connect_deferred(&self, route: &BranchRoute) -> ApiResult<PendingBranchConn> {
        if route.migration_failed {
            return Err(ApiError::unavailable(
                "branch_unavailable",
                "This branch is under maintenance; try again later.",
            ));
        }
        let busy = || ApiError::unavailable("branch_busy", "This branch is busy; try again shortly.");
        let permit = tokio::time::timeout(self.settings.pool_wait, self.share(route.id).acquire_owned())
            .await
            .map_err(|_| busy())?
            .map_err(|_| busy())?;
        Ok(BranchConn::checkout_deferred(&route.pool, &route.schema).await?.holding(permit))
    }

    /// Closes every branch pool (at shutdown, before the database goes away).
    pub fn close(&self) {
        for pool in self.pools.lock().expect("pool map poisoned").values() {
            pool.close();
        }
    }

    /// The state of every pool, by its name (`registry`, or a branch pool's server), for the
    /// pool metrics.
    pub fn pool_statuses(&self) -> Vec<(String, deadpool::Status)> {
        let pools = self.pools.lock().expect("pool map poisoned");
        let branch = pools.values().map(|p| (p.name().to_owned(), p.status()));
        std::iter::once(("registry".to_owned(), self.registry.status())).chain(branch).collect()
    }

    /// Connections held open across every pool, for the health check and tests.
    pub fn pool_status(&self) -> (usize, usize) {
        let pools = self.pools.lock().expect("pool map poisoned");
        let branch: usize = pools.values().map(|p| p.status().size).sum();
        (self.registry.status().size, branch)
    }
}

/// Every host a connection configuration names (names, addresses, socket folders), lowercased.
fn hosts_of(config: &tokio_postgres::Config) -> Vec<String> {
    let names = config.get_hosts().iter().map(|host| match host {
        tokio_postgres::config::Host::Tcp(name) => name.to_ascii_lowercase(),
        tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
    });
    names.chain(config.get_hostaddrs().iter().map(|ip| ip.to_string())).collect()
}

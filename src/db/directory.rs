//! The pool map: which schema, on which database server, serves a branch.
//!
//! Invariant: a query made for branch A runs on a connection whose search_path is exactly
//! A's schema. [`Directory::connect`] is the only way handlers get a branch connection, and it
//! goes through [`BranchConn::checkout`], which sets or verifies the schema every time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moka::future::Cache;
use moka::policy::EvictionPolicy;

use super::{BranchConn, BranchPool, RegistryPool};
use crate::config::Settings;
use crate::http::error::{ApiError, ApiResult};

/// Everything needed to serve one branch.
pub struct BranchRoute {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub schema: Arc<str>,
    pub pool: BranchPool,
    /// Set when the last migration of this branch failed: it answers 503 until fixed.
    pub migration_failed: bool,
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
    routes: Cache<i64, Arc<BranchRoute>>,
}

impl Directory {
    pub fn new(registry: RegistryPool, registry_url: &str, settings: &Settings) -> anyhow::Result<Self> {
        let routes = Cache::builder()
            // LRU: TinyLFU may refuse a brand-new entry when full, which would make every
            // request of a new branch re-resolve it.
            .eviction_policy(EvictionPolicy::lru())
            .max_capacity(10_000)
            .time_to_idle(Duration::from_secs(600))
            // Bounds how long another instance's archive or migration change can go unseen
            // if a notification is lost.
            .time_to_live(Duration::from_secs(60))
            .build();
        let directory = Self {
            registry,
            registry_url: registry_url.to_owned(),
            settings: settings.clone(),
            pools: Mutex::new(HashMap::new()),
            routes,
        };
        directory.pool_for(None)?;
        Ok(directory)
    }

    pub fn registry(&self) -> &RegistryPool {
        &self.registry
    }

    /// The pool of the server that holds a branch: its own database, or the registry's.
    pub fn pool_for(&self, database_url: Option<&str>) -> anyhow::Result<BranchPool> {
        let url = database_url.unwrap_or(&self.registry_url);
        let mut pools = self.pools.lock().expect("pool map poisoned");
        if let Some(pool) = pools.get(url) {
            return Ok(pool.clone());
        }
        let pool = super::branch_pool(url, &self.settings)?;
        pools.insert(url.to_owned(), pool.clone());
        Ok(pool)
    }

    /// Resolves a branch id to its route. Concurrent first requests for one branch share
    /// one registry lookup.
    pub async fn route(&self, id: i64) -> ApiResult<Result<Arc<BranchRoute>, Unroutable>> {
        let loaded = self
            .routes
            .try_get_with(id, async {
                match self.load_route(id).await {
                    Ok(Some(route)) => Ok(Arc::new(route)),
                    Ok(None) => Err(None),
                    Err(e) => Err(Some(e)),
                }
            })
            .await;
        match loaded {
            Ok(route) => Ok(Ok(route)),
            Err(e) => match &*e {
                None => Ok(Err(Unroutable::Unknown)),
                Some(cause) => Err(ApiError::Internal(anyhow::anyhow!("resolving branch {id}: {cause:#}"))),
            },
        }
    }

    async fn load_route(&self, id: i64) -> anyhow::Result<Option<BranchRoute>> {
        let client = self.registry.get().await?;
        let row = client
            .query_opt(
                "SELECT code, name, schema_name, database_url, migration_state
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
            pool: self.pool_for(database_url.as_deref())?,
            migration_failed: row.get::<_, String>("migration_state") == "failed",
        }))
    }

    /// Forgets a cached route (after a branch changes, or when told by another instance).
    pub async fn invalidate(&self, id: i64) {
        self.routes.invalidate(&id).await;
    }

    pub fn invalidate_all(&self) {
        self.routes.invalidate_all();
    }

    /// A connection for `route`, its search_path set to the branch's schema.
    pub async fn connect(&self, route: &BranchRoute) -> ApiResult<BranchConn> {
        if route.migration_failed {
            return Err(ApiError::unavailable(
                "branch_unavailable",
                "This branch is under maintenance; try again later.",
            ));
        }
        Ok(BranchConn::checkout(&route.pool, &route.schema).await?)
    }

    /// Connections held open across every pool, for the health check and tests.
    pub fn pool_status(&self) -> (usize, usize) {
        let pools = self.pools.lock().expect("pool map poisoned");
        let branch: usize = pools.values().map(|p| p.status().size).sum();
        (self.registry.status().size, branch)
    }
}

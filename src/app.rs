//! Application state, start-up sequence and the route table.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use salvo::catcher::Catcher;
use salvo::conn::tcp::TcpAcceptor;
use salvo::oapi::swagger_ui::{Config, SwaggerUi};
use salvo::prelude::*;
use salvo::server::ServerHandle;

use crate::auth::password::Hasher;
use crate::auth::{self, AuthCache};
use crate::config::Settings;
use crate::db::{self, RegistryPool};
use crate::http::docs::Doc;
use crate::http::rate_limit::Limits;
use crate::http::{catcher, trace};
use crate::resource::{self, Scope};
use crate::tenancy::{Directory, branches};
use crate::{health, notify};

pub struct AppState {
    pub settings: Settings,
    pub registry: RegistryPool,
    pub directory: Arc<Directory>,
    pub auth: AuthCache,
    pub hasher: Hasher,
    pub limits: Limits,
    pub mailer: crate::mail::Mailer,
    listener: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl AppState {
    /// The state injected by the service; every route runs behind that injection.
    pub fn of(depot: &Depot) -> Arc<AppState> {
        depot.get_typed::<Arc<AppState>>().expect("app state is injected for every request").clone()
    }

    /// Forwarded headers are believed only from trusted proxies.
    pub fn trusts_forwarded_headers(&self, req: &Request) -> bool {
        req.remote_addr()
            .ip()
            .is_some_and(|ip| self.settings.trusted_proxies.iter().any(|net| net.contains(ip)))
    }

    /// Creates a branch (see [`branches::create`]) and drops this instance's cached view of
    /// the users granted access before returning; other instances hear it by notification.
    pub async fn create_branch(
        &self,
        new: branches::NewBranch,
        grant_to: &[i64],
    ) -> crate::http::error::ApiResult<branches::Branch> {
        let branch = branches::create(&self.directory, new, grant_to).await?;
        for user in grant_to {
            notify::Invalidate::invalidate(self, notify::Topic::User(*user)).await;
        }
        Ok(branch)
    }

    /// Commits a registry transaction whose change makes cached entries stale: the
    /// notifications for `topics` are queued in it (so other instances hear of the change
    /// exactly when it commits), and this instance drops its own entries before the caller
    /// answers.
    pub async fn commit(
        &self,
        tx: deadpool_postgres::Transaction<'_>,
        topics: &[notify::Topic],
    ) -> crate::http::error::ApiResult<()> {
        for topic in topics {
            notify::publish(&tx, *topic).await?;
        }
        tx.commit().await?;
        for topic in topics {
            notify::Invalidate::invalidate(self, *topic).await;
        }
        Ok(())
    }

    /// Stops background work and closes the pools (before the database goes away).
    pub fn shutdown(&self) {
        if let Some(listener) = self.listener.lock().expect("listener slot").take() {
            listener.abort();
        }
        self.registry.close();
    }

    pub fn client_ip(&self, req: &Request) -> String {
        crate::http::client_ip(req, &self.settings.trusted_proxies)
            .map_or_else(|| "unknown".into(), |ip| ip.to_string())
    }
}

/// Connects, migrates the registry and every branch, bootstraps an empty registry, and
/// starts listening for cache invalidations.
pub async fn prepare(settings: Settings, database_url: &str) -> anyhow::Result<Arc<AppState>> {
    let registry = db::registry_pool(database_url, &settings)?;
    {
        let mut client = registry.get().await.context("connecting to the registry database")?;
        let applied = db::migrate::migrate_registry(&mut client).await?;
        if applied > 0 {
            tracing::info!(applied, "registry migrated");
        }
        auth::permissions::sync_catalogue(&client).await?;
    }
    let directory = Arc::new(Directory::new(registry.clone(), database_url, &settings)?);
    let state = Arc::new(AppState {
        hasher: Hasher::new(settings.password_hash_log_n)?,
        limits: Limits::new(&settings),
        mailer: crate::mail::Mailer::from_settings(&settings)?,
        auth: AuthCache::default(),
        registry,
        directory,
        settings,
        listener: std::sync::Mutex::new(None),
    });
    auth::bootstrap::run_if_empty(&state).await?;
    let outcomes = branches::migrate_all(&state.directory, state.settings.migrate_parallelism).await?;
    for outcome in outcomes.iter().filter(|o| o.result.is_some()) {
        match &outcome.result {
            Some(Ok(m)) => tracing::info!(
                branch = outcome.code,
                version = m.version,
                applied = m.applied,
                "branch migrated"
            ),
            Some(Err(e)) => {
                tracing::error!(branch = outcome.code, error = e, "branch migration failed; it answers 503")
            }
            None => {}
        }
    }
    let listener = notify::spawn_listener(database_url.to_owned(), state.clone());
    *state.listener.lock().expect("listener slot") = Some(listener);
    Ok(state)
}

/// Every route of the API, with its hoops.
fn api_router() -> Router {
    let mut branch_scoped =
        Router::new().hoop(crate::tenancy::hoop::require_branch).push(crate::clinical::extra_routes());
    let mut global = Router::new();
    for r in resource::served_generically() {
        match r.scope {
            Scope::Branch => branch_scoped = branch_scoped.push(resource::routes::router(r)),
            Scope::Registry => global = global.push(resource::routes::router(r)),
        }
    }
    let authenticated = Router::new()
        .hoop(auth::Authenticate { metered: true })
        .push(auth::routes::authenticated())
        .push(crate::admin::router())
        .push(global)
        .push(branch_scoped);
    Router::with_path("api/v1")
        .push(Router::with_path("public/health").get(health::health))
        .push(auth::routes::public())
        // Counted by its own per-user limit instead of the general one.
        .push(auth::routes::change_password())
        .push(authenticated)
}

/// The OpenAPI document of everything `api_router` serves.
pub fn openapi() -> salvo::oapi::OpenApi {
    let mut doc = Doc::default();
    health::document(&mut doc);
    auth::routes::document(&mut doc);
    for r in resource::all() {
        resource::routes::document(&mut doc, r);
    }
    crate::admin::document(&mut doc);
    crate::clinical::document(&mut doc);
    doc.finish()
}

pub fn service(state: Arc<AppState>) -> Service {
    let router = Router::new()
        .hoop(salvo::affix_state::inject(state))
        .push(api_router())
        .push(openapi().into_router("docs/api/openapi.json"))
        // No online spec validator: the page must work on a closed network.
        .push(
            SwaggerUi::new(Config::new(["/docs/api/openapi.json"]).validator_url("none"))
                .into_router("docs/api"),
        );
    Service::new(router)
        .hoop(CatchPanic::new())
        .hoop(trace::RequestSpan)
        .catcher(Catcher::default().hoop(catcher::json_errors))
}

/// A server listening in the background.
pub struct Running {
    pub addr: SocketAddr,
    pub handle: ServerHandle,
    pub task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub async fn stop(self) {
        self.handle.stop_graceful(Some(Duration::from_secs(30)));
        let _ = self.task.await;
    }
}

pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpAcceptor> {
    TcpListener::new(addr).try_bind().await.with_context(|| format!("cannot listen on {addr}"))
}

/// Starts serving `state` on `addr` (port 0 picks a free port).
pub async fn spawn(state: Arc<AppState>, addr: SocketAddr) -> anyhow::Result<Running> {
    let acceptor = bind(addr).await?;
    let addr = acceptor.local_addr()?;
    let server = Server::new(acceptor);
    let handle = server.handle();
    let service = service(state);
    let task = tokio::spawn(async move { server.serve(service).await });
    Ok(Running { addr, handle, task })
}

//! The application state every request runs with: settings, pools, caches, limits, mailer.
//!
//! It sits below every domain (they all receive it) and above the infrastructure it bundles,
//! so that no domain has to import another to reach a pool or a cache.

pub mod drain;
pub mod session;

use std::sync::Arc;

use salvo::prelude::*;

use crate::config::Settings;
use crate::db::RegistryPool;
use crate::db::directory::Directory;
use crate::db::read_audit::ReadAudit;
use crate::http::error::ApiResult;
use crate::http::rate_limit::Limits;
use crate::mail::Mailer;
use crate::metrics::Metrics;
use crate::notify::{self, Invalidate, Topic};
use crate::security::password::Hasher;
pub use session::{AuthCache, AuthUser};

pub struct AppState {
    pub settings: Settings,
    pub registry: RegistryPool,
    pub directory: Arc<Directory>,
    pub auth: AuthCache,
    pub hasher: Hasher,
    pub limits: Arc<Limits>,
    pub mailer: Mailer,
    /// This instance's metrics (`GET /metrics`, OTLP).
    pub metrics: Arc<Metrics>,
    /// Events heard from any instance (queue changes), for live displays.
    pub events: tokio::sync::broadcast::Sender<Event>,
    /// Cached entries made stale, heard from any instance: what a long-lived answer (a
    /// display's stream) holds on a token's or a user's behalf is checked again on these.
    pub invalidations: tokio::sync::broadcast::Sender<Topic>,
    /// Started when the instance begins shutting down (see `app::Running`).
    pub drain: drain::Drain,
    /// Records of reads, written in batches (`db::read_audit`).
    pub read_audit: ReadAudit,
    /// Woken when a create may have taken a spare branch schema (`tenancy::spares`).
    pub spare_schema_taken: tokio::sync::Notify,
    background: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// A change a live display follows: `topic` says which (`queue:<branch>:<service>`), `data`
/// is the changed record.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Event {
    #[serde(default)]
    pub topic: String,
    #[serde(default)]
    pub data: serde_json::Value,
}

impl AppState {
    /// The state; `metrics` (which the pools were made with) starts observing what the state
    /// holds.
    pub fn new(
        settings: Settings,
        registry: RegistryPool,
        directory: Arc<Directory>,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let hasher = Hasher::new(settings.password_hash_cost, settings.password_hash_limits)?;
        let limits = Arc::new(Limits::new(&settings));
        let (read_audit, read_audit_writer) = ReadAudit::start(
            directory.clone(),
            settings.read_audit_queue,
            settings.pool_wait,
            settings.read_audit_hold,
            settings.read_audit_branches_per_transaction,
        );
        metrics.observe(&directory, &hasher, &limits, &read_audit);
        Ok(Self {
            read_audit,
            hasher,
            limits,
            metrics,
            mailer: Mailer::from_settings(&settings)?,
            auth: AuthCache::default(),
            events: tokio::sync::broadcast::channel(1024).0,
            invalidations: tokio::sync::broadcast::channel(256).0,
            drain: drain::Drain::default(),
            spare_schema_taken: tokio::sync::Notify::new(),
            registry,
            directory,
            settings,
            background: std::sync::Mutex::new(vec![read_audit_writer]),
        })
    }

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

    pub fn client_ip(&self, req: &Request) -> String {
        crate::http::client_ip(req, &self.settings.trusted_proxies)
            .map_or_else(|| "unknown".into(), |ip| ip.to_string())
    }

    /// The caller's bucket in the bad-token limit: made-up tokens and display keys are
    /// counted per client address together.
    pub fn bad_token_key(&self, req: &Request) -> String {
        format!("bad-token:{}", self.client_ip(req))
    }

    /// Commits a registry transaction whose change makes cached entries stale: the
    /// notifications for `topics` are queued in it (so other instances hear of the change
    /// exactly when it commits), and this instance drops its own entries before the caller
    /// answers.
    pub async fn commit(&self, tx: crate::db::Transaction<'_>, topics: &[Topic]) -> ApiResult<()> {
        for topic in topics {
            notify::publish(&tx, *topic).await?;
        }
        tx.commit().await?;
        self.forget(topics).await;
        Ok(())
    }

    /// Drops this instance's cached entries for `topics` (already published with the change).
    pub async fn forget(&self, topics: &[Topic]) {
        for topic in topics {
            self.invalidate(*topic).await;
        }
    }

    /// Keeps a background task (listener, periodic job) to stop at shutdown.
    pub fn keep(&self, task: tokio::task::JoinHandle<()>) {
        self.background.lock().expect("task list").push(task);
    }

    /// Stops background work and closes the pools (before the database goes away).
    pub fn shutdown(&self) {
        for task in self.background.lock().expect("task list").drain(..) {
            task.abort();
        }
        self.registry.close();
        self.directory.close();
        self.metrics.shutdown();
    }
}

impl AppState {
    /// Publishes an event to the displays of every instance (this one hears it back).
    pub async fn publish(&self, topic: &str, data: serde_json::Value) {
        let payload = serde_json::json!({ "topic": topic, "data": data }).to_string();
        let sent = async {
            notify::publish_event(&self.registry.get().await?, &payload).await.map_err(anyhow::Error::from)
        };
        if let Err(e) = sent.await {
            tracing::warn!(error = format!("{e:#}"), topic, "could not publish an event");
        }
    }
}

impl Invalidate for AppState {
    fn relay(&self, payload: &str) {
        let Ok(event) = serde_json::from_str::<Event>(payload) else { return };
        // Nobody listening is fine.
        let _ = self.events.send(event);
    }

    async fn invalidate(&self, topic: Topic) {
        self.drop_cached(topic).await;
        // After the caches: a stream that checks again on hearing this reads afresh.
        let _ = self.invalidations.send(topic);
    }
}

impl AppState {
    async fn drop_cached(&self, topic: Topic) {
        match topic {
            Topic::Token(id) => self.auth.forget_token(id).await,
            Topic::User(id) => self.auth.forget_user(id).await,
            Topic::Branch(id) => {
                self.directory.invalidate(id).await;
                // Branch lists inside cached users may name it.
                self.auth.forget_all_users();
            }
            // Nothing cached: a display's stream checks its key again on hearing it.
            Topic::DisplayKey(_) => {}
            Topic::All => {
                self.auth.forget_all();
                self.directory.invalidate_all();
            }
        }
    }
}

//! Reliability: PostgreSQL restarting under load, graceful shutdown, the orchestrators'
//! probes, the container image, a point-in-time recovery. Tests that need a database they
//! may restart or stop start their own PostgreSQL cluster under `var/` ([`Cluster`]) and
//! remove it at the end.

mod deployment;
mod errors;
mod pitr;
mod probes;
mod restart;
mod shutdown;

use std::path::PathBuf;
use std::sync::Arc;

use clinic_server::app::{self, Running};
use clinic_server::config::Settings;
use clinic_server::embedded_pg::{EmbeddedPostgres, Extras};
use clinic_server::state::AppState;
use serde_json::json;

use crate::support::{ADMIN_PASSWORD, assert_status, client, reply, test_settings};

/// A private PostgreSQL cluster under `var/`, stopped and removed when dropped.
pub struct Cluster {
    pg: Option<EmbeddedPostgres>,
    folder: PathBuf,
    /// Database `clinic` on it.
    pub url: String,
}

impl Cluster {
    pub async fn start() -> Self {
        Self::start_with(Extras::default()).await
    }

    /// A cluster running with `extras` (a TCP port, TLS...).
    pub async fn start_with(extras: Extras) -> Self {
        let var = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("var");
        let name = format!("pg-{}", &clinic_server::security::tokens::random_secret()[..10]);
        let (pg, url) =
            EmbeddedPostgres::start_with(&var, &name, extras).await.expect("a private PostgreSQL cluster");
        Self { folder: pg.folder().to_owned(), pg: Some(pg), url }
    }

    pub fn pg(&self) -> &EmbeddedPostgres {
        self.pg.as_ref().expect("cluster")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let Some(pg) = self.pg.take() else { return };
        let folder = self.folder.clone();
        // Drop runs outside async context: use a short-lived runtime on its own thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(pg.stop());
            let _ = std::fs::remove_dir_all(folder);
        })
        .join();
    }
}

/// A server on a database of our choosing (a private cluster, or a test database), which
/// the test may drain.
pub struct Server {
    pub state: Arc<AppState>,
    pub base: String,
    pub http: reqwest::Client,
    pub admin_token: String,
    pub running: Option<Running>,
}

impl Server {
    /// Migrates `url` (bootstrapping an empty registry) and serves it on a free port.
    pub async fn start(url: &str, configure: impl FnOnce(&mut Settings)) -> Self {
        let mut settings = test_settings(url);
        configure(&mut settings);
        let state = app::prepare(settings, url).await.expect("app prepares");
        let running = app::spawn(state.clone(), "127.0.0.1:0".parse().unwrap()).await.expect("app listens");
        let base = format!("http://{}", running.addr);
        let http = client();
        let mut server = Self { state, base, http, admin_token: String::new(), running: Some(running) };
        server.admin_token = server.login().await;
        server
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn login(&self) -> String {
        let req = self.http.post(self.url("/api/v1/auth/login"));
        let r = reply(req.json(&json!({ "username": "admin", "password": ADMIN_PASSWORD }))).await;
        assert_status(&r, 200);
        r.body["data"]["token"].as_str().unwrap().to_owned()
    }

    /// The bootstrap branch `MAIN`.
    pub async fn main_branch(&self) -> i64 {
        let client = self.state.registry.get().await.unwrap();
        client.query_one("SELECT id FROM branches WHERE code = 'MAIN'", &[]).await.unwrap().get(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.handle.stop_forceful();
            running.task.abort();
        }
        self.state.shutdown();
    }
}

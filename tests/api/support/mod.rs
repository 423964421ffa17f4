//! Test harness: each test gets its own freshly created database on a real PostgreSQL and
//! its own server on a random port, talked to over HTTP. The database is dropped when the
//! [`TestApp`] goes out of scope, even when the test fails.
//!
//! PostgreSQL comes from `TEST_DATABASE_URL` (a server URL; each test creates a database
//! there) or, when unset, from the embedded cluster under `var/test-pg`.
#![allow(dead_code)]

mod db;
pub mod mail;
pub mod printed;
pub mod smtp;
pub mod sse;
mod tools;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clinic_server::app::{self, Running};
use clinic_server::config::Settings;
use clinic_server::embedded_pg::{self, EmbeddedPostgres};
use clinic_server::state::AppState;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

pub use db::{TestDb, database_url, server_url};
pub use tools::tool_present;

/// Today's date in UTC (the main branch's zone in the tests).
pub fn today() -> time::Date {
    time::OffsetDateTime::now_utc().date()
}

/// How long a test waits for what should happen at once (an event reaching a stream, a
/// record written behind the answer): long enough for a loaded 2-core machine, and a
/// bound, so that what never happens fails with a message rather than hanging.
pub const SOON: Duration = Duration::from_secs(15);

/// Waits for `work`, failing with `what` when it has not finished within `bound`.
#[track_caller]
pub fn within<T>(bound: Duration, what: &str, work: impl Future<Output = T>) -> impl Future<Output = T> {
    let caller = std::panic::Location::caller();
    async move {
        tokio::time::timeout(bound, work)
            .await
            .unwrap_or_else(|_| panic!("{what}: not within {bound:?} (at {caller})"))
    }
}

/// Checks `condition` every 20 ms until it holds, failing with `what` after `bound`.
pub async fn eventually(bound: Duration, what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let started = tokio::time::Instant::now();
    while !condition().await {
        assert!(started.elapsed() < bound, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The HTTP client of every test: redirects are answers to look at, not to follow. Its TLS
/// goes unused (the tests' listeners are plain) but is built with every client: on ring, the
/// server's provider, given here as the server gives it rather than installed for the whole
/// process, where it could hide a server path that leaned on a process-wide default.
pub fn client() -> reqwest::Client {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring has the default protocol versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .tls_backend_preconfigured(tls)
        .build()
        .expect("HTTP client")
}

pub const ADMIN_PASSWORD: &str = "admin-password-1";

pub fn test_settings(url: &str) -> Settings {
    let mut settings = Settings::for_database(url);
    settings.admin_password = Some(ADMIN_PASSWORD.into());
    settings.password_hash_cost = clinic_server::config::HashCost { memory_kib: 8, iterations: 1 };
    settings.password_hash_weak_for_tests = true;
    settings.pool_wait = std::time::Duration::from_secs(10);
    settings
}

pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub state: Arc<AppState>,
    pub admin_token: String,
    running: Option<Running>,
    // Last: the database is dropped after the server stopped using it.
    pub db: TestDb,
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    pub async fn spawn_with(configure: impl FnOnce(&mut Settings)) -> Self {
        let db = TestDb::create().await;
        let mut settings = test_settings(&db.url);
        configure(&mut settings);
        let state = app::prepare(settings, &db.url).await.expect("app prepares");
        let running = app::spawn(state.clone(), "127.0.0.1:0".parse().unwrap()).await.expect("app listens");
        let base = format!("http://{}", running.addr);
        let http = client();
        let mut app = Self { base, http, state, admin_token: String::new(), running: Some(running), db };
        app.admin_token = app.login("admin", ADMIN_PASSWORD).await;
        app
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Logs in and returns the token (panics on failure).
    pub async fn login(&self, username: &str, password: &str) -> String {
        let r = self.login_reply(username, password).await;
        assert_status(&r, 200);
        r.body["data"]["token"].as_str().unwrap().to_owned()
    }

    /// `POST /auth/login` with these credentials, whatever the answer.
    pub async fn login_reply(&self, username: &str, password: &str) -> Reply {
        reply(
            self.http
                .post(self.url("/api/v1/auth/login"))
                .json(&json!({ "username": username, "password": password })),
        )
        .await
    }

    /// A request as the admin, in `branch` when given.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        branch: Option<i64>,
    ) -> reqwest::RequestBuilder {
        self.request_as(&self.admin_token.clone(), method, path, branch)
    }

    pub fn request_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        branch: Option<i64>,
    ) -> reqwest::RequestBuilder {
        let mut req =
            self.http.request(method, self.url(path)).bearer_auth(token).header("accept", "application/json");
        if let Some(branch) = branch {
            req = req.header("x-branch-id", branch.to_string());
        }
        req
    }

    /// `GET path` as the admin, in `branch` when given.
    pub async fn get(&self, path: &str, branch: Option<i64>) -> Reply {
        reply(self.request(reqwest::Method::GET, path, branch)).await
    }

    pub async fn post(&self, path: &str, branch: Option<i64>, body: Value) -> Reply {
        reply(self.request(reqwest::Method::POST, path, branch).json(&body)).await
    }

    pub async fn put(&self, path: &str, branch: Option<i64>, body: Value) -> Reply {
        reply(self.request(reqwest::Method::PUT, path, branch).json(&body)).await
    }

    pub async fn delete(&self, path: &str, branch: Option<i64>) -> Reply {
        reply(self.request(reqwest::Method::DELETE, path, branch)).await
    }

    /// Creates a record and returns it (asserting 201).
    pub async fn created(&self, path: &str, branch: Option<i64>, body: Value) -> Value {
        let r = self.post(path, branch, body).await;
        assert_status(&r, 201);
        r.body["data"].clone()
    }

    /// The bootstrap branch `MAIN`.
    pub async fn main_branch(&self) -> i64 {
        let client = self.state.registry.get().await.unwrap();
        client.query_one("SELECT id FROM branches WHERE code = 'MAIN'", &[]).await.unwrap().get(0)
    }

    /// Provisions a branch that the admin may access.
    pub async fn create_branch(&self, code: &str) -> i64 {
        let admin = self.admin_id().await;
        let new = clinic_server::tenancy::branches::NewBranch {
            code: code.into(),
            name: format!("Branch {code}"),
            database_url: None,
            timezone: None,
        };
        clinic_server::tenancy::branches::provision(&self.state, new, &[admin])
            .await
            .expect("branch created")
            .id
    }

    /// Creates a user with the given role names and branch ids; returns (id, token).
    pub async fn create_user(&self, username: &str, roles: &[&str], branches: &[i64]) -> (i64, String) {
        let password = "user-password-1";
        let hash = self.state.hasher.hash(password).await.unwrap();
        let client = self.state.registry.get().await.unwrap();
        let id: i64 = client
            .query_one(
                "INSERT INTO users (name, email, username, password_hash) VALUES ($1, $2, $1, $3) RETURNING id",
                &[&username, &format!("{username}@example.test"), &hash],
            )
            .await
            .unwrap()
            .get(0);
        let roles: Vec<String> = roles.iter().map(|r| r.to_string()).collect();
        client
            .execute("INSERT INTO user_roles SELECT $1, id FROM roles WHERE name = ANY($2)", &[&id, &roles])
            .await
            .unwrap();
        client
            .execute(
                "INSERT INTO branch_users (branch_id, user_id) SELECT unnest($2::bigint[]), $1",
                &[&id, &branches],
            )
            .await
            .unwrap();
        (id, self.login(username, password).await)
    }

    /// Makes this test's database refuse connections (and cuts the open ones), or lets it
    /// take them again: PostgreSQL out of reach, as far as this server can tell.
    pub async fn database_reachable(&self, reachable: bool) {
        let server = std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| self.db.url.clone());
        let admin = clinic_server::db::connect(&database_url(&server, "postgres"))
            .await
            .expect("maintenance connection");
        let name = &self.db.name;
        admin.batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS {reachable}")).await.unwrap();
        if !reachable {
            admin
                .execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                    &[name],
                )
                .await
                .unwrap();
        }
    }

    /// The id of the bootstrap admin.
    pub async fn admin_id(&self) -> i64 {
        let client = self.state.registry.get().await.unwrap();
        client.query_one("SELECT id FROM users WHERE username = 'admin'", &[]).await.unwrap().get(0)
    }

    /// A request as the holder of `token`, with `body` as JSON unless it is null.
    pub async fn call_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        branch: Option<i64>,
        body: Value,
    ) -> Reply {
        let req = self.request_as(token, method, path, branch);
        reply(if body.is_null() { req } else { req.json(&body) }).await
    }

    /// `GET /auth/profile` as the holder of `token`: whether the token is taken.
    pub async fn profile_as(&self, token: &str) -> Reply {
        reply(self.request_as(token, reqwest::Method::GET, "/api/v1/auth/profile", None)).await
    }

    /// `PATCH path` without a body, as the admin (status toggles).
    pub async fn patch(&self, path: &str, branch: Option<i64>) -> Reply {
        reply(self.request(reqwest::Method::PATCH, path, branch)).await
    }

    /// A page of an audit trail as the admin reads it, whatever the answer: `trail` is
    /// `/api/v1/audit-logs` (with `branch`) or `/api/v1/system-audit-logs`; `query` adds
    /// filters, dates or an order to 100 rows a page.
    pub async fn audit_list(&self, trail: &str, branch: Option<i64>, query: &str) -> Reply {
        // Reads are recorded within milliseconds, by the instance's writer.
        self.state.read_audit.flush().await;
        self.get(&format!("{trail}?perPage=100&{query}"), branch).await
    }

    /// The audit rows of one record, oldest first, from `trail` (as [`Self::audit_list`]);
    /// `resource` as the trail names it.
    pub async fn audit_rows(
        &self,
        trail: &str,
        branch: Option<i64>,
        resource: &str,
        record: i64,
    ) -> Vec<Value> {
        let resource: String = form_urlencoded::byte_serialize(resource.as_bytes()).collect();
        let query = format!(
            "sortField=id&sortDirection=asc&filters[resource]={resource}&filters[record_id]={record}"
        );
        let r = self.audit_list(trail, branch, &query).await;
        assert_status(&r, 200);
        r.body["data"].as_array().cloned().unwrap_or_default()
    }

    /// How many rows the audit table holds, read straight from the database: the table of
    /// `branch`, or the registry's when `None`; only those recording `action` when given.
    pub async fn audit_count(&self, branch: Option<i64>, action: Option<&str>) -> i64 {
        let table = branch.map_or("audit_log".to_owned(), |b| format!("branch_{b}.audit_log"));
        let client = self.state.registry.get().await.unwrap();
        let sql = format!("SELECT count(*) FROM {table} WHERE $1::text IS NULL OR action = $1");
        client.query_one(&sql, &[&action]).await.unwrap().get(0)
    }

    /// Creates a patient in `branch`; returns its JSON.
    pub async fn create_patient(&self, branch: i64, first: &str, last: &str) -> Value {
        let body =
            json!({ "first_name": first, "last_name": last, "birth_date": "1980-01-02", "sex": "female" });
        self.created("/api/v1/patients", Some(branch), body).await
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.handle.stop_forceful();
            running.task.abort();
        }
    }
}

/// A whole answer: status, headers, the bytes, as text and parsed as JSON (or Null).
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
    pub text: String,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends a request and reads its whole answer: the one way the tests talk to a server.
/// Requests are built by [`TestApp::request`] and its kin, or on [`client`] for a server
/// without a `TestApp`; streams are opened by [`sse::open`].
pub async fn reply(req: reqwest::RequestBuilder) -> Reply {
    try_reply(req).await.expect("request sent and answer read")
}

/// [`reply`] for a test that counts a request the server never answered (one cut by a
/// restart) as an outcome rather than a failure.
pub async fn try_reply(req: reqwest::RequestBuilder) -> Result<Reply, reqwest::Error> {
    reply_of(req.send().await?).await
}

async fn reply_of(res: reqwest::Response) -> Result<Reply, reqwest::Error> {
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let bytes = res.bytes().await?.to_vec();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok(Reply { status, headers, bytes, text, body })
}

/// How many reads of patients the audit log of `branch` in database `url` records as `action`
/// (`list`, `search`, `view`), read straight from the table.
pub async fn patient_reads(url: &str, branch: i64, action: &str) -> i64 {
    clinic_server::db::connect(url)
        .await
        .unwrap()
        .query_one(
            &format!(
                "SELECT count(*) FROM branch_{branch}.audit_log WHERE resource = 'patients' AND action = $1"
            ),
            &[&action],
        )
        .await
        .unwrap()
        .get(0)
}

/// The answer has `status`; on failure the message shows the body. With [`assert_error`]
/// (and [`assert_invalid`] for a 422's fields), the one way a test checks a status.
#[track_caller]
pub fn assert_status(r: &Reply, status: u16) {
    assert_eq!(r.status, status, "unexpected status; body: {}", r.text);
}

/// The server handled the request, whichever way: any answer but a 5xx. For writes that race
/// one another, where the order they run in decides which are refused; `what` names it.
#[track_caller]
pub fn assert_handled(r: &Reply, what: &str) {
    assert!(r.status < 500, "{what}: {} {}", r.status, r.text);
}

/// An error answer: the status, a JSON body with a non-empty `message` and the given `code`.
#[track_caller]
/// The ids a 409 `code` names as in the way (`conflicts`: overlapping bookings).
pub fn conflict_ids(r: &Reply, code: &str) -> Vec<i64> {
    assert_error(r, 409, code);
    let ids = r.body["conflicts"].as_array().unwrap_or_else(|| panic!("no conflicts: {}", r.text));
    ids.iter().map(|v| v.as_i64().unwrap()).collect()
}

pub fn assert_error(r: &Reply, status: u16, code: &str) {
    assert_eq!(r.status, status, "unexpected status; body: {}", r.text);
    let content_type = r.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("application/json"), "error is not JSON ({content_type}): {}", r.text);
    assert!(r.body.is_object(), "error body is not a JSON object: {}", r.text);
    assert!(
        r.body["message"].as_str().is_some_and(|m| !m.trim().is_empty()),
        "error without a message: {}",
        r.body
    );
    assert_eq!(r.body["code"], code, "error code; body: {}", r.body);
}

/// A 422 whose `errors` names exactly `fields`, each with a non-empty list of messages.
#[track_caller]
pub fn assert_invalid(r: &Reply, fields: &[&str]) {
    assert_eq!(r.status, 422, "expected a 422 on {fields:?}; body: {}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.trim().is_empty()), "no message: {}", r.body);
    assert!(r.body["code"].as_str().is_some_and(|c| !c.is_empty()), "no code: {}", r.body);
    let errors = r.body["errors"].as_object().unwrap_or_else(|| panic!("no errors object: {}", r.body));
    let named: std::collections::BTreeSet<&str> = errors.keys().map(String::as_str).collect();
    let expected: std::collections::BTreeSet<&str> = fields.iter().copied().collect();
    assert_eq!(named, expected, "fields named by the 422: {}", r.text);
    for (field, messages) in errors {
        let messages = messages.as_array().unwrap_or_else(|| panic!("errors.{field} is not an array"));
        assert!(!messages.is_empty(), "errors.{field} is empty");
        assert!(messages.iter().all(|m| m.as_str().is_some_and(|m| !m.trim().is_empty())));
    }
}

/// A record, or an answer carrying one.
pub trait Json {
    fn json(&self) -> &Value;
}

impl Json for Value {
    fn json(&self) -> &Value {
        self
    }
}

impl Json for Reply {
    fn json(&self) -> &Value {
        &self.body
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.text)
    }
}

/// The id of a record, or of the record an answer carries in `data`.
#[track_caller]
pub fn id_of(record: &impl Json) -> i64 {
    let record = record.json();
    record["id"]
        .as_i64()
        .or_else(|| record["data"]["id"].as_i64())
        .unwrap_or_else(|| panic!("no id in {record}"))
}

/// A clinic ready for the work of most tests: a server on its own database, branch MAIN,
/// one patient in it and one visit of that patient.
pub struct Clinic {
    pub app: TestApp,
    pub branch: i64,
    pub patient: i64,
    pub visit: i64,
}

impl Clinic {
    pub async fn open() -> Self {
        Self::open_with(|_| {}).await
    }

    pub async fn open_with(configure: impl FnOnce(&mut Settings)) -> Self {
        let app = TestApp::spawn_with(configure).await;
        let branch = app.main_branch().await;
        let patient = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
        let visit = id_of(
            &app.created(
                "/api/v1/patient-visits",
                Some(branch),
                json!({ "patient_id": patient, "visit_date": "2026-01-05" }),
            )
            .await,
        );
        Self { app, branch, patient, visit }
    }
}

/// One string column of a list answer's rows.
pub fn column(body: &Value, name: &str) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data array: {body}"))
        .iter()
        .map(|row| row[name].as_str().unwrap_or_else(|| panic!("{name} missing in {row}")).to_owned())
        .collect()
}

/// The ids of a list answer's rows.
pub fn ids(body: &Value) -> Vec<i64> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data array: {body}"))
        .iter()
        .map(|row| row["id"].as_i64().unwrap_or_else(|| panic!("no id in {row}")))
        .collect()
}

#[allow(unused_imports)]
pub use embedded_pg::ensure_database;

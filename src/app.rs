//! The top of the server: the start-up sequence, the list of every declared resource, the
//! route table and the API description. Nothing below imports this module.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use salvo::catcher::Catcher;
use salvo::conn::tcp::TcpAcceptor;
use salvo::oapi::swagger_ui::{Config, SwaggerUi};
use salvo::prelude::*;
use salvo::server::ServerHandle;

use crate::config::Settings;
use crate::db::directory::Directory;
use crate::http::docs::{Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::guard::guard_routes;
use crate::http::listener::Closer;
use crate::http::text::QueryText;
use crate::http::{catcher, trace};
use crate::metrics::{MeasureRequests, Metrics};
use crate::permissions::ADMIN_ACCESS;
use crate::resource::context::Require;
use crate::resource::idempotency::Idempotent;
use crate::resource::{self, Resource, Scope};
use crate::state::AppState;
use crate::tenancy::branches;
use crate::{
    admin, appointments, auth, billing, bootstrap, clinical, dashboard, db, exams, health, master, notify,
    permissions, pharmacy, queue,
};

/// A domain: the resources it declares, served by the shared handlers and described from
/// their declarations, and the routes it serves by hand, each registered with its description.
struct Domain {
    resources: &'static [&'static Resource],
    endpoints: fn() -> Vec<Endpoints>,
}

/// Every domain. A domain's own routes are tried before the declared resources' routes.
static DOMAINS: &[Domain] = &[
    Domain { resources: &[], endpoints: health::endpoints },
    Domain { resources: &[], endpoints: auth::routes::endpoints },
    Domain { resources: admin::RESOURCES, endpoints: admin::endpoints },
    Domain { resources: master::RESOURCES, endpoints: master::endpoints },
    Domain { resources: clinical::RESOURCES, endpoints: clinical::endpoints },
    Domain { resources: exams::RESOURCES, endpoints: exams::endpoints },
    Domain { resources: billing::RESOURCES, endpoints: billing::endpoints },
    Domain { resources: queue::RESOURCES, endpoints: queue::endpoints },
    Domain { resources: appointments::RESOURCES, endpoints: appointments::endpoints },
    Domain { resources: pharmacy::RESOURCES, endpoints: Vec::new },
    Domain { resources: &[], endpoints: dashboard::endpoints },
];

/// What closes at the end of a branch's day: tickets and appointments nobody came to.
static PAST_DAYS: &[&resource::day_close::PastDays] =
    &[&queue::PAST_QUEUE_DAYS, &appointments::PAST_APPOINTMENT_DAYS];

/// Every declared resource, for documentation and checks.
pub fn resources() -> Vec<&'static Resource> {
    DOMAINS.iter().flat_map(|d| d.resources.iter().copied()).collect()
}

/// Connects, migrates the registry and every branch, bootstraps an empty registry, and
/// starts listening for cache invalidations.
pub async fn prepare(settings: Settings, database_url: &str) -> anyhow::Result<Arc<AppState>> {
    resource::register(resources());
    auth::mfa::check_settings(&settings)?;
    let metrics = Arc::new(Metrics::new(&settings)?);
    let registry = db::registry_pool(database_url, &settings, metrics.meter())?;
    {
        let mut client = registry.get().await.context("connecting to the registry database")?;
        let applied = db::migrate::migrate_registry(&mut client).await?;
        if applied > 0 {
            tracing::info!(applied, "registry migrated");
        }
        permissions::sync_catalogue(&*client).await?;
    }
    let directory = Arc::new(Directory::new(registry.clone(), database_url, &settings)?);
    let state = Arc::new(AppState::new(settings, registry, directory, metrics)?);
    branches::check_database_urls(&state.directory).await?;
    bootstrap::run_if_empty(&state).await?;
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
    // The database servers' settings against what this instance asks of them: warnings only.
    db::doctor::log_at_start(database_url, &state.settings).await;
    state.keep(notify::spawn_listener(
        database_url.to_owned(),
        state.settings.database_tls.clone(),
        state.clone(),
    ));
    state.keep(resource::day_close::spawn_day_closer(state.clone(), PAST_DAYS.to_vec()));
    state.keep(crate::tenancy::audit_months::spawn(state.clone()));
    state.keep(crate::tenancy::search_order::spawn(state.clone()));
    state.keep(state.metrics.watch_branches());
    Ok(state)
}

/// Every route of the API, with its hoops: public routes as they are; the others behind the
/// caller's token and the idempotency of their POSTs, and branch routes behind `X-Branch-Id`.
fn api_router() -> Router {
    // A branch's routes of a record merged into another answer 301 or 410 where they would 404.
    let in_branch = |router| {
        Router::new()
            .hoop(crate::tenancy::hoop::require_branch)
            .hoop(resource::merged::MergedRecords)
            .push(router)
    };
    let (mut public, mut metered, mut unmetered) = (Router::new(), Router::new(), Router::new());
    let mut enrolling = Router::new();
    for domain in DOMAINS {
        for endpoints in (domain.endpoints)().into_iter().filter(|e| !e.is_at_root()) {
            let (access, is_metered) = (endpoints.access(), endpoints.is_metered());
            let open_before_enrolment = endpoints.is_open_before_enrolment();
            let router = endpoints.into_router();
            match access {
                Access::Public => public = public.push(router),
                Access::User if open_before_enrolment && is_metered => enrolling = enrolling.push(router),
                Access::User if is_metered => metered = metered.push(router),
                Access::User => unmetered = unmetered.push(router),
                Access::Branch if is_metered => metered = metered.push(in_branch(router)),
                Access::Branch => unmetered = unmetered.push(in_branch(router)),
            }
        }
    }
    let mut declared_in_branch = Router::new();
    for r in resources() {
        match r.scope {
            Scope::Branch => declared_in_branch = declared_in_branch.push(resource::routes::router(r)),
            Scope::Registry => metered = metered.push(resource::routes::router(r)),
        }
    }
    metered = metered.push(in_branch(declared_in_branch));
    let mut api = Router::with_path("api/v1")
        .hoop(QueryText::FIELDS)
        .push(public)
        // What a user who must enrol a second factor may reach before they have.
        .push(enrolling.hoop(auth::Authenticate { metered: true, before_enrolment: true }).hoop(Idempotent))
        // Routes with a per-user limit of their own.
        .push(unmetered.hoop(auth::Authenticate::UNMETERED).hoop(Idempotent))
        .push(metered.hoop(auth::Authenticate::METERED).hoop(Idempotent));
    guard_routes(&mut api);
    api
}

/// Routes beside `/api/v1`: this instance's metrics, for a token holding `admin.access`
/// (outside the per-user limit, so that a scraper never finds itself refused); the domains'
/// routes there (waiting-room screens, which bring their own credential); and the FHIR
/// facade, its CapabilityStatement public and the rest behind the token (metered) and
/// `X-Branch-Id`, every error of it answered as an OperationOutcome.
fn root_router() -> Router {
    let metrics = crate::metrics::endpoints().hoop(Require(ADMIN_ACCESS)).into_router();
    let mut signed_in = Router::new().hoop(auth::Authenticate::UNMETERED).push(metrics);
    let mut public = Router::new();
    for domain in DOMAINS {
        for endpoints in (domain.endpoints)().into_iter().filter(Endpoints::is_at_root) {
            match endpoints.access() {
                Access::Public => public = public.push(endpoints.into_router()),
                Access::User => signed_in = signed_in.push(endpoints.into_router()),
                Access::Branch => panic!("no branch routes beside the API: they need X-Branch-Id's hoop"),
            }
        }
    }
    let (mut fhir_public, mut fhir_user) = (Router::new(), Router::new());
    for endpoints in crate::fhir::endpoints() {
        let access = endpoints.access();
        let router = endpoints.into_router();
        match access {
            Access::Public => fhir_public = fhir_public.push(router),
            Access::User => fhir_user = fhir_user.push(router),
            Access::Branch => {
                fhir_user =
                    fhir_user.push(Router::new().hoop(crate::tenancy::hoop::require_branch).push(router))
            }
        }
    }
    let fhir = Router::new()
        .hoop(crate::fhir::OperationOutcomes)
        .hoop(QueryText::bad_request("invalid_search"))
        .push(fhir_public)
        .push(fhir_user.hoop(auth::Authenticate::METERED));
    let beside_the_api = Router::new().hoop(QueryText::FIELDS).push(public).push(signed_in);
    let mut root = Router::new().push(beside_the_api).push(fhir);
    guard_routes(&mut root);
    root
}

/// Every method and path `api_router` and `root_router` serve, as (`GET`,
/// `/api/v1/patients/{id}`), read off the route trees themselves (for checks that the
/// document lists exactly what is served).
pub fn served_routes() -> Vec<(String, String)> {
    fn walk(router: &Router, path: &str, method: Option<&str>, out: &mut Vec<(String, String)>) {
        let (mut path, mut method) = (path.to_owned(), method.map(str::to_owned));
        for filter in router.filters() {
            let shown = format!("{filter:?}");
            if let Some(segment) = shown.strip_prefix("path:") {
                // `{id:num}` (and `{id|[0-9]+}`) is `{id}` in the document.
                let segment: String = segment
                    .split_inclusive('}')
                    .map(|part| match part.find([':', '|']) {
                        Some(colon) if part.ends_with('}') && part.contains('{') => {
                            format!("{}}}", &part[..colon])
                        }
                        _ => part.to_owned(),
                    })
                    .collect();
                path = format!("{path}/{}", segment.trim_matches('/'));
            } else if let Some(verb) = shown.strip_prefix("method:") {
                method = Some(verb.to_ascii_uppercase());
            }
        }
        if router.goal.is_some() {
            out.push((method.clone().unwrap_or_else(|| "ANY".into()), path.clone()));
        }
        for child in router.routers() {
            walk(child, &path, method.as_deref(), out);
        }
    }
    let mut routes = Vec::new();
    walk(&api_router(), "", None, &mut routes);
    walk(&root_router(), "", None, &mut routes);
    routes.sort();
    routes.dedup();
    routes
}

/// The OpenAPI document of everything `api_router` serves.
pub fn openapi() -> salvo::oapi::OpenApi {
    let mut doc = Doc::default();
    resource::docs::enumerations(&mut doc);
    for r in resources() {
        resource::docs::document(&mut doc, r);
    }
    // After the resources: a domain's endpoints may amend what the declarations describe.
    for domain in DOMAINS {
        for endpoints in (domain.endpoints)() {
            endpoints.describe(&mut doc);
        }
    }
    crate::metrics::endpoints().describe(&mut doc);
    for endpoints in crate::fhir::endpoints() {
        endpoints.describe(&mut doc);
    }
    resource::docs::merged_answers(&mut doc, &resources());
    doc.finish()
}

pub fn service(state: Arc<AppState>) -> Service {
    let cors = crate::http::cors::AllowedOrigins::new(&state.settings.cors_allowed_origins);
    let measure = MeasureRequests(state.metrics.clone());
    let router = Router::new()
        .hoop(salvo::affix_state::inject(state.metrics.clone()))
        .hoop(salvo::affix_state::inject(state))
        .push(api_router())
        .push(root_router())
        .push(openapi().into_router("docs/api/openapi.json"))
        // No online spec validator: the page must work on a closed network.
        .push(
            SwaggerUi::new(Config::new(["/docs/api/openapi.json"]).validator_url("none"))
                .into_router("docs/api"),
        );
    let service = Service::new(router)
        .hoop(measure)
        .hoop(CatchPanic::new())
        .hoop(trace::RequestSpan)
        .hoop(crate::http::compression::compression());
    let service = match cors {
        Some(cors) => service.hoop(cors),
        None => service,
    };
    service.catcher(error_catcher())
}

/// What answers an error no route gave a body (no route, a method not served, a panic):
/// an OperationOutcome under `/fhir/r4`, the API's JSON error body elsewhere.
pub fn error_catcher() -> Catcher {
    Catcher::default().hoop(crate::fhir::catch_errors).hoop(catcher::json_errors)
}

/// A server listening in the background.
pub struct Running {
    pub addr: SocketAddr,
    pub handle: ServerHandle,
    pub task: tokio::task::JoinHandle<()>,
    state: Arc<AppState>,
    closer: Closer,
}

/// Starts the graceful shutdown of a [`Running`] server: what SIGTERM and Ctrl-C do.
#[derive(Clone)]
pub struct ShutdownTrigger(Arc<AppState>);

impl ShutdownTrigger {
    pub fn pull(&self) {
        if self.0.drain.start() {
            tracing::info!(grace = ?self.0.settings.shutdown_grace, "shutting down");
        }
    }
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every connection finished within the grace.
    Finished,
    /// The grace ran out: the connections still open were cut.
    Cut,
}

impl Running {
    pub fn trigger(&self) -> ShutdownTrigger {
        ShutdownTrigger(self.state.clone())
    }

    /// Serves until the trigger is pulled, then drains: readiness turns 503 and
    /// waiting-room streams end (both follow `AppState::drain`), the listening socket closes
    /// so new connections are refused, idle connections close, and requests in flight
    /// (streamed exports included) may finish within `SHUTDOWN_GRACE_SECONDS`; past it the
    /// remaining connections are cut. Returns when the server has stopped.
    pub async fn until_shutdown(self) -> Drained {
        let Self { handle, mut task, state, closer, .. } = self;
        tokio::select! {
            () = state.drain.started() => {}
            // The server stopped by itself (it cannot, short of a bug): nothing to drain.
            _ = &mut task => return Drained::Finished,
        }
        let grace = state.settings.shutdown_grace;
        let started = tokio::time::Instant::now();
        if !closer.close(Duration::from_secs(1)).await {
            tracing::warn!("the listening socket did not close; stopping anyway");
        }
        handle.stop_graceful(Some(grace));
        // The server cuts what is left at the end of the grace; this is only a backstop.
        if tokio::time::timeout(grace + Duration::from_secs(2), &mut task).await.is_err() {
            task.abort();
        }
        if started.elapsed() < grace {
            tracing::info!(took = ?started.elapsed(), "drained");
            Drained::Finished
        } else {
            tracing::warn!(?grace, "the shutdown grace ran out; open connections were cut");
            Drained::Cut
        }
    }

    /// Shuts down now and waits for the drain (tools and tests).
    pub async fn stop(self) -> Drained {
        self.trigger().pull();
        self.until_shutdown().await
    }
}

pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpAcceptor> {
    let acceptor =
        TcpListener::new(addr).try_bind().await.with_context(|| format!("cannot listen on {addr}"))?;
    // Accepted connections inherit it: an answer written in pieces (a compressed body, a
    // stream) goes out at once instead of waiting up to 40 ms for the client's delayed ACK.
    socket2::SockRef::from(acceptor.inner()).set_tcp_nodelay(true).context("setting TCP_NODELAY")?;
    Ok(acceptor)
}

/// Starts serving `state` on `addr` (port 0 picks a free port).
pub async fn spawn(state: Arc<AppState>, addr: SocketAddr) -> anyhow::Result<Running> {
    let acceptor = bind(addr).await?;
    let addr = acceptor.local_addr()?;
    let (acceptor, closer) = crate::http::listener::closing(acceptor);
    // Slow or silent clients are cut off: headers (salvo's default), gaps in a body, idle
    // keep-alive connections.
    let fuse = salvo::fuse::FuseConfig::default()
        .with_request_body_timeout(state.settings.body_read_timeout)
        .with_connection_idle_timeout(state.settings.idle_timeout);
    let server = Server::new(acceptor).fuse_config(fuse);
    let handle = server.handle();
    let service = service(state.clone());
    let task = tokio::spawn(async move { server.serve(service).await });
    // Only a serving instance keeps spare branch schemas, not a one-off command.
    state.keep(crate::tenancy::spares::spawn(state.clone()));
    // Nor sends reminders; tests send them themselves, at the instants they choose.
    if state.settings.appointment_reminder_worker {
        state.keep(appointments::spawn_worker(state.clone()));
    }
    Ok(Running { addr, handle, task, state, closer })
}

/// Serves `/metrics` alone, without a token, on `addr` (`METRICS_ADDR`: an address only the
/// operators' network reaches).
pub async fn spawn_metrics(state: &AppState, addr: SocketAddr) -> anyhow::Result<MetricsServer> {
    let acceptor = bind(addr).await?;
    let addr = acceptor.local_addr()?;
    let router = Router::new()
        .hoop(salvo::affix_state::inject(state.metrics.clone()))
        .push(Router::with_path("metrics").get(crate::metrics::scrape));
    let server = Server::new(acceptor);
    let handle = server.handle();
    let task = tokio::spawn(async move { server.serve(router).await });
    Ok(MetricsServer { addr, handle, task })
}

/// The `METRICS_ADDR` listener: it holds nothing a drain must wait for.
pub struct MetricsServer {
    pub addr: SocketAddr,
    pub handle: ServerHandle,
    pub task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    pub async fn stop(self) {
        self.handle.stop_graceful(Some(Duration::from_secs(1)));
        let _ = self.task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every served method and path is in the API description, and the description lists
    /// nothing that is not served.
    #[test]
    fn the_document_lists_exactly_the_served_routes() {
        let document = serde_json::to_value(openapi()).unwrap();
        let mut documented = Vec::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if ["get", "put", "post", "delete", "patch", "head", "options"].contains(&method.as_str()) {
                    documented.push((method.to_ascii_uppercase(), path.clone()));
                }
            }
        }
        documented.sort();
        let served = served_routes();
        let undocumented: Vec<_> = served.iter().filter(|r| !documented.contains(r)).collect();
        let unserved: Vec<_> = documented.iter().filter(|r| !served.contains(r)).collect();
        assert!(undocumented.is_empty(), "served but not in the document: {undocumented:?}");
        assert!(unserved.is_empty(), "in the document but not served: {unserved:?}");
        assert!(served.len() > 200, "the walk found only {} routes", served.len());
    }

    /// Summaries read as English: every declaration names its records in the plural, and
    /// the article follows the noun's sound.
    #[test]
    fn summaries_read_as_english() {
        for r in resources() {
            assert!(!r.plural.is_empty() && r.plural != r.label, "{}: no plural", r.path);
        }
        let document = serde_json::to_value(openapi()).unwrap();
        let summary = |method: &str, path: &str| {
            document["paths"][path][method]["summary"].as_str().unwrap().to_owned()
        };
        assert_eq!(summary("get", "/api/v1/amsler-grids/{id}"), "Get an Amsler grid");
        assert_eq!(summary("get", "/api/v1/amsler-grids"), "List Amsler grids");
        assert_eq!(summary("post", "/api/v1/users"), "Create a user");
        assert_eq!(summary("delete", "/api/v1/insurances/{id}"), "Delete an insurance");
        assert_eq!(summary("get", "/api/v1/audit-logs/{id}"), "Get an audit record");
        assert_eq!(summary("get", "/api/v1/bill-item-categories"), "List bill item categories");
    }

    /// Declarations are data; check them once so a typo fails a test, not a request.
    #[test]
    fn declarations_are_consistent() {
        for r in resources() {
            // Sort fields must be real columns: searches sort a materialised (id, column) set.
            for s in r.sort_fields {
                assert!(r.output_columns().any(|c| c == *s), "{}: sort field {s} is not a column", r.path);
            }
            assert!(r.sort_fields.contains(&r.default_sort), "{}: default sort not allowed", r.path);
            for f in r.filters {
                assert!(
                    r.field(f).is_some()
                        || r.read_only.iter().any(|(n, _)| n == f)
                        || r.condition(f).is_some(),
                    "{}: filter {f} is not a field",
                    r.path
                );
            }
            for d in r.derived {
                // A nested record derives from its parent's column; what it fills may be
                // a column the server writes.
                let from_parent = r.parent.is_some_and(|p| p.column == d.from);
                assert!(
                    (r.field(d.field).is_some() || r.server_written.contains(&d.field))
                        && (r.field(d.from).is_some() || from_parent),
                    "{}: bad derived rule",
                    r.path
                );
            }
        }
    }
}

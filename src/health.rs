//! What operators and orchestrators ask the server about itself:
//!
//! - `GET /api/v1/public/health`: is the registry reachable, and how are the branches;
//! - `GET /api/v1/public/live`: the process serves HTTP (never touches the database), for a
//!   liveness probe: restarting the process does not cure a database outage;
//! - `GET /api/v1/public/ready`: should this instance get traffic: 503 while it drains
//!   before shutting down or while the registry does not answer a quick probe.

use std::time::Duration;

use salvo::http::StatusCode;
use salvo::http::header::{HeaderValue, RETRY_AFTER};
use salvo::oapi::PathItemType;
use salvo::prelude::*;
use serde_json::json;

use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::state::AppState;

#[handler]
pub async fn health(depot: &mut Depot, res: &mut Response) {
    let state = AppState::of(depot);
    let probe = async {
        let client = state.registry.get().await?;
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE status = 'active'),
                        count(*) FILTER (WHERE status = 'active' AND migration_state = 'failed')
                   FROM branches",
                &[],
            )
            .await?;
        anyhow::Ok((row.get::<_, i64>(0), row.get::<_, i64>(1)))
    };
    match tokio::time::timeout(Duration::from_secs(3), probe).await {
        Ok(Ok((active, failed))) => {
            res.status_code(StatusCode::OK);
            res.render(Json(json!({
                "message": "OK",
                "data": {
                    "status": if failed == 0 { "ok" } else { "degraded" },
                    "registry": "up",
                    "version": env!("CARGO_PKG_VERSION"),
                    "branches": { "active": active, "migration_failed": failed },
                },
            })));
        }
        outcome => {
            if let Ok(Err(e)) = outcome {
                tracing::warn!(error = format!("{e:#}"), "health check: registry unreachable");
            }
            res.status_code(StatusCode::SERVICE_UNAVAILABLE);
            res.render(Json(json!({
                "message": "The registry database is unavailable.",
                "code": "registry_unavailable",
                "data": { "status": "down", "registry": "down", "version": env!("CARGO_PKG_VERSION") },
            })));
        }
    }
}

#[handler]
pub async fn live(res: &mut Response) {
    res.status_code(StatusCode::OK);
    res.render(Json(json!({ "message": "OK", "data": { "status": "alive" } })));
}

#[handler]
pub async fn ready(depot: &mut Depot, res: &mut Response) {
    let state = AppState::of(depot);
    let (status, body) = if state.drain.is_draining() {
        let data = json!({ "status": "draining" });
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "message": "The server is shutting down.", "code": "draining", "data": data }),
        )
    } else if registry_answers(&state).await {
        (StatusCode::OK, json!({ "message": "Ready", "data": { "status": "ready", "registry": "up" } }))
    } else {
        let data = json!({ "status": "unavailable", "registry": "down" });
        let message = "The registry database is unavailable.";
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "message": message, "code": "registry_unavailable", "data": data }),
        )
    };
    if status != StatusCode::OK {
        res.headers_mut().insert(RETRY_AFTER, HeaderValue::from(READY_RETRY_AFTER_SECS));
    }
    res.status_code(status);
    res.render(Json(body));
}

/// What a readiness answer of 503 tells a client to wait.
const READY_RETRY_AFTER_SECS: u32 = 5;

/// Whether the registry answers `SELECT 1` within two seconds. A pool with every connection
/// busy counts as answering (the database is there; this server is busy, and taking it out
/// of rotation would only move the load), unless it has no connection at all.
async fn registry_answers(state: &AppState) -> bool {
    use deadpool::managed::{PoolError, TimeoutType, Timeouts};
    let timeouts = Timeouts {
        wait: Some(Duration::from_millis(500)),
        create: Some(Duration::from_millis(1500)),
        recycle: Some(Duration::from_millis(500)),
    };
    let probe = async {
        loop {
            match state.registry.timeout_get(&timeouts).await {
                Ok(client) => match client.simple_query("SELECT 1").await {
                    Ok(_) => return true,
                    // An idle connection the server ended (a restart, a cut) fails once and is
                    // dropped by the pool; the next is taken, so a registry back up is ready.
                    Err(_) if client.is_closed() => continue,
                    Err(_) => return false,
                },
                Err(PoolError::Timeout(TimeoutType::Wait)) => return state.registry.status().size > 0,
                Err(e) => {
                    tracing::warn!(error = %e, "readiness: registry unreachable");
                    return false;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(2), probe).await.unwrap_or(false)
}

/// `GET /public/health`, `/public/live`, `/public/ready`.
pub fn endpoints() -> Vec<Endpoints> {
    let mut public = Endpoints::new(Access::Public);
    let op = public.operation("public", "Health of the service and its registry database");
    let body = docs::envelope(
        salvo::oapi::Object::new()
            .property("status", docs::string().enum_values(["ok", "degraded", "down"]))
            .property("registry", docs::string().enum_values(["up", "down"]))
            .property("version", docs::string()),
    );
    let op = Doc::answers(
        Doc::answers(op, "200", "Registry reachable", body.clone()),
        "503",
        "Registry unreachable",
        body,
    );
    public.add(PathItemType::Get, "public/health", "getHealth", health, op);

    let op = public.operation("public", "Liveness: the process serves HTTP (no database access)");
    let body =
        docs::envelope(salvo::oapi::Object::new().property("status", docs::string().enum_values(["alive"])));
    public.add(
        PathItemType::Get,
        "public/live",
        "getLiveness",
        live,
        Doc::answers(op, "200", "The process is alive", body),
    );

    let op = public.operation(
        "public",
        "Readiness: 200 when this instance should get traffic; 503 while it shuts down or its registry database does not answer",
    );
    let body = docs::envelope(
        salvo::oapi::Object::new()
            .property("status", docs::string().enum_values(["ready", "draining", "unavailable"]))
            .property("registry", docs::string().enum_values(["up", "down"])),
    );
    let op = Doc::answers(
        Doc::answers(op, "200", "Ready for traffic", body.clone()),
        "503",
        "Shutting down, or the registry database does not answer (with Retry-After)",
        body,
    );
    public.add(PathItemType::Get, "public/ready", "getReadiness", ready, op);
    vec![public]
}

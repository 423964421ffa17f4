//! `GET /api/v1/public/health`: is the registry reachable, and how are the branches.

use std::time::Duration;

use salvo::http::StatusCode;
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

/// `GET /public/health`.
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
    public.add(PathItemType::Get, "public/health", health, op);
    vec![public]
}

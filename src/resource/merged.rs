//! The routes of a record merged into another (a duplicate patient): whatever answers 404 at
//! `/<path>/{id}` or below it for such a record answers instead a 301 to the same route of the
//! record it was merged into (reads), or a 410 (writes), with that record's id. Only answers
//! that were going to be 404 pay for the look-up.

use salvo::http::{Method, StatusCode};
use salvo::prelude::*;

use super::context::{Context, Scope};
use super::store::survivor_of;
use super::{Resource, registered};
use crate::http::error::ApiError;

/// Hoop on the branch's routes.
pub struct MergedRecords;

#[async_trait]
impl Handler for MergedRecords {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        ctrl.call_next(req, depot, res).await;
        if res.status_code != Some(StatusCode::NOT_FOUND) {
            return;
        }
        let Some((resource, id, rest)) = merged_route(req.uri().path()) else { return };
        let Ok(ctx) = Context::of(depot) else { return };
        // Boxed: only a 404 gets here, and inline its state would enlarge every request's.
        let survivor = Box::pin(async {
            let mut conn = ctx.conn(Scope::Branch).await?;
            survivor_of(&*conn.client(), resource, id).await
        });
        match survivor.await {
            Ok(Some(into)) => {
                let mut location = format!("{}/{into}{rest}", resource.collection_path());
                if let Some(query) = req.uri().query() {
                    location = format!("{location}?{query}");
                }
                let write = !matches!(*req.method(), Method::GET | Method::HEAD);
                res.render(ApiError::Merged { into, location: Some(location), write });
            }
            Ok(None) => {}
            // The 404 stands; the look-up's failure is the server's to know.
            Err(e) => tracing::warn!(error = %e, "could not tell whether a missing record was merged"),
        }
    }
}

/// The declaration, the id and the rest of a path under `/api/v1/<path>/{id}` of a branch
/// resource whose records may be merged.
fn merged_route(path: &str) -> Option<(&'static Resource, i64, &str)> {
    let below = path.strip_prefix("/api/v1/")?;
    registered().iter().filter(|r| r.merged_into.is_some() && r.scope == Scope::Branch).find_map(|r| {
        let member = below.strip_prefix(r.path)?.strip_prefix('/')?;
        let (id, rest) = match member.find('/') {
            Some(at) => member.split_at(at),
            None => (member, ""),
        };
        Some((*r, id.parse().ok().filter(|id: &i64| *id > 0)?, rest))
    })
}

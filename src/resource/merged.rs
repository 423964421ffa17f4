//! The routes of a record merged into another (a duplicate patient): whatever answers 404 at
//! `/<path>/{id}` or below it for such a record answers instead a 301 to the same route of the
//! record it was merged into (reads), or a 410 (writes), with that record's id. Only answers
//! that were going to be 404 pay for the look-up.

use salvo::http::StatusCode;
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
                let write = is_write(req.method().as_str());
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
    mergeable(registered()).find_map(|r| {
        let (id, rest) = below_member(r, path)?;
        Some((r, id.parse().ok().filter(|id: &i64| *id > 0)?, rest))
    })
}

/// The declarations whose routes this hoop answers for: branch resources whose records may
/// be merged.
pub fn mergeable(resources: &[&'static Resource]) -> impl Iterator<Item = &'static Resource> {
    resources.iter().copied().filter(|r| r.merged_into.is_some() && r.scope == Scope::Branch)
}

/// The id segment and the rest of `path` when it is `<collection>/<id>` or below it.
fn below_member<'p>(r: &Resource, path: &'p str) -> Option<(&'p str, &'p str)> {
    let member = path.strip_prefix(r.collection_path().as_str())?.strip_prefix('/')?;
    Some(member.split_at(member.find('/').unwrap_or(member.len())))
}

/// What the hoop answers, for a merged record, on the documented branch route `path`
/// (`/api/v1/patients/{id}/visits`): `Some(true)` a 410 (a write), `Some(false)` a 301 (a
/// read), `None` when the route is not one of a mergeable record.
pub fn documented_answer(resources: &[&'static Resource], method: &str, path: &str) -> Option<bool> {
    mergeable(resources)
        .filter_map(|r| below_member(r, path))
        .any(|(id, _)| id.starts_with('{') && id.ends_with('}'))
        .then(|| is_write(method))
}

fn is_write(method: &str) -> bool {
    !(method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD"))
}

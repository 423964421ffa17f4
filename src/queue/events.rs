//! `GET /queue/branch-services/{id}/events`: a waiting-room display's stream. First a
//! `snapshot` (today's queue, as `GET .../queue` answers it), then a `ticket` event for each
//! change of a ticket of that service, made on any instance, and a comment line every 15
//! seconds. A listener holds no database connection: changes reach it from the instance's one
//! LISTEN connection through a broadcast channel.

use std::time::Duration;

use futures_util::{StreamExt, stream};
use salvo::prelude::*;
use salvo::sse::{SseEvent, SseKeepAlive};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::{Service, path_service, queue_view, today_of};
use crate::http::error::ApiResult;
use crate::permissions::QUEUE_READ;
use crate::resource::{Context, Scope};
use crate::state::AppState;

/// The topic of a service's changes.
fn topic(branch: i64, service: i64) -> String {
    format!("queue:{branch}:{service}")
}

/// Tells every instance's displays of the ticket's service that it changed.
pub async fn ticket_changed(state: &AppState, branch: i64, ticket: &Value) {
    let Some(service) = ticket.get("branch_service_id").and_then(Value::as_i64) else { return };
    state.publish(&topic(branch, service), ticket.clone()).await;
}

#[derive(Debug)]
struct Never;

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}

impl std::error::Error for Never {}

#[handler]
pub async fn follow(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_READ)?;
    let service: Service = path_service(&ctx, req).await?;
    let route = ctx.branch()?.clone();
    // Subscribe before the snapshot is read, so that no change falls between the two.
    let changes = ctx.state.events.subscribe();
    let snapshot = {
        let mut conn = ctx.conn(Scope::Branch).await?;
        let client = conn.client();
        let today = today_of(&*client, &route).await?;
        queue_view(&*client, &service, today, None).await?
    };
    let wanted = topic(route.id, service.id);
    let first = SseEvent::default().name("snapshot").text(snapshot.to_string());
    let updates = stream::unfold((changes, wanted), |(mut changes, wanted)| async move {
        loop {
            match changes.recv().await {
                Ok(event) if event.topic == wanted => {
                    let next = SseEvent::default().name("ticket").text(event.data.to_string());
                    return Some((Ok::<_, Never>(next), (changes, wanted)));
                }
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            }
        }
    });
    let events = stream::iter([Ok::<_, Never>(first)]).chain(updates);
    res.headers_mut().insert("x-accel-buffering", salvo::http::HeaderValue::from_static("no"));
    SseKeepAlive::new(events).max_interval(Duration::from_secs(15)).comment("heartbeat").stream(res);
    Ok(())
}

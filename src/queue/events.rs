//! `GET /queue/branch-services/{id}/events`: a waiting-room display's stream. First a
//! `snapshot` (today's queue, as `GET .../queue` answers it), then a `ticket` event for each
//! change of a ticket of that service, made on any instance, and a comment line every 15
//! seconds. A listener holds no database connection: changes reach it from the instance's one
//! LISTEN connection through a broadcast channel.
//!
//! The stream lives only as long as what opened it: when its token is revoked or expires,
//! or its user is deactivated or loses the branch or `queue.read`, it sends `end` and closes
//! (it checks again whenever any instance says a token, user or branch changed). A display
//! that falls behind the channel gets a fresh `snapshot` instead of the changes it missed.
//! When the instance starts shutting down, every stream sends `end` with reason `shutdown`
//! and closes, so that the drain does not wait on them.

use std::time::Duration;

use futures_util::{StreamExt, stream};
use salvo::prelude::*;
use salvo::sse::{SseEvent, SseKeepAlive};
use serde_json::json;
use time::OffsetDateTime;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use super::tickets::{Service, path_service, queue_view, topic};
use crate::db::directory::BranchRoute;
use crate::http::error::ApiResult;
use crate::notify::Topic;
use crate::permissions::QUEUE_READ;
use crate::resource::{Context, Scope};
use crate::state::session::authenticate;
use crate::state::{AppState, Event};

#[derive(Debug)]
struct Never;

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}

impl std::error::Error for Never {}

/// Who a stream is for and what it shows: checked again whenever access may have changed.
struct Display {
    state: std::sync::Arc<AppState>,
    /// The bearer token the stream was opened with (kept in memory, never logged).
    token: String,
    token_id: i64,
    user_id: i64,
    route: std::sync::Arc<BranchRoute>,
    service: Service,
    expires_at: Option<OffsetDateTime>,
    changes: Receiver<Event>,
    invalidations: Receiver<Topic>,
    ended: bool,
}

/// What the stream sends next.
enum Next {
    Send(SseEvent),
    End(&'static str),
}

impl Display {
    fn concerns(&self, topic: Topic) -> bool {
        match topic {
            Topic::Token(id) => id == self.token_id,
            Topic::User(id) => id == self.user_id,
            Topic::Branch(id) => id == self.route.id,
            Topic::DisplayKey(_) => false,
            Topic::All => true,
        }
    }

    /// Whether the token still opens this stream: valid, its user active, with the branch
    /// and `queue.read`.
    async fn still_allowed(&self) -> bool {
        match authenticate(&self.state, &self.token).await {
            Ok(Some(user)) => user.branch_ids.contains(&self.route.id) && user.can(QUEUE_READ),
            Ok(None) => false,
            // Cannot tell now (the registry is unreachable): keep showing, check again later.
            Err(_) => true,
        }
    }

    async fn snapshot(&self) -> ApiResult<SseEvent> {
        let conn = self.state.directory.connect(&self.route).await?;
        let client: &deadpool_postgres::ClientWrapper = &conn;
        let today = self.route.today(client).await?;
        let view = queue_view(client, &self.service, today, None).await?;
        Ok(SseEvent::default().name("snapshot").text(view.to_string()))
    }

    /// Waits for the next thing to send.
    async fn next(&mut self) -> Next {
        let wanted = topic(self.route.id, self.service.id);
        let until_expiry = self.expires_at.map(|at| {
            let left = (at - OffsetDateTime::now_utc()).max(time::Duration::ZERO);
            Duration::from_secs_f64(left.as_seconds_f64())
        });
        let expiry = async {
            match until_expiry {
                Some(left) => tokio::time::sleep(left).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expiry);
        let state = self.state.clone();
        let draining = state.drain.started();
        tokio::pin!(draining);
        loop {
            tokio::select! {
                change = self.changes.recv() => match change {
                    Ok(event) if event.topic == wanted => {
                        return Next::Send(SseEvent::default().name("ticket").text(event.data.to_string()));
                    }
                    Ok(_) => {}
                    // Changes were missed: the whole queue again, never a stale screen.
                    Err(RecvError::Lagged(_)) => match self.snapshot().await {
                        Ok(snapshot) => return Next::Send(snapshot),
                        Err(_) => return Next::End("unavailable"),
                    },
                    Err(RecvError::Closed) => return Next::End("shutdown"),
                },
                topic = self.invalidations.recv() => {
                    let check = match topic {
                        Ok(topic) => self.concerns(topic),
                        Err(RecvError::Lagged(_)) => true,
                        Err(RecvError::Closed) => return Next::End("shutdown"),
                    };
                    if check && !self.still_allowed().await {
                        return Next::End("access_ended");
                    }
                }
                () = &mut expiry => return Next::End("token_expired"),
                // The instance is shutting down: the display reconnects to another one.
                () = &mut draining => return Next::End("shutdown"),
            }
        }
    }
}

#[handler]
pub async fn follow(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_READ)?;
    let service: Service = path_service(&ctx, req).await?;
    let route = ctx.branch()?.clone();
    let token = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .map(|(_, token)| token.trim().to_owned())
        .unwrap_or_default();
    // Subscribe before the snapshot is read, so that no change falls between the two.
    let display = Display {
        changes: ctx.state.events.subscribe(),
        invalidations: ctx.state.invalidations.subscribe(),
        state: ctx.state.clone(),
        token,
        token_id: ctx.user.token_id,
        user_id: ctx.user.id,
        route: route.clone(),
        expires_at: ctx.user.token_expires_at,
        service,
        ended: false,
    };
    let first = {
        let mut conn = ctx.conn(Scope::Branch).await?;
        let client = conn.client();
        let today = route.today(&*client).await?;
        let view = queue_view(&*client, &display.service, today, None).await?;
        SseEvent::default().name("snapshot").text(view.to_string())
    };
    let updates = stream::unfold(display, |mut display| async move {
        if display.ended {
            return None;
        }
        let event = match display.next().await {
            Next::Send(event) => event,
            Next::End(reason) => {
                display.ended = true;
                SseEvent::default().name("end").text(json!({ "reason": reason }).to_string())
            }
        };
        Some((Ok::<_, Never>(event), display))
    });
    let events = stream::iter([Ok::<_, Never>(first)]).chain(updates);
    res.headers_mut().insert("x-accel-buffering", salvo::http::HeaderValue::from_static("no"));
    SseKeepAlive::new(events).max_interval(Duration::from_secs(15)).comment("heartbeat").stream(res);
    Ok(())
}

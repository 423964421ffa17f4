//! A waiting-room display's stream: for a signed-in user,
//! `GET /queue/branch-services/{id}/events`; for a screen holding a display key,
//! `GET /display/{id}/events` (`display`). First the service's queue today, then each change
//! of a ticket of that service, made on any instance, and a comment line every 15 seconds. A listener holds no database connection:
//! changes reach it from the instance's one LISTEN connection through a broadcast channel.
//!
//! The stream lives only as long as what opened it: when its token is revoked or expires,
//! or its user is deactivated or loses the branch or `queue.read`, or its display key is
//! revoked, it sends `end` and closes (it checks again whenever any instance says a token,
//! user, key or branch changed). A display that falls behind the channel gets a fresh
//! snapshot instead of the changes it missed. When the instance starts shutting down, every
//! stream sends `end` with reason `shutdown` and closes, so that the drain does not wait on
//! them.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use salvo::prelude::*;
use salvo::sse::{SseEvent, SseKeepAlive};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use super::tickets::{Service, path_service, queue_view, topic};
use crate::db::directory::BranchRoute;
use crate::http::error::ApiResult;
use crate::notify::Topic;
use crate::permissions::QUEUE_READ;
use crate::resource::Context;
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

/// Who holds a stream open.
pub(super) enum Holder {
    /// A signed-in user, by the bearer token the stream was opened with (kept in memory,
    /// never logged).
    User { token: String, token_id: i64, user_id: i64, expires_at: Option<OffsetDateTime> },
    /// A display key of the service (`display_keys`).
    Key { id: i64 },
}

/// Who a stream is for and what it shows: checked again whenever access may have changed.
pub(super) struct Display {
    state: Arc<AppState>,
    holder: Holder,
    route: Arc<BranchRoute>,
    service: Service,
    changes: Receiver<Event>,
    invalidations: Receiver<Topic>,
}

/// What a stream learns next, before it is written for its audience.
pub(super) enum Change {
    /// The whole queue of the service today, as `GET .../queue` answers it.
    Snapshot(Value),
    /// A changed ticket of the service, as stored.
    Ticket(Value),
}

/// What the stream does next.
enum Next {
    Tell(Change),
    End(&'static str),
}

impl Display {
    /// Subscribes before anything is read, so that no change falls between the first
    /// snapshot and the changes.
    pub(super) fn open(
        state: Arc<AppState>,
        holder: Holder,
        route: Arc<BranchRoute>,
        service: Service,
    ) -> Self {
        Self {
            changes: state.events.subscribe(),
            invalidations: state.invalidations.subscribe(),
            state,
            holder,
            route,
            service,
        }
    }

    fn concerns(&self, topic: Topic) -> bool {
        match (topic, &self.holder) {
            (Topic::Token(id), Holder::User { token_id, .. }) => id == *token_id,
            (Topic::User(id), Holder::User { user_id, .. }) => id == *user_id,
            (Topic::DisplayKey(id), Holder::Key { id: key }) => id == *key,
            (Topic::Branch(id), _) => id == self.route.id,
            (Topic::All, _) => true,
            _ => false,
        }
    }

    /// Whether the holder still opens this stream: a token still valid, its user active,
    /// with the branch and `queue.read`; a key not revoked, its service and branch live.
    async fn still_allowed(&self) -> bool {
        let verdict = match &self.holder {
            Holder::User { token, .. } => authenticate(&self.state, token).await.map(|presented| {
                presented.user().is_some_and(|u| u.branch_ids.contains(&self.route.id) && u.can(QUEUE_READ))
            }),
            Holder::Key { id } => super::display_keys::still_live(&self.state, *id).await,
        };
        // Cannot tell now (the registry is unreachable): keep showing, check again later.
        verdict.unwrap_or(true)
    }

    /// Why the stream ends when its holder lost access.
    fn access_ended(&self) -> &'static str {
        match self.holder {
            Holder::User { .. } => "access_ended",
            Holder::Key { .. } => "revoked",
        }
    }

    /// Today's queue of the service.
    pub(super) async fn snapshot(&self) -> ApiResult<Value> {
        let conn = self.state.directory.connect(&self.route).await?;
        let client: &crate::db::Client = &conn;
        let today = self.route.today(client).await?;
        queue_view(client, &self.service, today, None).await
    }

    /// Waits for the next thing to tell.
    async fn next(&mut self) -> Next {
        let wanted = topic(self.route.id, self.service.id);
        let until_expiry = match self.holder {
            Holder::User { expires_at: Some(at), .. } => {
                let left = (at - OffsetDateTime::now_utc()).max(time::Duration::ZERO);
                Some(Duration::from_secs_f64(left.as_seconds_f64()))
            }
            _ => None,
        };
        let expiry = async {
            match until_expiry {
                Some(left) => tokio::time::sleep(left).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expiry);
        // An open stream is its token in use: with an idle limit, the stream presents its
        // token again now and then, which keeps it from going idle (and ends the stream
        // should the token be gone).
        let in_use_every = match (&self.holder, self.state.settings.token_idle) {
            (Holder::User { .. }, Some(idle)) => Some((idle / 3).max(Duration::from_secs(1))),
            _ => None,
        };
        let in_use = tokio::time::sleep(in_use_every.unwrap_or(Duration::from_secs(3600)));
        tokio::pin!(in_use);
        let state = self.state.clone();
        let draining = state.drain.started();
        tokio::pin!(draining);
        loop {
            tokio::select! {
                change = self.changes.recv() => match change {
                    Ok(event) if event.topic == wanted => return Next::Tell(Change::Ticket(event.data)),
                    Ok(_) => {}
                    // Changes were missed: the whole queue again, never a stale screen.
                    Err(RecvError::Lagged(_)) => match self.snapshot().await {
                        Ok(snapshot) => return Next::Tell(Change::Snapshot(snapshot)),
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
                        return Next::End(self.access_ended());
                    }
                }
                () = &mut expiry => return Next::End("token_expired"),
                () = &mut in_use, if in_use_every.is_some() => {
                    if !self.still_allowed().await {
                        return Next::End(self.access_ended());
                    }
                    let every = in_use_every.unwrap_or_default();
                    in_use.as_mut().reset(tokio::time::Instant::now() + every);
                }
                // The instance is shutting down: the display reconnects to another one.
                () = &mut draining => return Next::End("shutdown"),
            }
        }
    }
}

/// Streams `first`, then what `render` makes of each change (`None`: nothing to send for it),
/// then `end` with the reason the stream ends; a comment every 15 seconds keeps it open
/// through proxies.
pub(super) fn serve<R>(display: Display, first: SseEvent, render: R, res: &mut Response)
where
    R: FnMut(Change) -> Option<SseEvent> + Send + 'static,
{
    let updates = stream::unfold(Some((display, render)), |open| async move {
        let (mut display, mut render) = open?;
        loop {
            match display.next().await {
                Next::Tell(change) => {
                    if let Some(event) = render(change) {
                        return Some((Ok::<_, Never>(event), Some((display, render))));
                    }
                }
                Next::End(reason) => {
                    let end = SseEvent::default().name("end").text(json!({ "reason": reason }).to_string());
                    return Some((Ok(end), None));
                }
            }
        }
    });
    let events = stream::iter([Ok::<_, Never>(first)]).chain(updates);
    res.headers_mut().insert("x-accel-buffering", salvo::http::HeaderValue::from_static("no"));
    SseKeepAlive::new(events).max_interval(Duration::from_secs(15)).comment("heartbeat").stream(res);
}

/// `GET /queue/branch-services/{id}/events` for a signed-in user with `queue.read`: the
/// queue as `GET .../queue` answers it (`snapshot`), then each changed ticket (`ticket`).
#[handler]
pub async fn follow(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_READ)?;
    let service: Service = path_service(&ctx, req).await?;
    let token = crate::http::bearer(req).unwrap_or_default().to_owned();
    let holder = Holder::User {
        token,
        token_id: ctx.user.token_id,
        user_id: ctx.user.id,
        expires_at: ctx.user.token_expires_at,
    };
    let display = Display::open(ctx.state.clone(), holder, ctx.branch()?.clone(), service);
    let first = display.snapshot().await?;
    let named = |name: &'static str, data: Value| SseEvent::default().name(name).text(data.to_string());
    let first = named("snapshot", first);
    serve(
        display,
        first,
        move |change| {
            Some(match change {
                Change::Snapshot(view) => named("snapshot", view),
                Change::Ticket(ticket) => named("ticket", ticket),
            })
        },
        res,
    );
    Ok(())
}

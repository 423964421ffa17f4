//! Cache invalidation across instances, through PostgreSQL LISTEN/NOTIFY.
//!
//! A change that makes a cached entry wrong (a revoked token, a changed user, an archived
//! branch) publishes a topic in the same transaction, so the notification is sent exactly
//! when the change commits. Each instance listens on one dedicated connection
//! (`application_name` [`LISTENER_NAME`]). When that connection breaks (PostgreSQL restarted,
//! the network dropped it, or it stopped answering the periodic ping) the listener reconnects
//! by itself, with back-off, and clears every cache it guards both when the connection is lost
//! and once LISTEN is in effect again: notifications sent meanwhile were missed, so nothing
//! stale outlives a reconnect.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;

use crate::config::DatabaseTls;

pub const CHANNEL: &str = "clinic_cache";
/// Changes displays follow (a queue ticket called): relayed to this instance's listeners.
pub const EVENTS: &str = "clinic_events";
/// The listening connection's `application_name`, to tell it apart in `pg_stat_activity`.
pub const LISTENER_NAME: &str = "clinic-server-listener";
/// How often the listening connection is asked whether it is still there: a connection cut
/// without a word (a dropped route, a frozen server) is noticed within this and the
/// ping's own limit.
const PING_EVERY: Duration = Duration::from_secs(30);
const PING_LIMIT: Duration = Duration::from_secs(10);
/// The longest pause between two attempts to connect.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    Token(i64),
    User(i64),
    Branch(i64),
    /// A waiting-room display's key (revoked).
    DisplayKey(i64),
    /// Everything (after changes too broad to name, such as a role's permissions).
    All,
}

impl Topic {
    fn encode(self) -> String {
        match self {
            Self::Token(id) => format!("token:{id}"),
            Self::User(id) => format!("user:{id}"),
            Self::Branch(id) => format!("branch:{id}"),
            Self::DisplayKey(id) => format!("display_key:{id}"),
            Self::All => "all".into(),
        }
    }

    pub fn decode(text: &str) -> Option<Self> {
        if text == "all" {
            return Some(Self::All);
        }
        let (kind, id) = text.split_once(':')?;
        let id = id.parse().ok()?;
        match kind {
            "token" => Some(Self::Token(id)),
            "user" => Some(Self::User(id)),
            "branch" => Some(Self::Branch(id)),
            "display_key" => Some(Self::DisplayKey(id)),
            _ => None,
        }
    }
}

/// Queues a notification; it is delivered when the surrounding transaction commits.
pub async fn publish(client: &impl crate::db::Queries, topic: Topic) -> Result<(), tokio_postgres::Error> {
    client.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &topic.encode()]).await?;
    Ok(())
}

/// Something that drops cached entries when told to, and relays events to its listeners.
pub trait Invalidate: Send + Sync + 'static {
    fn invalidate(&self, topic: Topic) -> impl std::future::Future<Output = ()> + Send;

    /// An event published on [`EVENTS`] by any instance.
    fn relay(&self, _payload: &str) {}
}

/// Publishes an event to every instance (after the change it describes committed).
pub async fn publish_event(
    client: &impl crate::db::Queries,
    payload: &str,
) -> Result<(), tokio_postgres::Error> {
    client.execute("SELECT pg_notify($1, $2)", &[&EVENTS, &payload]).await?;
    Ok(())
}

/// Listens for notifications until the process ends, reconnecting with back-off.
pub fn spawn_listener<I: Invalidate>(
    url: String,
    tls: DatabaseTls,
    target: Arc<I>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let mut heard = false;
            match listen_once(&url, &tls, &target, &mut heard).await {
                Ok(()) => tracing::warn!("cache invalidation connection closed; reconnecting"),
                Err(e) => tracing::warn!(error = format!("{e:#}"), "cache invalidation connection failed"),
            }
            // Anything may have changed while we were not listening.
            target.invalidate(Topic::All).await;
            // A connection that was listening starts the back-off again; failed attempts in a
            // row wait longer each time.
            if heard {
                backoff = Duration::from_millis(100);
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    })
}

/// Connects, listens and hands on what it hears until the connection ends; sets `listening`
/// once LISTEN took effect.
async fn listen_once<I: Invalidate>(
    url: &str,
    tls: &DatabaseTls,
    target: &Arc<I>,
    listening: &mut bool,
) -> anyhow::Result<()> {
    let mut link = crate::db::link(url, "public", tls)?;
    link.config.application_name(LISTENER_NAME);
    let (client, mut connection) = link.connect().await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send((n.channel().to_owned(), n.payload().to_owned())).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cache invalidation connection error");
                    break;
                }
            }
        }
    });
    let outcome = async {
        link.settle(&client, crate::db::AUDIT_CHAIN).await?;
        client.batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {EVENTS}")).await?;
        *listening = true;
        tracing::info!("listening for cache invalidations");
        // Changes made before LISTEN took effect were not heard.
        target.invalidate(Topic::All).await;
        let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
        loop {
            tokio::select! {
                heard = rx.recv() => {
                    let Some((channel, payload)) = heard else { return Ok(()) };
                    if channel == EVENTS {
                        target.relay(&payload);
                        continue;
                    }
                    match Topic::decode(&payload) {
                        Some(topic) => target.invalidate(topic).await,
                        None => tracing::warn!(payload, "unknown cache invalidation message"),
                    }
                }
                _ = ping.tick() => {
                    match tokio::time::timeout(PING_LIMIT, client.simple_query("")).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => return Err(anyhow::Error::new(e).context("pinging the listening connection")),
                        Err(_) => anyhow::bail!("the listening connection did not answer a ping in {PING_LIMIT:?}"),
                    }
                }
            }
        }
    }
    .await;
    drop(client);
    driver.abort();
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_round_trip() {
        for topic in [Topic::Token(7), Topic::User(1), Topic::Branch(42), Topic::DisplayKey(3), Topic::All] {
            assert_eq!(Topic::decode(&topic.encode()), Some(topic));
        }
        assert_eq!(Topic::decode("user:x"), None);
        assert_eq!(Topic::decode("nope"), None);
    }
}

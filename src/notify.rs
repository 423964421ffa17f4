//! Cache invalidation across instances, through PostgreSQL LISTEN/NOTIFY.
//!
//! A change that makes a cached entry wrong (a revoked token, a changed user, an archived
//! branch) publishes a topic in the same transaction, so the notification is sent exactly
//! when the change commits. Each instance listens on one dedicated connection; while that
//! connection is down the caches are cleared and bypassed-by-expiry, so nothing stale
//! outlives a reconnect.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::{AsyncMessage, NoTls};

pub const CHANNEL: &str = "clinic_cache";
/// Changes displays follow (a queue ticket called): relayed to this instance's listeners.
pub const EVENTS: &str = "clinic_events";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    Token(i64),
    User(i64),
    Branch(i64),
    /// Everything (after changes too broad to name, such as a role's permissions).
    All,
}

impl Topic {
    fn encode(self) -> String {
        match self {
            Self::Token(id) => format!("token:{id}"),
            Self::User(id) => format!("user:{id}"),
            Self::Branch(id) => format!("branch:{id}"),
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
            _ => None,
        }
    }
}

/// Queues a notification; it is delivered when the surrounding transaction commits.
pub async fn publish(
    client: &impl deadpool_postgres::GenericClient,
    topic: Topic,
) -> Result<(), tokio_postgres::Error> {
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
    client: &impl deadpool_postgres::GenericClient,
    payload: &str,
) -> Result<(), tokio_postgres::Error> {
    client.execute("SELECT pg_notify($1, $2)", &[&EVENTS, &payload]).await?;
    Ok(())
}

/// Listens for notifications until the process ends, reconnecting with back-off.
pub fn spawn_listener<I: Invalidate>(url: String, target: Arc<I>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(200);
        loop {
            match listen_once(&url, &target).await {
                Ok(()) => tracing::warn!("cache invalidation connection closed; reconnecting"),
                Err(e) => tracing::warn!(error = format!("{e:#}"), "cache invalidation connection failed"),
            }
            // Anything may have changed while we were not listening.
            target.invalidate(Topic::All).await;
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    })
}

async fn listen_once<I: Invalidate>(url: &str, target: &Arc<I>) -> anyhow::Result<()> {
    let config = crate::db::pg_config(url, "public")?;
    let (client, mut connection) = config.connect(NoTls).await?;
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
    client.batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {EVENTS}")).await?;
    // Changes made before LISTEN took effect were not heard.
    target.invalidate(Topic::All).await;
    while let Some((channel, payload)) = rx.recv().await {
        if channel == EVENTS {
            target.relay(&payload);
            continue;
        }
        match Topic::decode(&payload) {
            Some(topic) => target.invalidate(topic).await,
            None => tracing::warn!(payload, "unknown cache invalidation message"),
        }
    }
    drop(client);
    driver.abort();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_round_trip() {
        for topic in [Topic::Token(7), Topic::User(1), Topic::Branch(42), Topic::All] {
            assert_eq!(Topic::decode(&topic.encode()), Some(topic));
        }
        assert_eq!(Topic::decode("user:x"), None);
        assert_eq!(Topic::decode("nope"), None);
    }
}

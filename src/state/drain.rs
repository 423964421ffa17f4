//! Whether this instance is shutting down. Once the drain starts, readiness answers 503, new
//! connections are refused, waiting-room streams end, and what is in flight may finish.

use tokio::sync::watch;

pub struct Drain {
    started: watch::Sender<bool>,
}

impl Default for Drain {
    fn default() -> Self {
        Self { started: watch::channel(false).0 }
    }
}

impl Drain {
    /// Starts the drain; answers whether this call started it (later calls change nothing).
    pub fn start(&self) -> bool {
        self.started.send_if_modified(|started| !std::mem::replace(started, true))
    }

    pub fn is_draining(&self) -> bool {
        *self.started.borrow()
    }

    /// Resolves once the drain has started.
    pub async fn started(&self) {
        let mut seen = self.started.subscribe();
        // The sender lives as long as `self`: waiting cannot fail while we are borrowed.
        let _ = seen.wait_for(|started| *started).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_drain_starts_once_and_wakes_every_waiter() {
        let drain = std::sync::Arc::new(Drain::default());
        assert!(!drain.is_draining());
        let waiter = tokio::spawn({
            let drain = drain.clone();
            async move { drain.started().await }
        });
        assert!(drain.start());
        assert!(!drain.start(), "a second start changes nothing");
        assert!(drain.is_draining());
        waiter.await.unwrap();
        // A waiter that comes after the start does not wait.
        drain.started().await;
    }
}

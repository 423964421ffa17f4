//! A read-through cache (moka) in which an invalidation always wins over a load that was
//! running when it happened.
//!
//! moka inserts whatever a loader returns, even when the key was invalidated while the loader
//! ran, so a token revoked during the lookup of that very token would stay usable until the
//! entry expired. Here every value carries the invalidation sequence number read before its
//! load began; a value loaded before the latest invalidation of its key (or of everything) is
//! dropped and loaded again.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::future::Cache;
use moka::policy::EvictionPolicy;

#[derive(Clone)]
struct Stamped<V> {
    value: V,
    /// The sequence number read before the load began.
    loaded_from: u64,
}

pub struct FreshCache<K, V> {
    entries: Cache<K, Stamped<V>>,
    /// Key -> sequence number of its latest invalidation. Kept as long as entries live, which
    /// bounds how long a raced value could otherwise survive.
    invalidated: Cache<K, u64>,
    /// Sequence number of the latest invalidation of everything.
    all_at: AtomicU64,
    seq: AtomicU64,
}

/// How many times a load that keeps racing invalidations is retried before its value is
/// answered uncached.
const ATTEMPTS: usize = 3;

impl<K, V> FreshCache<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// LRU (TinyLFU may refuse a brand-new entry when full), bounded, expiring after `ttl`
    /// (a safety net: invalidation is explicit) and after `idle` without use.
    pub fn new(capacity: u64, ttl: Duration, idle: Option<Duration>) -> Self {
        let builder =
            Cache::builder().eviction_policy(EvictionPolicy::lru()).max_capacity(capacity).time_to_live(ttl);
        let entries = match idle {
            Some(idle) => builder.time_to_idle(idle).build(),
            None => builder.build(),
        };
        let invalidated = Cache::builder()
            .eviction_policy(EvictionPolicy::lru())
            .max_capacity(capacity)
            .time_to_live(ttl)
            .build();
        Self { entries, invalidated, all_at: AtomicU64::new(0), seq: AtomicU64::new(0) }
    }

    /// The cached value, or what `load` gives (concurrent loads of one key share one run).
    /// Errors are not cached.
    pub async fn get_or_load<E, F, Fut>(&self, key: K, load: F) -> Result<V, Arc<E>>
    where
        E: Send + Sync + 'static,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        // A hit (nearly every call) takes neither the loader nor moka's loading path, whose
        // futures would hold the loader's whole state.
        if let Some(stamped) = self.entries.get(&key).await
            && self.is_fresh(&key, stamped.loaded_from).await
        {
            return Ok(stamped.value);
        }
        for _ in 0..ATTEMPTS {
            let start = self.seq.load(Ordering::SeqCst);
            let stamped = self
                .entries
                .try_get_with(
                    key.clone(),
                    Box::pin(async { load().await.map(|value| Stamped { value, loaded_from: start }) }),
                )
                .await?;
            if self.is_fresh(&key, stamped.loaded_from).await {
                return Ok(stamped.value);
            }
            self.entries.invalidate(&key).await;
        }
        load().await.map_err(Arc::new)
    }

    async fn is_fresh(&self, key: &K, loaded_from: u64) -> bool {
        if self.all_at.load(Ordering::SeqCst) > loaded_from {
            return false;
        }
        self.invalidated.get(key).await.is_none_or(|at| at <= loaded_from)
    }

    pub async fn invalidate(&self, key: &K) {
        let at = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.invalidated.insert(key.clone(), at).await;
        self.entries.invalidate(key).await;
    }

    pub fn invalidate_all(&self) {
        let at = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.all_at.store(at, Ordering::SeqCst);
        self.entries.invalidate_all();
    }

    /// Runs moka's pending maintenance (expiry, eviction) now.
    pub async fn run_pending_tasks(&self) {
        self.entries.run_pending_tasks().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use tokio::sync::{Notify, oneshot};

    use super::*;

    /// The race moka alone loses: a load starts, the key is invalidated while the loader is
    /// paused, the loader then returns the old value. It must be neither kept nor answered.
    #[tokio::test]
    async fn an_invalidation_during_a_load_wins() {
        let cache: Arc<FreshCache<i64, &'static str>> =
            Arc::new(FreshCache::new(100, Duration::from_secs(60), None));
        let loads = Arc::new(AtomicUsize::new(0));
        let (started_tx, started_rx) = oneshot::channel::<()>();
        let resume = Arc::new(Notify::new());
        let started_tx = std::sync::Mutex::new(Some(started_tx));

        let reader = {
            let (cache, loads, resume) = (cache.clone(), loads.clone(), resume.clone());
            tokio::spawn(async move {
                cache
                    .get_or_load(7, || {
                        let (loads, resume) = (loads.clone(), resume.clone());
                        let started = started_tx.lock().unwrap().take();
                        async move {
                            loads.fetch_add(1, Ordering::SeqCst);
                            if let Some(started) = started {
                                // First load: signal, then wait while the key is invalidated.
                                let _ = started.send(());
                                resume.notified().await;
                                return Ok::<_, ()>("before revocation");
                            }
                            Ok("after revocation")
                        }
                    })
                    .await
            })
        };
        started_rx.await.unwrap();
        cache.invalidate(&7).await;
        resume.notify_one();
        let answered = reader.await.unwrap().unwrap();
        assert_eq!(answered, "after revocation", "the value loaded before the invalidation was answered");
        assert_eq!(loads.load(Ordering::SeqCst), 2, "the raced load ran again");
        let cached = cache.get_or_load(7, || async { Ok::<_, ()>("a third load") }).await.unwrap();
        assert_eq!(cached, "after revocation", "the fresh value is the one kept");
    }

    #[tokio::test]
    async fn invalidate_all_also_wins_over_a_running_load() {
        let cache: Arc<FreshCache<i64, u32>> = Arc::new(FreshCache::new(100, Duration::from_secs(60), None));
        let resume = Arc::new(Notify::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let reader = {
            let (cache, resume, calls) = (cache.clone(), resume.clone(), calls.clone());
            tokio::spawn(async move {
                cache
                    .get_or_load(1, || {
                        let (resume, calls) = (resume.clone(), calls.clone());
                        async move {
                            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                                resume.notified().await;
                                return Ok::<_, ()>(1);
                            }
                            Ok(2)
                        }
                    })
                    .await
            })
        };
        while calls.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        cache.invalidate_all();
        resume.notify_one();
        assert_eq!(reader.await.unwrap().unwrap(), 2);
    }

    #[tokio::test]
    async fn errors_are_not_cached() {
        let cache: FreshCache<i64, u32> = FreshCache::new(10, Duration::from_secs(60), None);
        assert!(cache.get_or_load(1, || async { Err::<u32, _>("down") }).await.is_err());
        assert_eq!(cache.get_or_load(1, || async { Ok::<_, &str>(5) }).await.unwrap(), 5);
    }
}

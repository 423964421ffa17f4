//! Fixed-window rate limits kept in process memory: limits are per instance (README says so).
//!
//! Each key's window is a cache entry that lives exactly one window (moka's time to live), so
//! a hit costs one hash lookup however many keys there are, and a flood of distinct keys
//! (one per spoofed address) can never hold more than `MAX_KEYS` windows: past that the
//! least recently used are dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use moka::policy::EvictionPolicy;
use moka::sync::Cache;
use salvo::http::header::HeaderValue;
use salvo::prelude::*;

use super::error::ApiError;

/// Windows kept per limiter at most.
pub const MAX_KEYS: u64 = 100_000;

struct Window {
    started: Instant,
    used: AtomicU32,
}

pub struct RateLimiter {
    limit: u32,
    window: Duration,
    windows: Cache<String, Arc<Window>>,
    /// Requests refused so far (for the metrics).
    rejected: AtomicU64,
}

impl RateLimiter {
    pub fn per_minute(limit: u32) -> Self {
        Self::new(limit, Duration::from_secs(60), MAX_KEYS)
    }

    pub fn new(limit: u32, window: Duration, max_keys: u64) -> Self {
        let windows = Cache::builder()
            .eviction_policy(EvictionPolicy::lru())
            .max_capacity(max_keys)
            .time_to_live(window)
            .build();
        Self { limit, window, windows, rejected: AtomicU64::new(0) }
    }

    fn window_of(&self, key: &str) -> Arc<Window> {
        self.windows
            .get_with_by_ref(key, || Arc::new(Window { started: Instant::now(), used: AtomicU32::new(0) }))
    }

    fn refusal(&self, window: &Window) -> ApiError {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        let retry_after = self.window.saturating_sub(window.started.elapsed()).as_secs().max(1);
        ApiError::RateLimited { limit: self.limit, retry_after_secs: retry_after }
    }

    /// Counts one request for `key`. On success sets the `X-RateLimit-*` headers; past the
    /// limit answers the 429 to send.
    pub fn hit(&self, key: &str, res: &mut Response) -> Result<(), ApiError> {
        let remaining = self.count(key)?;
        let headers = res.headers_mut();
        headers.insert("x-ratelimit-limit", HeaderValue::from(self.limit));
        headers.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
        Ok(())
    }

    /// Counts one request for `key`; returns what is left of its window, or the 429.
    pub fn count(&self, key: &str) -> Result<u32, ApiError> {
        let window = self.window_of(key);
        let used = window.used.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if used > self.limit {
            return Err(self.refusal(&window));
        }
        Ok(self.limit - used)
    }

    /// The 429 `key` would get now, without counting a request.
    pub fn check(&self, key: &str) -> Result<(), ApiError> {
        match self.windows.get(key) {
            Some(window) if window.used.load(Ordering::Relaxed) >= self.limit => Err(self.refusal(&window)),
            _ => Ok(()),
        }
    }

    /// Requests refused since start.
    pub fn rejections(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Windows currently kept (for the benchmark).
    pub fn keys(&self) -> u64 {
        self.windows.run_pending_tasks();
        self.windows.entry_count()
    }
}

/// The limits README lists: login, the reset steps, change-password, bad tokens, the API.
pub struct Limits {
    /// `POST /auth/login`, per client IP.
    pub login: RateLimiter,
    /// The password-reset routes, per client IP, one bucket for all three.
    pub reset: RateLimiter,
    /// `POST /profile/change-password`, per user.
    pub change_password: RateLimiter,
    /// Every other authenticated route, per user.
    pub api: RateLimiter,
    /// Requests with a bearer token that is not valid, per client IP.
    pub bad_token: RateLimiter,
}

impl Limits {
    pub fn new(settings: &crate::config::Settings) -> Self {
        Self {
            login: RateLimiter::per_minute(settings.rate_limit_login),
            reset: RateLimiter::per_minute(settings.rate_limit_auth),
            change_password: RateLimiter::per_minute(settings.rate_limit_auth),
            api: RateLimiter::per_minute(settings.rate_limit_api),
            bad_token: RateLimiter::per_minute(settings.rate_limit_bad_token),
        }
    }
}

impl Limits {
    /// Each limit's name and the requests it refused since start.
    pub fn rejections(&self) -> [(&'static str, u64); 5] {
        [
            ("login", self.login.rejections()),
            ("reset", self.reset.rejections()),
            ("change_password", self.change_password.rejections()),
            ("api", self.api.rejections()),
            ("bad_token", self.bad_token.rejections()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_key_and_refuses_past_the_limit() {
        let limiter = RateLimiter::per_minute(2);
        let mut res = Response::new();
        assert!(limiter.hit("a", &mut res).is_ok());
        assert_eq!(res.headers().get("x-ratelimit-remaining").unwrap(), "1");
        assert!(limiter.hit("a", &mut res).is_ok());
        match limiter.hit("a", &mut res) {
            Err(ApiError::RateLimited { limit: 2, retry_after_secs }) => {
                assert!((1..=60).contains(&retry_after_secs))
            }
            other => panic!("expected a 429, got {other:?}"),
        }
        assert!(limiter.check("a").is_err(), "check sees the exhausted window");
        assert_eq!(limiter.rejections(), 2, "a refusal counts, whether counted or checked");
        assert!(limiter.hit("b", &mut res).is_ok());
        assert!(limiter.check("c").is_ok(), "check does not count");
        assert!(limiter.count("c").is_ok());
    }

    #[test]
    fn memory_is_bounded_by_the_key_cap() {
        let limiter = RateLimiter::new(5, Duration::from_secs(60), 1_000);
        for i in 0..5_000 {
            let _ = limiter.count(&format!("10.0.{}.{}", i / 256, i % 256));
        }
        assert!(limiter.keys() <= 1_000, "kept {} windows", limiter.keys());
    }
}

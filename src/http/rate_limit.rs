//! Fixed-window rate limits kept in process memory: limits are per instance (README says so).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use salvo::http::header::HeaderValue;
use salvo::prelude::*;

use super::error::ApiError;

pub struct RateLimiter {
    limit: u32,
    window: Duration,
    counters: Mutex<HashMap<String, (Instant, u32)>>,
}

impl RateLimiter {
    pub fn per_minute(limit: u32) -> Self {
        Self { limit, window: Duration::from_secs(60), counters: Mutex::new(HashMap::new()) }
    }

    /// Counts one request for `key`. On success sets the `X-RateLimit-*` headers; past the
    /// limit answers the 429 to send.
    pub fn hit(&self, key: &str, res: &mut Response) -> Result<(), ApiError> {
        let now = Instant::now();
        let mut counters = self.counters.lock().expect("rate limiter poisoned");
        if counters.len() > 100_000 {
            counters.retain(|_, (start, _)| now.duration_since(*start) < self.window);
        }
        let entry = counters.entry(key.to_owned()).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.window {
            *entry = (now, 0);
        }
        if entry.1 >= self.limit {
            let retry_after = self.window.saturating_sub(now.duration_since(entry.0)).as_secs().max(1);
            return Err(ApiError::RateLimited { limit: self.limit, retry_after_secs: retry_after });
        }
        entry.1 += 1;
        let remaining = self.limit - entry.1;
        drop(counters);
        let headers = res.headers_mut();
        headers.insert("x-ratelimit-limit", HeaderValue::from(self.limit));
        headers.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
        Ok(())
    }
}

/// The three limits of DESIGN.md.
pub struct Limits {
    /// `POST /auth/login`, per client IP.
    pub login: RateLimiter,
    /// The password-reset routes, per client IP, one bucket for all three.
    pub reset: RateLimiter,
    /// `POST /profile/change-password`, per user.
    pub change_password: RateLimiter,
    /// Every other authenticated route, per user.
    pub api: RateLimiter,
}

impl Limits {
    pub fn new(settings: &crate::config::Settings) -> Self {
        Self {
            login: RateLimiter::per_minute(settings.rate_limit_login),
            reset: RateLimiter::per_minute(settings.rate_limit_auth),
            change_password: RateLimiter::per_minute(settings.rate_limit_auth),
            api: RateLimiter::per_minute(settings.rate_limit_api),
        }
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
        assert!(limiter.hit("b", &mut res).is_ok());
    }
}

//! The rate limiter under a flood of distinct keys (one per spoofed address): how long a hit
//! takes as the number of keys grows past the cap, how many windows stay, and the memory.
//!
//!   cargo bench --bench rate_limit
//!
//! A hit must cost the same with 1,000 keys as with 200,000, and the windows kept must stop
//! at the cap (`MAX_KEYS`) however many addresses arrive.

use std::time::Instant;

use clinic_server::http::rate_limit::{MAX_KEYS, RateLimiter};

/// Resident memory of this process in KiB (Linux).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4)
}

fn address(i: u64) -> String {
    format!("bad-token:10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}

/// `hits` hits over `distinct` keys, in rounds; answers nanoseconds per hit.
fn flood(limiter: &RateLimiter, distinct: u64, hits: u64) -> f64 {
    let keys: Vec<String> = (0..distinct).map(address).collect();
    let start = Instant::now();
    for n in 0..hits {
        let _ = limiter.count(&keys[(n % distinct) as usize]);
    }
    start.elapsed().as_nanos() as f64 / hits as f64
}

fn main() {
    println!("cap: {MAX_KEYS} windows per limiter\n");
    println!("{:>16} {:>12} {:>14} {:>16}", "distinct keys", "ns per hit", "windows kept", "RSS growth KiB");
    for distinct in [1_000u64, 10_000, 100_000, 200_000] {
        let limiter = RateLimiter::per_minute(60);
        let before = rss_kib();
        let ns = flood(&limiter, distinct, 400_000);
        let kept = limiter.keys();
        println!("{distinct:>16} {ns:>12.0} {kept:>14} {:>16}", rss_kib().saturating_sub(before));
        assert!(kept <= MAX_KEYS, "the limiter kept {kept} windows");
    }
}

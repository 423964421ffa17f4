//! Password hashing: argon2id PHC strings (OWASP's first choice; scrypt hashes made before it
//! still verify, and are rehashed at the next login), computed off the async runtime (a hash
//! costs tens of milliseconds and tens of megabytes of memory), a few at a time.
//!
//! Fewer hashes run at once than there are cores, on threads of their own at a lower CPU
//! priority (nice 10), so a flood of logins leaves the cores to the rest of the API and takes
//! what it leaves; the line of hashes waiting for their turn is bounded, and a hash that
//! would join a full line is refused at once (503 `busy_hashing`, with Retry-After) rather
//! than holding its connection for seconds.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use anyhow::Context;
use argon2::{Algorithm, Argon2, Version};
use scrypt::Scrypt;
use scrypt::password_hash::{PasswordHasher as _, PasswordVerifier as _};
use scrypt::phc::PasswordHash;
use tokio::sync::Semaphore;

use crate::config::{HashCost, HashLimits};
use crate::http::error::ApiError;

#[derive(Clone)]
pub struct Hasher {
    params: argon2::Params,
    /// The threads that compute hashes.
    threads: HashThreads,
    /// Bounds memory: each hash holds its memory cost (a scrypt hash verified, 128 * r * N
    /// bytes).
    permits: Arc<Semaphore>,
    /// A hash of a random password, verified against when a login names no user, so that
    /// unknown usernames cost the same as wrong passwords.
    decoy: Arc<String>,
    /// Hashes waiting for a permit or being computed (for the metrics).
    queued: Arc<AtomicUsize>,
    /// Most hashes waiting or running at once; one more is refused.
    bound: usize,
    /// Passwords checked so far (a login of an unknown user is checked against the decoy).
    checked: Arc<std::sync::atomic::AtomicU64>,
}

/// Counts one hash in the queue while it lives.
struct Queued(Arc<AtomicUsize>);

impl Queued {
    /// A place in the line, or `busy_hashing` when `bound` hashes already wait or run.
    fn join(queue: &Arc<AtomicUsize>, bound: usize) -> Result<Self, ApiError> {
        let place = Self(queue.clone());
        if queue.fetch_add(1, Ordering::Relaxed) >= bound {
            // Dropping the place gives it back.
            return Err(ApiError::Unavailable {
                code: "busy_hashing",
                message: "Too many passwords are being checked right now; try again shortly.".into(),
                retry_after_secs: 1,
            });
        }
        Ok(place)
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Threads that compute hashes and nothing else, at a lower CPU priority than the threads
/// that serve requests (tokio's blocking pool serves other work too, so its threads keep
/// their priority).
#[derive(Clone)]
struct HashThreads {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl HashThreads {
    fn start(count: usize) -> anyhow::Result<Self> {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        let queue = Arc::new(std::sync::Mutex::new(queue));
        for _ in 0..count {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name("password-hash".into())
                .spawn(move || {
                    lower_priority();
                    loop {
                        let job = queue.lock().expect("hash queue").recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                })
                .context("starting a hashing thread")?;
        }
        Ok(Self { jobs })
    }

    async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<T> {
        let (done, answer) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = done.send(work());
            }))
            .map_err(|_| anyhow::anyhow!("the hashing threads have stopped"))?;
        Ok(answer.await?)
    }
}

/// Nice 10 for the calling thread (on Linux a thread has its own nice value). Raising it
/// needs no privilege; a failure leaves the thread as it was. The one `unsafe` left: neither
/// nix nor another well-kept crate wraps `setpriority` for the calling thread.
fn lower_priority() {
    // SAFETY: setpriority reads no memory; `who = 0` is the calling thread.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub const MIN_LEN: usize = 8;
pub const MAX_LEN: usize = 128;

/// A new password and its confirmation: the rules that need no account (strength), then the
/// confirmation. An empty confirmation is the caller's to report as missing.
pub fn check_new(password: &str, confirmation: &str) -> Result<(), String> {
    check_strength(password, &[])?;
    if !confirmation.is_empty() && password != confirmation {
        return Err("The password confirmation does not match.".into());
    }
    Ok(())
}

/// Length and character rules shared by every route that sets a password.
pub fn check_length(password: &str) -> Result<(), String> {
    let len = password.chars().count();
    if len < MIN_LEN {
        Err(format!("The password must be at least {MIN_LEN} characters."))
    } else if len > MAX_LEN {
        Err(format!("The password may not be greater than {MAX_LEN} characters."))
    } else if password.chars().any(char::is_control) {
        // Nobody types them, and a NUL cannot be stored in PostgreSQL text.
        Err("The password may not contain control characters.".into())
    } else {
        Ok(())
    }
}

/// Passwords attackers try first (NIST SP 800-63B asks to refuse them).
static COMMON: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("common-passwords.txt").lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect()
});

/// Every rule a new password must pass: its length, not a common password, and not the
/// account's own username or e-mail address (or the address's local part).
pub fn check_strength(password: &str, identities: &[&str]) -> Result<(), String> {
    check_length(password)?;
    let folded = password.to_lowercase();
    if COMMON.contains(folded.as_str()) {
        return Err("The password is too common; choose one that is harder to guess.".into());
    }
    let own = identities.iter().flat_map(|id| {
        let id = id.trim().to_lowercase();
        let local = id.split_once('@').map(|(local, _)| local.to_owned());
        std::iter::once(id).chain(local)
    });
    for identity in own {
        if !identity.is_empty() && folded == identity {
            return Err("The password may not be the username or the e-mail address.".into());
        }
    }
    Ok(())
}

impl Hasher {
    pub fn new(cost: HashCost, limits: HashLimits) -> anyhow::Result<Self> {
        let params = argon2::Params::new(cost.memory_kib, cost.iterations, 1, None)
            .map_err(|e| anyhow::anyhow!("argon2 parameters: {e}"))?;
        let concurrency = limits.concurrency.max(1);
        let permits = Arc::new(Semaphore::new(concurrency));
        let decoy = hash_with(&params, &super::tokens::random_secret())?;
        Ok(Self {
            params,
            threads: HashThreads::start(concurrency)?,
            permits,
            decoy: Arc::new(decoy),
            queued: Arc::new(AtomicUsize::new(0)),
            bound: concurrency + limits.queue,
            checked: Arc::default(),
        })
    }

    /// Passwords checked since start, against a stored hash or the decoy.
    pub fn checked(&self) -> u64 {
        self.checked.load(Ordering::Relaxed)
    }

    /// Hashes and checks waiting for their turn or being computed now.
    pub fn queue(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    pub async fn hash(&self, password: &str) -> Result<String, ApiError> {
        let _queued = Queued::join(&self.queued, self.bound)?;
        let _permit = self.permits.acquire().await.map_err(anyhow::Error::from)?;
        let params = self.params.clone();
        let password = password.to_owned();
        Ok(self.threads.run(move || hash_with(&params, &password)).await??)
    }

    /// Checks `password` against a stored PHC string, or against the decoy when `stored` is
    /// `None`, in which case the answer is always false.
    pub async fn verify(&self, password: &str, stored: Option<&str>) -> Result<bool, ApiError> {
        let _queued = Queued::join(&self.queued, self.bound)?;
        let _permit = self.permits.acquire().await.map_err(anyhow::Error::from)?;
        // A missing or unusable stored hash (an account without a password) is checked
        // against the decoy, so it costs the same and never matches.
        let parsed = stored.filter(|s| PasswordHash::new(s).is_ok());
        let usable = parsed.is_some();
        let stored = parsed.map_or_else(|| (*self.decoy).clone(), str::to_owned);
        let password = password.to_owned();
        let matches = self
            .threads
            .run(move || {
                let hash = PasswordHash::new(&stored).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?;
                let matches = match hash.algorithm.as_str() {
                    "scrypt" => Scrypt::new().verify_password(password.as_bytes(), &hash).is_ok(),
                    // The parameters are the stored hash's own.
                    _ => Argon2::default().verify_password(password.as_bytes(), &hash).is_ok(),
                };
                anyhow::Ok(matches)
            })
            .await??;
        self.checked.fetch_add(1, Ordering::Relaxed);
        Ok(usable && matches)
    }

    /// Whether a stored hash is weaker than what this server makes now (another algorithm, or
    /// argon2id at a lower cost): after a login proved the password, it is hashed again.
    pub fn needs_rehash(&self, stored: &str) -> bool {
        let Ok(hash) = PasswordHash::new(stored) else { return false };
        if hash.algorithm.as_str() != "argon2id" || hash.version != Some(Version::V0x13.into()) {
            return true;
        }
        argon2::Params::try_from(&hash).map_or(true, |p| {
            p.m_cost() < self.params.m_cost()
                || p.t_cost() < self.params.t_cost()
                || p.p_cost() < self.params.p_cost()
        })
    }

    /// How a stored hash was made, for the audit record of a rehash: its algorithm and cost,
    /// never the hash.
    pub fn describe(stored: &str) -> String {
        match PasswordHash::new(stored) {
            Ok(hash) => format!("{} {}", hash.algorithm, hash.params),
            Err(_) => "unreadable".into(),
        }
    }
}

fn hash_with(params: &argon2::Params, password: &str) -> anyhow::Result<String> {
    let hash = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password(password.as_bytes())
        .map_err(|e| anyhow::anyhow!("hashing: {e}"))?;
    Ok(hash.to_string())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use scrypt::password_hash::PasswordHasher as _;

    use super::{HashCost, HashLimits, Hasher, check_strength};

    const CHEAP: HashCost = HashCost { memory_kib: 8, iterations: 1 };

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scrypt_hashes_verify_and_are_rehashed_below_the_cost() {
        let hasher = Hasher::new(CHEAP, HashLimits { concurrency: 1, queue: 4 }).unwrap();
        let params = scrypt::Params::new(4, 8, 1).unwrap();
        let old =
            scrypt::Scrypt::new_with_params(params).hash_password(b"violet-harbour-27").unwrap().to_string();
        assert!(hasher.verify("violet-harbour-27", Some(&old)).await.unwrap());
        assert!(!hasher.verify("violet-harbour-28", Some(&old)).await.unwrap());
        assert!(hasher.needs_rehash(&old), "another algorithm");
        let new = hasher.hash("violet-harbour-27").await.unwrap();
        assert!(new.starts_with("$argon2id$v=19$m=8,t=1,p=1$"), "{new}");
        assert!(!hasher.needs_rehash(&new));
        assert!(hasher.verify("violet-harbour-27", Some(&new)).await.unwrap());
        let stronger =
            Hasher::new(HashCost { memory_kib: 16, iterations: 1 }, HashLimits { concurrency: 1, queue: 4 })
                .unwrap();
        assert!(stronger.needs_rehash(&new), "a lower memory cost");
        assert!(stronger.verify("violet-harbour-27", Some(&new)).await.unwrap(), "its own parameters");
        assert_eq!(Hasher::describe(&new), "argon2id m=8,t=1,p=1");
    }

    #[test]
    fn the_floor_is_owasps() {
        assert!(HashCost::DEFAULT.meets_floor());
        assert!(HashCost { memory_kib: 19_456, iterations: 2 }.meets_floor());
        assert!(!HashCost { memory_kib: 19_456, iterations: 1 }.meets_floor());
        assert!(!HashCost { memory_kib: 7_000, iterations: 10 }.meets_floor());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_queue_counts_hashes_waiting_and_running() {
        let hasher = Hasher::new(CHEAP, HashLimits { concurrency: 2, queue: 4 }).unwrap();
        // Every permit held: a hash waits in the queue.
        let all = hasher.permits.available_permits() as u32;
        let held = hasher.permits.clone().acquire_many_owned(all).await.unwrap();
        let waiting = {
            let hasher = hasher.clone();
            tokio::spawn(async move { hasher.hash("violet-harbour-27").await })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while hasher.queue() == 0 {
            assert!(Instant::now() < deadline, "the waiting hash was not counted");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(hasher.queue(), 1);
        drop(held);
        waiting.await.unwrap().unwrap();
        assert_eq!(hasher.queue(), 0, "a finished hash leaves the queue");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hash_past_a_full_line_is_refused_at_once_and_the_line_recovers() {
        let hasher = Hasher::new(CHEAP, HashLimits { concurrency: 1, queue: 2 }).unwrap();
        let held = hasher.permits.clone().acquire_owned().await.unwrap();
        // One place computing (held above, so nothing runs) and two waiting fill the line.
        let waiting: Vec<_> = (0..3)
            .map(|_| {
                let hasher = hasher.clone();
                tokio::spawn(async move { hasher.hash("violet-harbour-27").await })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while hasher.queue() < 3 {
            assert!(Instant::now() < deadline, "the waiting hashes were not counted");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let refused = hasher.verify("violet-harbour-27", None).await.unwrap_err();
        assert!(
            matches!(refused, crate::http::error::ApiError::Unavailable { code: "busy_hashing", .. }),
            "{refused:?}"
        );
        assert_eq!(hasher.queue(), 3, "a refused hash takes no place");
        drop(held);
        for hash in waiting {
            hash.await.unwrap().unwrap();
        }
        assert_eq!(hasher.queue(), 0);
        hasher.hash("violet-harbour-27").await.expect("the line takes hashes again");
    }

    #[test]
    fn refuses_short_common_and_own_identities() {
        assert!(check_strength("short", &[]).is_err());
        assert!(check_strength("Password1", &[]).is_err(), "case does not hide a common password");
        assert!(check_strength("iloveyou", &[]).is_err());
        assert!(check_strength("ana.cruz", &["ana.cruz", "x@y.z"]).is_err());
        assert!(check_strength("Ana.Cruz@Clinic.Test", &["ana", "ana.cruz@clinic.test"]).is_err());
        assert!(check_strength("anacruz1", &["ana", "anacruz1@clinic.test"]).is_err(), "the local part");
        assert!(check_strength("violet-harbour-27", &["ana", "ana@clinic.test"]).is_ok());
    }
}

//! The pool of one database server that holds branch schemas, shared by all its branches,
//! handing each branch the connections that served it before.
//!
//! A backend that has served a schema keeps its tables in its catalogue caches and, with
//! [`super::client`], its statements planned; a backend meeting a schema for the first time
//! loads both. So a checkout for a schema takes, in order:
//! 1. an idle connection already on that schema (no switch at all);
//! 2. otherwise the free slot the schema ranks highest (rendezvous hashing of the schema
//!    over the slots): the same few connections serve a schema whenever they are free, so
//!    each backend warms to a share of the schemas instead of all of them;
//!    a slot without a connection yet opens one.
//!
//! Every slot is open to every schema, so one busy branch may still use the whole pool (less
//! its share, see `Directory::connect`), and the pool never holds more than `max_size`
//! connections. Waiting is first come, first served, and bounded by the wait timeout.
//!
//! A connection keeps what it learnt of a schema: [`super::client`] caches its prepared
//! statements per schema (at most 1,000, least recently used first out), so a statement only
//! runs under the search_path it was planned for (PostgreSQL re-analyses and re-plans one that
//! meets another). A migration of a schema with live connections clears every cache of its
//! pool (a generation counter).
//!
//! This is not deadpool-postgres, unlike the registry's pool: deadpool hands out whichever
//! connection is idle, and its `get()` has no way to be told which schema the checkout is
//! for. Without that choice nearly every request with more than one branch would pay the
//! switch, and every backend would warm to every schema. On one connection, a list statement
//! took 64 µs on the schema the connection was on, 70 µs with the switch in its round trip
//! (as `db::Reads` sends it) and 78 µs with the switch sent alone (median of 5 rounds of 5 s
//! each, `DURATION=5 ops/bench/schema_switch.sh`, pgbench against PostgreSQL 15 on loopback).
//! Over 1,000 branches, round-robin lists ran at 0.25 to 0.30 of one branch's rate before
//! branch-affine connections and 0.52 to 0.62 after (`ops/bench/branches.sh`,
//! `ops/SCALING.md`).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::client::Client;
use super::tls::Link;
use deadpool::managed::{PoolError, TimeoutType};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub type BranchPoolError = PoolError<tokio_postgres::Error>;

#[derive(Clone)]
pub struct BranchPool {
    inner: Arc<Inner>,
}

struct Inner {
    link: Link,
    slots: Mutex<Vec<Slot>>,
    /// One permit per slot: holding one guarantees a slot that is not lent.
    free: Arc<Semaphore>,
    waiting: AtomicUsize,
    closed: AtomicBool,
    wait_timeout: Duration,
    create_timeout: Duration,
    /// Bumped to make every connection drop its cached statements.
    generation: Arc<AtomicU64>,
    waits: super::waits::Waits,
}

enum Slot {
    Vacant,
    Idle(Client),
    Lent,
}

/// The settings of a [`BranchPool`].
pub struct PoolSettings {
    pub max_size: usize,
    pub wait_timeout: Duration,
    pub create_timeout: Duration,
}

impl BranchPool {
    pub fn new(link: Link, settings: PoolSettings, waits: super::waits::Waits) -> Self {
        let max_size = settings.max_size.max(1);
        let inner = Inner {
            link,
            slots: Mutex::new((0..max_size).map(|_| Slot::Vacant).collect()),
            free: Arc::new(Semaphore::new(max_size)),
            waiting: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            wait_timeout: settings.wait_timeout,
            create_timeout: settings.create_timeout,
            generation: Arc::new(AtomicU64::new(0)),
            waits,
        };
        Self { inner: Arc::new(inner) }
    }

    /// The pool's name in its metrics: its server and database.
    pub fn name(&self) -> &str {
        self.inner.waits.pool_name()
    }

    pub(super) fn waits(&self) -> &super::waits::Waits {
        &self.inner.waits
    }

    /// Drops every connection's prepared statements (after a migration changed tables).
    pub fn clear_statement_caches(&self) {
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// A connection for `schema` (see the module's order of preference); `None` takes any,
    /// for maintenance work that sets its own search_path.
    pub async fn get(&self, schema: Option<&str>) -> Result<Lease, BranchPoolError> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Acquire) {
            return Err(PoolError::Closed);
        }
        inner.waiting.fetch_add(1, Ordering::Relaxed);
        let permit = tokio::time::timeout(inner.wait_timeout, inner.free.clone().acquire_owned()).await;
        inner.waiting.fetch_sub(1, Ordering::Relaxed);
        let permit = match permit {
            Err(_) => return Err(PoolError::Timeout(TimeoutType::Wait)),
            Ok(Err(_)) => return Err(PoolError::Closed),
            Ok(Ok(permit)) => permit,
        };
        let (slot, idle) = {
            let mut slots = inner.slots.lock().expect("pool slots poisoned");
            let slot = choose(&slots, schema).expect("a permit guarantees a slot that is not lent");
            let taken = std::mem::replace(&mut slots[slot], Slot::Lent);
            (slot, if let Slot::Idle(client) = taken { Some(client) } else { None })
        };
        let mut lease = Lease { pool: self.inner.clone(), slot, client: None, _permit: permit };
        lease.client = match idle {
            // A connection the server closed is never handed out again.
            Some(client) if !client.is_closed() => Some(client),
            // Boxed: connecting's state is large and rarely needed, and inline it would be
            // part of every checkout's.
            _ => Some(Box::pin(self.open(super::client::STATEMENTS_PER_CONNECTION)).await?),
        };
        Ok(lease)
    }

    /// A connection to the pool's server outside its slots, named `application_name` and
    /// keeping up to `statements` prepared, for one long-lived user of its own (the read
    /// audit's writer, whose statements name every branch's table and would crowd the
    /// requests' out of a pooled connection).
    pub async fn open_apart(
        &self,
        application_name: &str,
        statements: usize,
    ) -> Result<Client, BranchPoolError> {
        let mut link = self.inner.link.clone();
        link.config.application_name(application_name);
        self.open_with(&link, statements).await
    }

    async fn open(&self, statements: usize) -> Result<Client, BranchPoolError> {
        self.open_with(&self.inner.link, statements).await
    }

    async fn open_with(&self, link: &Link, statements: usize) -> Result<Client, BranchPoolError> {
        let inner = &self.inner;
        let deadline = tokio::time::Instant::now() + inner.create_timeout;
        let (client, connection) = match tokio::time::timeout_at(deadline, link.connect()).await {
            Err(_) => return Err(PoolError::Timeout(TimeoutType::Create)),
            Ok(Err(e)) => return Err(PoolError::Backend(e)),
            Ok(Ok(connected)) => connected,
        };
        let task = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "branch connection closed");
            }
        });
        match tokio::time::timeout_at(deadline, link.settle(&client, super::AUDIT_CHAIN)).await {
            Err(_) => return Err(PoolError::Timeout(TimeoutType::Create)),
            Ok(Err(e)) => return Err(PoolError::Backend(e)),
            Ok(Ok(_)) => {}
        }
        Ok(Client::keeping(client, task, inner.generation.clone(), statements))
    }

    /// Whether [`BranchPool::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Refuses new checkouts and closes the idle connections; lent ones close when returned.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.free.close();
        let mut slots = self.inner.slots.lock().expect("pool slots poisoned");
        for slot in slots.iter_mut() {
            if matches!(slot, Slot::Idle(_)) {
                *slot = Slot::Vacant;
            }
        }
    }

    /// The pool's size, its idle connections and its waiters, as deadpool reports them.
    pub fn status(&self) -> deadpool::Status {
        let slots = self.inner.slots.lock().expect("pool slots poisoned");
        let size = slots.iter().filter(|s| !matches!(s, Slot::Vacant)).count();
        let available = slots.iter().filter(|s| matches!(s, Slot::Idle(_))).count();
        deadpool::Status {
            max_size: slots.len(),
            size,
            available,
            waiting: self.inner.waiting.load(Ordering::Relaxed),
        }
    }
}

/// The slot a checkout for `schema` takes: an idle connection on that schema, else the
/// free slot (idle or vacant) the schema ranks highest.
fn choose(slots: &[Slot], schema: Option<&str>) -> Option<usize> {
    if let Some(schema) = schema {
        let on_schema =
            |slot: &Slot| matches!(slot, Slot::Idle(client) if client.schema().as_deref() == Some(schema));
        if let Some(found) = slots.iter().position(on_schema) {
            return Some(found);
        }
    }
    let key = schema.map(schema_key).unwrap_or(0);
    (0..slots.len()).filter(|&i| !matches!(slots[i], Slot::Lent)).max_by_key(|&i| rank(key, i))
}

/// The first eight bytes of the schema name's SHA-256: a hash whose definition no release
/// of Rust or of the server changes, so that every instance, of any build, ranks a schema's
/// slots the same way (std's `DefaultHasher` promises no such thing).
fn schema_key(schema: &str) -> u64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(schema.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 digest has eight bytes to spare"))
}

/// Rendezvous weight of slot `i` for a schema: a well-mixed function of both (SplitMix64's
/// finaliser), so that each schema ranks the slots in its own order.
fn rank(key: u64, i: usize) -> u64 {
    let mut z = key ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A connection lent from a [`BranchPool`]; it goes back to its slot when dropped.
pub struct Lease {
    pool: Arc<Inner>,
    slot: usize,
    client: Option<Client>,
    _permit: OwnedSemaphorePermit,
}

impl Deref for Lease {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("a lease holds its client until dropped")
    }
}

impl DerefMut for Lease {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("a lease holds its client until dropped")
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let client = self.client.take();
        let mut slots = self.pool.slots.lock().expect("pool slots poisoned");
        slots[self.slot] = match client {
            Some(client) if !client.is_closed() && !self.pool.closed.load(Ordering::Acquire) => {
                Slot::Idle(client)
            }
            _ => Slot::Vacant,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::{rank, schema_key};

    /// Two builds serving side by side rank alike: the key is pinned.
    #[test]
    fn a_schemas_key_is_the_same_in_every_build() {
        assert_eq!(schema_key("branch_1"), 0x8533_e153_3538_8ac7_u64, "{:#x}", schema_key("branch_1"));
    }

    #[test]
    fn schemas_rank_the_slots_in_orders_of_their_own_and_spread_over_all_of_them() {
        let slots = 20;
        let favourite = |schema: &str| (0..slots).max_by_key(|&i| rank(schema_key(schema), i)).unwrap();
        assert_eq!(favourite("branch_7"), favourite("branch_7"));
        let mut counts = vec![0; slots];
        for id in 0..1_000 {
            counts[favourite(&format!("branch_{id}"))] += 1;
        }
        // 50 each on average; every slot is some schemas' favourite, none takes a crowd.
        assert!(counts.iter().all(|&n| (20..=90).contains(&n)), "{counts:?}");
    }
}

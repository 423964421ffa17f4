//! Audit records of reads (a list, a search, a patient opened), written in batches off the
//! request's path.
//!
//! A read hands its record to a bounded queue and answers; one task per instance writes what
//! has queued, many records per `INSERT`, one `INSERT` per branch (prepared once, on the
//! writer's own connection to each database server), and the branches of one server together,
//! up to `READ_AUDIT_BRANCHES_PER_TRANSACTION` (256) to a transaction (one commit for many
//! branches: reads spread over a thousand branches would otherwise wait on a thousand commits a
//! second). A branch's records are held until `BRANCH_BATCH` have gathered or the first has
//! waited the hold (`READ_AUDIT_HOLD_MS`): PostgreSQL's cost of an insert is mostly opening the
//! branch's table, its partition and indexes, so several records to an insert cost little more
//! than one. A branch that cannot be written is tried again on its own. Nothing is dropped:
//! when the queue is full a read waits for room, and a batch that cannot be written (the
//! database is away, the branch is frozen for a move) is tried again until it is. A graceful
//! stop, and any reader of the audit trail, writes every queued and held record first
//! ([`ReadAudit::flush`]).
//!
//! What a crash can lose: the records still queued or held when the server process itself
//! dies (killed, out of memory), at most `READ_AUDIT_QUEUE` and the reads of the last hold
//! (one second by default). Batches commit synchronously, so a crash of PostgreSQL loses none
//! that were written. A record's `at` is the moment of the read by this instance's clock,
//! not the moment of the write. Writes are unaffected: their records are in their own
//! transaction.
//!
//! What is recorded, and when it shows. A list, search, type-ahead or GET of patients, and
//! every FHIR answer that shows a patient's data (recorded as a read of `patients`: a search
//! with the ids of the patients its page showed, a read by id or `$everything` as a `view` of
//! the patient, each with its FHIR route), a printed document, a patient's access log and each
//! chunk of a patient export (with the ids it holds, before it is sent) hands its record to
//! `db::read_audit`'s bounded queue (`READ_AUDIT_QUEUE`, 8,192) and answers; a full queue makes
//! reads wait, up to `POOL_WAIT_TIMEOUT_MS`, then answer 503 `audit_busy`: no read is answered
//! unrecorded and none is dropped. One task per instance writes the queue in batches on a
//! connection of its own to each database server (one prepared `INSERT ... unnest` per branch,
//! up to 256 branches of one server in one transaction (`READ_AUDIT_BRANCHES_PER_TRANSACTION`)
//! with one synchronous commit, so that a flush of thousands of branches never fills
//! PostgreSQL's shared lock table; a branch whose insert fails is written on its own through
//! the pool). A branch's records are held until 32 have gathered or the first has waited
//! `READ_AUDIT_HOLD_MS` (1 s), so that reads spread over many branches are written several to
//! an insert. It retries what it cannot write (the database away, the branch frozen by a move)
//! while it goes on writing the other branches, and is flushed before the process exits. An
//! audit trail read (`shows_reads`) first waits for what this instance has queued, so it shows
//! every read this instance answered before it; another instance's reads appear within
//! `READ_AUDIT_HOLD_MS`. A crash of the server process loses the records still queued or held
//! (at most the last `READ_AUDIT_HOLD_MS` of reads); a crash of PostgreSQL loses none written.
//! `at` is the read's moment by the instance's clock. Tests flush the queue
//! (`state.read_audit.flush()`) before they look at the trail.

use std::collections::BTreeMap;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};

use super::branch_pool::BranchPool;
use super::client::Client;
use super::directory::{BranchRoute, Directory};
use super::{BranchConn, quote_ident};

/// One read: who saw what of which branch, and when.
#[derive(Debug)]
pub struct ReadRecord {
    pub branch: i64,
    pub at: OffsetDateTime,
    pub user_id: Option<i64>,
    pub action: &'static str,
    pub resource: &'static str,
    pub record_id: Option<i64>,
    pub details: Option<Value>,
    /// The route the read came through (`GET /api/v1/patients/{id}`).
    pub route: Option<std::sync::Arc<str>>,
}

enum Message {
    Record(ReadRecord),
    /// Answered once every record queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// The sending side of the queue; cheap to clone.
#[derive(Clone)]
pub struct ReadAudit {
    sender: mpsc::Sender<Message>,
    /// Longest a read waits for room in a full queue before it answers 503 instead.
    room_wait: Duration,
    /// Records queued since the start, for the metrics.
    recorded: Arc<AtomicU64>,
}

impl ReadAudit {
    /// The queue, and the task that writes it (to be kept with the instance's background
    /// work, and stopped only after [`ReadAudit::flush`]). At most `branches_per_transaction`
    /// branches' records go in one transaction (see
    /// [`crate::config::READ_AUDIT_BRANCHES_PER_TRANSACTION`]).
    pub fn start(
        directory: Arc<Directory>,
        capacity: usize,
        room_wait: Duration,
        hold: Duration,
        branches_per_transaction: usize,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let capacity = capacity.max(1);
        let (sender, receiver) = mpsc::channel(capacity);
        let bounds = Bounds { capacity, hold, branches_per_transaction: branches_per_transaction.max(1) };
        (
            Self { sender, room_wait, recorded: Arc::default() },
            tokio::spawn(write_queued(receiver, directory, bounds)),
        )
    }

    /// Queues `record`, waiting for room when the queue is full: a read is answered only once
    /// its record is queued, so a queue that stays full (the audit log cannot be written)
    /// ends in `Ok(false)`, for the read to answer 503 rather than go unrecorded.
    pub async fn record(&self, record: ReadRecord) -> anyhow::Result<bool> {
        match self.sender.send_timeout(Message::Record(record), self.room_wait).await {
            Ok(()) => {
                self.recorded.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => Ok(false),
            Err(mpsc::error::SendTimeoutError::Closed(_)) => {
                Err(anyhow::anyhow!("the read audit writer has stopped"))
            }
        }
    }

    /// Waits until every record queued so far is written (at shutdown, before an audit trail
    /// is read, and in tests).
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.sender.send(Message::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }

    /// Records waiting to be written.
    pub fn queued(&self) -> usize {
        self.sender.max_capacity() - self.sender.capacity()
    }

    /// What the metrics read of the queue, without keeping it open (the writer ends once
    /// every [`ReadAudit`] is dropped).
    pub fn gauge(&self) -> Gauge {
        Gauge { sender: self.sender.downgrade(), recorded: self.recorded.clone() }
    }
}

/// The read audit queue as the metrics see it.
#[derive(Clone)]
pub struct Gauge {
    sender: mpsc::WeakSender<Message>,
    recorded: Arc<AtomicU64>,
}

impl Gauge {
    /// Records waiting to be written and the most the queue holds (`READ_AUDIT_QUEUE`);
    /// none once the queue is closed.
    pub fn queue(&self) -> (usize, usize) {
        self.sender.upgrade().map_or((0, 0), |s| (s.max_capacity() - s.capacity(), s.max_capacity()))
    }

    /// Records queued since the start.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }
}

/// Writes what is queued, each branch's records together: a branch's are written once
/// `BRANCH_BATCH` of them wait or the first has waited `hold`, and everything at once when a
/// flush asks or half the bound is held. Writing a branch's records costs PostgreSQL about
/// as much for one record as for several (the table, its partition and its six indexes are
/// opened either way), so reads spread over many branches are written several to a branch
/// instead of one. Records it could not write yet are held too, at most `capacity` in all
/// beside the queue's own: past that it takes no more, the queue fills, and reads wait.
async fn write_queued(mut receiver: mpsc::Receiver<Message>, directory: Arc<Directory>, bounds: Bounds) {
    let Bounds { capacity, hold, branches_per_transaction } = bounds;
    let mut connections = Connections::new();
    let mut held = Held::default();
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    let mut backoff = Duration::from_millis(50);
    // After a failed write, nothing is written again before this.
    let mut retry_at: Option<Instant> = None;
    let mut closed = false;
    loop {
        // The next message; or none when the first held branch is due (or, once the queue is
        // closed, when a retry may be made).
        let next = match held.first_due(hold) {
            None if closed => return,
            None => Some(receiver.recv().await),
            Some(due) => {
                let due = retry_at.map_or(due, |at| at.max(due));
                // At the bound nothing more is taken: the queue fills and reads wait.
                if closed || held.len >= capacity {
                    tokio::time::sleep_until(due.into()).await;
                    None
                } else {
                    tokio::time::timeout_at(due.into(), receiver.recv()).await.ok()
                }
            }
        };
        match next {
            Some(Some(message)) => take(message, &mut held, &mut waiting),
            Some(None) => closed = true,
            None => {}
        }
        // New records are taken even while older ones wait to be retried, so that one branch
        // that cannot be written does not hold up the others, up to the bound.
        while held.len < capacity {
            match receiver.try_recv() {
                Ok(message) => take(message, &mut held, &mut waiting),
                Err(_) => break,
            }
        }
        let now = Instant::now();
        if retry_at.is_none_or(|at| at <= now) {
            let everything = closed || !waiting.is_empty() || held.len >= capacity.div_ceil(2);
            let due = held.take_due(now, hold, everything);
            if !due.is_empty() {
                let left = write(&directory, &mut connections, due, branches_per_transaction).await;
                if left.is_empty() {
                    backoff = Duration::from_millis(50);
                    retry_at = None;
                } else {
                    held.put_back(left);
                    retry_at = Some(Instant::now() + backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        if held.len == 0 {
            for done in waiting.drain(..) {
                let _ = done.send(());
            }
        }
    }
}

/// What the writer holds and writes at once.
struct Bounds {
    /// Records held beside the queue's own, at most.
    capacity: usize,
    /// Longest a branch's records are held.
    hold: Duration,
    /// Branches written in one transaction, at most.
    branches_per_transaction: usize,
}

/// A branch's records to be written together, at most (past it, they are written at once).
pub const BRANCH_BATCH: usize = 32;

/// The records the writer holds, by branch, with what makes each due found without a scan
/// of every branch (a record comes for each read, and a thousand branches may be held).
#[derive(Default)]
struct Held {
    branches: HashMap<i64, Waiting>,
    len: usize,
    /// Branches by the moment their first held record came, oldest first; an entry whose
    /// branch was written since (or holds newer records) is skipped.
    order: VecDeque<(Instant, i64)>,
    /// Branches with a full batch, or whose write failed: due at once.
    ready: Vec<i64>,
}

/// One branch's records not yet written.
struct Waiting {
    /// When the first of them came.
    since: Instant,
    records: Vec<ReadRecord>,
}

impl Held {
    fn add(&mut self, record: ReadRecord) -> usize {
        let branch = record.branch;
        let waiting = self.branches.entry(branch).or_insert_with(|| {
            let since = Instant::now();
            self.order.push_back((since, branch));
            Waiting { since, records: Vec::new() }
        });
        waiting.records.push(record);
        self.len += 1;
        waiting.records.len()
    }

    fn push(&mut self, record: ReadRecord) {
        let branch = record.branch;
        if self.add(record) == BRANCH_BATCH {
            self.ready.push(branch);
        }
    }

    /// Records whose write failed: due again once the writer's backoff allows.
    fn put_back(&mut self, records: Vec<ReadRecord>) {
        for record in records {
            let branch = record.branch;
            if self.ready.last() != Some(&branch) {
                self.ready.push(branch);
            }
            self.add(record);
        }
    }

    /// When the first branch is due, if any records are held.
    fn first_due(&mut self, hold: Duration) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        if !self.ready.is_empty() {
            return Some(Instant::now());
        }
        while let Some(&(since, branch)) = self.order.front() {
            if self.branches.get(&branch).is_some_and(|w| w.since == since) {
                return Some(since + hold);
            }
            self.order.pop_front();
        }
        Some(Instant::now())
    }

    /// The records of every branch that is due (all of them with `everything`).
    fn take_due(&mut self, now: Instant, hold: Duration, everything: bool) -> Vec<ReadRecord> {
        let mut taken = Vec::new();
        if everything {
            self.order.clear();
            self.ready.clear();
            for (_, mut waiting) in self.branches.drain() {
                taken.append(&mut waiting.records);
            }
        } else {
            let mut due = std::mem::take(&mut self.ready);
            while let Some(&(since, branch)) = self.order.front() {
                if since + hold > now {
                    break;
                }
                self.order.pop_front();
                if self.branches.get(&branch).is_some_and(|w| w.since == since) {
                    due.push(branch);
                }
            }
            for branch in due {
                if let Some(mut waiting) = self.branches.remove(&branch) {
                    taken.append(&mut waiting.records);
                }
            }
        }
        self.len -= taken.len();
        taken
    }
}

fn take(message: Message, held: &mut Held, waiting: &mut Vec<oneshot::Sender<()>>) {
    match message {
        Message::Record(record) => held.push(record),
        Message::Flush(done) => waiting.push(done),
    }
}

/// A branch's route and the read records waiting for it.
type BranchRecords = (Arc<BranchRoute>, Vec<ReadRecord>);

/// The writer's own connection to each database server, by pool name. Its `INSERT`s name
/// each branch's table, so each is prepared once per branch and kept: planning an `INSERT`
/// again for every batch cost as much as the reads it recorded when reads spread over a
/// thousand branches, and on the pool's connections those statements would crowd out the
/// requests' own. Each goes with its pool: closed with it, as when a server's last branch
/// moved away.
type Connections = HashMap<String, (BranchPool, Client)>;

/// Statements the writer keeps prepared per server, one per branch; past it, the branches
/// written least recently are prepared again when next read.
const STATEMENTS_PER_SERVER: usize = 2_000;

/// The writer's sessions merge the audit log's pending GIN entries (the ids each list showed,
/// `audit_log_shown_idx`) into the index a quarter of a megabyte at a time, not at
/// PostgreSQL's 4 MB: the insert that merges them waited 1.8 s at 4 MB and 0.15 s at 256 kB
/// (3,000 inserts of 32 records of ten ids, psql), for about the same work in all. Past a
/// pause that long the queue filled and reads waited. Writes' own audit rows are few, and
/// find the list kept short by the writer.
const WRITER_SESSION: &str = "SET gin_pending_list_limit = '256kB'";

/// The writer's connections' `application_name`, to tell them apart in `pg_stat_activity`.
pub const WRITER_NAME: &str = "clinic-server-read-audit";

/// Writes `records`, the branches of each database server together; answers those that could
/// not be written yet.
async fn write(
    directory: &Directory,
    connections: &mut Connections,
    records: Vec<ReadRecord>,
    branches_per_transaction: usize,
) -> Vec<ReadRecord> {
    let mut by_branch: BTreeMap<i64, Vec<ReadRecord>> = BTreeMap::new();
    for record in records {
        by_branch.entry(record.branch).or_default().push(record);
    }
    let mut left = Vec::new();
    // The branches of each server, with their routes, together (`branches_per_transaction`
    // to a transaction); any other branch (unroutable, moving) and the branches of a
    // transaction that fails, branch by branch.
    let mut by_server: BTreeMap<String, Vec<BranchRecords>> = BTreeMap::new();
    let mut alone = Vec::new();
    for (branch, mut records) in by_branch {
        // A branch's backlog goes in transactions of at most `RECORDS_PER_TRANSACTION`,
        // whichever way it is written.
        let mut batches = Vec::new();
        while records.len() > RECORDS_PER_TRANSACTION {
            let rest = records.split_off(RECORDS_PER_TRANSACTION);
            batches.push(std::mem::replace(&mut records, rest));
        }
        batches.push(records);
        match directory.route(branch).await {
            Ok(Ok(route)) if !route.frozen => by_server
                .entry(route.pool.name().to_owned())
                .or_default()
                .extend(batches.into_iter().map(|batch| (route.clone(), batch))),
            _ => alone.extend(batches.into_iter().map(|batch| (branch, batch))),
        }
    }
    connections.retain(|_, (pool, client)| !pool.is_closed() && !client.is_closed());
    for (server, mut branches) in by_server {
        while !branches.is_empty() {
            let rest = branches.split_off(together(&branches, branches_per_transaction));
            match write_together(connections, &server, &branches).await {
                Ok(()) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "read audit records are written branch by branch");
                    alone.extend(branches.into_iter().map(|(route, records)| (route.id, records)));
                }
            }
            branches = rest;
        }
    }
    for (branch, records) in alone {
        match write_branch(directory, branch, &records).await {
            Ok(()) => {}
            Err(Retry::Later(e)) => {
                tracing::warn!(branch, records = records.len(), error = %e, "read audit records wait to be written");
                left.extend(records);
            }
            Err(Retry::Never) => {
                tracing::warn!(
                    branch,
                    records = records.len(),
                    "read audit records of a branch that is gone"
                );
            }
        }
    }
    left
}

/// Read records written in one transaction, at most. Each record moves its chain lane's head
/// row (`audit_log_chain()`), and the head's versions made within one transaction make each
/// next move slower: a backlog written at once, 8,192 records of one branch, cost 127 µs a
/// record, against 40 µs in batches of 512. Smaller transactions also give the queue room,
/// and the reads waiting on it their answers, after each.
pub const RECORDS_PER_TRANSACTION: usize = 512;

/// How many of `branches` (a branch's records at most [`RECORDS_PER_TRANSACTION`]) go in the
/// next transaction: at most `branches_per_transaction`, and at most
/// `RECORDS_PER_TRANSACTION` records unless the first alone holds that many.
fn together(branches: &[BranchRecords], branches_per_transaction: usize) -> usize {
    let mut records = 0;
    let mut taken = 0;
    for (_, batch) in branches.iter().take(branches_per_transaction) {
        if taken > 0 && records + batch.len() > RECORDS_PER_TRANSACTION {
            break;
        }
        records += batch.len();
        taken += 1;
    }
    taken
}

/// The records of some branches of one server in one transaction, on the writer's own
/// connection to it: an `INSERT` into each branch's own `audit_log` (its schema named in the
/// statement, prepared once), all sent at once.
async fn write_together(
    connections: &mut Connections,
    server: &str,
    branches: &[BranchRecords],
) -> anyhow::Result<()> {
    let pool = &branches[0].0.pool;
    let (_, conn) = match connections.entry(server.to_owned()) {
        Entry::Occupied(entry) => entry.into_mut(),
        Entry::Vacant(entry) => {
            let client = pool.open_apart(WRITER_NAME, STATEMENTS_PER_SERVER).await?;
            client.batch_execute(WRITER_SESSION).await?;
            entry.insert((pool.clone(), client))
        }
    };
    let tx = conn.transaction().await?;
    let columns: Vec<Columns> = branches.iter().map(|(_, records)| Columns::of(records)).collect();
    let params: Vec<_> = columns.iter().map(Columns::params).collect();
    let statements: Vec<String> = branches
        .iter()
        .map(|(route, _)| insert_sql(&format!("{}.audit_log", quote_ident(&route.schema))))
        .collect();
    let prepared =
        futures_util::future::try_join_all(statements.iter().map(|sql| tx.prepare_cached(sql))).await?;
    let inserts = prepared.iter().zip(&params).map(|(stmt, params)| tx.execute(stmt, params));
    futures_util::future::try_join_all(inserts).await?;
    tx.commit().await?;
    Ok(())
}

/// `INSERT` of read records into `table`, their columns given as arrays.
fn insert_sql(table: &str) -> String {
    format!(
        "INSERT INTO {table} (at, user_id, action, resource, record_id, after, route)
         SELECT * FROM unnest($1::timestamptz[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::jsonb[],
                              $7::text[])"
    )
}

/// The columns of some read records, as the arrays [`insert_sql`] takes.
struct Columns<'a> {
    at: Vec<OffsetDateTime>,
    user_id: Vec<Option<i64>>,
    action: Vec<&'static str>,
    resource: Vec<&'static str>,
    record_id: Vec<Option<i64>>,
    details: Vec<Option<&'a Value>>,
    route: Vec<Option<&'a str>>,
}

impl<'a> Columns<'a> {
    fn of(records: &'a [ReadRecord]) -> Self {
        Self {
            at: records.iter().map(|r| r.at).collect(),
            user_id: records.iter().map(|r| r.user_id).collect(),
            action: records.iter().map(|r| r.action).collect(),
            resource: records.iter().map(|r| r.resource).collect(),
            record_id: records.iter().map(|r| r.record_id).collect(),
            details: records.iter().map(|r| r.details.as_ref()).collect(),
            route: records.iter().map(|r| r.route.as_deref()).collect(),
        }
    }

    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 7] {
        [&self.at, &self.user_id, &self.action, &self.resource, &self.record_id, &self.details, &self.route]
    }
}

enum Retry {
    Later(anyhow::Error),
    /// The branch was dropped: there is nowhere to write its records.
    Never,
}

async fn write_branch(directory: &Directory, branch: i64, records: &[ReadRecord]) -> Result<(), Retry> {
    let later = |e: anyhow::Error| Retry::Later(e);
    let route = match directory.route(branch).await.map_err(|e| later(e.into()))? {
        Ok(route) => route,
        Err(_) => return Err(Retry::Never),
    };
    if route.frozen {
        // Its last copy is being made elsewhere; written after the move, they travel with it.
        directory.invalidate(branch).await;
        return Err(later(anyhow::anyhow!("the branch is moving")));
    }
    let conn = BranchConn::checkout(&route.pool, &route.schema).await.map_err(|e| later(e.into()))?;
    let columns = Columns::of(records);
    let stmt = conn.prepare_cached(&insert_sql("audit_log")).await.map_err(|e| later(e.into()))?;
    conn.execute(&stmt, &columns.params()).await.map_err(|e| {
        if crate::http::error::is_no_partition(&e) {
            // The records wait for their month, which is made now.
            crate::http::error::audit_month_missing();
        }
        later(e.into())
    })?;
    Ok(())
}

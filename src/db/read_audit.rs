//! Audit records of reads (a list, a search, a patient opened), written in batches off the
//! request's path.
//!
//! A read hands its record to a bounded queue and answers; one task per instance writes what
//! has queued, many records per `INSERT`, one `INSERT` per branch, and the branches of one
//! database server in one transaction (one commit, however many branches were read: reads
//! spread over a thousand branches would otherwise wait on a thousand commits a second).
//! A branch that cannot be written is tried again on its own. Nothing is dropped: when the
//! queue is full a read waits for room, and a batch that cannot be written (the database is
//! away, the branch is frozen for a move) is tried again until it is. A graceful stop writes
//! every queued record before the instance exits ([`ReadAudit::flush`]).
//!
//! What a crash can lose: the records still queued when the server process itself dies
//! (killed, out of memory), at most `READ_AUDIT_QUEUE` and in practice the reads of the last
//! few milliseconds. Batches commit synchronously, so a crash of PostgreSQL loses none that
//! were written. A record's `at` is the moment of the read by this instance's clock, not
//! the moment of the write. Writes are unaffected: their records are in their own
//! transaction.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};

use super::directory::{BranchRoute, Directory};
use super::{BranchConn, quote_ident};

/// Records taken from the queue per round, at most.
const BATCH: usize = 1000;

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
}

impl ReadAudit {
    /// The queue, and the task that writes it (to be kept with the instance's background
    /// work, and stopped only after [`ReadAudit::flush`]).
    pub fn start(
        directory: Arc<Directory>,
        capacity: usize,
        room_wait: Duration,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let capacity = capacity.max(1);
        let (sender, receiver) = mpsc::channel(capacity);
        (Self { sender, room_wait }, tokio::spawn(write_queued(receiver, directory, capacity)))
    }

    /// Queues `record`, waiting for room when the queue is full: a read is answered only once
    /// its record is queued, so a queue that stays full (the audit log cannot be written)
    /// ends in `Ok(false)`, for the read to answer 503 rather than go unrecorded.
    pub async fn record(&self, record: ReadRecord) -> anyhow::Result<bool> {
        match self.sender.send_timeout(Message::Record(record), self.room_wait).await {
            Ok(()) => Ok(true),
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
}

/// Writes what is queued. Records it could not write yet are held, at most `capacity` of them
/// beside the queue's own: past that it takes no more, the queue fills, and reads wait.
async fn write_queued(mut receiver: mpsc::Receiver<Message>, directory: Arc<Directory>, capacity: usize) {
    let mut pending: Vec<ReadRecord> = Vec::new();
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    let mut backoff = Duration::from_millis(50);
    loop {
        // Block for the next message only when nothing is left to write.
        if pending.is_empty() {
            match receiver.recv().await {
                Some(message) => take(message, &mut pending, &mut waiting),
                None => return,
            }
        }
        // New records are taken even while older ones wait to be retried, so that one branch
        // that cannot be written does not hold up the others, up to the bound.
        for _ in 0..BATCH.min(capacity.saturating_sub(pending.len())) {
            match receiver.try_recv() {
                Ok(message) => take(message, &mut pending, &mut waiting),
                Err(_) => break,
            }
        }
        pending = write(&directory, std::mem::take(&mut pending)).await;
        if pending.is_empty() {
            backoff = Duration::from_millis(50);
            for done in waiting.drain(..) {
                let _ = done.send(());
            }
        } else {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }
}

fn take(message: Message, pending: &mut Vec<ReadRecord>, waiting: &mut Vec<oneshot::Sender<()>>) {
    match message {
        Message::Record(record) => pending.push(record),
        Message::Flush(done) => waiting.push(done),
    }
}

/// A branch's route and the read records waiting for it.
type BranchRecords = (Arc<BranchRoute>, Vec<ReadRecord>);

/// Writes `records`, the branches of each database server together; answers those that could
/// not be written yet.
async fn write(directory: &Directory, records: Vec<ReadRecord>) -> Vec<ReadRecord> {
    let mut by_branch: BTreeMap<i64, Vec<ReadRecord>> = BTreeMap::new();
    for record in records {
        by_branch.entry(record.branch).or_default().push(record);
    }
    let mut left = Vec::new();
    // The branches of each server, with their routes, in one transaction; any other branch
    // (unroutable, moving) and any server whose transaction fails, branch by branch.
    let mut by_server: BTreeMap<String, Vec<BranchRecords>> = BTreeMap::new();
    let mut alone = Vec::new();
    for (branch, records) in by_branch {
        match directory.route(branch).await {
            Ok(Ok(route)) if !route.frozen => {
                by_server.entry(route.pool.name().to_owned()).or_default().push((route, records))
            }
            _ => alone.push((branch, records)),
        }
    }
    for (_, branches) in by_server {
        if branches.len() > 1 {
            match write_together(&branches).await {
                Ok(()) => continue,
                Err(e) => tracing::debug!(error = %e, "read audit records are written branch by branch"),
            }
        }
        alone.extend(branches.into_iter().map(|(route, records)| (route.id, records)));
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

/// The records of several branches of one server in one transaction: an `INSERT` into each
/// branch's own `audit_log` (its schema named in the statement), all sent at once.
async fn write_together(branches: &[BranchRecords]) -> anyhow::Result<()> {
    let mut conn = BranchConn::unrouted(&branches[0].0.pool).await?;
    let tx = conn.client_mut().transaction().await?;
    let columns: Vec<Columns> = branches.iter().map(|(_, records)| Columns::of(records)).collect();
    let params: Vec<_> = columns.iter().map(Columns::params).collect();
    let statements: Vec<String> = branches
        .iter()
        .map(|(route, _)| insert_sql(&format!("{}.audit_log", quote_ident(&route.schema))))
        .collect();
    // Statements prepared for this once, not cached: one per branch would fill the cache.
    let inserts = statements.iter().zip(&params).map(|(sql, params)| tx.execute(sql.as_str(), params));
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
    conn.execute(&stmt, &columns.params()).await.map_err(|e| later(e.into()))?;
    Ok(())
}

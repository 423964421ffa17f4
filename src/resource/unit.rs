//! The unit of work: the one transaction every write of a request goes through.
//!
//! It claims the request's `Idempotency-Key` before anything else (a key already answered
//! ends the request with that answer), collects the cached entries the writes make stale,
//! and on commit keeps the answer with the key, publishes the stale entries to every instance
//! in the same transaction, and drops this instance's own before the answer leaves. Its
//! writes (`insert`, `change`, `act`, in `store`) lock, check `If-Match`, bump the version
//! and audit before and after; a domain writes through nothing else. The audit records are
//! kept until the commit and appended last, in one statement: appending takes the turn of
//! the audit log's hash chain, held until the commit.

use std::sync::Mutex;

use crate::db::{Client, Transaction};
use serde_json::Value;

use super::context::Writer;
use super::idempotency::{self, Answer};
use super::trail::{self, Pending};
use crate::http::error::ApiResult;
use crate::notify::{self, Topic};

pub struct Unit<'c> {
    tx: Transaction<'c>,
    writer: Writer,
    stale: Mutex<Vec<Topic>>,
    audit: Mutex<Vec<Pending>>,
}

/// A committed write: the record before and after, and what the answer's message was when
/// a resource's own delete said something other than "deleted".
pub struct Written {
    pub before: Option<Value>,
    pub record: Option<Value>,
    pub message: Option<&'static str>,
}

impl<'c> Unit<'c> {
    pub async fn begin(client: &'c mut Client, writer: Writer) -> ApiResult<Self> {
        let tx = client.transaction().await?;
        if let Some(idem) = &writer.idempotency {
            idempotency::claim(&tx, writer.user_id, idem).await?;
        }
        Ok(Self { tx, writer, stale: Mutex::new(Vec::new()), audit: Mutex::new(Vec::new()) })
    }

    /// Who is writing.
    pub fn writer(&self) -> &Writer {
        &self.writer
    }

    /// An audit record to append at the commit.
    pub(crate) fn keep_audit(&self, record: Pending) {
        self.audit.lock().expect("audit records").push(record);
    }

    /// Cached entries (a token, a user, a branch) the writes make stale.
    pub fn stale(&self, topics: impl IntoIterator<Item = Topic>) {
        let mut stale = self.stale.lock().expect("stale topics");
        for topic in topics {
            if !stale.contains(&topic) {
                stale.push(topic);
            }
        }
    }

    /// Keeps `answer` with the request's key, publishes the stale entries, commits, and drops
    /// this instance's own stale entries.
    pub async fn commit(self, answer: &Answer) -> ApiResult<()> {
        if let Some(idem) = &self.writer.idempotency {
            idempotency::keep(&self.tx, self.writer.user_id, idem, answer).await?;
        }
        self.commit_step().await
    }

    /// Commits this unit as one step of a request that writes more than one database in turn
    /// (a merge of patients moves the branch's rows, then the registry's): the request's key
    /// stays claimed without an answer, so that a retry of the request runs again and finds
    /// this step done. The unit of the last step commits with the answer.
    pub async fn commit_step(self) -> ApiResult<()> {
        let Self { tx, writer, stale, audit } = self;
        let stale = stale.into_inner().expect("stale topics");
        for topic in &stale {
            notify::publish(&tx, *topic).await?;
        }
        trail::append(&tx, &audit.into_inner().expect("audit records")).await?;
        tx.commit().await?;
        writer.state.forget(&stale).await;
        Ok(())
    }
}

impl<'c> std::ops::Deref for Unit<'c> {
    type Target = Transaction<'c>;

    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

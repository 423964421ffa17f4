//! What a resource does beyond the shared writes, declared once beside it: work before the
//! transaction (hashing a password), rows written alongside in the same transaction (a
//! user's roles), and a delete that means something else (archive, deactivate, refuse).
//!
//! The shared handlers call these at fixed points, so a resource with hooks still validates,
//! audits, answers and invalidates caches exactly like every other.

use salvo::async_trait;
use serde_json::{Map, Value};

use super::actions::Action;
use super::context::Writer;
use super::unit::Unit;
use crate::http::error::ApiResult;
use crate::notify::Topic;

/// What a resource's own delete does instead of the shared soft delete.
pub enum Deleted {
    /// A declared action with its checked input (a posted transaction is voided with its
    /// reason): run and audited as the action, and answered with the record.
    Act(&'static Action, Map<String, Value>),
    /// The hook's own write (archive, deactivate, remove), audited as `action`.
    Own {
        action: &'static str,
        /// The answer's message.
        message: &'static str,
        /// Cached entries the change makes stale.
        topics: Vec<Topic>,
    },
}

#[async_trait]
pub trait Hooks: Send + Sync {
    /// Before the write's transaction: checks that need no row, and slow work (hashing).
    /// `id` is `None` on create.
    async fn prepare(
        &self,
        _writer: &Writer,
        _id: Option<i64>,
        _input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        Ok(())
    }

    /// In the write's transaction, after the row is written and before it is re-read and
    /// audited (so the audit's after-image shows what this wrote too). Returns the cached
    /// entries the write makes stale.
    async fn written(
        &self,
        _unit: &Unit<'_>,
        _id: i64,
        _input: &Map<String, Value>,
        _before: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        Ok(Vec::new())
    }

    /// In an action's transaction, after the new state is written and before the record is
    /// re-read and audited (posting a delivery writes its stock movements here).
    async fn acted(
        &self,
        _unit: &Unit<'_>,
        _id: i64,
        _action: &Action,
        _input: &Map<String, Value>,
        _before: &Value,
    ) -> ApiResult<Vec<Topic>> {
        Ok(Vec::new())
    }

    /// After the write committed (mail, notices): `before` is `None` on create, `after` on
    /// delete. Cannot fail the write.
    async fn committed(&self, _writer: &Writer, _before: Option<&Value>, _after: Option<&Value>) {}

    /// In the write's transaction, after the record's rules and before the row is written:
    /// checks and fills in what needs other rows (a price, a payment method's rules). `record`
    /// is the stored record with the sent fields over it (`id` is `None` on create); what is
    /// added to `input` is written.
    async fn resolve(
        &self,
        _unit: &Unit<'_>,
        _id: Option<i64>,
        _record: &Map<String, Value>,
        _input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        Ok(())
    }

    /// Replaces the shared soft delete, with the row locked; `None` keeps the shared one.
    /// `input` holds what the request sent (body fields, then query parameters).
    async fn delete(
        &self,
        _unit: &Unit<'_>,
        _id: i64,
        _before: &Value,
        _input: &Map<String, Value>,
    ) -> ApiResult<Option<Deleted>> {
        Ok(None)
    }
}

/// A resource without hooks.
pub struct NoHooks;

impl Hooks for NoHooks {}

//! The SQL behind every declared resource.
//!
//! Column and table names come only from the declarations (trusted, compiled in); every
//! value is a bind parameter. Answers are built by PostgreSQL (`to_jsonb`) so that one code
//! path serves every resource. Writes take the row lock, check `If-Match`, write, and append
//! the audit record in one transaction.
//!
//! - `select`: what a list, an export or a single read selects;
//! - `write`: create, change, soft delete, each audited;
//! - `references`: derived fields and references to other rows, checked on write.

mod references;
mod select;
mod write;

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::ToSql;

pub use references::{reference_errors, registry_row_exists};
pub use select::{
    Selection, contains_pattern, fetch, list, normalized_contains, parent_exists, reload, select_columns,
    stream,
};
pub use write::{
    Writer, Written, act, audit_change, audit_event, change, change_with_hooks, create, delete, insert,
    insert_with_hooks, lock_for_change, state_conflict, update,
};

use super::Resource;
use crate::db::BranchConn;

/// A connection to wherever a resource's rows live.
pub enum Conn {
    Branch(BranchConn),
    Registry(deadpool_postgres::Object),
}

impl Conn {
    pub fn client(&mut self) -> &mut ClientWrapper {
        match self {
            Self::Branch(c) => c,
            Self::Registry(c) => c,
        }
    }
}

/// The parent a nested resource's rows must belong to: `(column, id)`.
pub type Within = Option<(&'static str, i64)>;

/// A bind parameter of a statement built at run time.
pub type Param = Box<dyn ToSql + Sync + Send>;

pub fn as_refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()
}

/// A client span for one statement on a resource's table.
pub fn db_span(resource: &Resource, operation: &'static str) -> tracing::Span {
    tracing::info_span!(
        "db",
        otel.name = format!("{operation} {}", resource.table),
        otel.kind = "client",
        db.system.name = "postgresql",
        db.operation.name = operation,
        db.collection.name = resource.table,
    )
}

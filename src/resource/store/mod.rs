//! The SQL behind every declared resource.
//!
//! Column and table names come only from the declarations (trusted, compiled in); every
//! value is a bind parameter. Answers are built by PostgreSQL (`to_jsonb`) so that one code
//! path serves every resource. Writes take the row lock, check `If-Match`, write, and append
//! the audit record in one transaction.
//!
//! - `select`: what a list, an export or a single read selects;
//! - `checks`: what a write is held to before it touches a row;
//! - `insert`, `change`, `delete`: the writes of the unit of work (`resource::unit`), each
//!   audited (`audit`);
//! - `references`: derived fields and references to other rows, checked on write;
//! - `moving`: records merged into others, and the rows handed from one to the other.

mod audit;
mod change;
mod checks;
mod delete;
mod insert;
mod moving;
mod references;
mod select;

pub use audit::audit_event;
pub use change::{act, update, updated_message};
pub use checks::state_conflict;
pub use delete::{delete, deleted_answer};
pub use insert::{create, created_message};
pub use moving::{Moved, merged_record, survivor_of};
pub use references::reference_errors;
pub use select::{fetch, list, normalized_literal, parent_exists, reload, select_columns, stream};

pub use super::context::{Conn, Writer};
use crate::db::sql::Param;

/// What rows a request may reach besides the resource's own rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct Within<'a> {
    /// The parent named in the path of a nested resource: `(column, id)`.
    pub parent: Option<(&'static str, i64)>,
    /// For rows that belong to a branch: the branches the caller may access.
    pub branches: Option<&'a [i64]>,
}

impl<'a> Within<'a> {
    pub fn parent(column: &'static str, id: i64) -> Self {
        Self { parent: Some((column, id)), branches: None }
    }

    /// Whether nothing restricts the rows.
    pub fn is_open(&self) -> bool {
        self.parent.is_none() && self.branches.is_none()
    }

    /// The conditions on `t`, numbering parameters after `taken`, and their values.
    pub fn conditions(&self, taken: usize) -> (Vec<String>, Vec<Param>) {
        let mut conditions = Vec::new();
        let mut params: Vec<Param> = Vec::new();
        if let Some((column, id)) = self.parent {
            params.push(Box::new(id));
            conditions.push(format!("t.{column} = ${}", taken + params.len()));
        }
        if let Some(branches) = self.branches {
            params.push(Box::new(branches.to_vec()));
            conditions.push(format!("t.branch_id = ANY(${})", taken + params.len()));
        }
        (conditions, params)
    }
}

//! State changes declared beside the CRUD verbs (`POST /refractions/{id}/sign`,
//! `PATCH /medicines/{id}/toggle-status`), and what a record's state forbids.
//!
//! One store operation runs every action: it locks the row, honours `If-Match`, checks the
//! move against the record's current state (409 `invalid_transition` naming it), writes the
//! new state and the stamps, bumps the version and audits under the action's name.

use super::field::Field;

/// The HTTP verb of an action route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Post,
    Put,
    Patch,
}

/// From any of `from` to `to`.
#[derive(Debug, Clone, Copy)]
pub struct Move {
    pub from: &'static [&'static str],
    pub to: &'static str,
}

/// A column an action or an amendment sets besides the state.
#[derive(Debug, Clone, Copy)]
pub enum Stamp {
    /// The id of the user acting.
    User(&'static str),
    /// The time of the action.
    Now(&'static str),
    /// The time of the first such action (later ones keep it).
    FirstTime(&'static str),
    /// The column plus one.
    Increment(&'static str),
    /// `(body field, column)`: text the action's body carried (when it carried any).
    Sent(&'static str, &'static str),
}

impl Stamp {
    pub fn column(&self) -> &'static str {
        match self {
            Self::User(c) | Self::Now(c) | Self::FirstTime(c) | Self::Increment(c) | Self::Sent(_, c) => c,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Action {
    /// Audit action and the name answers use (`sign`, `toggle_status`).
    pub name: &'static str,
    /// The path segment after `/{id}/` (`sign`, `toggle-status`, `no-show`).
    pub segment: &'static str,
    pub verb: Verb,
    /// `None`: the resource's write permission.
    pub permission: Option<&'static str>,
    /// The state column.
    pub field: &'static str,
    pub moves: &'static [Move],
    pub stamps: &'static [Stamp],
    /// Fields of the (optional) body; required ones must be sent.
    pub input: &'static [Field],
    /// The answer's message.
    pub done: &'static str,
}

impl Action {
    /// Whether a record in `state` may undergo this action.
    pub fn moves_from(&self, state: Option<&str>) -> bool {
        state.is_some_and(|s| self.moves.iter().any(|m| m.from.contains(&s)))
    }
}

/// What a record may still undergo in some states (a signed examination, a posted charge).
#[derive(Debug, Clone, Copy)]
pub struct StateLock {
    pub field: &'static str,
    pub states: &'static [&'static str],
    /// Fields that may still change in those states.
    pub editable: &'static [&'static str],
    /// Any field may change with a reason, recorded as an amendment.
    pub amend: Option<Amend>,
    /// The 409 code of a change the state forbids.
    pub conflict: &'static str,
    /// The 409 code of a delete the state forbids; `None`: deletes are allowed.
    pub delete: Option<&'static str>,
}

#[derive(Debug, Clone, Copy)]
pub struct Amend {
    /// The field that must carry the reason.
    pub reason: &'static str,
    /// The audit action of the change.
    pub action: &'static str,
    pub stamps: &'static [Stamp],
}

impl StateLock {
    /// Whether a record in `state` is locked.
    pub fn holds(&self, state: Option<&str>) -> bool {
        state.is_some_and(|s| self.states.contains(&s))
    }
}

/// `active <-> inactive`: the toggle of master data.
pub const TOGGLE_STATUS: Action = Action {
    name: "toggle_status",
    segment: "toggle-status",
    verb: Verb::Patch,
    permission: None,
    field: "status",
    moves: &[Move { from: &["active"], to: "inactive" }, Move { from: &["inactive"], to: "active" }],
    stamps: &[],
    input: &[],
    done: "Status toggled.",
};

/// State changes made by PUT of the state field itself (a surgery schedule's status): any
/// other move is 409 `invalid_transition` naming the current state.
#[derive(Debug, Clone, Copy)]
pub struct Transitions {
    pub field: &'static str,
    pub moves: &'static [Move],
}

impl Transitions {
    /// Whether `from -> to` is allowed (staying put always is).
    pub fn allows(&self, from: &str, to: &str) -> bool {
        from == to || self.moves.iter().any(|m| m.to == to && m.from.contains(&from))
    }
}

/// Rows that may not overlap, enforced by an exclusion constraint (the backstop under
/// concurrent writes) and answered as a 409 that names the rows in the way.
#[derive(Debug, Clone, Copy)]
pub struct Exclusion {
    /// The constraints whose violation this is.
    pub constraints: &'static [&'static str],
    pub code: &'static str,
    pub message: &'static str,
    /// SQL answering the ids in the way: `$1` the record's id (0 when new), `$2` the record
    /// (stored with the sent fields over it) as jsonb.
    pub overlapping: &'static str,
}

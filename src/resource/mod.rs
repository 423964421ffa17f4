//! One mechanism for every CRUD resource.
//!
//! A resource is declared once as a [`Resource`] (table, fields, list rules, permissions);
//! [`store`] turns the declaration into SQL (list, fetch, create, update, soft delete, each
//! write audited in the same transaction) and [`routes`] into HTTP routes and their OpenAPI
//! description. Handlers are never written per resource.

pub mod actions;
pub mod check;
pub mod context;
pub mod day_close;
pub mod decimal;
pub mod docs;
pub mod etag;
pub mod field;
pub mod hooks;
pub mod idempotency;
pub mod input;
pub mod merged;
pub mod numbers;
pub mod print;
pub mod printable;
pub mod reads;
pub mod routes;
pub mod row;
mod store;
mod trail;
pub mod unit;
pub mod validate;

pub use actions::{Action, StateLock};
pub use context::{Conn, Context, ReadingConn, Scope, Writer};
pub use field::{Calculated, Field, Kind, Rule, Target};
pub use hooks::Hooks;
pub use numbers::Numbering;
// What a domain may call of the mechanism beyond its declarations (ARCHITECTURE.md, "What a
// domain may call"): the unit of work for every write, and the pieces of reads for queries
// of its own.
pub use row::{Fields, typed};
pub use store::{
    Moved, Within, audit_event, created_message, merged_record, normalized_literal, reload, select_columns,
    state_conflict, stream, survivor_of, updated_message,
};
pub use unit::{Unit, Written};

use crate::http::list::SortDirection;

/// A field whose value follows from another reference: a complaint's `patient_id` is the
/// patient of its `patient_visit_id`. Left out, it is filled in; given and different, 422.
#[derive(Debug, Clone, Copy)]
pub struct Derived {
    pub field: &'static str,
    pub from: &'static str,
    pub table: &'static str,
    pub column: &'static str,
}

/// The patient of a visit: every visit record carries both ids.
pub const PATIENT_OF_VISIT: Derived =
    Derived { field: "patient_id", from: "patient_visit_id", table: "patient_visits", column: "patient_id" };

/// What a column the server fills in looks like in answers (for the API description).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Text,
    Integer,
    /// An exact decimal, answered as a JSON number.
    Number,
    /// Money, answered as a string with 2 decimals.
    Money,
    /// A quantity, answered as a string with 3 decimals.
    Quantity,
    Date,
    Timestamp,
    Boolean,
    Ids,
    Names,
    /// Any JSON (audit snapshots).
    Json,
}

/// A resource nested under another: `/branches/{branch_id}/services`. Rows carry the parent's
/// id in `column`; a parent that does not exist is a 404 for every operation.
#[derive(Debug, Clone, Copy)]
pub struct Parent {
    /// The path parameter naming the parent, as in `path`.
    pub param: &'static str,
    pub column: &'static str,
    pub table: &'static str,
    /// Whether the parent table hides soft-deleted rows.
    pub soft_deleted: bool,
}

/// `filters[name]=value` as a condition: `sql` over the row alias `t`, where `$?` is the
/// value parsed as `kind` (`t.expiry_date <= current_date + $?::int`).
#[derive(Debug, Clone, Copy)]
pub struct Condition {
    pub name: &'static str,
    pub kind: Kind,
    pub sql: &'static str,
}

/// A unique index (or an exclusion constraint) whose violation is the client's mistake: a
/// 422 on `field`.
#[derive(Debug, Clone, Copy)]
pub struct Unique {
    pub index: &'static str,
    pub field: &'static str,
    pub message: &'static str,
}

/// Rows of several resources kept in one table, told apart by a column: the fourteen
/// examinations live in `examinations`, each row's `exam` saying which one it is.
#[derive(Debug, Clone, Copy)]
pub struct Shared {
    pub table: &'static str,
    pub column: &'static str,
    pub value: &'static str,
}

pub struct Resource {
    /// URL segment under `/api/v1`, e.g. `complaints`.
    pub path: &'static str,
    /// The resource's name among tables: its rows' table, unless `shared` says where they
    /// are kept. Merge records, row counts and audit records name the resource by it.
    pub table: &'static str,
    /// Where the rows are kept when they share a table with other resources' rows.
    pub shared: Option<Shared>,
    /// Human name of one record, for messages: "Complaint".
    pub label: &'static str,
    /// Human name of several, as written inside a sentence: "complaints", "Amsler grids".
    /// The singular inside a sentence follows from it and `label` ([`Resource::noun`]).
    pub plural: &'static str,
    pub scope: Scope,
    /// Writable fields shared with other resources (an examination's visit, examiner,
    /// signature), answered before the resource's own.
    pub common: &'static [Field],
    /// Writable fields.
    pub fields: &'static [Field],
    /// Rules between the fields of a whole record, checked after the row is locked on the
    /// stored record with the sent fields over it.
    pub rules: &'static [Rule],
    /// State changes beside the CRUD verbs.
    pub actions: &'static [Action],
    /// What the record's state forbids.
    pub lock: Option<StateLock>,
    /// State changes made by PUT.
    pub transitions: Option<actions::Transitions>,
    /// Rows that may not overlap.
    pub exclusions: &'static [actions::Exclusion],
    /// Fields that may not change while live records derive theirs from this one (a visit's
    /// patient, once records of the visit name that patient); the dependent resources are
    /// found among all declarations by their `derived` rules.
    pub keeps: &'static [&'static str],
    /// Columns shown but never written by clients (e.g. a generated PIN).
    pub read_only: &'static [(&'static str, Shape)],
    /// Read-only columns the resource's hooks fill in (a document number): written when a
    /// hook puts them in the input, never taken from a request.
    pub server_written: &'static [&'static str],
    /// A number the mechanism gives each new record (`PO-MAIN-2026-000001`).
    pub numbering: Option<numbers::Numbering>,
    /// Values the hooks compute and write (an amount, a total): held to their bounds.
    pub calculated: &'static [Calculated],
    /// `(name, SQL expression over the row alias t)` added to every answer.
    pub computed: &'static [(&'static str, &'static str, Shape)],
    pub sort_fields: &'static [&'static str],
    pub default_sort: &'static str,
    pub default_direction: SortDirection,
    /// Columns matched by `search` (case-insensitive substring).
    pub search: &'static [&'static str],
    /// Instead of `search`: a column of normalised text (see `search_normalize` in the branch
    /// schema) in which every word of the term must occur.
    pub search_words: Option<&'static str>,
    /// A table kept beside `table` (by triggers, in the writing transaction) holding, for each
    /// live row, its `id`, its `search_words` column and every sort field, and nothing else:
    /// a search with no other condition finds its matches there, where checking each match
    /// visits far fewer pages than the full rows would. Only the page's rows are then read.
    pub search_rows: Option<&'static str>,
    /// A date or timestamp column that `start_date` / `end_date` (inclusive) bound.
    pub date_range: Option<&'static str>,
    /// Fields usable as `filters[name]`.
    pub filters: &'static [&'static str],
    /// Filters also accepted as plain parameters (`status=`).
    pub filter_aliases: &'static [&'static str],
    /// Filters that are conditions rather than equality on a column.
    pub conditions: &'static [Condition],
    pub derived: &'static [Derived],
    pub read_permission: &'static str,
    pub write_permission: &'static str,
    /// Record who opened a single record (patient charts).
    pub audit_reads: bool,
    /// An audit trail: reading it first writes the read records this instance has queued, so
    /// that it shows every read answered before (`db::read_audit`).
    pub shows_reads: bool,
    pub parent: Option<Parent>,
    pub unique: &'static [Unique],
    /// Accepted on input and documented, but not columns (e.g. a password, role ids); the
    /// resource's own handlers deal with them.
    pub write_only: &'static [Field],
    /// Typed columns that are not writable but may be used in `filters[...]`.
    pub filter_only: &'static [Field],
    /// Whether clients may create, update and delete (false: list and get only).
    pub writable: bool,
    /// A column whose value a parent holds in one live row only (an attachment's `sha256`
    /// in a patient's chart): rows moved to another parent (a merge) leave behind those
    /// whose value it already holds.
    pub once_per_parent: Option<&'static str>,
    /// Rows are hidden by `deleted_at`, not removed (every table but append-only logs).
    pub soft_delete: bool,
    /// Columns every answer ends with.
    pub trailing: &'static [&'static str],
    /// The table's live rows are counted in `row_counts` by trigger (large tables): an
    /// unfiltered list reads its total there instead of counting.
    pub counted: bool,
    /// Rows belong to a branch (`branch_id`): a caller reaches only rows of branches they may
    /// access, and writes for another branch are refused.
    pub branch_bound: bool,
    /// What the resource does beyond the shared writes.
    pub hooks: &'static dyn Hooks,
    /// A printed form: its GET also answers `application/pdf` (`print`).
    pub printable: Option<&'static dyn printable::Printable>,
    /// The column naming the record a record was merged into (a duplicate patient): such a
    /// record is soft-deleted, a read of any of its routes is sent to the one it was merged
    /// into (301) and a write naming it is refused (410).
    pub merged_into: Option<&'static str>,
}

static CATALOGUE: std::sync::OnceLock<Vec<&'static Resource>> = std::sync::OnceLock::new();

/// Tells the mechanism every declaration, for rules that span resources (`keeps`); the top
/// of the server calls it once at start-up.
pub fn register(all: Vec<&'static Resource>) {
    let _ = CATALOGUE.set(all);
}

/// Every declaration, once registered.
pub fn registered() -> &'static [&'static Resource] {
    CATALOGUE.get().map(Vec::as_slice).unwrap_or(&[])
}

impl printable::Declared for Resource {
    fn path(&self) -> &'static str {
        self.path
    }

    fn kind_of(&self, name: &str) -> Option<Kind> {
        self.filter_field(name).map(|f| f.kind)
    }
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Resource {
    /// One record's name inside a sentence: the label, lower-cased unless the plural keeps
    /// its capital ("an Amsler grid", "a complaint").
    pub fn noun(&self) -> String {
        let keeps_capital = self.plural.chars().next().is_some_and(char::is_uppercase);
        let mut chars = self.label.chars();
        match chars.next() {
            Some(first) if !keeps_capital => first.to_lowercase().chain(chars).collect(),
            _ => self.label.to_owned(),
        }
    }

    /// "a" or "an" before [`Resource::noun`], by its sound: a vowel, but not the "you" of
    /// "user" or "unit".
    pub fn article(&self) -> &'static str {
        let noun = self.noun().to_lowercase();
        let vowel = noun.starts_with(['a', 'e', 'i', 'o', 'u']);
        let sounds_like_you = ["us", "uni", "eu"].iter().any(|p| noun.starts_with(p));
        if vowel && !sounds_like_you { "an" } else { "a" }
    }

    /// Everything but the identity of a resource, for `..Resource::DEFAULTS` in declarations.
    pub const DEFAULTS: Resource = Resource {
        path: "",
        table: "",
        shared: None,
        label: "",
        plural: "",
        scope: Scope::Branch,
        common: &[],
        fields: &[],
        rules: &[],
        actions: &[],
        lock: None,
        transitions: None,
        exclusions: &[],
        keeps: &[],
        read_only: &[],
        server_written: &[],
        numbering: None,
        calculated: &[],
        computed: &[],
        sort_fields: &["id"],
        default_sort: "id",
        default_direction: SortDirection::Asc,
        search: &[],
        filters: &[],
        filter_aliases: &[],
        conditions: &[],
        derived: &[],
        read_permission: "",
        write_permission: "",
        audit_reads: false,
        shows_reads: false,
        parent: None,
        unique: &[],
        write_only: &[],
        search_words: None,
        search_rows: None,
        date_range: None,
        filter_only: &[],
        writable: true,
        once_per_parent: None,
        soft_delete: true,
        trailing: &["version", "created_at", "updated_at"],
        counted: false,
        branch_bound: false,
        hooks: &hooks::NoHooks,
        printable: None,
        merged_into: None,
    };
}

/// What an audit trail can be filtered by.
const AUDIT_FILTERS: &[Field] = &[
    Field::new("resource", Kind::Text { max: 100 }),
    Field::new("action", Kind::Text { max: 50 }),
    Field::new("record_id", Kind::Integer { min: 1, max: i64::MAX }),
    Field::new("user_id", Kind::Integer { min: 1, max: i64::MAX }),
];

impl Resource {
    /// The audit trail of a branch or of the registry (read-only, `admin.access`): who
    /// created, changed, deleted, opened or exported what, and when.
    pub const fn audit_trail(path: &'static str, scope: Scope) -> Resource {
        use crate::permissions::ADMIN_ACCESS;
        // Two names: the document names its operations and schemas after them.
        let (label, plural) = match scope {
            Scope::Branch => ("Audit record", "audit records"),
            Scope::Registry => ("System audit record", "system audit records"),
        };
        Resource {
            path,
            table: "audit_log",
            label,
            plural,
            scope,
            read_only: &[
                ("at", Shape::Timestamp),
                ("user_id", Shape::Integer),
                ("action", Shape::Text),
                ("resource", Shape::Text),
                ("record_id", Shape::Integer),
                ("before", Shape::Json),
                ("after", Shape::Json),
                ("route", Shape::Text),
            ],
            filter_only: AUDIT_FILTERS,
            sort_fields: &["at", "id"],
            default_sort: "at",
            default_direction: SortDirection::Desc,
            filters: &["resource", "action", "record_id", "user_id"],
            date_range: Some("at"),
            read_permission: ADMIN_ACCESS,
            write_permission: ADMIN_ACCESS,
            writable: false,
            soft_delete: false,
            trailing: &[],
            shows_reads: true,
            ..Resource::DEFAULTS
        }
    }

    /// Every writable field: the shared ones, then the resource's own.
    pub fn all_fields(&self) -> impl Iterator<Item = &'static Field> + use<> {
        self.common.iter().chain(self.fields)
    }

    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.all_fields().find(|f| f.name == name)
    }

    /// Whether the `date_range` column holds instants (which `from` / `to` bound too, and
    /// whose days are the branch's).
    pub fn dated_by_instants(&self) -> bool {
        let Some(column) = self.date_range else { return false };
        match self.field(column) {
            Some(field) => matches!(field.kind, field::Kind::Timestamp { .. }),
            None => self
                .read_only
                .iter()
                .any(|(name, shape)| *name == column && matches!(shape, Shape::Timestamp)),
        }
    }

    /// The declared type of a filterable column.
    pub fn filter_field(&self, name: &str) -> Option<&Field> {
        self.field(name).or_else(|| self.filter_only.iter().find(|f| f.name == name))
    }

    pub fn condition(&self, name: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.name == name)
    }

    /// `/api/v1/...` of the collection, with `{param}` placeholders.
    pub fn collection_path(&self) -> String {
        format!("/api/v1/{}", self.path)
    }

    /// The dependents of a field named in `keeps`: `(table, column)` of every declaration
    /// whose `field` is derived from this resource's `field` through `column`, each table
    /// where its rows are kept once (the examinations share theirs).
    pub fn dependents(&self, field: &str) -> Vec<(&'static str, &'static str)> {
        let mut dependents: Vec<_> = registered()
            .iter()
            .flat_map(|r| r.derived.iter().map(move |d| (r, d)))
            .filter(|(_, d)| d.table == self.table && d.column == field)
            .map(|(r, d)| (r.stored_in(), d.from))
            .collect();
        dependents.sort_unstable();
        dependents.dedup();
        dependents
    }

    /// The table the rows are kept in: [`Resource::table`], or the table it shares.
    pub fn stored_in(&self) -> &'static str {
        self.shared.map_or(self.table, |shared| shared.table)
    }

    /// The SQL condition, on the row alias `alias` (none: unqualified), that picks this
    /// resource's rows out of the table it shares; `None` when the table is its own.
    pub fn own_rows(&self, alias: &str) -> Option<String> {
        let shared = self.shared?;
        let dot = if alias.is_empty() { "" } else { "." };
        // Declarations are static and name their own column and value: not client input.
        Some(format!("{alias}{dot}{} = '{}'", shared.column, shared.value))
    }

    /// `" AND <own_rows>"`, or nothing: appended to a WHERE clause.
    pub fn and_own_rows(&self, alias: &str) -> String {
        self.own_rows(alias).map(|c| format!(" AND {c}")).unwrap_or_default()
    }

    /// Every column of an answer, in order.
    pub fn output_columns(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once("id")
            .chain(self.parent.map(|p| p.column))
            .chain(self.read_only.iter().map(|(name, _)| *name))
            .chain(self.all_fields().map(|f| f.name))
            .chain(self.trailing.iter().copied())
    }
}

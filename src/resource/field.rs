//! Field declarations: a column's name, kind and presence rules, and the shapes a kind can
//! name (enumerations, exact decimals, structures stored as jsonb). Values are checked
//! against them by `check`.

use serde_json::{Map, Value};

use super::decimal::{self, Decimal, Style};

/// Where a referenced record lives.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A table of the same branch schema (soft-deleted rows do not count).
    Branch(&'static str),
    /// A registry table (master data).
    Registry(&'static str),
    /// An active user with access to the branch being written.
    Staff,
    /// A live row of a table in the schema of the branch the record names in `branch_id`
    /// (a surgery schedule's patient).
    InBranch(&'static str),
}

pub use crate::enums::Enumeration;

/// A rule between the fields of one object (a record, or a structure inside it): returns
/// `(path, message)` for each field it finds wrong, the path relative to the object. A rule
/// may also fill in what follows from the other fields (a visual acuity's logMAR).
pub type Rule = fn(&mut Map<String, Value>) -> Vec<(String, String)>;

/// An object stored as jsonb (an eye's findings, a tonometry reading), with its own fields
/// and rules. Its OpenAPI component is `name`.
#[derive(Debug)]
pub struct Structure {
    pub name: &'static str,
    pub fields: &'static [Field],
    pub rules: &'static [Rule],
    /// Values the server computes into each object (a line's total).
    pub calculated: &'static [Calculated],
    /// The findings of one eye: `unable_to_assess` (default false) may replace them; when it
    /// is false the required fields must be there and at least one field hold a value.
    pub per_eye: bool,
}

/// A value the server computes from sent ones and writes: an amount, a line total, a stock
/// level. It is held to its declared bounds like a sent value, so that whatever the server
/// writes fits its column; when it does not, the request is 422 on `from`, the sent field
/// whose value makes it too large, and nothing is written. Sums over many rows (summaries,
/// dashboards, a kept balance) are unbounded `numeric` instead, never narrowed to a column.
#[derive(Debug, Clone, Copy)]
pub struct Calculated {
    pub name: &'static str,
    pub kind: Decimal,
    pub from: &'static str,
}

impl Calculated {
    /// The value as answered, or the message for `from`.
    pub fn fit(&self, value: rust_decimal::Decimal) -> Result<Value, String> {
        self.kind.fit(value).map_err(|largest| {
            format!(
                "The {} computed from the {} would be {}, more than the largest allowed, {largest}.",
                self.name.replace('_', " "),
                self.from.replace('_', " "),
                value.normalize()
            )
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A single-line string of at most `max` characters.
    Text {
        max: usize,
    },
    /// Free text (notes, findings) of at most `max` characters.
    LongText {
        max: usize,
    },
    Email,
    Phone,
    Integer {
        min: i64,
        max: i64,
    },
    /// An exact decimal within a range and on a step (never a float).
    Decimal(Decimal),
    /// `YYYY-MM-DD`; `past` forbids dates after today.
    Date {
        past: bool,
    },
    /// An RFC 3339 timestamp with an offset; `past` forbids instants after now (5 minutes of
    /// clock skew allowed).
    Timestamp {
        past: bool,
    },
    /// `HH:MM`.
    Time,
    Bool,
    /// One of an enumeration's values.
    Enum(&'static Enumeration),
    /// The id of another record, which must exist.
    Ref(Target),
    /// A short code of uppercase letters, digits and the `marks` (`._-`); lowercase input is
    /// uppercased.
    Code {
        min: usize,
        max: usize,
        marks: &'static str,
    },
    /// An IANA time zone name (`Asia/Manila`), as the database knows them.
    TimeZone,
    /// A login name: letters, digits, `.`, `_`, `-` (never an e-mail address).
    Username,
    /// A password: kept exactly as typed, length rules of `security::password`.
    Password,
    /// What its owner types to prove who they are (a current password, a one-time code): kept
    /// exactly as typed, 1 to `max` characters, never checked
    /// against a rule that would tell anything about the secret it is compared with.
    Secret {
        max: usize,
    },
    /// A list of distinct positive ids (checked by the resource's own handler).
    IdList,
    /// A list of distinct non-empty names (checked by the resource's own handler).
    NameList,
    /// An object of the structure's fields, stored as jsonb.
    Object(&'static Structure),
    /// A list of `min..=max` items of one kind, stored as jsonb.
    List {
        item: &'static Kind,
        min: usize,
        max: usize,
        distinct: bool,
    },
}

impl Kind {
    /// Whether values of the kind are written as JSON strings (so that a blank string means
    /// "no value", as an emptied form box sends it).
    pub fn is_string(self) -> bool {
        matches!(
            self,
            Self::Text { .. }
                | Self::LongText { .. }
                | Self::Email
                | Self::Phone
                | Self::Date { .. }
                | Self::Timestamp { .. }
                | Self::Time
                | Self::Enum(_)
                | Self::Code { .. }
                | Self::TimeZone
                | Self::Username
                | Self::Secret { .. }
        )
    }

    /// The SQL type a filter value is cast to.
    pub fn sql_type(self) -> &'static str {
        match self {
            Self::Integer { .. } | Self::Ref(_) => "int8",
            Self::Date { .. } => "date",
            Self::Bool => "bool",
            Self::Decimal(_) => "numeric",
            _ => "text",
        }
    }

    /// How the column is selected for an answer: money and quantities as fixed-scale
    /// strings, everything else as PostgreSQL renders it.
    pub fn select(self, column: &str) -> String {
        match self {
            Self::Decimal(d) if d.style != Style::Measurement => format!("t.{column}::text AS {column}"),
            _ => format!("t.{column}"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    /// Must be present (and not null) on create; may never be set to null. Inside a
    /// structure: must be present in every object.
    pub required: bool,
    /// The column is NOT NULL with a database default: left out, null or empty on create it
    /// takes the default; on update it may not be emptied.
    pub defaulted: bool,
    /// Set on create, never changed after (sending the same value back is fine).
    pub fixed: bool,
    /// Left out on create, it is the id of the user writing (an exam's examiner).
    pub caller_by_default: bool,
}

impl Field {
    pub const fn new(name: &'static str, kind: Kind) -> Self {
        Self { name, kind, required: false, defaulted: false, fixed: false, caller_by_default: false }
    }

    pub const fn required(mut self) -> Self {
        self.required = true;
        self
    }

    pub const fn defaulted(mut self) -> Self {
        self.defaulted = true;
        self
    }

    pub const fn fixed(mut self) -> Self {
        self.fixed = true;
        self
    }

    pub const fn caller_by_default(mut self) -> Self {
        self.caller_by_default = true;
        self
    }
}

/// The rule that the day in `to` is not before the day in `from` (ISO dates compare as text):
/// `message` on `to` when it is.
pub fn days_in_order(
    record: &Map<String, Value>,
    from: &str,
    to: &str,
    message: &str,
) -> Vec<(String, String)> {
    use super::row::Fields;
    match (record.text(from), record.text(to)) {
        (Some(start), Some(end)) if end < start => vec![(to.into(), message.into())],
        _ => Vec::new(),
    }
}

/// Shorthands that keep resource declarations one line per field.
pub const fn text(name: &'static str, max: usize) -> Field {
    Field::new(name, Kind::Text { max })
}
pub const fn long_text(name: &'static str) -> Field {
    Field::new(name, Kind::LongText { max: 10_000 })
}
pub const fn date(name: &'static str) -> Field {
    Field::new(name, Kind::Date { past: false })
}
pub const fn past_date(name: &'static str) -> Field {
    Field::new(name, Kind::Date { past: true })
}
pub const fn timestamp(name: &'static str) -> Field {
    Field::new(name, Kind::Timestamp { past: false })
}
pub const fn past_timestamp(name: &'static str) -> Field {
    Field::new(name, Kind::Timestamp { past: true })
}
pub const fn time(name: &'static str) -> Field {
    Field::new(name, Kind::Time)
}
pub const fn one_of(name: &'static str, values: &'static Enumeration) -> Field {
    Field::new(name, Kind::Enum(values))
}
pub const fn branch_ref(name: &'static str, table: &'static str) -> Field {
    Field::new(name, Kind::Ref(Target::Branch(table)))
}
pub const fn registry_ref(name: &'static str, table: &'static str) -> Field {
    Field::new(name, Kind::Ref(Target::Registry(table)))
}
/// What its owner types to prove who they are (`current_password`, a code).
pub const fn secret(name: &'static str, max: usize) -> Field {
    Field::new(name, Kind::Secret { max })
}
pub const fn boolean(name: &'static str) -> Field {
    Field::new(name, Kind::Bool)
}
pub const fn integer(name: &'static str, min: i64, max: i64) -> Field {
    Field::new(name, Kind::Integer { min, max })
}
/// A code of master data: 1 to 30 of `A-Z0-9._-`.
pub const fn code(name: &'static str) -> Field {
    Field::new(name, Kind::Code { min: 1, max: 30, marks: "._-" })
}
/// A code of letters and digits only, `min..=max` long (branches, services, ticket prefixes).
pub const fn plain_code(name: &'static str, min: usize, max: usize) -> Field {
    Field::new(name, Kind::Code { min, max, marks: "" })
}
/// A measurement: `min..=max` in multiples of `step`, all written as decimals
/// (`num("sphere", "-30", "30", "0.25")`), answered as a JSON number at the step's scale.
pub const fn num(name: &'static str, min: &str, max: &str, step: &str) -> Field {
    Field::new(name, Kind::Decimal(decimal::spec(min, max, step, Style::Measurement)))
}
/// Money: at least 0, at most 10 integer digits, 2 decimals, answered as a string.
pub const fn money(name: &'static str) -> Field {
    Field::new(name, Kind::Decimal(decimal::MONEY))
}
/// A quantity: at least 0, at most 9 integer digits, 3 decimals, answered as a string.
pub const fn qty(name: &'static str) -> Field {
    Field::new(name, Kind::Decimal(decimal::QUANTITY))
}
/// Money the server computes from `from` (an amount, a total).
pub const fn calculated_money(name: &'static str, from: &'static str) -> Calculated {
    Calculated { name, kind: decimal::MONEY, from }
}
/// A quantity the server computes from `from` (a stock level).
pub const fn calculated_qty(name: &'static str, from: &'static str) -> Calculated {
    Calculated { name, kind: decimal::QUANTITY, from }
}
/// A quantity that may be negative (a movement out of stock).
pub const fn signed_qty(name: &'static str) -> Field {
    Field::new(
        name,
        Kind::Decimal(decimal::spec("-999999999.999", "999999999.999", "0.001", Style::Quantity)),
    )
}
pub const fn object(name: &'static str, structure: &'static Structure) -> Field {
    Field::new(name, Kind::Object(structure))
}
pub const fn list(name: &'static str, item: &'static Kind, min: usize, max: usize) -> Field {
    Field::new(name, Kind::List { item, min, max, distinct: false })
}
/// A list whose items may not repeat (clock hours).
pub const fn distinct_list(name: &'static str, item: &'static Kind, min: usize, max: usize) -> Field {
    Field::new(name, Kind::List { item, min, max, distinct: true })
}

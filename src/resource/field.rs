//! Field declarations: a column's name, kind and presence rules. Values are checked against
//! them by `check`.

/// Where a referenced record lives.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A table of the same branch schema (soft-deleted rows do not count).
    Branch(&'static str),
    /// A registry table (master data).
    Registry(&'static str),
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
    /// `YYYY-MM-DD`; `past` forbids dates after today.
    Date {
        past: bool,
    },
    Bool,
    /// One of the lowercase snake_case values.
    Enum(&'static [&'static str]),
    /// The id of another record, which must exist.
    Ref(Target),
    /// A short code of uppercase letters and digits (branch codes, ticket prefixes);
    /// lowercase input is uppercased.
    Code {
        min: usize,
        max: usize,
    },
    /// A login name: letters, digits, `.`, `_`, `-` (never an e-mail address).
    Username,
    /// A password: kept exactly as typed, length rules of `auth::password`.
    Password,
    /// A list of distinct positive ids (checked by the resource's own handler).
    IdList,
    /// A list of distinct non-empty names (checked by the resource's own handler).
    NameList,
}

impl Kind {
    /// The SQL type a filter value is cast to.
    pub fn sql_type(self) -> &'static str {
        match self {
            Self::Integer { .. } | Self::Ref(_) => "int8",
            Self::Date { .. } => "date",
            Self::Bool => "bool",
            _ => "text",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    /// Must be present (and not null) on create; may never be set to null.
    pub required: bool,
    /// The column is NOT NULL with a database default: left out, null or empty on create it
    /// takes the default; on update it may not be emptied.
    pub defaulted: bool,
    /// Set on create, never changed after (sending the same value back is fine).
    pub fixed: bool,
}

impl Field {
    pub const fn new(name: &'static str, kind: Kind) -> Self {
        Self { name, kind, required: false, defaulted: false, fixed: false }
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
pub const fn one_of(name: &'static str, values: &'static [&'static str]) -> Field {
    Field::new(name, Kind::Enum(values))
}
pub const fn branch_ref(name: &'static str, table: &'static str) -> Field {
    Field::new(name, Kind::Ref(Target::Branch(table)))
}
pub const fn registry_ref(name: &'static str, table: &'static str) -> Field {
    Field::new(name, Kind::Ref(Target::Registry(table)))
}
pub const fn boolean(name: &'static str) -> Field {
    Field::new(name, Kind::Bool)
}
pub const fn integer(name: &'static str, min: i64, max: i64) -> Field {
    Field::new(name, Kind::Integer { min, max })
}

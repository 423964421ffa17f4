//! The SQL of a search: the conditions its parameters make (dates compared as FHIR compares
//! ranges, in the branch's zone; names as `names` matches them) and one statement for a page
//! in the order asked for and its total.

use serde_json::Value;
use time::{Date, OffsetDateTime, PrimitiveDateTime};
use tokio_postgres::types::ToSql;

use super::names;
use super::search::{DateParam, Prefix, Search, Span};
use crate::db::sql::{Param, as_refs};
use crate::http::error::ApiResult;
use crate::resource::Conn;

/// A statement's conditions and their values.
#[derive(Default)]
pub struct Sql {
    pub conditions: Vec<String>,
    pub params: Vec<Param>,
}

impl Sql {
    /// Adds a value; answers its placeholder.
    pub fn value(&mut self, value: impl ToSql + Sync + Send + 'static) -> String {
        self.params.push(Box::new(value));
        format!("${}", self.params.len())
    }

    pub fn condition(&mut self, condition: impl Into<String>) {
        self.conditions.push(condition.into());
    }

    /// `WHERE` with every condition (or none).
    pub fn filter(&self) -> String {
        if self.conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", self.conditions.join(" AND "))
        }
    }

    /// `_id=` of a type whose ids are made of a record's id and more (`problem-7`,
    /// `va-12-right`): `record_of` reads the record's id out of one (none: not of the type),
    /// the record's id reaching its primary key and `<alias>.fhir_id` the whole id.
    pub fn composite_ids(&mut self, alias: &str, search: &Search, record_of: fn(&str) -> Option<i64>) {
        let Some(ids) = &search.ids else { return };
        let (records, names): (Vec<i64>, Vec<String>) =
            ids.iter().filter_map(|id| record_of(id).map(|record| (record, id.clone()))).unzip();
        let (records, names) = (self.value(records), self.value(names));
        self.condition(format!(
            "{alias}.record_id = ANY({records}::bigint[]) AND {alias}.fhir_id = ANY({names}::text[])"
        ));
    }

    /// `patient=`: the rows of these patients.
    pub fn patients(&mut self, column: &str, search: &Search) {
        if let Some(patients) = &search.patients {
            let placeholder = self.value(patients.clone());
            self.condition(format!("{column} = ANY({placeholder}::bigint[])"));
        }
    }

    /// The type's practitioner parameter: the rows of these doctors.
    pub fn practitioners(&mut self, column: &str, search: &Search) {
        if let Some(doctors) = &search.practitioners {
            let placeholder = self.value(doctors.clone());
            self.condition(format!("{column} = ANY({placeholder}::bigint[])"));
        }
    }

    /// `status=`: the rows whose own status is one that `to_fhir` answers as a code sent.
    pub fn statuses(
        &mut self,
        column: &str,
        search: &Search,
        own: &[&str],
        to_fhir: fn(&str) -> &'static str,
    ) {
        if let Some(codes) = &search.statuses {
            let matching: Vec<String> = own
                .iter()
                .filter(|s| codes.iter().any(|c| c == to_fhir(s)))
                .map(|s| (*s).to_owned())
                .collect();
            let placeholder = self.value(matching);
            self.condition(format!("{column} = ANY({placeholder}::text[])"));
        }
    }

    /// `name`, `family` and `given` on a patient row aliased `p`: each must hold.
    pub fn names(&mut self, search: &Search) {
        for matched in &search.names {
            let values = self.value(matched.values.clone());
            self.conditions.extend(names::conditions(matched, &values));
        }
    }

    /// `_id` of a type whose ids are numbers: an id that is not one matches nothing.
    pub fn numeric_ids(&mut self, column: &str, search: &Search) {
        if let Some(ids) = &search.ids {
            let ids: Vec<i64> = ids.iter().filter_map(|id| id.parse::<i64>().ok()).collect();
            let placeholder = self.value(ids);
            self.condition(format!("{column} = ANY({placeholder}::bigint[])"));
        }
    }

    /// Every date parameter on `column`, a `timestamptz` (a moment) or a `date` (a whole
    /// local day of the branch, zone `timezone`), as FHIR compares ranges: `eq` when the
    /// value lies within the parameter's span, `ge`/`le` when it reaches at or after its
    /// start / before its end, `gt`/`lt` when it reaches after its end / before its start.
    /// The values of one parameter are alternatives; the parameters must all hold.
    pub fn dates(&mut self, column: &str, is_day: bool, search: &Search, timezone: &str) {
        for any_of in &search.dates {
            let alternatives: Vec<String> = any_of
                .iter()
                .map(|param| {
                    let mut zone = Zone { name: timezone, placeholder: None };
                    self.date(column, is_day, param, &mut zone)
                })
                .collect();
            self.condition(format!("({})", alternatives.join(" OR ")));
        }
    }

    /// The condition of one date value on `column`.
    fn date(&mut self, column: &str, is_day: bool, param: &DateParam, zone: &mut Zone) -> String {
        let (first, last) = match param.span {
            Span::Days(first, after) => (Bound::Day(first), after.map(Bound::Day)),
            Span::Instants(start, end) => (Bound::Instant(start), end.map(Bound::Instant)),
            Span::Local(start, end) => (Bound::Local(start), end.map(Bound::Local)),
        };
        let days = is_day && matches!(param.span, Span::Days(..));
        // A moment (or a day against days) lies in [from, to); a whole local day against
        // a span of time reaches from its start to its end.
        let (from, to, after, within) = if is_day && !days {
            let zone = zone.of(self);
            let from = format!("({column}::timestamp AT TIME ZONE {zone}::text)");
            (from, format!("(({column} + 1)::timestamp AT TIME ZONE {zone}::text)"), ">", "<=")
        } else {
            (column.to_owned(), column.to_owned(), ">=", "<")
        };
        // Only the bounds a condition uses become values: a placeholder that no statement
        // uses has no type.
        let condition = match param.prefix {
            Prefix::Eq => {
                let (start, end) = (self.bound(Some(first), days, zone), self.bound(last, days, zone));
                format!("{from} >= {start} AND {to} {within} {end}")
            }
            Prefix::Gt => format!("{to} {after} {}", self.bound(last, days, zone)),
            Prefix::Lt => format!("{from} < {}", self.bound(Some(first), days, zone)),
            Prefix::Ge => format!("{to} {after} {}", self.bound(Some(first), days, zone)),
            Prefix::Le => format!("{from} < {}", self.bound(last, days, zone)),
        };
        format!("({condition})")
    }

    /// One end of a span as SQL: a `date` when `days` (a day against days), else a
    /// `timestamptz`. No end (a span that closes past year 9999) is the end of time.
    fn bound(&mut self, bound: Option<Bound>, days: bool, zone: &mut Zone) -> String {
        match bound {
            None if days => "'infinity'::date".to_owned(),
            None => "'infinity'::timestamptz".to_owned(),
            Some(Bound::Day(day)) if days => format!("{}::date", self.value(day)),
            Some(Bound::Day(day)) => {
                let day = self.value(day);
                format!("({day}::date::timestamp AT TIME ZONE {}::text)", zone.of(self))
            }
            Some(Bound::Instant(at)) => format!("{}::timestamptz", self.value(at)),
            Some(Bound::Local(at)) => {
                let at = self.value(at);
                format!("({at}::timestamp AT TIME ZONE {}::text)", zone.of(self))
            }
        }
    }
}

/// One end of a date parameter's span.
#[derive(Clone, Copy)]
enum Bound {
    Day(Date),
    Instant(OffsetDateTime),
    Local(PrimitiveDateTime),
}

/// The branch's zone, a value of the statement once a condition uses it.
struct Zone<'a> {
    name: &'a str,
    placeholder: Option<String>,
}

impl Zone<'_> {
    fn of(&mut self, sql: &mut Sql) -> String {
        self.placeholder.get_or_insert_with(|| sql.value(self.name.to_owned())).clone()
    }
}

/// One page of a search: how many rows match in all, and the page's rows as JSON objects.
pub struct Page {
    pub total: i64,
    pub rows: Vec<Value>,
}

/// Runs `matching` (a `SELECT` with `sql`'s values) for the page `search` asks for, in the
/// order its `_sort` asks for and then in `order` (the type's own, which tells every row
/// apart, so that pages neither overlap nor skip), and the count of every match, in one
/// statement. A value a row lacks sorts after every other, either way.
pub async fn page(
    conn: &mut Conn,
    matching: &str,
    order: &str,
    mut sql: Sql,
    search: &Search,
) -> ApiResult<Page> {
    let mut keys: Vec<String> = search
        .sort
        .iter()
        .map(|key| format!("{} {} NULLS LAST", key.column, if key.descending { "DESC" } else { "ASC" }))
        .collect();
    keys.push(order.to_owned());
    let order = keys.join(", ");
    let (limit, offset) = (sql.value(search.count), sql.value(search.offset));
    let statement = format!(
        "WITH m AS ({matching})
         SELECT (SELECT count(*) FROM m),
                coalesce((SELECT jsonb_agg(to_jsonb(p) ORDER BY {order})
                            FROM (SELECT * FROM m ORDER BY {order} LIMIT {limit} OFFSET {offset}) p), '[]')"
    );
    let client = conn.client();
    let prepared = client.prepare_cached(&statement).await?;
    let row = client.query_one(&prepared, &as_refs(&sql.params)).await?;
    let rows: Value = row.get(1);
    Ok(Page { total: row.get(0), rows: rows.as_array().cloned().unwrap_or_default() })
}

//! Reads: what a list, an export or a single read selects, and how.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

use crate::db::Queries;
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tracing::Instrument;

use super::{Conn, Within};
use crate::db::sql::{PAGE_AGGREGATE, Param, as_refs, db_span, one_row};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::list::Bound;
use crate::http::list::ListQuery;
use crate::resource::check::parse_date;
use crate::resource::field::Kind;
use crate::resource::{Resource, Shape};

/// `<columns>` of `SELECT <columns> FROM <table> t`, the inner query of every read: made
/// once per resource (a declaration never changes), not again for every read.
pub fn select_columns(resource: &Resource) -> Arc<str> {
    /// By the resource's path and table.
    type Made = HashMap<(&'static str, &'static str), Arc<str>>;
    static MADE: LazyLock<RwLock<Made>> = LazyLock::new(Default::default);
    let key = (resource.path, resource.table);
    if let Some(columns) = MADE.read().expect("select columns poisoned").get(&key) {
        return columns.clone();
    }
    let columns: Arc<str> = make_select_columns(resource).into();
    MADE.write().expect("select columns poisoned").insert(key, columns.clone());
    columns
}

fn make_select_columns(resource: &Resource) -> String {
    let as_text = |c: &str| {
        resource
            .read_only
            .iter()
            .any(|(name, shape)| *name == c && matches!(shape, Shape::Money | Shape::Quantity))
    };
    let mut columns: Vec<String> = resource
        .output_columns()
        .map(|c| match resource.field(c) {
            Some(f) => f.kind.select(c),
            None if as_text(c) => format!("t.{c}::text AS {c}"),
            None => format!("t.{c}"),
        })
        .collect();
    columns.extend(resource.computed.iter().map(|(name, expr, _)| format!("{expr} AS {name}")));
    columns.join(", ")
}

/// Whether the parent named in the path exists (nested resources answer 404 otherwise).
pub async fn parent_exists(client: &impl Queries, resource: &Resource, id: i64) -> ApiResult<bool> {
    let Some(parent) = resource.parent else { return Ok(true) };
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM {} WHERE id = $1{})",
        parent.table,
        if parent.soft_deleted { " AND deleted_at IS NULL" } else { "" }
    );
    let stmt = client.prepare_cached(&sql).await?;
    Ok(client.read(&stmt, &[&id]).await?.first().is_some_and(|row| row.get(0)))
}

/// The rows a list query selects: its WHERE clause and the values bound to it. Lists and
/// exports share it, so they always agree on what matches.
pub struct Selection {
    conditions: Vec<String>,
    params: Vec<Param>,
    /// Where the search's own conditions begin in `conditions`, when nothing but the soft
    /// delete and the search narrows the rows: then the resource's `search_rows`, which hold
    /// the live rows only, can answer them alone.
    search_alone_from: Option<usize>,
}

/// SQL for "the normalised column contains the normalised word in `param` literally": the
/// word is normalised first and escaped after, because normalising turns the fullwidth
/// ＿ and ％ into the LIKE wildcards _ and %. The pattern is a sub-select so that it is
/// computed once per statement: in the generic plan of a prepared statement, an expression
/// of a parameter would be computed again for every row the trigram index hands over (four
/// times slower for a word in 4% of 100,000 patients).
pub fn normalized_contains(column: &str, param: &str) -> String {
    format!("{column} LIKE (SELECT '%' || {} || '%')", normalized_literal(param))
}

/// SQL for the normalised text of `value` escaped for LIKE, so that it matches literally.
pub fn normalized_literal(value: &str) -> String {
    format!("replace(replace(replace(search_normalize({value}), '\\', '\\\\'), '%', '\\%'), '_', '\\_')")
}

/// A LIKE pattern matching `term` literally anywhere.
pub fn contains_pattern(term: &str) -> String {
    format!("%{}%", term.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"))
}

impl Selection {
    pub fn new(resource: &Resource, within: Within<'_>, query: &ListQuery) -> ApiResult<Self> {
        let mut selection = Self { conditions: Vec::new(), params: Vec::new(), search_alone_from: None };
        selection.conditions.extend(resource.own_rows("t"));
        if resource.soft_delete {
            selection.conditions.push("t.deleted_at IS NULL".to_owned());
        }
        // What every list of the resource is narrowed by, before any filter.
        let always = selection.conditions.len();
        let (conditions, params) = within.conditions(0);
        selection.conditions.extend(conditions);
        selection.params.extend(params);
        selection.add_filters(resource, query)?;
        selection.add_date_range(resource, query);
        let narrowed = selection.conditions.len();
        if let Some(term) = &query.search {
            selection.add_search(resource, term);
        }
        if narrowed == always && resource.shared.is_none() && selection.conditions.len() > narrowed {
            selection.search_alone_from = Some(narrowed);
        }
        Ok(selection)
    }

    /// Adds a condition whose `$?` is the next parameter.
    fn bind(&mut self, condition: String, value: Param) {
        self.params.push(value);
        self.conditions.push(condition.replace("$?", &format!("${}", self.params.len())));
    }

    /// `filters[name]=value`, each value parsed as its field's kind (422 naming the filter).
    fn add_filters(&mut self, resource: &Resource, query: &ListQuery) -> ApiResult<()> {
        let mut errors = FieldErrors::new();
        for (name, raw) in &query.filters {
            if let Some(condition) = resource.condition(name) {
                match filter_value(condition.kind, name, raw) {
                    Ok(Some(value)) => self.bind(format!("({})", condition.sql), value),
                    Ok(None) => {}
                    Err(message) => errors.entry(format!("filters[{name}]")).or_default().push(message),
                }
                continue;
            }
            let kind = resource.filter_field(name).map_or(Kind::Text { max: 200 }, |f| f.kind);
            match filter_value(kind, name, raw) {
                Ok(Some(value)) => self.bind(format!("t.{name} = $?::{}", kind.sql_type()), value),
                Ok(None) => {}
                Err(message) => errors.entry(format!("filters[{name}]")).or_default().push(message),
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
    }

    /// `start_date` / `end_date`, inclusive, on the resource's date column; on a column of
    /// instants, days of the query's zone, and `from` / `to` too.
    fn add_date_range(&mut self, resource: &Resource, query: &ListQuery) {
        let Some(column) = resource.date_range else { return };
        if !resource.dated_by_instants() {
            if let Some(start) = query.start_date {
                self.bind(format!("t.{column} >= $?::date"), Box::new(start));
            }
            if let Some(end) = query.end_date {
                self.bind(format!("t.{column} < $?::date + 1"), Box::new(end));
            }
            return;
        }
        let zone = query.zone.clone().unwrap_or_else(|| "UTC".to_owned());
        let from = query.start_date.map(Bound::Day).into_iter().chain(query.from);
        for bound in from {
            match bound {
                Bound::Day(day) => self.bind_in_zone(
                    &format!("t.{column} >= ($?::date)::timestamp AT TIME ZONE $zone"),
                    day,
                    &zone,
                ),
                Bound::Instant(at) => self.bind(format!("t.{column} >= $?::timestamptz"), Box::new(at)),
            }
        }
        let to = query.end_date.map(Bound::Day).into_iter().chain(query.to);
        for bound in to {
            match bound {
                Bound::Day(day) => self.bind_in_zone(
                    &format!("t.{column} < ($?::date + 1)::timestamp AT TIME ZONE $zone"),
                    day,
                    &zone,
                ),
                Bound::Instant(at) => self.bind(format!("t.{column} < $?::timestamptz"), Box::new(at)),
            }
        }
    }

    /// Adds a condition whose `$?` is a local day and `$zone` the zone it is a day of.
    fn bind_in_zone(&mut self, condition: &str, day: time::Date, zone: &str) {
        self.params.push(Box::new(zone.to_owned()));
        let zone_param = format!("${}::text", self.params.len());
        self.bind(condition.replace("$zone", &zone_param), Box::new(day));
    }

    fn add_search(&mut self, resource: &Resource, term: &str) {
        match resource.search_words {
            // Every word must occur, in any order, accents and case ignored.
            Some(column) => {
                for word in term.split_whitespace().take(8) {
                    self.bind(normalized_contains(&format!("t.{column}"), "$?"), Box::new(word.to_owned()));
                }
            }
            None if !resource.search.is_empty() => {
                self.params.push(Box::new(contains_pattern(term)));
                let n = self.params.len();
                let any: Vec<String> = resource.search.iter().map(|c| format!("t.{c} ILIKE ${n}")).collect();
                self.conditions.push(format!("({})", any.join(" OR ")));
            }
            None => {}
        }
    }

    fn filter(&self) -> String {
        if self.conditions.is_empty() { "true".to_owned() } else { self.conditions.join(" AND ") }
    }

    /// One statement answering `(total, page as JSON text, the page's ids)`; see [`list`].
    fn matches_sql(&self, resource: &Resource, query: &ListQuery) -> String {
        let dir = query.sort_direction.sql();
        let table = resource.stored_in();
        let sort = &query.sort_field;
        let (source, filter) = match (resource.search_rows, self.search_alone_from) {
            (Some(rows), Some(from)) if resource.search_words.is_some() => {
                (rows, self.conditions[from..].join(" AND "))
            }
            _ => (table, self.filter()),
        };
        format!(
            "WITH matches AS MATERIALIZED (SELECT t.id, t.{sort} AS sort_key FROM {source} t WHERE {filter}),
                  page AS (SELECT id, sort_key FROM matches ORDER BY sort_key {dir}, id {dir} LIMIT {limit} OFFSET {offset})
             SELECT (SELECT count(*) FROM matches), p.data, p.ids
               FROM ({aggregate} FROM (SELECT {columns} FROM page JOIN {table} t ON t.id = page.id
                                        ORDER BY page.sort_key {dir}, page.id {dir}) r) p",
            limit = query.per_page,
            offset = query.offset(),
            columns = select_columns(resource),
            aggregate = PAGE_AGGREGATE,
        )
    }

    /// One statement answering `(page as JSON text, the page's ids)`; see [`list`].
    fn page_sql(&self, resource: &Resource, query: &ListQuery) -> String {
        let dir = query.sort_direction.sql();
        format!(
            "{PAGE_AGGREGATE} FROM (SELECT {} FROM {} t WHERE {} ORDER BY {} {dir}, id {dir} LIMIT {} OFFSET {}) r",
            select_columns(resource),
            resource.stored_in(),
            self.filter(),
            query.sort_field,
            query.per_page,
            query.offset(),
        )
    }

    /// Every matching row, in list order, as one JSON value each (exports).
    fn sql(&self, resource: &Resource, query: &ListQuery) -> String {
        let dir = query.sort_direction.sql();
        format!(
            "SELECT to_jsonb(r) FROM (SELECT {} FROM {} t WHERE {} ORDER BY {} {dir}, id {dir}) r",
            select_columns(resource),
            resource.stored_in(),
            self.filter(),
            query.sort_field,
        )
    }

    fn count_sql(&self, resource: &Resource, unfiltered: bool) -> String {
        if resource.counted && unfiltered {
            format!("SELECT live FROM row_counts WHERE table_name = '{}'", resource.table)
        } else {
            format!("SELECT count(*) FROM {} t WHERE {}", resource.stored_in(), self.filter())
        }
    }
}

/// One page of a list: the total, the page's rows as a JSON array (text made by PostgreSQL)
/// and their ids.
pub struct Page {
    pub total: i64,
    pub data: String,
    pub ids: Vec<i64>,
}

/// A filter's value as its kind: `Ok(None)` for kinds that cannot be filtered on.
fn filter_value(kind: Kind, name: &str, raw: &str) -> Result<Option<Param>, String> {
    Ok(Some(match kind {
        Kind::IdList | Kind::NameList | Kind::Password | Kind::Secret { .. } => return Ok(None),
        Kind::Integer { min, max } => match raw.parse::<i64>() {
            Ok(v) if (min..=max).contains(&v) => Box::new(v),
            _ => return Err(format!("The filter must be an integer from {min} to {max}.")),
        },
        Kind::Ref(_) => match raw.parse::<i64>() {
            Ok(id) if id >= 1 => Box::new(id),
            _ => return Err("The filter must be an id (an integer of at least 1).".into()),
        },
        Kind::Date { .. } => {
            Box::new(parse_date(raw).ok_or_else(|| "The filter must be a date (YYYY-MM-DD).".to_owned())?)
        }
        Kind::Bool => match raw {
            "true" | "1" => Box::new(true),
            "false" | "0" => Box::new(false),
            _ => return Err("The filter must be true or false.".into()),
        },
        Kind::Enum(values) => {
            let v = raw.to_ascii_lowercase();
            if !values.values.contains(&v.as_str()) {
                return Err(format!(
                    "The selected {name} is invalid. Allowed: {}.",
                    values.values.join(", ")
                ));
            }
            Box::new(v)
        }
        Kind::Text { max } | Kind::LongText { max } if raw.chars().count() > max => {
            return Err(format!("The filter may not be longer than {max} characters."));
        }
        _ => Box::new(raw.to_owned()),
    }))
}

/// Rows of one page and the total, for the list envelope.
///
/// Without a search term, the page walks the sort index and the total is a count beside it in
/// the same statement (an index-only scan, or the kept row count). With one, the planner
/// would walk the sort index and filter every row (tens of milliseconds on 100k rows), so the
/// matches are found once through the trigram index, materialised as (id, sort key), counted,
/// and only the page's rows are read.
pub async fn list(
    client: &impl Queries,
    resource: &Resource,
    within: Within<'_>,
    query: &ListQuery,
) -> ApiResult<Page> {
    let selection = Selection::new(resource, within, query)?;
    let searching =
        query.search.is_some() && (resource.search_words.is_some() || !resource.search.is_empty());
    async {
        let refs = as_refs(&selection.params);
        if searching {
            let stmt = client.prepare_cached(&selection.matches_sql(resource, query)).await?;
            let row = one_row(client.read(&stmt, &refs).await?)?;
            return Ok(Page { total: row.get(0), data: row.get(1), ids: row.get(2) });
        }
        let unfiltered = query.filters.is_empty()
            && query.search.is_none()
            && within.is_open()
            && query.start_date.is_none()
            && query.end_date.is_none();
        // The count and the page in one statement: one round trip, and one plan to make again
        // when the connection comes from another branch's schema.
        let sql = format!(
            "SELECT ({}) AS total, p.data, p.ids FROM ({}) p",
            selection.count_sql(resource, unfiltered),
            selection.page_sql(resource, query)
        );
        let stmt = client.prepare_cached(&sql).await?;
        let row = one_row(client.read(&stmt, &refs).await?)?;
        let total: i64 = row.get(0);
        if query.offset() >= total {
            return Ok(Page { total, data: "[]".into(), ids: Vec::new() });
        }
        Ok(Page { total, data: row.get(1), ids: row.get(2) })
    }
    .instrument(db_span(resource.table, "SELECT"))
    .await
}

/// Every matching row, in list order, as a stream (exports): rows are read as they are sent,
/// so memory stays flat however many there are.
pub async fn stream(
    conn: &mut Conn,
    resource: &Resource,
    within: Within<'_>,
    query: &ListQuery,
) -> ApiResult<tokio_postgres::RowStream> {
    let selection = Selection::new(resource, within, query)?;
    let sql = selection.sql(resource, query);
    let client = conn.client();
    let stmt = client.prepare_cached(&sql).await?;
    Ok(client.query_raw(&stmt, selection.params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync))).await?)
}

/// `SELECT <outer> FROM (<one live row of resource, id $1, within conditions>) r`, locked
/// for a write when `lock`.
fn one_record_sql(resource: &Resource, conditions: &[String], outer: &str, lock: bool) -> String {
    format!(
        "SELECT {outer} FROM (SELECT {} FROM {} t WHERE t.id = $1{}{}{}{}) r",
        select_columns(resource),
        resource.stored_in(),
        resource.and_own_rows("t"),
        if resource.soft_delete { " AND t.deleted_at IS NULL" } else { "" },
        conditions.iter().map(|c| format!(" AND {c}")).collect::<String>(),
        if lock { " FOR UPDATE OF t" } else { "" },
    )
}

/// One live record as JSON, optionally locked for a write.
pub(super) async fn select_one(
    client: &impl Queries,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    lock: bool,
) -> Result<Option<Value>, tokio_postgres::Error> {
    let (conditions, params) = within.conditions(1);
    let sql = one_record_sql(resource, &conditions, "to_jsonb(r)", lock);
    let stmt = client.prepare_cached(&sql).await?;
    let mut refs: Vec<&(dyn ToSql + Sync)> = vec![&id];
    refs.extend(as_refs(&params));
    let rows = client.query_opt(&stmt, &refs).await?;
    Ok(rows.map(|r| r.get(0)))
}

/// Re-reads a record after a write, for the answer.
pub async fn reload(client: &impl Queries, resource: &Resource, id: i64) -> ApiResult<Value> {
    select_one(client, resource, Within::default(), id, false).await?.ok_or(ApiError::NotFound)
}

/// One record as the JSON text PostgreSQL makes of it, with its version (a GET writes the
/// text into its answer without parsing it).
pub async fn fetch(
    client: &impl Queries,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
) -> ApiResult<(String, Option<i32>)> {
    let (conditions, params) = within.conditions(1);
    let version = if resource.trailing.contains(&"version") { "r.version" } else { "NULL::int" };
    let sql = one_record_sql(resource, &conditions, &format!("row_to_json(r)::text, {version}"), false);
    async {
        let stmt = client.prepare_cached(&sql).await?;
        let mut refs: Vec<&(dyn ToSql + Sync)> = vec![&id];
        refs.extend(as_refs(&params));
        let row = client.read(&stmt, &refs).await?.into_iter().next().ok_or(ApiError::NotFound)?;
        Ok((row.get(0), row.get(1)))
    }
    .instrument(db_span(resource.table, "SELECT"))
    .await
}

//! The SQL behind every declared resource.
//!
//! Column and table names come only from the declarations (trusted, compiled in); every
//! value is a bind parameter. Answers are built by PostgreSQL (`to_jsonb`) so that one code
//! path serves every resource. Writes take the row lock, check `If-Match`, write, and append
//! the audit record in one transaction.

use serde_json::{Map, Value};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error as PgError, Row, Statement};
use tracing::Instrument;

use super::Resource;
use super::field::{self, Kind, Target};
use crate::db::{BranchConn, RegistryPool};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::list::ListQuery;

/// A connection to wherever a resource's rows live.
pub enum Conn {
    Branch(BranchConn),
    Registry(deadpool_postgres::Object),
}

impl Conn {
    fn client(&mut self) -> &mut deadpool_postgres::ClientWrapper {
        match self {
            Self::Branch(c) => c,
            Self::Registry(c) => c,
        }
    }
}

type Param = Box<dyn ToSql + Sync + Send>;

/// A pooled connection or a transaction on one: both cache prepared statements.
pub trait Sql: Sync {
    fn prepare_cached(&self, sql: &str) -> impl Future<Output = Result<Statement, PgError>> + Send;
    fn fetch_opt(
        &self,
        stmt: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Option<Row>, PgError>> + Send;
    fn fetch_one(
        &self,
        stmt: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Row, PgError>> + Send;
    fn run_stmt(
        &self,
        stmt: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<u64, PgError>> + Send;
}

macro_rules! impl_sql {
    ($ty:ty) => {
        impl Sql for $ty {
            fn prepare_cached(&self, sql: &str) -> impl Future<Output = Result<Statement, PgError>> + Send {
                <$ty>::prepare_cached(self, sql)
            }
            fn fetch_opt(
                &self,
                stmt: &Statement,
                params: &[&(dyn ToSql + Sync)],
            ) -> impl Future<Output = Result<Option<Row>, PgError>> + Send {
                (**self).query_opt(stmt, params)
            }
            fn fetch_one(
                &self,
                stmt: &Statement,
                params: &[&(dyn ToSql + Sync)],
            ) -> impl Future<Output = Result<Row, PgError>> + Send {
                (**self).query_one(stmt, params)
            }
            fn run_stmt(
                &self,
                stmt: &Statement,
                params: &[&(dyn ToSql + Sync)],
            ) -> impl Future<Output = Result<u64, PgError>> + Send {
                (**self).execute(stmt, params)
            }
        }
    };
}
impl_sql!(deadpool_postgres::ClientWrapper);
impl_sql!(deadpool_postgres::Transaction<'_>);

fn as_refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()
}

fn db_span(resource: &Resource, operation: &'static str) -> tracing::Span {
    tracing::info_span!(
        "db",
        otel.name = format!("{operation} {}", resource.table),
        otel.kind = "client",
        db.system.name = "postgresql",
        db.operation.name = operation,
        db.collection.name = resource.table,
    )
}

/// `SELECT <columns> FROM <table> t`, the inner query of every read.
fn select_columns(resource: &Resource) -> String {
    let mut columns: Vec<String> = resource.output_columns().map(|c| format!("t.{c}")).collect();
    columns.extend(resource.computed.iter().map(|(name, expr, _)| format!("{expr} AS {name}")));
    columns.join(", ")
}

/// Checks a body against the declaration. On create, required fields must be present; on
/// update only the fields sent are checked. Unknown keys are ignored (clients often echo
/// whole records back, `id` and timestamps included).
pub fn validate(
    resource: &Resource,
    body: &Map<String, Value>,
    creating: bool,
) -> Result<Map<String, Value>, FieldErrors> {
    let (clean, errors) = validate_fields(resource, body, creating);
    if errors.is_empty() { Ok(clean) } else { Err(errors) }
}

/// Like [`validate`], but returns the fields that passed along with the errors, so that
/// the references among them can be checked and reported together.
pub fn validate_fields(
    resource: &Resource,
    body: &Map<String, Value>,
    creating: bool,
) -> (Map<String, Value>, FieldErrors) {
    let mut errors = FieldErrors::new();
    let mut clean = Map::new();
    for f in resource.fields.iter().chain(resource.write_only) {
        match body.get(f.name) {
            None if creating && f.required && !resource.derived.iter().any(|d| d.field == f.name) => {
                errors
                    .entry(f.name.into())
                    .or_default()
                    .push(format!("The {} field is required.", f.name.replace('_', " ")));
            }
            None => {}
            Some(Value::Null) if f.required => {
                errors
                    .entry(f.name.into())
                    .or_default()
                    .push(format!("The {} field is required.", f.name.replace('_', " ")));
            }
            // On create a blank defaulted field is left to the database default.
            Some(value) if f.defaulted && is_blank(value) && creating => {}
            Some(value) if f.defaulted && is_blank(value) => {
                errors
                    .entry(f.name.into())
                    .or_default()
                    .push(format!("The {} field may not be empty.", f.name.replace('_', " ")));
            }
            Some(Value::Null) => {
                clean.insert(f.name.into(), Value::Null);
            }
            Some(Value::String(s)) if s.trim().is_empty() && !f.required => {
                // An emptied form field clears the value.
                clean.insert(f.name.into(), Value::Null);
            }
            Some(value) => match field::check(f, value) {
                Ok(v) => {
                    clean.insert(f.name.into(), v);
                }
                Err(message) => errors.entry(f.name.into()).or_default().push(message),
            },
        }
    }
    (clean, errors)
}

/// Refuses to change a guarded field while dependent rows exist.
async fn check_guards(
    tx: &deadpool_postgres::Transaction<'_>,
    resource: &Resource,
    id: i64,
    input: &Map<String, Value>,
    before: &Value,
) -> ApiResult<()> {
    for guard in resource.guards {
        let changes = input.get(guard.field).is_some_and(|new| Some(new) != before.get(guard.field));
        if !changes {
            continue;
        }
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE {} = $1 AND deleted_at IS NULL)",
            guard.table, guard.column
        );
        let stmt = tx.prepare_cached(&sql).await?;
        if tx.fetch_one(&stmt, &[&id]).await?.get::<_, bool>(0) {
            return Err(ApiError::field(
                guard.field,
                format!(
                    "The {} cannot change: this {} already has {} that name it.",
                    guard.field.replace('_', " "),
                    resource.label.to_lowercase(),
                    guard.table.replace('_', " ")
                ),
            ));
        }
    }
    Ok(())
}

/// Null, or a string of only white space.
fn is_blank(value: &Value) -> bool {
    value.is_null() || value.as_str().is_some_and(|s| s.trim().is_empty())
}

/// The reference errors among fields that passed their own checks (an id of a record that
/// does not exist), for a 422 that names every bad field at once.
pub async fn reference_errors(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    mut valid: Map<String, Value>,
    already: &FieldErrors,
) -> ApiResult<FieldErrors> {
    valid.retain(|k, _| !already.contains_key(k));
    let client = conn.client();
    match check_references(&*client, writer, resource, &mut valid, None).await {
        Ok(()) => Ok(FieldErrors::new()),
        Err(ApiError::Validation(errors)) => {
            Ok(errors.into_iter().filter(|(field, _)| !already.contains_key(field)).collect())
        }
        Err(other) => Err(other),
    }
}

/// The parent a nested resource's rows must belong to: `(column, id)`.
pub type Within = Option<(&'static str, i64)>;

/// Whether the parent named in the path exists (nested resources answer 404 otherwise).
pub async fn parent_exists(conn: &mut Conn, resource: &Resource, id: i64) -> ApiResult<bool> {
    let Some(parent) = resource.parent else { return Ok(true) };
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM {} WHERE id = $1{})",
        parent.table,
        if parent.soft_deleted { " AND deleted_at IS NULL" } else { "" }
    );
    let client = conn.client();
    let stmt = Sql::prepare_cached(&*client, &sql).await?;
    Ok(client.fetch_one(&stmt, &[&id]).await?.get(0))
}

/// A unique violation the resource declared is the client's mistake (422), not a 500.
fn unique_violation(resource: &Resource, e: tokio_postgres::Error) -> ApiError {
    if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
        && let Some(db) = e.as_db_error()
        && let Some(rule) = resource.unique.iter().find(|u| Some(u.index) == db.constraint())
    {
        return ApiError::field(rule.field, rule.message);
    }
    e.into()
}

/// The rows a list query selects: its WHERE clause and the values bound to it. Lists and
/// exports share it, so they always agree on what matches.
pub struct Selection {
    filter: String,
    params: Vec<Param>,
}

/// A LIKE pattern matching `term` literally anywhere.
fn contains_pattern(term: &str) -> String {
    format!("%{}%", term.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"))
}

impl Selection {
    pub fn new(resource: &Resource, within: Within, query: &ListQuery) -> ApiResult<Self> {
        let mut params: Vec<Param> = Vec::new();
        let mut conditions = Vec::new();
        if resource.soft_delete {
            conditions.push("t.deleted_at IS NULL".to_owned());
        }
        if let Some((column, id)) = within {
            params.push(Box::new(id));
            conditions.push(format!("t.{column} = $1"));
        }
        let mut errors = FieldErrors::new();
        for (name, raw) in &query.filters {
            let kind = resource.filter_field(name).map_or(Kind::Text { max: 200 }, |f| f.kind);
            let value: Param = match kind {
                Kind::IdList | Kind::NameList | Kind::Password => continue,
                Kind::Integer { .. } | Kind::Ref(_) => match raw.parse::<i64>() {
                    Ok(v) => Box::new(v),
                    Err(_) => {
                        errors
                            .entry(format!("filters[{name}]"))
                            .or_default()
                            .push("The filter must be an integer.".into());
                        continue;
                    }
                },
                Kind::Date { .. } => match field::parse_date(raw) {
                    Some(d) => Box::new(d),
                    None => {
                        errors
                            .entry(format!("filters[{name}]"))
                            .or_default()
                            .push("The filter must be a date (YYYY-MM-DD).".into());
                        continue;
                    }
                },
                Kind::Bool => match raw.as_str() {
                    "true" | "1" => Box::new(true),
                    "false" | "0" => Box::new(false),
                    _ => {
                        errors
                            .entry(format!("filters[{name}]"))
                            .or_default()
                            .push("The filter must be true or false.".into());
                        continue;
                    }
                },
                Kind::Enum(values) => {
                    let v = raw.to_ascii_lowercase();
                    if !values.contains(&v.as_str()) {
                        errors
                            .entry(format!("filters[{name}]"))
                            .or_default()
                            .push(format!("The selected {name} is invalid. Allowed: {}.", values.join(", ")));
                        continue;
                    }
                    Box::new(v)
                }
                _ => Box::new(raw.clone()),
            };
            params.push(value);
            conditions.push(format!("t.{name} = ${}::{}", params.len(), kind.sql_type()));
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        if let Some(column) = resource.date_range {
            if let Some(start) = query.start_date {
                params.push(Box::new(start));
                conditions.push(format!("t.{column} >= ${}::date", params.len()));
            }
            if let Some(end) = query.end_date {
                params.push(Box::new(end));
                conditions.push(format!("t.{column} < ${}::date + 1", params.len()));
            }
        }
        if let Some(term) = &query.search {
            match resource.search_words {
                // Every word must occur, in any order, accents and case ignored.
                Some(column) => {
                    for word in term.split_whitespace().take(8) {
                        params.push(Box::new(contains_pattern(word)));
                        conditions.push(format!("t.{column} LIKE search_normalize(${})", params.len()));
                    }
                }
                None if !resource.search.is_empty() => {
                    params.push(Box::new(contains_pattern(term)));
                    let n = params.len();
                    let any: Vec<String> =
                        resource.search.iter().map(|c| format!("t.{c} ILIKE ${n}")).collect();
                    conditions.push(format!("({})", any.join(" OR ")));
                }
                None => {}
            }
        }
        let filter = if conditions.is_empty() { "true".to_owned() } else { conditions.join(" AND ") };
        Ok(Self { filter, params })
    }

    /// One statement answering `(total, page as a JSON array)`; see [`list`].
    fn matches_sql(&self, resource: &Resource, query: &ListQuery) -> String {
        let dir = query.sort_direction.sql();
        let table = resource.table;
        let sort = &query.sort_field;
        format!(
            "WITH matches AS MATERIALIZED (SELECT t.id, t.{sort} AS sort_key FROM {table} t WHERE {filter}),
                  page AS (SELECT id, sort_key FROM matches ORDER BY sort_key {dir}, id {dir} LIMIT {limit} OFFSET {offset})
             SELECT (SELECT count(*) FROM matches),
                    (SELECT jsonb_agg(to_jsonb(r) - 'page_key' ORDER BY r.page_key {dir}, r.id {dir})
                       FROM (SELECT {columns}, page.sort_key AS page_key FROM page JOIN {table} t ON t.id = page.id) r)",
            filter = self.filter,
            limit = query.per_page,
            offset = query.offset(),
            columns = select_columns(resource),
        )
    }

    fn sql(&self, resource: &Resource, query: &ListQuery, page: Option<(i64, i64)>) -> String {
        let dir = query.sort_direction.sql();
        let limit = page.map(|(limit, offset)| format!(" LIMIT {limit} OFFSET {offset}")).unwrap_or_default();
        format!(
            "SELECT to_jsonb(r) FROM (SELECT {} FROM {} t WHERE {} ORDER BY {} {dir}, id {dir}{limit}) r",
            select_columns(resource),
            resource.table,
            self.filter,
            query.sort_field,
        )
    }
}

/// Rows of one page and the total, for the list envelope.
///
/// Without a search term, the page walks the sort index and the total is a separate count
/// (an index-only scan). With one, the planner would walk the sort index and filter every row
/// (tens of milliseconds on 100k rows), so the matches are found once through the trigram
/// index, materialised as (id, sort key), counted, and only the page's rows are read.
pub async fn list(
    conn: &mut Conn,
    resource: &Resource,
    within: Within,
    query: &ListQuery,
) -> ApiResult<(i64, Vec<Value>)> {
    let selection = Selection::new(resource, within, query)?;
    let searching =
        query.search.is_some() && (resource.search_words.is_some() || !resource.search.is_empty());
    let client = conn.client();
    async {
        let refs = as_refs(&selection.params);
        if searching {
            let stmt = client.prepare_cached(&selection.matches_sql(resource, query)).await?;
            let row = client.fetch_one(&stmt, &refs).await?;
            let rows = match row.get::<_, Option<Value>>(1) {
                Some(Value::Array(rows)) => rows,
                _ => Vec::new(),
            };
            return Ok((row.get(0), rows));
        }
        let unfiltered = query.filters.is_empty()
            && query.search.is_none()
            && within.is_none()
            && query.start_date.is_none()
            && query.end_date.is_none();
        let count_sql = if resource.counted && unfiltered {
            format!("SELECT live FROM row_counts WHERE table_name = '{}'", resource.table)
        } else {
            format!("SELECT count(*) FROM {} t WHERE {}", resource.table, selection.filter)
        };
        let count_stmt = client.prepare_cached(&count_sql).await?;
        let count_params: &[&(dyn ToSql + Sync)] = if count_sql.contains('$') { &refs } else { &[] };
        let total: i64 = client.fetch_one(&count_stmt, count_params).await?.get(0);
        let rows = if query.offset() < total {
            let page_sql = selection.sql(resource, query, Some((query.per_page, query.offset())));
            let page_stmt = client.prepare_cached(&page_sql).await?;
            client.query(&page_stmt, &refs).await?.into_iter().map(|r| r.get::<_, Value>(0)).collect()
        } else {
            Vec::new()
        };
        Ok((total, rows))
    }
    .instrument(db_span(resource, "SELECT"))
    .await
}

/// A handful of records for a type-ahead: every word of `term` in the search text, or the
/// digits of a phone number (anywhere, so that numbers typed without the country code match);
/// an exact PIN first, then by name. Needs `search_words`.
pub async fn lookup(conn: &mut Conn, resource: &Resource, term: &str, limit: i64) -> ApiResult<Vec<Value>> {
    let column = resource.search_words.ok_or(ApiError::NotFound)?;
    let mut params: Vec<Param> = Vec::new();
    let mut words = Vec::new();
    for word in term.split_whitespace().take(8) {
        params.push(Box::new(contains_pattern(word)));
        words.push(format!("t.{column} LIKE search_normalize(${})", params.len()));
    }
    let mut matches = format!("({})", words.join(" AND "));
    let digits: String = term.chars().filter(char::is_ascii_digit).collect();
    let phone_like = term.chars().all(|c| c.is_ascii_digit() || " +-().".contains(c));
    if phone_like && digits.len() >= 3 {
        params.push(Box::new(format!("%{digits}%")));
        matches = format!("({matches} OR t.phone_digits LIKE ${})", params.len());
    }
    params.push(Box::new(term.trim().to_uppercase()));
    let exact = params.len();
    params.push(Box::new(limit));
    let sql = format!(
        "SELECT to_jsonb(r) FROM (SELECT {} FROM {} t WHERE t.deleted_at IS NULL AND {matches}
          ORDER BY (t.pin = ${exact}) DESC, t.last_name, t.first_name, t.id LIMIT ${}) r",
        select_columns(resource),
        resource.table,
        params.len(),
    );
    let client = conn.client();
    async {
        let stmt = client.prepare_cached(&sql).await?;
        let rows = client.query(&stmt, &as_refs(&params)).await?;
        Ok(rows.into_iter().map(|r| r.get(0)).collect())
    }
    .instrument(db_span(resource, "SELECT"))
    .await
}

/// Records that someone exported records of `resource`, and with which parameters.
pub async fn audit_export(
    conn: &mut Conn,
    resource: &Resource,
    user_id: i64,
    details: Value,
) -> ApiResult<()> {
    let client = conn.client();
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_log (user_id, action, resource, after) VALUES ($1, 'export', $2, $3)",
        )
        .await?;
    client.run_stmt(&stmt, &[&user_id, &resource.path, &details]).await?;
    Ok(())
}

/// Every matching row, in list order, as a stream (exports): rows are read as they are sent,
/// so memory stays flat however many there are.
pub async fn stream(
    conn: &mut Conn,
    resource: &Resource,
    within: Within,
    query: &ListQuery,
) -> ApiResult<tokio_postgres::RowStream> {
    let selection = Selection::new(resource, within, query)?;
    let sql = selection.sql(resource, query, None);
    let client = conn.client();
    let stmt = client.prepare_cached(&sql).await?;
    Ok(client.query_raw(&stmt, selection.params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync))).await?)
}

async fn select_one(
    client: &impl Sql,
    resource: &Resource,
    within: Within,
    id: i64,
    lock: bool,
) -> Result<Option<Value>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT to_jsonb(r) FROM (SELECT {} FROM {} t WHERE t.id = $1{}{}{}) r",
        select_columns(resource),
        resource.table,
        if resource.soft_delete { " AND t.deleted_at IS NULL" } else { "" },
        within.map(|(column, _)| format!(" AND t.{column} = $2")).unwrap_or_default(),
        if lock { " FOR UPDATE OF t" } else { "" },
    );
    let stmt = client.prepare_cached(&sql).await?;
    let rows = match within {
        Some((_, parent)) => client.fetch_opt(&stmt, &[&id, &parent]).await?,
        None => client.fetch_opt(&stmt, &[&id]).await?,
    };
    Ok(rows.map(|r| r.get(0)))
}

/// Re-reads a record after a write, for the answer.
pub async fn reload(client: &impl Sql, resource: &Resource, id: i64) -> ApiResult<Value> {
    select_one(client, resource, None, id, false).await?.ok_or(ApiError::NotFound)
}

async fn audit(
    client: &impl Sql,
    user_id: i64,
    action: &str,
    resource: &Resource,
    id: i64,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Result<(), tokio_postgres::Error> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_log (user_id, action, resource, record_id, before, after) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .await?;
    client.run_stmt(&stmt, &[&user_id, &action, &resource.path, &id, &before, &after]).await?;
    Ok(())
}

/// One record; opening a record of a resource that audits reads is recorded.
pub async fn fetch(
    conn: &mut Conn,
    resource: &Resource,
    within: Within,
    id: i64,
    reader: i64,
) -> ApiResult<Value> {
    let client = conn.client();
    async {
        let row = select_one(&*client, resource, within, id, false).await?.ok_or(ApiError::NotFound)?;
        if resource.audit_reads {
            audit(&*client, reader, "view", resource, id, None, None).await?;
        }
        Ok(row)
    }
    .instrument(db_span(resource, "SELECT"))
    .await
}

/// The version a client last saw, from `If-Match`.
#[derive(Debug, Clone)]
pub enum IfMatch {
    Any,
    Versions(Vec<i64>),
}

impl IfMatch {
    /// Parses `If-Match: "3"`, `W/"3"`, `"3", "4"` or `*`. Unparseable tags match nothing.
    pub fn parse(header: &str) -> Self {
        if header.trim() == "*" {
            return Self::Any;
        }
        let versions = header
            .split(',')
            .filter_map(|tag| {
                let tag = tag.trim();
                let tag = tag.strip_prefix("W/").unwrap_or(tag);
                tag.trim_matches('"').parse().ok()
            })
            .collect();
        Self::Versions(versions)
    }

    fn allows(&self, version: i64) -> bool {
        match self {
            Self::Any => true,
            Self::Versions(v) => v.contains(&version),
        }
    }
}

pub fn etag(record: &Value) -> Option<String> {
    record.get("version").and_then(Value::as_i64).map(|v| format!("\"{v}\""))
}

/// Who is writing, and where references to registry rows are checked.
pub struct Writer<'a> {
    pub user_id: i64,
    pub registry: &'a RegistryPool,
}

/// Fills and checks derived fields and references; `current` is the row being updated.
async fn check_references(
    client: &impl Sql,
    writer: &Writer<'_>,
    resource: &Resource,
    input: &mut Map<String, Value>,
    current: Option<&Value>,
) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    let mut checked: Vec<&str> = Vec::new();
    for rule in resource.derived {
        let effective = |name: &str| {
            input.get(name).or_else(|| current.and_then(|c| c.get(name))).and_then(Value::as_i64)
        };
        if !input.contains_key(rule.from) && !input.contains_key(rule.field) {
            continue;
        }
        let Some(from_id) = effective(rule.from) else {
            continue;
        };
        // The derived rule settles both fields; the plain reference check skips them.
        checked.extend([rule.from, rule.field]);
        let sql = format!("SELECT {} FROM {} WHERE id = $1 AND deleted_at IS NULL", rule.column, rule.table);
        let stmt = client.prepare_cached(&sql).await?;
        let owner: Option<i64> = client.fetch_opt(&stmt, &[&from_id]).await?.map(|r| r.get(0));
        let Some(owner) = owner else {
            errors
                .entry(rule.from.into())
                .or_default()
                .push(format!("The selected {} is invalid.", rule.from.replace('_', " ")));
            continue;
        };
        match effective(rule.field) {
            Some(given) if given != owner => {
                errors.entry(rule.field.into()).or_default().push(format!(
                    "The {} does not match the {}.",
                    rule.field.replace('_', " "),
                    rule.from.replace('_', " ")
                ));
            }
            _ => {
                input.insert(rule.field.into(), Value::from(owner));
            }
        }
    }
    for f in resource.fields {
        let Kind::Ref(target) = f.kind else { continue };
        let Some(id) = input.get(f.name).and_then(Value::as_i64) else {
            continue;
        };
        if checked.contains(&f.name) {
            continue;
        }
        let exists = match target {
            Target::Branch(table) => {
                let sql =
                    format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE id = $1 AND deleted_at IS NULL)");
                let stmt = client.prepare_cached(&sql).await?;
                client.fetch_one(&stmt, &[&id]).await?.get::<_, bool>(0)
            }
            Target::Registry(table) => registry_row_exists(writer.registry, table, id).await?,
        };
        if !exists {
            errors
                .entry(f.name.into())
                .or_default()
                .push(format!("The selected {} is invalid.", f.name.replace('_', " ")));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

/// Whether a registry row exists. Master-data tables that do not exist yet accept no ids.
pub async fn registry_row_exists(registry: &RegistryPool, table: &str, id: i64) -> ApiResult<bool> {
    let client = registry.get().await?;
    let present: bool =
        client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&format!("public.{table}")]).await?.get(0);
    if !present {
        return Ok(false);
    }
    let sql = format!("SELECT EXISTS (SELECT 1 FROM public.{table} WHERE id = $1)");
    Ok(client.query_one(&sql, &[&id]).await?.get(0))
}

pub async fn create(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    input: Map<String, Value>,
) -> ApiResult<Value> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        let after = insert(&tx, writer, resource, within, input).await?;
        tx.commit().await?;
        Ok(after)
    }
    .instrument(db_span(resource, "INSERT"))
    .await
}

/// Inserts and audits inside the caller's transaction (for handlers that write more rows
/// alongside, such as a user's roles).
pub async fn insert(
    tx: &deadpool_postgres::Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    mut input: Map<String, Value>,
) -> ApiResult<Value> {
    {
        check_references(tx, writer, resource, &mut input, None).await?;
        let mut columns: Vec<&str> =
            resource.fields.iter().map(|f| f.name).filter(|n| input.contains_key(*n)).collect();
        if let Some((column, id)) = within {
            input.insert(column.into(), Value::from(id));
            columns.push(column);
        }
        let list = columns.iter().map(|c| format!("r.{c}")).collect::<Vec<_>>().join(", ");
        let sql = format!(
            "INSERT INTO {table} ({cols}{sep}created_by, updated_by)
             SELECT {list}{sep}$2, $2 FROM jsonb_populate_record(NULL::{table}, $1) r RETURNING id",
            table = resource.table,
            cols = columns.join(", "),
            sep = if columns.is_empty() { "" } else { ", " },
        );
        let stmt = tx.prepare_cached(&sql).await?;
        let id: i64 = tx
            .fetch_one(&stmt, &[&Value::Object(input), &writer.user_id])
            .await
            .map_err(|e| unique_violation(resource, e))?
            .get(0);
        let after = reload(tx, resource, id).await?;
        audit(tx, writer.user_id, "create", resource, id, None, Some(&after)).await?;
        Ok(after)
    }
}

pub async fn update(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    id: i64,
    input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Value> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        let after = change(&tx, writer, resource, within, id, input, if_match).await?;
        tx.commit().await?;
        Ok(after)
    }
    .instrument(db_span(resource, "UPDATE"))
    .await
}

/// Updates and audits inside the caller's transaction.
pub async fn change(
    tx: &deadpool_postgres::Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    id: i64,
    mut input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Value> {
    {
        let before = lock_for_change(tx, resource, within, id, if_match).await?;
        check_guards(tx, resource, id, &input, &before).await?;
        check_references(tx, writer, resource, &mut input, Some(&before)).await?;
        let columns: Vec<&str> =
            resource.fields.iter().map(|f| f.name).filter(|n| input.contains_key(*n)).collect();
        let sets: String = columns.iter().map(|c| format!("{c} = r.{c}, ")).collect();
        let sql = format!(
            "UPDATE {table} t SET {sets}version = t.version + 1, updated_at = now(), updated_by = $3
               FROM jsonb_populate_record(NULL::{table}, $1) r WHERE t.id = $2",
            table = resource.table,
        );
        let stmt = tx.prepare_cached(&sql).await?;
        tx.run_stmt(&stmt, &[&Value::Object(input), &id, &writer.user_id])
            .await
            .map_err(|e| unique_violation(resource, e))?;
        let after = reload(tx, resource, id).await?;
        audit(tx, writer.user_id, "update", resource, id, Some(&before), Some(&after)).await?;
        Ok(after)
    }
}

/// Soft delete: later reads give 404; the row and its history stay.
pub async fn delete(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    id: i64,
    if_match: Option<IfMatch>,
) -> ApiResult<()> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        let before = lock_for_change(&tx, resource, within, id, if_match).await?;
        let sql = format!(
            "UPDATE {} SET deleted_at = now(), updated_at = now(), version = version + 1, updated_by = $2 WHERE id = $1",
            resource.table
        );
        let stmt = tx.prepare_cached(&sql).await?;
        tx.run_stmt(&stmt, &[&id, &writer.user_id]).await?;
        audit(&tx, writer.user_id, "delete", resource, id, Some(&before), None).await?;
        tx.commit().await?;
        Ok(())
    }
    .instrument(db_span(resource, "DELETE"))
    .await
}

/// Appends an audit record for a change a resource's own handler made.
pub async fn audit_change(
    tx: &deadpool_postgres::Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    action: &str,
    id: i64,
    before: Option<&Value>,
    after: Option<&Value>,
) -> ApiResult<()> {
    Ok(audit(tx, writer.user_id, action, resource, id, before, after).await?)
}

/// Locks and returns a record for a resource's own write handler (404 when absent, 412 when
/// `If-Match` no longer matches).
pub async fn lock_for_change(
    tx: &deadpool_postgres::Transaction<'_>,
    resource: &Resource,
    within: Within,
    id: i64,
    if_match: Option<IfMatch>,
) -> ApiResult<Value> {
    let before = select_one(tx, resource, within, id, true).await?.ok_or(ApiError::NotFound)?;
    let version = before.get("version").and_then(Value::as_i64).unwrap_or_default();
    if if_match.is_some_and(|m| !m.allows(version)) {
        return Err(ApiError::PreconditionFailed);
    }
    Ok(before)
}

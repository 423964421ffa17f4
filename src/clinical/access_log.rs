//! Who saw this patient: `GET /patients/{id}/access-log` lists every record of the branch's
//! audit log that read or changed the patient's records, newest first, with who, when and
//! through which route; `.../access-log/export` gives the same entries as CSV or PDF.
//!
//! An entry is a record of the patient itself (opened, created, changed, its access log
//! read), of a row that names the patient (`patient_id` in its before or after image:
//! visits and their records, examinations, billing, queue tickets, printed documents), or a
//! read of many patients that showed this one (a list, a search, the type-ahead, an export:
//! they keep the ids they showed). Each has an index (`tenants/V14`). Reading the log is a
//! disclosure too, recorded as `access_log`.
//!
//! Since every read of the log adds an entry to it, the log pages by a cursor, not by page
//! number: the first page takes a snapshot (the newest entry's id), and each next page
//! continues after the last entry shown, by time and id, within that snapshot. Entries
//! recorded meanwhile never shift a page; reading from the first page again shows them.

use std::collections::BTreeMap;

use salvo::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use salvo::oapi::{BasicType, Object, PathItemType, SchemaType};
use salvo::prelude::*;
use serde_json::{Value, json};

use super::patients::formula_safe;
use super::records::PATIENTS;
use crate::db::sql::{Param, as_refs};
use crate::http::docs::{self, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::error::{ApiError, ApiResult};
use crate::http::guard::{Produces, accept_of, preferred};
use crate::http::list::{self, ListQuery, ListRules, SortDirection};
use crate::http::{self as web};
use crate::pdf::{Block, Sheet, Signing};
use crate::permissions::AUDIT_READ;
use crate::resource::print;
use crate::resource::printable::{Printing, joined, text};
use crate::resource::reads::{record_read, write_queued_reads};
use crate::resource::{Conn, Context, Scope};

/// The most entries one export holds; past it, a narrower date range is asked for.
pub const MAX_EXPORTED: i64 = 10_000;

/// What the log may be narrowed by; sorted by `at` only.
pub const RULES: ListRules<'static> = ListRules {
    sort_fields: &["at"],
    default_sort: "at",
    default_direction: SortDirection::Desc,
    filters: &["action", "user_id"],
    date_range: true,
    window: false,
    aliases: &[],
    extra: &[],
};

/// The media types of an export, CSV first (the default).
pub const EXPORTS: &[&str] = &["text/csv", "application/pdf"];

/// Where a page after the first starts: the snapshot the first page took (the id of the
/// newest entry then: later entries are not shown) and the last entry the page before
/// showed (its time, in microseconds since 1970, and its id). Written as three integers
/// joined by dots, which a client passes back as it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    as_of: i64,
    at_us: i64,
    id: i64,
}

impl Cursor {
    fn parse(text: &str) -> ApiResult<Self> {
        let numbers: Vec<i64> = text.split('.').map_while(|part| part.parse().ok()).collect();
        match numbers[..] {
            [as_of, at_us, id] if as_of > 0 && id > 0 && id <= as_of && text.split('.').count() == 3 => {
                Ok(Self { as_of, at_us, id })
            }
            _ => Err(ApiError::field(
                "cursor",
                "The cursor must be a meta.next_cursor of this log, as it was given.",
            )),
        }
    }

    fn text(&self) -> String {
        format!("{}.{}.{}", self.as_of, self.at_us, self.id)
    }
}

/// The conditions that select the patient's entries, over the audit log `a`, and their
/// values (`$1`..`$3`): the patient's own records, rows naming the patient, reads that
/// showed the patient among others.
fn of_patient(patient: i64) -> (String, Vec<Param>) {
    let sql = "((a.resource = 'patients' AND a.record_id = $1)
               OR (coalesce(a.after, a.before) ->> 'patient_id') = $2
               OR (a.resource = 'patients' AND a.action IN ('list', 'search', 'exported')
                   AND (a.after -> 'ids') @> $3))";
    (sql.to_owned(), vec![Box::new(patient), Box::new(patient.to_string()), Box::new(json!([patient]))])
}

/// The statement of a page of entries (`query.per_page` of them and one more, to know
/// whether there is a next page), after `after` when it is given, of their count and of the
/// snapshot's bound, with its parameters; `zone` makes the date range the branch's local
/// dates.
fn statement(
    patient: i64,
    query: &ListQuery,
    zone: &str,
    after: Option<Cursor>,
) -> ApiResult<(String, Vec<Param>)> {
    let (mut conditions, mut params) = of_patient(patient);
    let bind = |params: &mut Vec<Param>, value: Param| {
        params.push(value);
        format!("${}", params.len())
    };
    for (field, value) in &query.filters {
        match field.as_str() {
            "action" => {
                conditions += &format!(" AND a.action = {}", bind(&mut params, Box::new(value.clone())))
            }
            _ => {
                let user = value.trim().parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
                    ApiError::field(format!("filters[{field}]"), "The user id must be a positive integer.")
                })?;
                conditions += &format!(" AND a.user_id = {}", bind(&mut params, Box::new(user)));
            }
        }
    }
    if let Some(term) = &query.search {
        let like = bind(&mut params, Box::new(format!("%{}%", term.replace(['%', '_'], ""))));
        conditions += &format!(" AND concat_ws(' ', a.action, a.resource, a.route) ILIKE {like}");
    }
    if query.start_date.is_some() || query.end_date.is_some() {
        let local = format!("(a.at AT TIME ZONE {})::date", bind(&mut params, Box::new(zone.to_owned())));
        if let Some(start) = query.start_date {
            conditions += &format!(" AND {local} >= {}", bind(&mut params, Box::new(start)));
        }
        if let Some(end) = query.end_date {
            conditions += &format!(" AND {local} <= {}", bind(&mut params, Box::new(end)));
        }
    }
    let direction = query.sort_direction.sql();
    let mut position = String::from("true");
    if let Some(after) = after {
        conditions += &format!(" AND a.id <= {}", bind(&mut params, Box::new(after.as_of)));
        let at = bind(&mut params, Box::new(after.at_us));
        let id = bind(&mut params, Box::new(after.id));
        let beyond = if direction == "DESC" { "<" } else { ">" };
        position = format!(
            "(at, id) {beyond} (timestamptz 'epoch' + {at}::bigint * interval '1 microsecond', {id})"
        );
    }
    let limit = bind(&mut params, Box::new(query.per_page + 1));
    let sql = format!(
        "WITH shown AS MATERIALIZED (
             SELECT a.id, a.at, a.user_id, a.action, a.resource, a.record_id, a.route
               FROM audit_log a WHERE {conditions})
         SELECT (SELECT count(*) FROM shown),
                (SELECT max(id) FROM shown),
                (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.at {direction}, p.id {direction}), '[]')
                   FROM (SELECT *, (extract(epoch FROM at) * 1000000)::bigint AS at_us FROM shown
                          WHERE {position} ORDER BY at {direction}, id {direction} LIMIT {limit}) p)"
    );
    Ok((sql, params))
}

/// A page of the entries `query` selects, each with its user's name.
struct Entries {
    /// How many there are in all, within the snapshot.
    total: i64,
    page: Vec<Value>,
    /// Where the next page starts, when there is one.
    next: Option<Cursor>,
}

/// The page of entries `query` selects after `after` (from the first without it).
async fn entries(
    ctx: &Context,
    conn: &mut Conn,
    patient: i64,
    query: &ListQuery,
    after: Option<Cursor>,
) -> ApiResult<Entries> {
    let client = conn.client();
    let known = client.prepare_cached("SELECT 1 FROM patients WHERE id = $1").await?;
    if client.query_opt(&known, &[&patient]).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    let (sql, params) = statement(patient, query, &ctx.branch()?.timezone, after)?;
    let stmt = client.prepare_cached(&sql).await?;
    let row = client.query_one(&stmt, &as_refs(&params)).await?;
    let as_of = after.map_or_else(|| row.get::<_, Option<i64>>(1).unwrap_or_default(), |after| after.as_of);
    let mut page: Vec<Value> = serde_json::from_value(row.get(2)).map_err(anyhow::Error::from)?;
    let more = page.len() as i64 > query.per_page;
    page.truncate(usize::try_from(query.per_page).unwrap_or(usize::MAX));
    let next = page
        .last()
        .filter(|_| more)
        .and_then(|last| Some(Cursor { as_of, at_us: last["at_us"].as_i64()?, id: last["id"].as_i64()? }));
    for entry in &mut page {
        if let Some(entry) = entry.as_object_mut() {
            entry.remove("at_us");
        }
    }
    let ids: Vec<i64> = page.iter().filter_map(|e| e["user_id"].as_i64()).collect();
    let names: BTreeMap<i64, String> = if ids.is_empty() {
        BTreeMap::new()
    } else {
        let registry = ctx.registry().await?;
        let stmt = registry.prepare_cached("SELECT id, name FROM users WHERE id = ANY($1)").await?;
        registry.query(&stmt, &[&ids]).await?.iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    for entry in &mut page {
        let name = entry["user_id"].as_i64().and_then(|id| names.get(&id).cloned());
        entry["user_name"] = name.map_or(Value::Null, Value::String);
    }
    Ok(Entries { total: row.get(0), page, next })
}

/// The patient of the path and a connection to read their log, for a caller holding
/// `audit.read`, once the reads this instance answered are written (the log shows them).
async fn opened(ctx: &Context, req: &Request) -> ApiResult<(i64, Conn)> {
    ctx.require(AUDIT_READ)?;
    let patient = web::path_id(req, "id")?;
    write_queued_reads(ctx).await;
    Ok((patient, ctx.conn(Scope::Branch).await?))
}

/// Records that the caller read the patient's access log, and how.
async fn record_reading(
    ctx: &Context,
    patient: i64,
    format: &str,
    pairs: &[(String, String)],
) -> ApiResult<()> {
    let details = json!({ "format": format, "query": pairs });
    record_read(ctx, PATIENTS.path, "access_log", Some(patient), Some(details)).await
}

/// The answer holding `entries`: `links.next` and `meta.next_cursor` lead to the page after
/// it (null on the last), `links.first` to the first page, a new snapshot.
fn envelope(
    base_url: &str,
    path: &str,
    pairs: &[(String, String)],
    per_page: i64,
    entries: Entries,
) -> Value {
    let link = |cursor: Option<&str>| {
        let mut serializer = form_urlencoded::Serializer::new(String::new());
        for (k, v) in pairs.iter().filter(|(k, _)| k != "cursor") {
            serializer.append_pair(k, v);
        }
        if let Some(cursor) = cursor {
            serializer.append_pair("cursor", cursor);
        }
        let query = serializer.finish();
        if query.is_empty() { format!("{base_url}{path}") } else { format!("{base_url}{path}?{query}") }
    };
    let next = entries.next.map(|cursor| cursor.text());
    json!({
        "data": entries.page,
        "links": { "first": link(None), "next": next.as_deref().map(|cursor| link(Some(cursor))) },
        "meta": { "per_page": per_page, "total": entries.total, "next_cursor": next },
    })
}

/// `GET /patients/{id}/access-log`: one page, newest first, from the first or after `cursor`.
#[handler]
pub async fn read(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let pairs = list::query_pairs(req);
    if pairs.iter().any(|(k, _)| k == "page") {
        let message =
            "The access log pages by cursor: follow links.next, or send meta.next_cursor as cursor.";
        return Err(ApiError::field("page", message));
    }
    let query = list::parse(&pairs, &ListRules { extra: &["cursor"], ..RULES })?;
    let after = pairs.iter().rev().find(|(k, _)| k == "cursor").map(|(_, v)| Cursor::parse(v)).transpose()?;
    let ctx = Context::of(depot)?;
    let (patient, mut conn) = opened(&ctx, req).await?;
    let entries = entries(&ctx, &mut conn, patient, &query, after).await?;
    drop(conn);
    record_reading(&ctx, patient, "json", &pairs).await?;
    let base = web::base_url(req, ctx.state.trusts_forwarded_headers(req));
    res.render(Json(envelope(&base, req.uri().path(), &pairs, query.per_page, entries)));
    Ok(())
}

/// Whether the export is asked for as PDF (`format=pdf`, or `Accept` preferring it).
fn wants_pdf(req: &Request, pairs: &[(String, String)]) -> ApiResult<bool> {
    match pairs.iter().rev().find(|(k, _)| k == "format").map(|(_, v)| v.as_str()) {
        Some("csv") => Ok(false),
        Some("pdf") => Ok(true),
        Some(_) => Err(ApiError::field("format", "The format must be csv or pdf.")),
        None => Ok(preferred(&accept_of(req), EXPORTS) == Some("application/pdf")),
    }
}

/// The columns of an export, in order.
const COLUMNS: [&str; 8] = ["at", "user_id", "user_name", "action", "resource", "record_id", "route", "id"];

fn cell(entry: &Value, column: &str) -> String {
    text(entry, column)
}

/// The entries as CSV, every cell safe to open in a spreadsheet.
fn csv(entries: &[Value]) -> ApiResult<Vec<u8>> {
    let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
    writer.write_record(COLUMNS).map_err(anyhow::Error::from)?;
    for entry in entries {
        let cells = COLUMNS.iter().map(|c| formula_safe(&cell(entry, c)).into_owned());
        writer.write_record(cells).map_err(anyhow::Error::from)?;
    }
    Ok(writer.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?)
}

/// The entries as a report under the branch's letterhead.
async fn report(
    printing: &mut Printing<'_>,
    patient: i64,
    entries: &[Value],
    query: &ListQuery,
) -> ApiResult<Sheet> {
    let mut rows = Vec::with_capacity(entries.len());
    for entry in entries {
        let user = match (text(entry, "user_name"), text(entry, "user_id")) {
            (name, id) if name.is_empty() => id,
            (name, _) => name,
        };
        let record = joined([cell(entry, "resource").as_str(), cell(entry, "record_id").as_str()]);
        let at = printing.local_time(&cell(entry, "at")).await?;
        rows.push(vec![at, user, cell(entry, "action"), record, cell(entry, "route")]);
    }
    let range = match (query.start_date, query.end_date) {
        (None, None) => "All records".to_owned(),
        (start, end) => format!(
            "{} to {}",
            start.map_or("the first record".into(), |d| d.to_string()),
            end.map_or("today".into(), |d| d.to_string())
        ),
    };
    let columns = [("When", 1.35), ("Who", 1.2), ("Action", 0.8), ("Record", 1.5), ("Route", 2.2)];
    Ok(Sheet {
        title: "Access log".into(),
        reference: None,
        blocks: vec![
            Block::Fields(printing.patient_fields(patient).await?),
            Block::Fields(vec![("Period".into(), range), ("Entries".into(), entries.len().to_string())]),
            Block::Table {
                columns: columns.iter().map(|(name, share)| ((*name).to_owned(), *share)).collect(),
                rows,
            },
        ],
        signing: Signing::NotSigned,
        sign_here: None,
        footer: String::new(),
    })
}

/// `GET /patients/{id}/access-log/export?format=csv|pdf`: every entry the parameters select
/// (at most [`MAX_EXPORTED`]), newest first.
#[handler]
pub async fn export(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let pairs = list::query_pairs(req);
    let pdf = wants_pdf(req, &pairs)?;
    let rules = ListRules { extra: &["format"], ..RULES };
    let paged: Vec<(String, String)> =
        pairs.iter().filter(|(k, _)| k != "page" && k != "perPage").cloned().collect();
    let mut query = list::parse(&paged, &rules)?;
    (query.page, query.per_page) = (1, MAX_EXPORTED + 1);
    let ctx = Context::of(depot)?;
    let (patient, mut conn) = opened(&ctx, req).await?;
    let Entries { total, page: entries, .. } = entries(&ctx, &mut conn, patient, &query, None).await?;
    if total > MAX_EXPORTED {
        let message =
            format!("More than {MAX_EXPORTED} entries: export a shorter period (start_date, end_date).");
        return Err(ApiError::field("start_date", message));
    }
    let code = ctx.branch()?.code.clone();
    let name = format!("access-log-{code}-patient-{patient}");
    if pdf {
        let mut printing = Printing { ctx: &ctx, conn, resource: &PATIENTS };
        let mut sheet = report(&mut printing, patient, &entries, &query).await?;
        sheet.footer = print::footer(&mut printing).await?;
        drop(printing);
        let document = print::render(&ctx, sheet).await?;
        record_reading(&ctx, patient, "pdf", &pairs).await?;
        print::send(res, &name, document);
        return Ok(());
    }
    drop(conn);
    let body = csv(&entries)?;
    record_reading(&ctx, patient, "csv", &pairs).await?;
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8"));
    if let Ok(disposition) = HeaderValue::from_str(&format!("attachment; filename=\"{name}.csv\"")) {
        res.headers_mut().insert(CONTENT_DISPOSITION, disposition);
    }
    res.body(body);
    Ok(())
}

fn nullable(basic: BasicType) -> Object {
    Object::with_type([basic, BasicType::Null].into_iter().collect::<SchemaType>())
}

/// The log's two routes and their operations: a page, and the export.
pub fn add_endpoints(branch: &mut Endpoints) {
    let entry = Object::new()
        .property("id", docs::integer().description("The audit record"))
        .property("at", docs::timestamp())
        .property("user_id", nullable(BasicType::Integer).description("Null for work no user did"))
        .property("user_name", nullable(BasicType::String))
        .property(
            "action",
            docs::string()
                .description("view, list, search, exported, print, access_log, create, update, sign, ..."),
        )
        .property("resource", docs::string())
        .property(
            "record_id",
            nullable(BasicType::Integer).description("Null for a read of many records (list, search)"),
        )
        .property(
            "route",
            nullable(BasicType::String).description(
                "The route it came through, as GET /api/v1/patients/{id}; null before routes were kept",
            ),
        );
    let narrowing = || {
        vec![
            docs::query("sortField", docs::string().enum_values(["at"]), "Default at"),
            docs::query("sortDirection", docs::string().enum_values(["asc", "desc"]), "Default desc"),
            docs::query("search", docs::search_term(), "Matches the action, resource or route"),
            docs::query("start_date", docs::date(), "On or after this local date"),
            docs::query("end_date", docs::date(), "On or before this local date"),
            docs::query("filters[action]", docs::string(), "Exact action"),
            docs::query("filters[user_id]", docs::integer().minimum(1), "Who"),
        ]
    };
    let page = Object::new()
        .property("data", salvo::oapi::Array::new().items(entry))
        .property(
            "links",
            Object::new()
                .property("first", docs::string().description("The first page, a new snapshot"))
                .property(
                    "next",
                    nullable(BasicType::String).description("The page after this one; null on the last"),
                ),
        )
        .property(
            "meta",
            Object::new()
                .property("per_page", docs::integer())
                .property("total", docs::integer().description("Entries in the snapshot the first page took"))
                .property(
                    "next_cursor",
                    nullable(BasicType::String).description("The cursor of the next page; null on the last"),
                ),
        );
    let mut op = branch.operation("patients", "Who read or changed the patient's records (audit.read)");
    op = op.add_parameter(docs::path_id());
    op = op.add_parameter(docs::query(
        "perPage",
        docs::integer().minimum(1).maximum(crate::http::list::MAX_PER_PAGE),
        "Items per page (default 15)",
    ));
    op = op.add_parameter(docs::query(
        "cursor",
        docs::string().pattern(r"^[0-9]+\.-?[0-9]+\.[0-9]+$"),
        "Where the page starts: meta.next_cursor of the page before, as given (links.next holds it). \
         Without it, the first page, which takes a snapshot: entries recorded after it (reading the \
         log records one) are not shown on the pages that follow it. Page numbers are not taken.",
    ));
    for parameter in narrowing() {
        op = op.add_parameter(parameter);
    }
    let op = Doc::answers(op, "200", "Newest first (or oldest first, with sortDirection=asc)", page);
    let op = Doc::not_found(Doc::invalid(
        op,
        "A list parameter is out of range or unknown, or the cursor is not one",
    ));
    branch.add(PathItemType::Get, "patients/{id:num}/access-log", "getPatientAccessLog", read, op);
    let mut op = branch.operation("patients", "The patient's access log as CSV or PDF (audit.read)");
    op = op.add_parameter(docs::path_id());
    for parameter in narrowing() {
        op = op.add_parameter(parameter);
    }
    let op = op
        .add_parameter(docs::query(
            "format",
            docs::string().enum_values(["csv", "pdf"]),
            "Default csv, or as Accept prefers",
        ))
        .add_response(
            "200",
            salvo::oapi::Response::new("Every entry selected, newest first")
                .add_content("text/csv", salvo::oapi::Content::new(docs::string()))
                .add_content("application/pdf", salvo::oapi::Content::new(docs::binary("application/pdf"))),
        );
    let op = Doc::not_found(Doc::invalid(
        op,
        "A parameter is out of range or unknown, or more than 10000 entries",
    ));
    branch.add_behind(
        PathItemType::Get,
        "patients/{id:num}/access-log/export",
        "exportPatientAccessLog",
        Some(Produces(EXPORTS)),
        export,
        op,
    );
}

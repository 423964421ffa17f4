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

use std::collections::BTreeMap;

use salvo::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use salvo::prelude::*;
use serde_json::{Value, json};

use super::patients::formula_safe;
use super::records::PATIENTS;
use crate::http::error::{ApiError, ApiResult};
use crate::http::guard::{accept_of, preferred};
use crate::http::list::{self, ListQuery, ListRules, SortDirection};
use crate::http::{self as web};
use crate::pdf::{Block, Sheet, Signing};
use crate::permissions::AUDIT_READ;
use crate::resource::print;
use crate::resource::printable::{Printing, joined, text};
use crate::resource::reads::{record_read, write_queued_reads};
use crate::resource::{Conn, Context, Param, Scope, as_refs};

/// The most entries one export holds; past it, a narrower date range is asked for.
pub const MAX_EXPORTED: i64 = 10_000;

/// What the log may be narrowed by; sorted by `at` only.
pub const RULES: ListRules<'static> = ListRules {
    sort_fields: &["at"],
    default_sort: "at",
    default_direction: SortDirection::Desc,
    filters: &["action", "user_id"],
    date_range: true,
    aliases: &[],
    extra: &[],
};

/// The media types of an export, CSV first (the default).
pub const EXPORTS: &[&str] = &["text/csv", "application/pdf"];

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

/// The statement of a page of entries (`limit` of them from `offset`) and of their count,
/// with its parameters; `zone` makes the date range the branch's local dates.
fn statement(patient: i64, query: &ListQuery, zone: &str) -> ApiResult<(String, Vec<Param>)> {
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
    let limit = bind(&mut params, Box::new(query.per_page));
    let offset = bind(&mut params, Box::new(query.offset()));
    let sql = format!(
        "WITH shown AS MATERIALIZED (
             SELECT a.id, a.at, a.user_id, a.action, a.resource, a.record_id, a.route
               FROM audit_log a WHERE {conditions})
         SELECT (SELECT count(*) FROM shown),
                (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.at {direction}, p.id {direction}), '[]')
                   FROM (SELECT * FROM shown ORDER BY at {direction}, id {direction} LIMIT {limit} OFFSET {offset}) p)"
    );
    Ok((sql, params))
}

/// The entries `query` selects and how many there are in all, each with its user's name.
async fn entries(
    ctx: &Context,
    conn: &mut Conn,
    patient: i64,
    query: &ListQuery,
) -> ApiResult<(i64, Vec<Value>)> {
    let client = conn.client();
    let known = client.prepare_cached("SELECT 1 FROM patients WHERE id = $1").await?;
    if client.query_opt(&known, &[&patient]).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    let (sql, params) = statement(patient, query, &ctx.branch()?.timezone)?;
    let stmt = client.prepare_cached(&sql).await?;
    let row = client.query_one(&stmt, &as_refs(&params)).await?;
    let mut page: Vec<Value> = serde_json::from_value(row.get(1)).map_err(anyhow::Error::from)?;
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
    Ok((row.get(0), page))
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

/// `GET /patients/{id}/access-log`: one page, newest first.
#[handler]
pub async fn read(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let pairs = list::query_pairs(req);
    let query = list::parse(&pairs, &RULES)?;
    let ctx = Context::of(depot)?;
    let (patient, mut conn) = opened(&ctx, req).await?;
    let (total, page) = entries(&ctx, &mut conn, patient, &query).await?;
    drop(conn);
    record_reading(&ctx, patient, "json", &pairs).await?;
    let base = web::base_url(req, ctx.state.trusts_forwarded_headers(req));
    res.render(Json(list::envelope(&base, req.uri().path(), &pairs, &query, total, page)));
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
    let (total, entries) = entries(&ctx, &mut conn, patient, &query).await?;
    if total > MAX_EXPORTED {
        let message =
            format!("More than {MAX_EXPORTED} entries: export a shorter period (start_date, end_date).");
        return Err(ApiError::field("start_date", message));
    }
    let code = ctx.branch()?.code.clone();
    let name = format!("access-log-{code}-patient-{patient}");
    if pdf {
        let mut printing = Printing { ctx: &ctx, conn, resource: PATIENTS.path };
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

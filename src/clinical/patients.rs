//! Patient routes beyond CRUD: the front desk's type-ahead lookup and the export. An export
//! is recorded when asked for (`export`, with its parameters), and each chunk's patients as
//! they are sent (`exported`, with their ids), so that a patient's access log names the
//! exports that held them.

use crate::db::Queries;
use crate::db::read_audit::{ReadAudit, ReadRecord};
use crate::resource::row::Fields;
use futures_util::{StreamExt, pin_mut};
use salvo::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use salvo::prelude::*;
use serde_json::{Value, json};
use tracing::Instrument;

use super::records::PATIENTS;
use crate::db::sql::{PAGE_AGGREGATE, Param, as_refs, db_span, one_row};
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web, list};
use crate::permissions::PATIENTS_READ;
use crate::resource::Context;
use crate::resource::reads::audit_seen;
use crate::resource::routes::list_rules;
use crate::resource::{Conn, Within, select_columns, stream};

pub const MAX_LOOKUP: i64 = 50;
pub const DEFAULT_LOOKUP: i64 = 10;

/// A handful of records for a type-ahead: every word of `term` begins a word of the name or
/// PIN number (any order; the index `patient_search_prefixes_idx`), or the term is a whole
/// PIN, or the digits of a phone number (anywhere, so that numbers typed without the country
/// code match); an exact PIN first, then by name. Answers them as the JSON array text
/// PostgreSQL makes of them (written into the answer unparsed, as a list page is) and their
/// ids.
///
/// Each way of matching picks its first `limit` by the answer's order on its own, the words
/// from `patient_search`'s narrow rows (a common word's thousands of matches are sorted there,
/// not from the full rows); their union is ordered again and only its first `limit` are read
/// from `patients`.
async fn matching(client: &impl Queries, term: &str, limit: i64) -> ApiResult<(String, Vec<i64>)> {
    // The answer's order, and its length: `$3` is the limit (the third parameter below).
    const ORDER: &str = "ORDER BY exact DESC, last_name, first_name, id LIMIT $3";
    let resource = &PATIENTS;
    let words: Vec<&str> = term.split_whitespace().take(8).collect();
    let mut params: Vec<Param> =
        vec![Box::new(words.join(" ")), Box::new(term.trim().to_uppercase()), Box::new(limit)];
    // Each word normalised and split as the column's were, and cut to the longest start it
    // keeps; a term with no word at all matches by PIN or phone only.
    let mut ways = vec![
        format!(
            "(SELECT s.id, s.pin = $2 AS exact, s.last_name, s.first_name FROM patient_search s
               WHERE patient_prefixes(s.first_name, s.middle_name, s.last_name, s.suffix, s.pin)
                     @@ (SELECT string_agg(quote_literal(left(w, 20)), ' & ')::tsquery
                           FROM unnest(regexp_split_to_array(search_normalize($1), '\\W+')) w WHERE w <> '')
               {ORDER})"
        ),
        "(SELECT p.id, true, p.last_name, p.first_name FROM patients p WHERE p.pin = $2 AND p.deleted_at IS NULL)"
            .to_owned(),
    ];
    let digits: String = term.chars().filter(char::is_ascii_digit).collect();
    let phone_like = term.chars().all(|c| c.is_ascii_digit() || " +-().".contains(c));
    if phone_like && digits.len() >= 3 {
        params.push(Box::new(format!("%{digits}%")));
        ways.push(format!(
            "(SELECT p.id, p.pin = $2 AS exact, p.last_name, p.first_name FROM patients p
               WHERE p.deleted_at IS NULL AND p.phone_digits LIKE ${} {ORDER})",
            params.len()
        ));
    }
    // UNION: a patient matched more than one way is answered once.
    let sql = format!(
        "{PAGE_AGGREGATE} FROM (SELECT {} FROM (SELECT * FROM ({}) u {ORDER}) m JOIN {} t ON t.id = m.id
          ORDER BY m.exact DESC, m.last_name, m.first_name, m.id) r",
        select_columns(resource),
        ways.join(" UNION "),
        resource.table,
    );
    async {
        let stmt = client.prepare_cached(&sql).await?;
        let row = one_row(client.read(&stmt, &as_refs(&params)).await?)?;
        Ok((row.get(0), row.get(1)))
    }
    .instrument(db_span(resource.table, "SELECT"))
    .await
}

/// `GET /patients/search?search=...&limit=10`: a few patients by name words, PIN or phone,
/// best match first, without a count.
#[handler]
pub async fn lookup(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let pairs = list::query_pairs(req);
    list::only(&pairs, &["search", "q", "limit"])?;
    let get = |name: &str| pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.trim().to_owned());
    let term = get("search").or_else(|| get("q")).unwrap_or_default();
    if term.is_empty() {
        return Err(ApiError::field("search", "The search field is required."));
    }
    if list::has_control_characters(&term) {
        return Err(ApiError::field("search", "The search contains control characters."));
    }
    if term.chars().count() > list::MAX_SEARCH_LEN {
        return Err(ApiError::field("search", "The search may not be greater than 200 characters."));
    }
    let limit = match get("limit") {
        None => DEFAULT_LOOKUP,
        Some(raw) => raw.parse::<i64>().ok().filter(|n| (1..=MAX_LOOKUP).contains(n)).ok_or_else(|| {
            ApiError::field("limit", format!("The limit must be an integer between 1 and {MAX_LOOKUP}."))
        })?,
    };
    let ctx = Context::of(depot)?;
    ctx.require(PATIENTS_READ)?;
    let conn = ctx.reading_conn(PATIENTS.scope).await?;
    let (rows, ids) = matching(&conn.reads(), &term, limit).await?;
    drop(conn);
    audit_seen(&ctx, &PATIENTS, Default::default(), &ids, &pairs).await?;
    web::ok_text(res, "Patients found.", &rows);
    Ok(())
}

/// Records that someone exported patients, and with which parameters (the patients each
/// chunk holds are recorded as `exported` as it is sent).
async fn audit_export(conn: &mut Conn, ctx: &Context, details: Value) -> ApiResult<()> {
    let client = conn.client();
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_log (user_id, action, resource, after, route) VALUES ($1, 'export', $2, $3, $4)",
        )
        .await?;
    client.execute(&stmt, &[&ctx.user.id, &PATIENTS.path, &details, &ctx.endpoint.as_deref()]).await?;
    Ok(())
}

/// Whether the client asked for JSON lines rather than CSV.
fn wants_json(req: &Request, pairs: &[(String, String)]) -> ApiResult<bool> {
    if let Some((_, format)) = pairs.iter().rev().find(|(k, _)| k == "format") {
        return match format.as_str() {
            "csv" => Ok(false),
            "json" | "jsonl" | "ndjson" => Ok(true),
            _ => Err(ApiError::field("format", "The format must be csv or json.")),
        };
    }
    let accept =
        req.headers().get("accept").and_then(|v| v.to_str().ok()).unwrap_or_default().to_ascii_lowercase();
    Ok(!accept.contains("text/csv") && (accept.contains("application/json") || accept.contains("ndjson")))
}

/// Who is exporting: each chunk's patients are recorded as shown to them before it is sent,
/// so that every patient's access log names the export that disclosed them.
struct Exporter {
    audit: ReadAudit,
    branch: i64,
    user: i64,
    route: Option<std::sync::Arc<str>>,
    format: &'static str,
}

impl Exporter {
    /// Records that the patients `ids` are being sent; false when that cannot be recorded.
    async fn disclose(&self, ids: Vec<i64>) -> bool {
        let record = ReadRecord {
            branch: self.branch,
            at: time::OffsetDateTime::now_utc(),
            user_id: Some(self.user),
            action: "exported",
            resource: PATIENTS.path,
            record_id: None,
            details: Some(json!({ "ids": ids, "format": self.format })),
            route: self.route.clone(),
        };
        matches!(self.audit.record(record).await, Ok(true))
    }
}

/// Streams the rows as CSV or JSON lines in chunks of about 60 KiB, until the last row or
/// until the client goes away; a chunk whose patients cannot be recorded ends the export.
async fn send_rows(
    rows: tokio_postgres::RowStream,
    mut body: salvo::http::body::BodySender,
    columns: &[&str],
    json_lines: bool,
    exporter: Exporter,
) {
    pin_mut!(rows);
    let mut buffer = String::with_capacity(64 * 1024);
    if !json_lines {
        buffer.push_str(&columns.join(","));
        buffer.push_str("\r\n");
    }
    let mut shown: Vec<i64> = Vec::new();
    while let Some(row) = rows.next().await {
        let record: Value = match row {
            Ok(row) => row.get(0),
            Err(e) => {
                tracing::error!(error = %e, "patient export stopped");
                return;
            }
        };
        shown.extend(record.integer("id"));
        if json_lines {
            buffer.push_str(&record.to_string());
            buffer.push('\n');
        } else {
            let cells: Vec<String> =
                columns.iter().map(|c| csv_cell(record.get(*c).unwrap_or(&Value::Null))).collect();
            buffer.push_str(&cells.join(","));
            buffer.push_str("\r\n");
        }
        if buffer.len() >= 60 * 1024 {
            if !exporter.disclose(std::mem::take(&mut shown)).await {
                tracing::error!("patient export stopped: its reads cannot be recorded");
                return;
            }
            if body.send_data(std::mem::take(&mut buffer)).await.is_err() {
                return; // the client went away
            }
        }
    }
    if !shown.is_empty() && !exporter.disclose(shown).await {
        tracing::error!("patient export stopped: its reads cannot be recorded");
        return;
    }
    if !buffer.is_empty() {
        let _ = body.send_data(buffer).await;
    }
}

/// A spreadsheet treats a cell starting with = + - @ (or a tab / carriage return) as a
/// formula; a leading apostrophe makes it text.
pub fn formula_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{text}").into() } else { text.into() }
}

fn csv_cell(value: &Value) -> String {
    let text = match value {
        Value::Null => String::new(),
        Value::String(s) => formula_safe(s).into_owned(),
        other => other.to_string(),
    };
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text }
}

/// `GET /patients/export`: every patient the list parameters select (no paging), as CSV or
/// JSON lines, streamed as rows are read.
#[handler]
pub async fn export(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let pairs = list::query_pairs(req);
    let json_lines = wants_json(req, &pairs)?;
    let query = list::parse(&pairs, &list::ListRules { extra: &["format"], ..list_rules(&PATIENTS) })?;
    let ctx = Context::of(depot)?;
    ctx.require(PATIENTS_READ)?;
    let route = ctx.branch()?.clone();
    let mut conn = ctx.conn(PATIENTS.scope).await?;
    let details = json!({ "query": pairs, "format": if json_lines { "json" } else { "csv" } });
    audit_export(&mut conn, &ctx, details).await?;
    // An export reads every row while the client downloads: it gets a longer limit than the
    // statements of ordinary requests.
    let limit = ctx.state.settings.export_statement_timeout.as_millis();
    conn.client().batch_execute(&format!("SET statement_timeout = {limit}")).await?;
    let rows = stream(&mut conn, &PATIENTS, Within::default(), &query).await?;

    let date = time::OffsetDateTime::now_utc().date();
    let (content_type, extension) =
        if json_lines { ("application/x-ndjson", "jsonl") } else { ("text/csv; charset=utf-8", "csv") };
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(disposition) =
        HeaderValue::from_str(&format!("attachment; filename=\"patients-{}-{date}.{extension}\"", route.code))
    {
        res.headers_mut().insert(CONTENT_DISPOSITION, disposition);
    }
    let columns: Vec<&'static str> =
        PATIENTS.output_columns().chain(PATIENTS.computed.iter().map(|(n, _, _)| *n)).collect();
    let exporter = Exporter {
        audit: ctx.state.read_audit.clone(),
        branch: route.id,
        user: ctx.user.id,
        route: ctx.endpoint.clone(),
        format: if json_lines { "json" } else { "csv" },
    };
    let body = res.channel();
    tokio::spawn(async move {
        send_rows(rows, body, &columns, json_lines, exporter).await;
        // The connection stays checked out until the last row is sent; it goes back to the
        // pool with the usual statement limit.
        if let Err(e) = conn.client().batch_execute("RESET statement_timeout").await {
            tracing::warn!(error = %e, "could not reset the export's statement timeout");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::csv_cell;
    use serde_json::json;

    #[test]
    fn cells_are_quoted_and_formulas_neutralised() {
        assert_eq!(csv_cell(&json!("=HYPERLINK(\"x\")")), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_cell(&json!("+63 912")), "'+63 912");
        assert_eq!(csv_cell(&json!("@SUM(A1)")), "'@SUM(A1)");
        assert_eq!(csv_cell(&json!("Cruz, Ana")), "\"Cruz, Ana\"");
        assert_eq!(csv_cell(&json!(null)), "");
        assert_eq!(csv_cell(&json!(42)), "42");
        assert_eq!(csv_cell(&json!("plain")), "plain");
    }
}

//! Patient routes beyond CRUD: the front desk's type-ahead lookup and the export.

use std::sync::Arc;

use futures_util::{StreamExt, pin_mut};
use salvo::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use salvo::prelude::*;
use serde_json::{Value, json};

use super::PATIENTS;
use crate::app::AppState;
use crate::auth::current_user;
use crate::auth::permissions::PATIENTS_READ;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web, list};
use crate::resource::store::{self, Conn};
use crate::tenancy::BranchRoute;

pub const MAX_LOOKUP: i64 = 50;
pub const DEFAULT_LOOKUP: i64 = 10;

/// The branch connection of a patient route, after the permission check.
async fn branch_conn(depot: &Depot) -> ApiResult<(Arc<AppState>, Arc<BranchRoute>, Conn, i64)> {
    let state = AppState::of(depot);
    let user = current_user(depot)?;
    if !user.can(PATIENTS_READ) {
        return Err(ApiError::forbidden("You do not have permission to do this."));
    }
    let route = depot
        .get_typed::<Arc<BranchRoute>>()
        .map_err(|_| ApiError::Internal(anyhow::anyhow!("branch route missing")))?
        .clone();
    let conn = Conn::Branch(state.directory.connect(&route).await?);
    Ok((state, route, conn, user.id))
}

/// `GET /patients/search?search=...&limit=10`: a few patients by name words, PIN or phone,
/// best match first, without a count.
#[handler]
pub async fn lookup(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let pairs = list::query_pairs(req);
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
    let (_, _, mut conn, _) = branch_conn(depot).await?;
    let rows = store::lookup(&mut conn, &PATIENTS, &term, limit).await?;
    web::ok(res, "Patients found.", rows);
    Ok(())
}

/// Whether the client asked for JSON lines rather than CSV.
fn wants_json(req: &Request, pairs: &[(String, String)]) -> ApiResult<bool> {
    if let Some((_, format)) = pairs.iter().rev().find(|(k, _)| k == "format") {
        return match format.trim().to_ascii_lowercase().as_str() {
            "csv" => Ok(false),
            "json" | "jsonl" | "ndjson" => Ok(true),
            _ => Err(ApiError::field("format", "The format must be csv or json.")),
        };
    }
    let accept =
        req.headers().get("accept").and_then(|v| v.to_str().ok()).unwrap_or_default().to_ascii_lowercase();
    Ok(!accept.contains("text/csv") && (accept.contains("application/json") || accept.contains("ndjson")))
}

/// A spreadsheet treats a cell starting with = + - @ (or a tab / carriage return) as a
/// formula; a leading apostrophe makes it text.
fn csv_cell(value: &Value) -> String {
    let text = match value {
        Value::Null => String::new(),
        Value::String(s) => {
            if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
                format!("'{s}")
            } else {
                s.clone()
            }
        }
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
    let rules = list::ListRules {
        sort_fields: PATIENTS.sort_fields,
        default_sort: PATIENTS.default_sort,
        default_direction: PATIENTS.default_direction,
        filters: PATIENTS.filters,
        date_range: PATIENTS.date_range.is_some(),
    };
    let query = list::parse(&pairs, &rules)?;
    let (_, route, mut conn, user_id) = branch_conn(depot).await?;
    store::audit_export(
        &mut conn,
        &PATIENTS,
        user_id,
        json!({ "query": pairs, "format": if json_lines { "json" } else { "csv" } }),
    )
    .await?;
    let rows = store::stream(&mut conn, &PATIENTS, None, &query).await?;

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
    let mut body = res.channel();
    tokio::spawn(async move {
        // The connection stays checked out until the last row is sent.
        let _conn = conn;
        pin_mut!(rows);
        let mut buffer = String::with_capacity(64 * 1024);
        if !json_lines {
            buffer.push_str(&columns.join(","));
            buffer.push_str("\r\n");
        }
        while let Some(row) = rows.next().await {
            let record: Value = match row {
                Ok(row) => row.get(0),
                Err(e) => {
                    tracing::error!(error = %e, "patient export stopped");
                    return;
                }
            };
            if json_lines {
                buffer.push_str(&record.to_string());
                buffer.push('\n');
            } else {
                let cells: Vec<String> =
                    columns.iter().map(|c| csv_cell(record.get(*c).unwrap_or(&Value::Null))).collect();
                buffer.push_str(&cells.join(","));
                buffer.push_str("\r\n");
            }
            if buffer.len() >= 60 * 1024 && body.send_data(std::mem::take(&mut buffer)).await.is_err() {
                return; // the client went away
            }
        }
        if !buffer.is_empty() {
            let _ = body.send_data(buffer).await;
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

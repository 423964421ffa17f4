//! `GET /patients/duplicates`: pairs of live patients of the branch that are likely one
//! person, with the reasons, paginated like every list.
//!
//! The pairs are kept in `patient_duplicate_pairs`, found again for the patients changed since
//! the last read (`refresh_patient_duplicates`, which this read runs first): a read costs a
//! page of an indexed table, however many patients the branch has.

use salvo::prelude::*;
use serde_json::Value;

use crate::clinical::records::PATIENTS;
use crate::db::sql::{Param, as_refs};
use crate::http::error::{ApiError, ApiResult};
use crate::http::list::{self, ListQuery, ListRules, SortDirection};
use crate::http::{self as web};
use crate::permissions::PATIENTS_READ;
use crate::resource::reads::audit_seen;
use crate::resource::{Context, Scope};

/// Why two patients are listed together.
pub const REASONS: [&str; 4] =
    ["same_name_and_birth_date", "similar_name_and_birth_date", "same_phone", "same_insurance_member_no"];

pub const RULES: ListRules<'static> = ListRules {
    sort_fields: &["duplicate_id", "patient_id"],
    default_sort: "duplicate_id",
    default_direction: SortDirection::Desc,
    filters: &["reason", "patient_id"],
    date_range: false,
    window: false,
    aliases: &[],
    extra: &[],
};

/// What each patient of a pair shows.
const SHOWN: &str = "t.id, t.pin, t.first_name, t.middle_name, t.last_name, t.suffix, t.birth_date, t.sex, \
                     t.phone, t.email, t.city, t.insurance_id, t.insurance_member_no, t.created_at";

/// The conditions of `filters[...]` on the pairs `p`, and their values.
fn conditions(query: &ListQuery) -> ApiResult<(Vec<String>, Vec<Param>)> {
    if query.search.is_some() {
        return Err(ApiError::field("search", "This list takes no search; filter by filters[patient_id]."));
    }
    let (mut conditions, mut params): (Vec<String>, Vec<Param>) = (Vec::new(), Vec::new());
    for (name, value) in &query.filters {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        if name == "reason" {
            if !REASONS.contains(&value) {
                let message = format!("The reason must be one of {}.", REASONS.join(", "));
                return Err(ApiError::field("filters[reason]", message));
            }
            params.push(Box::new(value.to_owned()));
            conditions.push(format!("p.reasons @> ARRAY[${}::text]", params.len()));
        } else {
            let id = value.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
                ApiError::field("filters[patient_id]", "The patient id must be a positive integer.")
            })?;
            params.push(Box::new(id));
            conditions.push(format!("(p.older_id = ${0} OR p.newer_id = ${0})", params.len()));
        }
    }
    Ok((conditions, params))
}

/// The total, and the page as JSON, in one statement.
fn sql(query: &ListQuery, conditions: &[String], taken: usize) -> String {
    let filter =
        if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) };
    let direction = query.sort_direction.sql();
    let (first, second) =
        if query.sort_field == "patient_id" { ("older_id", "newer_id") } else { ("newer_id", "older_id") };
    let order = |table: &str| format!("{table}.{first} {direction}, {table}.{second} {direction}");
    format!(
        "SELECT (SELECT count(*) FROM patient_duplicate_pairs p{filter}),
                (SELECT coalesce(jsonb_agg(jsonb_build_object('patient', a.shown, 'duplicate', b.shown,
                                                              'reasons', to_jsonb(page.reasons))
                                           ORDER BY {page_order}), '[]')
                   FROM (SELECT p.* FROM patient_duplicate_pairs p{filter} ORDER BY {pairs_order}
                          LIMIT ${limit} OFFSET ${offset}) page
                   CROSS JOIN LATERAL (SELECT to_jsonb(x) AS shown FROM (SELECT {SHOWN} FROM patients t
                                        WHERE t.id = page.older_id) x) a
                   CROSS JOIN LATERAL (SELECT to_jsonb(x) AS shown FROM (SELECT {SHOWN} FROM patients t
                                        WHERE t.id = page.newer_id) x) b)",
        page_order = order("page"),
        pairs_order = order("p"),
        limit = taken + 1,
        offset = taken + 2,
    )
}

#[handler]
pub async fn duplicates(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let pairs = list::query_pairs(req);
    let query = list::parse(&pairs, &RULES)?;
    let (conditions, mut params) = conditions(&query)?;
    let ctx = Context::of(depot)?;
    ctx.require(PATIENTS_READ)?;
    let sql = sql(&query, &conditions, params.len());
    params.push(Box::new(query.per_page));
    params.push(Box::new(query.offset()));
    let mut conn = ctx.conn(Scope::Branch).await?;
    let client = conn.client();
    // Patients changed since the last read are paired again first (a statement of its own: the
    // pairs it writes are committed, whoever reads next).
    client.execute("SELECT refresh_patient_duplicates()", &[]).await?;
    let stmt = client.prepare_cached(&sql).await?;
    let row = client.query_one(&stmt, &as_refs(&params)).await?;
    drop(conn);
    let (total, data): (i64, Value) = (row.get(0), row.get(1));
    let rows = data.as_array().cloned().unwrap_or_default();
    let shown: Vec<i64> = rows
        .iter()
        .flat_map(|pair| [&pair["patient"]["id"], &pair["duplicate"]["id"]])
        .filter_map(Value::as_i64)
        .collect();
    // Who saw which patients, as for every list of them.
    audit_seen(&ctx, &PATIENTS, Default::default(), &shown, &pairs).await?;
    let base = web::base_url(req, ctx.state.trusts_forwarded_headers(req));
    res.render(Json(list::envelope(&base, req.uri().path(), &pairs, &query, total, rows)));
    Ok(())
}

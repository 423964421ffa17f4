//! What FHIR answers show of the registry: the names of the staff who examined or
//! prescribed, and the codes and names of what a charge bills.

use std::collections::HashMap;

use serde_json::Value;

use super::charge::billed;
use crate::http::error::ApiResult;
use crate::resource::Context;
use crate::resource::row::Fields;

/// The names of the users in `column` of `rows`.
pub async fn user_names(ctx: &Context, rows: &[Value], column: &str) -> ApiResult<HashMap<i64, String>> {
    names_in(ctx, rows, column, "SELECT id, name FROM users WHERE id = ANY($1)").await
}

/// `(code, name)` of the master data the charges in `rows` bill.
pub async fn billed_items(
    ctx: &Context,
    rows: &[Value],
) -> ApiResult<HashMap<(&'static str, i64), (String, String)>> {
    let named: Vec<(&'static str, i64)> = rows.iter().filter_map(billed).collect();
    if named.is_empty() {
        return Ok(HashMap::new());
    }
    let of = |kind: &str| named.iter().filter(|(k, _)| *k == kind).map(|(_, id)| *id).collect::<Vec<i64>>();
    let (items, procedures, services) = (of("bill-item"), of("procedure"), of("service"));
    let client = ctx.registry().await?;
    let found = client
        .query(
            "SELECT 'bill-item', id, code, name FROM bill_items WHERE id = ANY($1)
             UNION ALL SELECT 'procedure', id, code, name FROM procedures WHERE id = ANY($2)
             UNION ALL SELECT 'service', id, code, name FROM services WHERE id = ANY($3)",
            &[&items, &procedures, &services],
        )
        .await?;
    let kind = |k: String| -> &'static str {
        match k.as_str() {
            "bill-item" => "bill-item",
            "procedure" => "procedure",
            _ => "service",
        }
    };
    Ok(found.into_iter().map(|r| ((kind(r.get(0)), r.get(1)), (r.get(2), r.get(3)))).collect())
}

/// The names of the doctors in `column` of `rows`.
pub async fn doctor_names(ctx: &Context, rows: &[Value], column: &str) -> ApiResult<HashMap<i64, String>> {
    names_in(
        ctx,
        rows,
        column,
        "SELECT id, concat_ws(' ', first_name, last_name) FROM doctors WHERE id = ANY($1)",
    )
    .await
}

/// The names of the branch services in `column` of `rows`.
pub async fn service_names(ctx: &Context, rows: &[Value], column: &str) -> ApiResult<HashMap<i64, String>> {
    names_in(ctx, rows, column, "SELECT id, name FROM branch_services WHERE id = ANY($1)").await
}

/// `(id, name)` as `sql` answers them for the ids in `column` of `rows`.
async fn names_in(ctx: &Context, rows: &[Value], column: &str, sql: &str) -> ApiResult<HashMap<i64, String>> {
    let mut ids: Vec<i64> = rows.iter().filter_map(|r| r.integer(column)).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let client = ctx.registry().await?;
    let found = client.query(sql, &[&ids]).await?;
    Ok(found.iter().map(|r| (r.get(0), r.get(1))).collect())
}

//! `GET /patient-visits/{id}/summary`: a visit, its patient, and every live record of the
//! visit grouped by kind, in one statement. The kinds are the declarations whose patient is
//! derived from a visit; a kind the caller may not read is left out (examinations need
//! `clinical.read`). Asked for in PDF, the same summary is printed (`print::VisitSummary`).

use salvo::prelude::*;
use serde_json::Value;

use super::print::{VisitSummary, record_key};
use super::records::{PATIENT_VISITS, PATIENTS};
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::permissions::PATIENTS_READ;
use crate::resource::select_columns;
use crate::resource::{Context, Resource, print, registered};

/// The records of a visit the caller may read, with their key in the answer.
fn kinds(ctx: &Context) -> Vec<&'static Resource> {
    registered()
        .iter()
        .copied()
        .filter(|r| r.derived.iter().any(|d| d.table == PATIENT_VISITS.table && d.from == "patient_visit_id"))
        .filter(|r| ctx.user.can(r.read_permission))
        .collect()
}

/// `'<key>', (the visit's live records of one kind, oldest first)`.
fn records_of(resource: &Resource) -> String {
    let order = if resource.field("examined_at").is_some() { "examined_at" } else { "created_at" };
    format!(
        "'{key}', (SELECT coalesce(jsonb_agg(to_jsonb(r) ORDER BY r.{order}, r.id), '[]')
                     FROM (SELECT {columns} FROM {table} t
                            WHERE t.patient_visit_id = $1 AND t.deleted_at IS NULL{own}) r)",
        key = record_key(resource),
        columns = select_columns(resource),
        table = resource.stored_in(),
        own = resource.and_own_rows("t"),
    )
}

fn sql(kinds: &[&Resource]) -> String {
    let records: Vec<String> = kinds.iter().map(|r| records_of(r)).collect();
    format!(
        "SELECT jsonb_build_object(
             'visit', to_jsonb(v),
             'patient', (SELECT jsonb_build_object('id', p.id, 'pin', p.pin, 'first_name', p.first_name,
                                                   'last_name', p.last_name)
                           FROM {patients} p WHERE p.id = v.patient_id),
             'records', jsonb_build_object({records}))
           FROM (SELECT {visit_columns} FROM {visits} t WHERE t.id = $1 AND t.deleted_at IS NULL) v",
        patients = PATIENTS.table,
        records = records.join(", "),
        visit_columns = select_columns(&PATIENT_VISITS),
        visits = PATIENT_VISITS.table,
    )
}

#[handler]
pub async fn summary(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(PATIENTS_READ)?;
    let visit = web::path_id(req, "id")?;
    let kinds = kinds(&ctx);
    let mut conn = ctx.conn(PATIENT_VISITS.scope).await?;
    let client = conn.client();
    let stmt = client.prepare_cached(&sql(&kinds)).await?;
    let row = client.query_opt(&stmt, &[&visit]).await?.ok_or(ApiError::NotFound)?;
    drop(conn);
    let answer = row.get::<_, Value>(0);
    if print::wants_print(req) {
        let printable = VisitSummary { kinds };
        return print::answer(&ctx, res, &printable, &PATIENT_VISITS, visit, &answer).await;
    }
    web::ok(res, "Visit summary retrieved.", answer);
    Ok(())
}

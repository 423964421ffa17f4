//! `GET /patients/{id}/measurements?kind=&eye=`: one measurement of a patient over time, for
//! plots: intraocular pressure, distance visual acuity in logMAR, sphere, cylinder and
//! cup-to-disc ratio. Drafts count; eyes that could not be assessed give nothing.

use salvo::prelude::*;
use serde_json::Value;

use super::types::{FUNDUSCOPIES, REFRACTIONS, TONOMETRIES, VISUAL_ACUITIES, kind_of};
use crate::enums::MEASUREMENT_KIND;
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::{self as web, list};
use crate::permissions::CLINICAL_READ;
use crate::resource::{Context, Resource, Scope};

/// Where a measurement kind is read: the examination, the JSON path of the value inside an
/// eye (SQL over `t.<eye>`), and an extra condition on the record.
fn source(kind: &str) -> Option<(&'static Resource, &'static str, &'static str)> {
    Some(match kind {
        "iop" => (&TONOMETRIES, "{eye}->'readings'->-1->'iop_mmhg'", "true"),
        "va_logmar" => (&VISUAL_ACUITIES, "{eye}->'logmar'", "t.distance = 'distance'"),
        "sphere" => (&REFRACTIONS, "{eye}->'sphere'", "true"),
        // A refraction without a cylinder has none: 0.
        "cylinder" => (&REFRACTIONS, "coalesce({eye}->'cylinder', '0.00'::jsonb)", "true"),
        "cd_ratio" => (&FUNDUSCOPIES, "{eye}->'cd_ratio'", "true"),
        _ => return None,
    })
}

struct Query {
    kind: String,
    eyes: Vec<&'static str>,
    start: Option<time::Date>,
    end: Option<time::Date>,
}

fn parse(pairs: &[(String, String)]) -> ApiResult<Query> {
    list::only(pairs, &["kind", "eye", "start_date", "end_date"])?;
    let get =
        |name: &str| pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.trim().to_ascii_lowercase());
    let mut errors = FieldErrors::new();
    let kind = get("kind").unwrap_or_default();
    if !MEASUREMENT_KIND.values.contains(&kind.as_str()) {
        let message = format!("The kind must be one of: {}.", MEASUREMENT_KIND.values.join(", "));
        errors.entry("kind".into()).or_default().push(message);
    }
    let eyes = match get("eye").as_deref() {
        None | Some("") | Some("both") => vec!["right", "left"],
        Some("right") => vec!["right"],
        Some("left") => vec!["left"],
        Some(_) => {
            errors.entry("eye".into()).or_default().push("The eye must be right, left or both.".into());
            Vec::new()
        }
    };
    let mut date = |name: &str| {
        let raw = get(name)?;
        let parsed = list::parse_date(&raw);
        if parsed.is_none() {
            errors.entry(name.into()).or_default().push(format!("The {name} must be a date (YYYY-MM-DD)."));
        }
        parsed
    };
    let (start, end) = (date("start_date"), date("end_date"));
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        errors
            .entry("end_date".into())
            .or_default()
            .push("The end_date must be on or after the start_date.".into());
    }
    if errors.is_empty() { Ok(Query { kind, eyes, start, end }) } else { Err(ApiError::Validation(errors)) }
}

/// One statement: a row per examination and eye, by time then record.
fn sql(query: &Query) -> String {
    let (exam, value, condition) = source(&query.kind).expect("kind checked");
    let per_eye: Vec<String> = query
        .eyes
        .iter()
        .map(|eye| {
            let column = format!("t.{eye}_eye");
            let value = value.replace("{eye}", &column);
            format!(
                "SELECT t.examined_at AS at, {value} AS value, '{eye}' AS eye, t.id AS record_id
                   FROM {table} t
                  WHERE t.patient_id = $1 AND t.deleted_at IS NULL{own} AND {condition}
                    AND {column} IS NOT NULL AND NOT coalesce(({column}->>'unable_to_assess')::boolean, false)
                    AND ($2::date IS NULL OR t.examined_at >= $2::date)
                    AND ($3::date IS NULL OR t.examined_at < $3::date + 1)",
                table = exam.stored_in(),
                own = exam.and_own_rows("t"),
            )
        })
        .collect();
    format!(
        "SELECT coalesce(jsonb_agg(jsonb_build_object('at', m.at, 'value', m.value, 'eye', m.eye,
                                                      'record_id', m.record_id, 'exam', '{kind}')
                                   ORDER BY m.at, m.record_id, m.eye), '[]')
           FROM ({union}) m WHERE m.value IS NOT NULL AND jsonb_typeof(m.value) = 'number'",
        kind = kind_of(exam),
        union = per_eye.join(" UNION ALL "),
    )
}

#[handler]
pub async fn measurements(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(CLINICAL_READ)?;
    let patient = web::path_id(req, "id")?;
    let query = parse(&list::query_pairs(req))?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let client = conn.client();
    let exists: bool = client
        .query_one("SELECT EXISTS (SELECT 1 FROM patients WHERE id = $1 AND deleted_at IS NULL)", &[&patient])
        .await?
        .get(0);
    if !exists {
        return Err(ApiError::NotFound);
    }
    let stmt = client.prepare_cached(&sql(&query)).await?;
    let series: Value = client.query_one(&stmt, &[&patient, &query.start, &query.end]).await?.get(0);
    web::ok(res, "Measurements retrieved.", series);
    Ok(())
}

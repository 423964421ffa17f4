//! The FHIR routes' handlers: a type's search, a read by id, `Patient/{id}/$everything`. Each
//! read of patient data is recorded as patient reads are (`db::read_audit`): a search names
//! the patients its page showed, a read or `$everything` the patient whose data it was.

use salvo::http::StatusCode;
use salvo::prelude::*;
use serde_json::{Value, json};

use super::condition;
use super::kinds::Type;
use super::outcome::{fail, moved, respond};
use super::patient::Standing;
use super::search::{self, Accepts, Search, bundle};
use super::shape::prune;
use super::{
    allergy, appointment, charge, document, encounter, observation, patient, registry, schedule, slot, vision,
};
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web, list};
use crate::permissions::PATIENTS_READ;
use crate::resource::reads::record_read;
use crate::resource::{Conn, Context, Scope};

/// What the branch's audit trail calls a patient's records: FHIR reads are recorded under the
/// same name as the API's reads of them.
const PATIENT_RECORDS: &str = "patients";

/// One type's page of resources, in FHIR, with the patients they are about (in order, once).
struct Found {
    total: i64,
    resources: Vec<Value>,
    patients: Vec<i64>,
}

/// The rows of `kind` that `search` finds.
async fn rows(ctx: &Context, conn: &mut Conn, kind: Type, search: &Search) -> ApiResult<super::sql::Page> {
    let timezone = ctx.branch()?.timezone.clone();
    match kind {
        Type::Patient => patient::search(conn, search, &timezone).await,
        Type::Encounter => encounter::search(conn, search, &timezone).await,
        Type::Observation => observation::search(conn, search, &timezone).await,
        Type::VisionPrescription => vision::search(conn, search, &timezone).await,
        Type::ChargeItem => charge::search(conn, search, &timezone).await,
        Type::Appointment => appointment::search(conn, search, &timezone).await,
        Type::Schedule => schedule::search(conn, search, &timezone).await,
        Type::Slot => slot::search(ctx, search).await,
        Type::AllergyIntolerance => allergy::search(conn, search, &timezone).await,
        Type::Condition => condition::search(conn, search).await,
        Type::DocumentReference => document::search(conn, search, &timezone).await,
    }
}

/// The page of `kind` that `search` finds, as FHIR resources; `base` is the server's URL, which
/// an absolute URL in a resource starts with.
async fn find(ctx: &Context, conn: &mut Conn, kind: Type, search: &Search, base: &str) -> ApiResult<Found> {
    let page = rows(ctx, conn, kind, search).await?;
    let rows = &page.rows;
    let resources: Vec<Value> = match kind {
        Type::Patient => rows.iter().map(patient::resource).collect(),
        Type::Encounter => rows.iter().map(encounter::resource).collect(),
        Type::Observation => {
            let names = registry::user_names(ctx, rows, "examiner_id").await?;
            rows.iter().map(|row| observation::resource(row, &names)).collect()
        }
        Type::VisionPrescription => {
            let names = registry::user_names(ctx, rows, "prescriber_id").await?;
            rows.iter().map(|row| vision::resource(row, &names)).collect()
        }
        Type::ChargeItem => {
            let billed = registry::billed_items(ctx, rows).await?;
            let currency = &ctx.state.settings.currency;
            rows.iter().map(|row| charge::resource(row, &billed, currency)).collect()
        }
        Type::Appointment => {
            let doctors = registry::doctor_names(ctx, rows, "doctor_id").await?;
            let services = registry::service_names(ctx, rows, "branch_service_id").await?;
            rows.iter().map(|row| appointment::resource(row, &doctors, &services)).collect()
        }
        Type::Schedule => {
            let doctors = registry::doctor_names(ctx, rows, "doctor_id").await?;
            rows.iter().map(|row| schedule::resource(row, &doctors)).collect()
        }
        Type::Slot => rows.iter().map(slot::resource).collect(),
        Type::AllergyIntolerance => {
            let medicines = allergy::medicine_names(ctx, rows).await?;
            rows.iter().map(|row| allergy::resource(row, &medicines)).collect()
        }
        Type::Condition => rows.iter().map(condition::resource).collect(),
        Type::DocumentReference => rows.iter().map(|row| document::resource(row, base)).collect(),
    };
    let mut patients: Vec<i64> = Vec::new();
    for id in rows.iter().filter_map(|row| row["patient_id"].as_i64()) {
        if !patients.contains(&id) {
            patients.push(id);
        }
    }
    Ok(Found { total: page.total, resources: resources.into_iter().map(prune).collect(), patients })
}

/// A Bundle entry.
fn entry(base: &str, resource: Value) -> Value {
    let url = format!(
        "{base}/fhir/r4/{}/{}",
        resource["resourceType"].as_str().unwrap_or_default(),
        resource["id"].as_str().unwrap_or_default()
    );
    json!({ "fullUrl": url, "resource": resource, "search": { "mode": "match" } })
}

fn base_of(ctx: &Context, req: &Request) -> String {
    web::base_url(req, ctx.state.trusts_forwarded_headers(req))
}

/// The handler of a type's routes: its search (`GET /fhir/r4/<Type>?...`, a searchset
/// Bundle) or a read by id (`GET /fhir/r4/<Type>/{id}`: the resource, 410 when it was
/// deleted, else 404).
pub enum Serve {
    Search(Type),
    Read(Type),
}

#[async_trait]
impl Handler for Serve {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, _ctrl: &mut FlowCtrl) {
        let served = match *self {
            Serve::Search(kind) => search_type(kind, req, depot, res).await,
            Serve::Read(kind) => read_one(kind, req, depot, res).await,
        };
        if let Err(e) = served {
            res.render(e);
        }
    }
}

async fn search_type(kind: Type, req: &Request, depot: &Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(kind.permission())?;
    let pairs = list::query_pairs(req);
    let search = search::parse(&pairs, kind.accepts())?;
    let base = base_of(&ctx, req);
    let mut conn = ctx.conn(Scope::Branch).await?;
    let found = find(&ctx, &mut conn, kind, &search, &base).await?;
    drop(conn);
    let details = json!({ "ids": found.patients, "query": pairs, "route": kind.route() });
    record_read(&ctx, PATIENT_RECORDS, "search", None, Some(details)).await?;
    let entries = found.resources.into_iter().map(|r| entry(&base, r)).collect();
    respond(req, res, &bundle(&base, req.uri().path(), &search, found.total, entries));
    Ok(())
}

async fn read_one(kind: Type, req: &Request, depot: &Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(kind.permission())?;
    let id = req.param::<String>("id").ok_or(ApiError::NotFound)?;
    list::only(&list::query_pairs(req), &["_format"]).map_err(|_| {
        ApiError::bad_request("invalid_search", "A read by id takes no parameter but _format.")
    })?;
    let mut search = Search { ids: Some(vec![id.clone()]), count: 1, ..Search::default() };
    let mut conn = ctx.conn(Scope::Branch).await?;
    let found = find(&ctx, &mut conn, kind, &search, &base_of(&ctx, req)).await?;
    let Some(resource) = found.resources.into_iter().next() else {
        // FHIR's read tells a resource the server knows was deleted (410) from one it never had.
        search.gone = true;
        if rows(&ctx, &mut conn, kind, &search).await?.total == 0 {
            return Err(ApiError::NotFound);
        }
        let message = format!("{}/{id} was deleted.", kind.name());
        fail(req, res, StatusCode::GONE, "deleted", &message);
        return Ok(());
    };
    drop(conn);
    // A read of what is no patient's (a doctor's Schedule) reads no patient data.
    if let Some(patient) = found.patients.first() {
        let details = json!({ "route": kind.route(), "id": id });
        record_read(&ctx, PATIENT_RECORDS, "view", Some(*patient), Some(details)).await?;
    }
    respond(req, res, &resource);
    Ok(())
}

/// `GET /fhir/r4/Patient/{id}/$everything`: the patient, their encounters, and what the
/// caller may also read of their observations, prescriptions and charges, in that order,
/// paged as one searchset. A deleted patient is 410, as its read is; a patient merged into
/// another is a 301 to the survivor's, who holds its records now (the API's reads of a
/// merged patient answer 301 too).
#[handler]
pub async fn everything(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(PATIENTS_READ)?;
    let patient = web::path_id(req, "id")?;
    let pairs = list::query_pairs(req);
    let paging = search::parse(&pairs, Accepts::NOTHING_MORE)?;
    if paging.ids.is_some() {
        return Err(ApiError::bad_request(
            "invalid_search",
            "$everything takes only _count, _offset and _summary=count.",
        ));
    }
    let kinds: Vec<Type> =
        Type::EVERYTHING.into_iter().filter(|kind| ctx.user.can(kind.permission())).collect();
    let (mut skip, mut room, mut total, mut resources) = (paging.offset, paging.count, 0, Vec::new());
    let base = base_of(&ctx, req);
    let mut conn = ctx.conn(Scope::Branch).await?;
    match patient::standing(&mut conn, patient).await? {
        Standing::Unknown => return Err(ApiError::NotFound),
        Standing::Deleted => {
            fail(req, res, StatusCode::GONE, "deleted", &format!("Patient/{patient} was deleted."));
            return Ok(());
        }
        Standing::MergedInto(survivor) => {
            let mut location = format!("/fhir/r4/Patient/{survivor}/$everything");
            if let Some(query) = req.uri().query() {
                location = format!("{location}?{query}");
            }
            let message =
                format!("Patient/{patient} was merged into Patient/{survivor}, who holds its records.");
            moved(req, res, &location, "merged", &message);
            return Ok(());
        }
        Standing::Live => {}
    }
    for kind in &kinds {
        let mut search = Search { count: room, offset: skip, ..Search::default() };
        match kind {
            Type::Patient => search.ids = Some(vec![patient.to_string()]),
            _ => search.patients = Some(vec![patient]),
        }
        let found = find(&ctx, &mut conn, *kind, &search, &base).await?;
        total += found.total;
        skip = (skip - found.total).max(0);
        room -= found.resources.len() as i64;
        resources.extend(found.resources);
    }
    drop(conn);
    let included: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    let details = json!({ "route": "/fhir/r4/Patient/{id}/$everything", "types": included, "query": pairs });
    record_read(&ctx, PATIENT_RECORDS, "view", Some(patient), Some(details)).await?;
    let entries = resources.into_iter().map(|r| entry(&base, r)).collect();
    respond(req, res, &bundle(&base, req.uri().path(), &paging, total, entries));
    Ok(())
}

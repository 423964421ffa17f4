//! `GET /fhir/r4/metadata`: the CapabilityStatement, what this server does of FHIR.

use salvo::prelude::*;
use serde_json::{Value, json};

use super::kinds::Type;
use super::outcome::respond;
use super::search::now;
use crate::http as web;
use crate::state::AppState;

const FAMILY: &str = "The last name: starting with the value, case and accents aside; :contains, holding it \
                      anywhere, case and accents aside; :exact, exactly it; several, comma-separated, match any";

/// Each search parameter a type takes, as `(name, type, documentation)`.
fn parameters(kind: Type) -> Vec<(&'static str, &'static str, &'static str)> {
    let accepts = kind.accepts();
    let mut parameters = vec![("_id", "token", "The resource's id; several, comma-separated, match any")];
    if accepts.patient {
        parameters.push(("patient", "reference", "The patient: an id or Patient/<id>; several match any"));
    }
    if accepts.identifier {
        parameters.push(("identifier", "token", "The PIN, as <pin> or urn:clinic-server:pin|<pin>"));
    }
    if accepts.names {
        parameters.extend([
            ("name", "string", "Any part of the name (first, middle or last name, suffix); see family"),
            ("family", "string", FAMILY),
            ("given", "string", "The first or middle name; see family"),
        ]);
    }
    if let Some(name) = accepts.practitioner {
        parameters.push((name, "reference", "The doctor: an id or Practitioner/<id>; several match any"));
    }
    if accepts.schedule {
        parameters.push((
            "schedule",
            "reference",
            "The doctor's Schedule: an id or Schedule/<id>; several match any",
        ));
    }
    if accepts.code.is_some() {
        parameters.push(("code", "token", "The code, as <code> or <system>|<code>; several match any"));
    }
    if !accepts.statuses.is_empty() {
        parameters.push(("status", "token", "The status; several, comma-separated, match any"));
    }
    for name in accepts.dates {
        parameters.push((
            name,
            "date",
            "A date or date and time, after eq, gt, lt, ge or le; repeated, all hold",
        ));
    }
    parameters
}

/// What a type's `_sort` takes, as its documentation says it.
fn sorting(kind: Type) -> String {
    let sorts: Vec<&str> = kind.accepts().sorts.iter().map(|(name, _)| *name).collect();
    format!("_sort by {}, comma-separated, each after - to sort descending", sorts.join(", "))
}

pub fn statement(base: &str) -> Value {
    let resources: Vec<Value> = Type::ALL
        .into_iter()
        .map(|kind| {
            let search: Vec<Value> = parameters(kind)
                .into_iter()
                .map(|(name, kind, documentation)| json!({ "name": name, "type": kind, "documentation": documentation }))
                .collect();
            let mut resource = json!({
                "type": kind.name(),
                "documentation": sorting(kind),
                "interaction": [{ "code": "read" }, { "code": "search-type" }],
                "searchParam": search,
            });
            if kind == Type::Patient {
                resource["operation"] = json!([{
                    "name": "everything",
                    "definition": "http://hl7.org/fhir/OperationDefinition/Patient-everything",
                }]);
            }
            resource
        })
        .chain([json!({
            "type": "Binary",
            "interaction": [{ "code": "read" }],
            "documentation": "An attachment's bytes (a DocumentReference's content): FHIR JSON with base64 data, or the bytes themselves",
        })])
        .collect();
    json!({
        "resourceType": "CapabilityStatement",
        "status": "active",
        "date": now(),
        "publisher": "clinic-server",
        "kind": "instance",
        "software": { "name": "clinic-server", "version": env!("CARGO_PKG_VERSION") },
        "implementation": { "description": "The branch's records, read-only", "url": format!("{base}/fhir/r4") },
        "fhirVersion": "4.0.1",
        "format": ["application/fhir+json", "json"],
        "rest": [{
            "mode": "server",
            "documentation": "Searches page with _count (1 to 100, default 20) and _offset; the links of a Bundle keep the query. \
                              _count=0 or _summary=count answers the total alone. _sort orders by the parameters each type's \
                              documentation names, then by the type's own order. A modifier or _sort not taken is a 400.",
            "security": {
                "description": "A bearer token from POST /api/v1/auth/login in Authorization, and the branch in X-Branch-Id; \
                                each type needs the permission its API reads need."
            },
            "resource": resources,
        }],
    })
}

#[handler]
pub async fn metadata(req: &mut Request, depot: &mut Depot, res: &mut Response) {
    let state = AppState::of(depot);
    let base = web::base_url(req, state.trusts_forwarded_headers(req));
    respond(req, res, &statement(&base));
}

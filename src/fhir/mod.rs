//! A FHIR R4 read facade over the branch's records, at `/fhir/r4` beside `/api/v1`: `Patient`,
//! `Encounter` (visits), `Observation` (intraocular pressure, visual acuity and refraction of
//! each eye), `VisionPrescription` (final refractions) and `ChargeItem` (posted charges), read
//! by id and searched by `_id`, `patient` and date, plus `Patient/{id}/$everything` and the
//! CapabilityStatement. It only reads, with its own SQL on the request's branch connection;
//! each type needs the permission the API's reads of the same records need, and every read
//! of patient data is recorded as the API's patient reads are.

mod capability;
mod charge;
mod codes;
mod encounter;
mod handlers;
mod kinds;
mod observation;
mod outcome;
mod patient;
mod registry;
mod search;
mod shape;
mod vision;

use salvo::oapi::{Object, PathItemType};

use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::guard::Produces;
pub use kinds::Type;
pub use outcome::{OperationOutcomes, catch_errors};

/// A resource of `kind`, as the API description shows it.
fn resource_schema(kind: &str) -> Object {
    Object::new()
        .description(format!("A FHIR R4 {kind}"))
        .property("resourceType", docs::string().enum_values([kind]))
        .property("id", docs::string())
        .required("resourceType")
}

/// A searchset Bundle of `kind`.
fn bundle_schema(kind: &str) -> Object {
    let link = Object::new()
        .property("relation", docs::string().enum_values(["self", "next", "previous"]))
        .property("url", docs::string());
    let entry = Object::new()
        .property("fullUrl", docs::string())
        .property("resource", resource_schema(kind))
        .property("search", Object::new().property("mode", docs::string()));
    Object::new()
        .description(format!("A FHIR R4 searchset Bundle of {kind}"))
        .property("resourceType", docs::string().enum_values(["Bundle"]))
        .property("type", docs::string().enum_values(["searchset"]))
        .property("total", docs::integer())
        .property("link", salvo::oapi::Array::new().items(link))
        .property("entry", salvo::oapi::Array::new().items(entry))
        .required("resourceType")
        .required("type")
}

/// The routes, each with its description: the CapabilityStatement for anyone; the rest for a
/// caller in a branch (`app` puts them behind the token and `X-Branch-Id`, and everything
/// behind [`OperationOutcomes`]).
pub fn endpoints() -> Vec<Endpoints> {
    let mut public = Endpoints::at_root(Access::Public).hoop(Produces(outcome::MEDIA));
    let op = public
        .fhir_operation(
            "fhir",
            "The FHIR CapabilityStatement: the types, interactions and search parameters served",
        )
        .description("Needs no token: a FHIR client reads it before it signs in; it holds no patient data.");
    let op = Doc::fhir_answers(op, "200", "The CapabilityStatement", resource_schema("CapabilityStatement"));
    public.add(PathItemType::Get, "fhir/r4/metadata", capability::metadata, op);

    let mut branch = Endpoints::at_root(Access::Branch).hoop(Produces(outcome::MEDIA));
    for kind in Type::ALL {
        let name = kind.name();
        let needs = format!("Needs `{}`.", kind.permission());
        let mut op = branch.fhir_operation("fhir", &format!("Search {name}")).description(format!(
            "{needs} A searchset Bundle with `total` and `self`/`next`/`previous` links; a parameter \
             this search does not take, or a value holding a control character, is a 400."
        ));
        let mut parameters = vec![("_id", docs::string(), "Ids, comma-separated")];
        let accepts = kind.accepts();
        if accepts.patient {
            parameters.push((
                "patient",
                docs::string(),
                "A Patient id or reference (Patient/4); comma-separated",
            ));
        }
        if accepts.identifier {
            parameters.push((
                "identifier",
                docs::string(),
                "The PIN, or urn:clinic-server:pin|PIN; comma-separated; no control characters",
            ));
        }
        for date in accepts.dates {
            parameters.push((
                date,
                docs::string(),
                "A date, or date and time, after eq, gt, lt, ge or le; comma-separated (any), each with \
                 its own prefix; may repeat (all)",
            ));
        }
        parameters.push((
            "_count",
            docs::integer().minimum(1).maximum(search::MAX_COUNT),
            "Entries per page, default 20",
        ));
        parameters.push((
            "_offset",
            docs::integer().minimum(0).maximum(search::MAX_OFFSET),
            "Entries to skip",
        ));
        parameters.push((
            "_format",
            docs::string().enum_values(["json", "application/fhir+json", "application/json"]),
            "Only JSON",
        ));
        for (parameter, schema, description) in parameters {
            op = op.add_parameter(docs::query(parameter, schema, description));
        }
        let op = Doc::fhir_answers(op, "200", "The matching resources", bundle_schema(name));
        branch.add(PathItemType::Get, &format!("fhir/r4/{name}"), handlers::Serve::Search(kind), op);

        let id = if kind.numeric_ids() {
            docs::path_id()
        } else {
            docs::path_param("id").schema(docs::string().pattern("^[A-Za-z0-9.-]{1,64}$"))
        };
        let op = branch
            .fhir_operation("fhir", &format!("Read a {name} by id"))
            .description(format!("{needs} 410 for a resource deleted, 404 for an id the branch never had."))
            .add_parameter(id);
        let op = Doc::fhir_answers(op, "200", &format!("The {name}"), resource_schema(name));
        let op = Doc::fhir_answers(
            op,
            "404",
            "No such resource in this branch",
            resource_schema("OperationOutcome"),
        );
        let op =
            Doc::fhir_answers(op, "410", "The resource was deleted", resource_schema("OperationOutcome"));
        let path = if kind.numeric_ids() {
            format!("fhir/r4/{name}/{{id:num}}")
        } else {
            format!("fhir/r4/{name}/{{id}}")
        };
        branch.add(PathItemType::Get, &path, handlers::Serve::Read(kind), op);
    }
    let op = branch
        .fhir_operation(
            "fhir",
            "Everything of a patient: the patient, encounters, observations, prescriptions, charges",
        )
        .description(
            "Needs `patients.read`; observations and prescriptions only with `clinical.read`, charges only \
             with `billing.read`. One searchset, paged with _count and _offset. A patient merged into \
             another moves (301) to the survivor's.",
        )
        .add_parameter(docs::path_id())
        .add_parameter(docs::query(
            "_count",
            docs::integer().minimum(1).maximum(search::MAX_COUNT),
            "Entries per page, default 20",
        ))
        .add_parameter(docs::query(
            "_offset",
            docs::integer().minimum(0).maximum(search::MAX_OFFSET),
            "Entries to skip",
        ));
    let op = Doc::fhir_answers(op, "200", "The patient's records", bundle_schema("Patient"));
    let op =
        Doc::fhir_answers(op, "404", "No such patient in this branch", resource_schema("OperationOutcome"));
    let op = Doc::fhir_answers(op, "410", "The patient was deleted", resource_schema("OperationOutcome"));
    let op = Doc::fhir_answers(
        op,
        "301",
        "The patient was merged into another: Location is the survivor's $everything",
        resource_schema("OperationOutcome"),
    );
    branch.add(PathItemType::Get, "fhir/r4/Patient/{id:num}/$everything", handlers::everything, op);
    vec![public, branch]
}

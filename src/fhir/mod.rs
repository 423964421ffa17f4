//! A FHIR R4 read facade over the branch's records, at `/fhir/r4` beside `/api/v1`: `Patient`,
//! `Encounter` (visits), `Observation` (intraocular pressure, visual acuity and refraction of
//! each eye), `VisionPrescription` (final refractions), `ChargeItem` (posted charges),
//! `Appointment` (searched by `patient`, `practitioner`, `date` and `status` too) and
//! `Schedule` (a doctor's hours at the branch, one per doctor, searched by `actor`) and `Slot`
//! (free slots, from the availability search, by `schedule` and `start`) and
//! `AllergyIntolerance` (a patient's allergies, `allergy`), `Condition` and
//! `DocumentReference` (a patient's attachments, `document`), read by id and searched by
//! `_id`, `patient` and date, plus `Binary` (an attachment's bytes, read only: `binary`),
//! `Patient/{id}/$everything` and the CapabilityStatement; a Patient by its names too
//! (`names`), any search sorted (`_sort`) or answered as its total alone (`_count=0`,
//! `_summary=count`). It only reads, with its own SQL on the request's branch connection;
//! each type needs the permission the API's reads of the same records need, and every read
//! of patient data is recorded as the API's patient reads are.
mod allergy;
mod appointment;
mod binary;
mod capability;
mod charge;
mod codes;
mod condition;
mod dates;
mod document;
mod encounter;
mod handlers;
mod kinds;
mod names;
mod observation;
mod outcome;
mod patient;
mod registry;
mod schedule;
mod search;
mod shape;
mod slot;
mod sql;
mod vision;

use salvo::oapi::{Content, Object, PathItemType, RefOr, Schema, SchemaFormat};

use crate::http::docs::{self, Access, Doc, FHIR_JSON};
use crate::http::endpoints::Endpoints;
use crate::http::guard::Produces;
pub use kinds::Type;
pub use outcome::{OperationOutcomes, catch_errors};

/// What `_count` and `_summary` are, on every search.
const COUNT: &str = "Entries per page, default 20; 0 answers the total alone";
const SUMMARY: &str = "count: the total alone, no entries; false: the entries (the default)";

/// How a name parameter matches, by its modifier.
const NAME_STARTS: &str = "starts with it, case and accents aside; comma-separated (any); may repeat (all)";
const NAME_EXACT: &str = "is exactly it, case and accents included; comma-separated (any)";
const NAME_CONTAINS: &str = "holds it anywhere, case and accents aside; comma-separated (any)";

/// A resource of `kind`, as the API description shows it.
fn resource_schema(kind: &str) -> Object {
    resource_of(&[kind], kind)
}

/// A resource of one of `kinds`, described as `what`.
fn resource_of(kinds: &[&str], what: &str) -> Object {
    Object::new()
        .description(format!("A FHIR R4 {what}"))
        .property("resourceType", docs::string().enum_values(kinds.iter().copied()))
        .property("id", docs::string())
        .required("resourceType")
}

/// A searchset Bundle of `kind`.
fn bundle_schema(kind: &str) -> Object {
    bundle_of(resource_schema(kind), kind)
}

/// A searchset Bundle of `resource`, described as holding `what`.
fn bundle_of(resource: Object, what: &str) -> Object {
    let link = Object::new()
        .property("relation", docs::string().enum_values(["self", "next", "previous"]))
        .property("url", docs::string());
    let entry = Object::new()
        .property("fullUrl", docs::string())
        .property("resource", resource)
        .property("search", Object::new().property("mode", docs::string()));
    Object::new()
        .description(format!("A FHIR R4 searchset Bundle of {what}"))
        .property("resourceType", docs::string().enum_values(["Bundle"]))
        .property("type", docs::string().enum_values(["searchset"]))
        .property("total", docs::integer())
        .property("link", salvo::oapi::Array::new().items(link))
        .property("entry", salvo::oapi::Array::new().items(entry))
        .required("resourceType")
        .required("type")
}

/// What a search's `patient` takes: ids or references (`Patient/4`, or a URL ending so),
/// comma-separated; blank is left out.
fn patient_pattern() -> String {
    reference_pattern("Patient")
}

/// Ids or references to `kind` (`Patient/4`, or a URL ending so), comma-separated.
fn reference_pattern(kind: &str) -> String {
    let item = format!(r"(([^,\x00-\x1f\x7f-\x9f]*/)?{kind}/)?\+?0*[1-9][0-9]{{0,17}}");
    format!("^ *({item})? *(, *({item})? *)*$")
}

/// What a date search takes: a comma list of a prefix, then a date or a date and time, each
/// part in its range (years 1 to 9899; the 29th of February is left out of the pattern, not
/// refused); a blank item is left out.
fn date_pattern() -> String {
    let year = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-8][0-9]{3}|9[0-8][0-9]{2})";
    let day = "((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)";
    let time =
        r"T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,9})?)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?";
    let item = format!("((eq|gt|lt|ge|le)?{year}(-(0[1-9]|1[0-2])|-{day}({time})?)?)?");
    // A comma list matches any of its values; an empty item is left out.
    format!("^ *{item} *(, *{item} *)*$")
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
    public.add(PathItemType::Get, "fhir/r4/metadata", "getFhirCapabilities", capability::metadata, op);

    let mut branch = Endpoints::at_root(Access::Branch).hoop(Produces(outcome::MEDIA));
    for kind in Type::ALL {
        let name = kind.name();
        let needs = format!("Needs `{}`.", kind.permission());
        let mut op = branch.fhir_operation("fhir", &format!("Search {name}")).description(format!(
            "{needs} A searchset Bundle with `total` and `self`/`next`/`previous` links (the total \
             alone with `_count=0` or `_summary=count`); a parameter this search does not take, a \
             modifier it does not know, a `_sort` it does not take, or a value holding a control \
             character, is a 400."
        ));
        let text = || docs::string().pattern(docs::text_pattern(true, true));
        let mut parameters: Vec<(&str, RefOr<Schema>, &str)> =
            vec![("_id", text().into(), "Ids, comma-separated")];
        let accepts = kind.accepts();
        // Each name parameter, then with each of its modifiers.
        let named: Vec<(String, String)> = names::PARAMETERS
            .iter()
            .filter(|_| accepts.names)
            .flat_map(|name| {
                let part = match *name {
                    "family" => "The last name",
                    "given" => "The first or middle name",
                    _ => "Any part of the name (first, middle or last name, suffix)",
                };
                [(name.to_string(), format!("{part}: {NAME_STARTS}"))].into_iter().chain(
                    names::MODIFIERS.iter().map(move |modifier| {
                        let how = if *modifier == "exact" { NAME_EXACT } else { NAME_CONTAINS };
                        (format!("{name}:{modifier}"), format!("{part}: {how}"))
                    }),
                )
            })
            .collect();
        for (name, description) in &named {
            parameters.push((name, text().into(), description));
        }
        if accepts.patient {
            parameters.push((
                "patient",
                docs::string().pattern(patient_pattern()).into(),
                "A Patient id or reference (Patient/4); comma-separated",
            ));
        }
        if accepts.identifier {
            parameters.push((
                "identifier",
                text().into(),
                "The PIN, or urn:clinic-server:pin|PIN; comma-separated (any); may repeat (all)",
            ));
        }
        if let Some(name) = accepts.practitioner {
            parameters.push((
                name,
                docs::string().pattern(reference_pattern("Practitioner")).into(),
                "A doctor's id or reference (Practitioner/4); comma-separated",
            ));
        }
        if accepts.schedule {
            parameters.push((
                "schedule",
                docs::string().pattern(reference_pattern("Schedule")).into(),
                "A Schedule id or reference (Schedule/4, a doctor's); comma-separated",
            ));
        }
        if accepts.code.is_some() {
            parameters.push(("code", text().into(), "Codes, as code or system|code; comma-separated (any)"));
        }
        if !accepts.statuses.is_empty() {
            let item = accepts.statuses.join("|");
            parameters.push((
                "status",
                docs::string().pattern(format!("^ *({item})? *(, *({item})? *)*$")).into(),
                "Statuses, comma-separated (any); may repeat (all)",
            ));
        }
        for date in accepts.dates {
            parameters.push((
                date,
                docs::string().pattern(date_pattern()).into(),
                "A date (YYYY, YYYY-MM, YYYY-MM-DD) or a date and time (YYYY-MM-DDThh:mm[:ss[.s]][Z|+hh:mm]), \
                 after eq, gt, lt, ge or le; comma-separated (any), each with its own prefix; may repeat (all)",
            ));
        }
        let sorts: Vec<&str> = accepts.sorts.iter().map(|(name, _)| *name).collect();
        let sorted = format!(" *(-?({}))? *", sorts.join("|"));
        if !sorts.is_empty() {
            parameters.push((
                "_sort",
                docs::string().pattern(format!("^{sorted}(,{sorted})*$")).into(),
                "The order: parameters, comma-separated, each after - to sort descending; then the type's own order",
            ));
        }
        parameters.push((
            "_count",
            docs::or_blank(docs::integer().minimum(0).maximum(search::MAX_COUNT)),
            COUNT,
        ));
        parameters.push((
            "_summary",
            docs::or_blank(docs::string().enum_values(["count", "false"])),
            SUMMARY,
        ));
        parameters.push((
            "_totalMethod",
            docs::or_blank(docs::string().enum_values(["count"])),
            "Only count (fhirpy's count() sends it): every total is counted",
        ));
        parameters.push((
            "_offset",
            docs::or_blank(docs::integer().minimum(0).maximum(search::MAX_OFFSET)),
            "Entries to skip",
        ));
        parameters.push((
            "_format",
            docs::or_blank(docs::string().enum_values(["json", "application/json", "application/fhir+json"])),
            "Only JSON",
        ));
        for (parameter, schema, description) in parameters {
            op = op.add_parameter(docs::query(parameter, schema, description));
        }
        let op = Doc::fhir_answers(op, "200", "The matching resources", bundle_schema(name));
        branch.add(
            PathItemType::Get,
            &format!("fhir/r4/{name}"),
            &format!("searchFhir{name}"),
            handlers::Serve::Search(kind),
            op,
        );

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
        branch.add(PathItemType::Get, &path, &format!("readFhir{name}"), handlers::Serve::Read(kind), op);
    }
    let op = branch
        .fhir_operation(
            "fhir",
            "Everything of a patient: the patient, encounters, observations, prescriptions, charges, appointments",
        )
        .description(
            "Needs `patients.read`; observations and prescriptions only with `clinical.read`, charges only \
             with `billing.read`, appointments only with `appointments.read`, documents only with \
             `attachments.read`. One searchset, paged with _count and _offset (`_count=0` or \
             `_summary=count`: the total alone). A patient merged into another moves (301) to the \
             survivor's.",
        )
        .add_parameter(docs::path_id())
        .add_parameter(docs::query(
            "_count",
            docs::or_blank(docs::integer().minimum(0).maximum(search::MAX_COUNT)),
            COUNT,
        ))
        .add_parameter(docs::query(
            "_summary",
            docs::or_blank(docs::string().enum_values(["count", "false"])),
            SUMMARY,
        ))
        .add_parameter(docs::query(
            "_offset",
            docs::or_blank(docs::integer().minimum(0).maximum(search::MAX_OFFSET)),
            "Entries to skip",
        ));
    let kinds: Vec<&str> = Type::EVERYTHING.iter().map(|kind| kind.name()).collect();
    let records = bundle_of(resource_of(&kinds, "resource of the patient"), "the patient's records");
    let op = Doc::fhir_answers(op, "200", "The patient's records", records);
    let op =
        Doc::fhir_answers(op, "404", "No such patient in this branch", resource_schema("OperationOutcome"));
    let op = Doc::fhir_answers(op, "410", "The patient was deleted", resource_schema("OperationOutcome"));
    let op = Doc::fhir_answers(
        op,
        "301",
        "The patient was merged into another: Location is the survivor's $everything",
        resource_schema("OperationOutcome"),
    );
    branch.add(
        PathItemType::Get,
        "fhir/r4/Patient/{id:num}/$everything",
        "getFhirPatientEverything",
        handlers::everything,
        op,
    );

    let op = branch
        .fhir_operation("fhir", "Read a Binary by id: an attachment's bytes")
        .description(format!(
            "Needs `attachments.read`. Asked for as FHIR JSON (or `_format=json`): a Binary with the \
             bytes in base64, for a file of at most {} bytes (406 `binary_too_large` past it); asked \
             for as anything else: the bytes with their media type, as the attachment's content route \
             answers them (ETag, Range). Audited as a download of the content. 410 for an attachment \
             removed from the chart.",
            binary::JSON_BOUND
        ))
        .add_parameter(docs::path_id())
        .add_parameter(docs::query(
            "_format",
            docs::or_blank(docs::string().enum_values(["json", "application/json", "application/fhir+json"])),
            "The Binary as FHIR JSON",
        ));
    let schema = resource_schema("Binary")
        .property("contentType", docs::string())
        .property("securityContext", Object::new().property("reference", docs::string()))
        .property("data", docs::string().format(SchemaFormat::Custom("byte".into())));
    let mut answer = salvo::oapi::Response::new("The Binary, or the bytes themselves")
        .add_content(FHIR_JSON, Content::new(schema.clone()))
        .add_content("application/json", Content::new(schema));
    for media in &binary::PRODUCED[2..] {
        answer = answer.add_content(*media, Content::new(docs::binary(media)));
    }
    let op = op.add_response("200", answer);
    let op = Doc::answers_bytes(op, "206", "The range asked for, with Content-Range", &binary::PRODUCED[2..]);
    let op = Doc::fhir_answers(
        op,
        "404",
        "No such attachment in this branch",
        resource_schema("OperationOutcome"),
    );
    let op = Doc::fhir_answers(op, "410", "The attachment was removed", resource_schema("OperationOutcome"));
    branch.add_behind(
        PathItemType::Get,
        "fhir/r4/Binary/{id:num}",
        "readFhirBinary",
        Some(Produces(binary::PRODUCED)),
        binary::read,
        op,
    );
    vec![public, branch]
}

//! The served API description is one that real client generators and validators accept:
//! valid against the OpenAPI 3.1 schema, every `$ref` resolving, every operation named, and
//! (where the machine has it) accepted by openapi-spec-validator, the validator client
//! generators rely on (the generators themselves: `openapi_clients.rs`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use clinic_server::resource::field::{Field, Kind, Target};

use crate::support::{TestApp, assert_status, reply, tool_present};

/// The OpenAPI 3.1 schema (2022-10-07), as published by the OpenAPI Initiative.
const OAS_3_1_SCHEMA: &str = include_str!("data/openapi-3.1.schema.json");

pub async fn served_document() -> (TestApp, Value) {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_status(&r, 200);
    (app, r.body)
}

/// Every `$ref` in `node`, with where it was found.
fn references<'a>(node: &'a Value, at: &str, found: &mut Vec<(String, &'a str)>) {
    match node {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(target)) => found.push((at.to_owned(), target)),
                    _ => references(value, &format!("{at}/{key}"), found),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                references(item, &format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn every_reference_in_the_document_resolves() {
    let (_app, doc) = served_document().await;
    let mut found = Vec::new();
    references(&doc, "", &mut found);
    assert!(found.len() > 100, "only {} references found", found.len());
    let dangling: BTreeSet<String> = found
        .iter()
        .filter(|(_, target)| target.strip_prefix('#').is_none_or(|pointer| doc.pointer(pointer).is_none()))
        .map(|(at, target)| format!("{target} (at {at})"))
        .collect();
    assert!(dangling.is_empty(), "dangling references: {dangling:#?}");
}

#[tokio::test]
async fn the_document_is_valid_openapi_3_1() {
    let (_app, doc) = served_document().await;
    let schema: Value = serde_json::from_str(OAS_3_1_SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the OpenAPI schema compiles");
    let errors: Vec<String> =
        validator.iter_errors(&doc).take(20).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "the document breaks the OpenAPI 3.1 schema: {errors:#?}");
}

/// openapi-spec-validator (PyPI) also resolves every reference and checks every schema.
/// CI installs it and sets `OPENAPI_SPEC_VALIDATOR=required`; elsewhere it runs when present.
#[tokio::test]
async fn openapi_spec_validator_accepts_the_document() {
    let present = std::process::Command::new("openapi-spec-validator")
        .arg("--help")
        .output()
        .is_ok_and(|o| o.status.success());
    let missing = "openapi-spec-validator not found (pip install openapi-spec-validator)";
    let skipped = "its check is skipped, the schema and reference checks still ran";
    if !tool_present(present, "OPENAPI_SPEC_VALIDATOR", missing, skipped) {
        return;
    }
    let (_app, doc) = served_document().await;
    let file = std::env::temp_dir().join(format!("clinic-openapi-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = std::process::Command::new("openapi-spec-validator").arg(&file).output().unwrap();
    let _ = std::fs::remove_file(&file);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "openapi-spec-validator refused the document: {}",
        &said[..said.len().min(2000)]
    );
}

/// The routes of a mergeable record (a patient) as the server knows them: every served route
/// at or below `<collection>/{id}` of a declaration whose records may be merged.
fn routes_of_mergeable_records() -> Vec<(String, String)> {
    let resources = clinic_server::app::resources();
    let collections: Vec<String> =
        clinic_server::resource::merged::mergeable(&resources).map(|r| r.collection_path()).collect();
    assert!(!collections.is_empty(), "no declaration's records may be merged");
    clinic_server::app::served_routes()
        .into_iter()
        .filter(|(_, path)| {
            collections.iter().any(|c| {
                path.strip_prefix(c.as_str())
                    .and_then(|below| below.strip_prefix("/{"))
                    .is_some_and(|member| member.split('/').next().is_some_and(|id| id.ends_with('}')))
            })
        })
        .collect()
}

/// Every operation of a patient's routes documents what the server answers for a merged
/// patient (301 to a read, 410 to a write), and so does every write whose body names a
/// patient (410).
#[tokio::test]
async fn every_route_of_a_mergeable_record_documents_its_merged_answers() {
    let (_app, doc) = served_document().await;
    let routes = routes_of_mergeable_records();
    assert!(routes.len() > 15, "only {} routes of mergeable records", routes.len());
    let status = |method: &str| if method == "GET" { "301" } else { "410" };
    let missing: Vec<String> = routes
        .iter()
        .filter(|(method, path)| {
            doc["paths"][path][method.to_lowercase()]["responses"][status(method)].is_null()
        })
        .map(|(method, path)| format!("{method} {path}: {}", status(method)))
        .collect();
    assert!(missing.is_empty(), "undocumented answers for merged records: {missing:#?}");

    let resources = clinic_server::app::resources();
    let tables: Vec<&str> = clinic_server::resource::merged::mergeable(&resources).map(|r| r.table).collect();
    let names_merged = |f: &Field| matches!(f.kind, Kind::Ref(Target::Branch(t) | Target::InBranch(t)) if tables.contains(&t));
    let mut naming = Vec::new();
    for r in resources.iter().filter(|r| r.writable && r.all_fields().any(names_merged)) {
        naming.push(("post".to_owned(), r.collection_path()));
        naming.push(("put".to_owned(), format!("{}/{{id}}", r.collection_path())));
    }
    assert!(naming.len() > 10, "only {} declared writes name a patient", naming.len());
    // Hand-written writes name a patient as the declarations do (`patient_id`), which the
    // schemas' triggers check whatever route writes the row.
    let names: BTreeSet<&str> =
        resources.iter().flat_map(|r| r.all_fields()).filter(|f| names_merged(f)).map(|f| f.name).collect();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            // A declared body is a component the operation refers to.
            let schema = match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
                Some(name) => &doc["components"]["schemas"][name],
                None => schema,
            };
            let properties = &schema["properties"];
            if names.iter().any(|name| !properties[*name].is_null()) {
                naming.push((method.clone(), path.clone()));
            }
        }
    }
    assert!(naming.iter().any(|(_, path)| path == "/api/v1/queue/visits"), "{naming:?}");
    let missing: Vec<String> = naming
        .iter()
        .filter(|(method, path)| doc["paths"][path][method]["responses"]["410"].is_null())
        .map(|(method, path)| format!("{method} {path}"))
        .collect();
    assert!(missing.is_empty(), "writes naming a patient without their 410: {missing:#?}");
}

/// What the document says is what a merged patient's routes answer: every read of a patient's
/// routes that takes only the patient's id answers 301 to the same route of the survivor.
/// Except the access log: who saw a record is read after the record is gone, a merged
/// duplicate's included (its own log, not the survivor's).
#[tokio::test]
async fn every_read_of_a_merged_patient_answers_the_documented_301() {
    let (app, doc) = served_document().await;
    let branch = app.main_branch().await;
    let survivor = crate::support::id_of(&app.create_patient(branch, "Ana", "Reyes").await);
    let duplicate = crate::support::id_of(&app.create_patient(branch, "Anna", "Reyes").await);
    let merged = app
        .post(
            &format!("/api/v1/patients/{survivor}/merge"),
            Some(branch),
            serde_json::json!({ "duplicate_id": duplicate, "reason": "registered twice" }),
        )
        .await;
    assert_status(&merged, 201);

    let reads: Vec<String> = routes_of_mergeable_records()
        .into_iter()
        .filter(|(method, path)| method == "GET" && path.matches('{').count() == 1)
        .filter(|(_, path)| !path.contains("/access-log"))
        .map(|(_, path)| path)
        .collect();
    assert!(reads.len() > 3, "only {} reads of a patient", reads.len());
    for path in reads {
        assert!(!doc["paths"][&path]["get"]["responses"]["301"].is_null(), "GET {path}: 301 undocumented");
        let (before, after) = path.split_once('{').unwrap();
        let rest = &after[after.find('}').unwrap() + 1..];
        let query = required_query(&doc["paths"][&path]["get"]);
        let r = app.get(&format!("{before}{duplicate}{rest}{query}"), Some(branch)).await;
        assert_status(&r, 301);
        let survivors = format!("{before}{survivor}{rest}{query}");
        assert_eq!(r.header("location"), Some(survivors.as_str()), "GET {path}");
    }
}

/// The query an operation cannot go without: each required parameter at its first allowed
/// value.
fn required_query(operation: &Value) -> String {
    let pairs: Vec<String> = operation["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["in"] == "query" && p["required"] == true)
        .map(|p| {
            let value = p["schema"]["enum"][0].as_str();
            format!(
                "{}={}",
                p["name"].as_str().unwrap(),
                value.expect("a required parameter lists its values")
            )
        })
        .collect();
    if pairs.is_empty() { String::new() } else { format!("?{}", pairs.join("&")) }
}

#[tokio::test]
async fn attachments_describe_their_file_bodies_and_every_answer_they_give() {
    let (_app, doc) = served_document().await;
    let upload = &doc["paths"]["/api/v1/patients/{patient_id}/attachments"]["post"];
    let body = &upload["requestBody"]["content"];
    assert_eq!(body["application/pdf"]["schema"]["format"], "binary", "{body}");
    assert_eq!(body["multipart/form-data"]["schema"]["properties"]["file"]["format"], "binary", "{body}");
    for status in ["200", "201", "413", "415", "422"] {
        assert!(upload["responses"][status].is_object(), "upload: no {status}");
    }
    let content = &doc["paths"]["/api/v1/patients/{patient_id}/attachments/{id}/content"]["get"];
    for status in ["200", "206", "304", "416", "422"] {
        assert!(content["responses"][status].is_object(), "content: no {status}");
    }
    let remove = &doc["paths"]["/api/v1/patients/{patient_id}/attachments/{id}"]["delete"];
    assert!(remove["responses"]["200"].is_object());
}

/// The verbs a hand-written route's `operationId` may start with (`docs/api-decisions.md`); a
/// declared resource's start with `list`, `get`, `create`, `update`, `delete` or the name of
/// one of its actions.
const HAND_WRITTEN_VERBS: &[&str] = &[
    "add", "change", "check", "confirm", "create", "delete", "disable", "end", "export", "get", "issue",
    "list", "login", "logout", "merge", "read", "remove", "reset", "revoke", "search", "send", "start",
    "stream", "switch", "transfer", "unmerge", "update", "upload", "verify",
];

/// `no_show` as an `operationId` starts: `noShow`.
fn camel_case(name: &str) -> String {
    let mut words = name.split('_');
    let first = words.next().unwrap_or_default().to_owned();
    words.fold(first, |id, word| {
        let mut chars = word.chars();
        id + &chars.next().map(|c| c.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
    })
}

/// Every operation has an `operationId`, none twice, each camelCase and starting with its
/// verb, followed by nothing or by a capital (what it acts on): `login`, `listPatients`.
#[tokio::test]
async fn every_operation_has_a_unique_operation_id_that_starts_with_its_verb() {
    let (_app, doc) = served_document().await;
    let mut verbs: BTreeSet<String> = HAND_WRITTEN_VERBS.iter().map(|v| (*v).to_owned()).collect();
    for r in clinic_server::app::resources() {
        verbs.extend(r.actions.iter().map(|a| camel_case(a.name)));
    }
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let at = format!("{} {path}", method.to_uppercase());
            let Some(id) = op["operationId"].as_str() else {
                wrong.push(format!("{at}: no operationId"));
                continue;
            };
            let camel = id.starts_with(|c: char| c.is_ascii_lowercase())
                && id.chars().all(|c| c.is_ascii_alphanumeric());
            let verb_first = verbs.iter().any(|verb| {
                id.strip_prefix(verb.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_uppercase()))
            });
            if !camel || !verb_first {
                wrong.push(format!("{at}: {id} is not a verb and its object in camelCase"));
            }
            if let Some(other) = ids.insert(id.to_owned(), at.clone()) {
                wrong.push(format!("{at}: {id} also names {other}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(ids.len() > 300, "only {} operations", ids.len());
    let named = |id: &str| ids.get(id).map(String::as_str);
    assert_eq!(named("login"), Some("POST /api/v1/auth/login"));
    assert_eq!(named("listPatients"), Some("GET /api/v1/patients"));
    assert_eq!(named("createPatient"), Some("POST /api/v1/patients"));
    assert_eq!(named("getPatient"), Some("GET /api/v1/patients/{id}"));
    assert_eq!(named("updatePatient"), Some("PUT /api/v1/patients/{id}"));
    assert_eq!(named("deletePatient"), Some("DELETE /api/v1/patients/{id}"));
    assert_eq!(named("signMedicalCertificate"), Some("POST /api/v1/medical-certificates/{id}/sign"));
    assert_eq!(named("noShowAppointment"), Some("POST /api/v1/appointments/{id}/no-show"));
    assert_eq!(named("listAmslerGrids"), Some("GET /api/v1/amsler-grids"));
    assert_eq!(named("listSystemAuditRecords"), Some("GET /api/v1/system-audit-logs"));
    assert_eq!(named("uploadBranchLogo"), Some("PUT /api/v1/branches/{id}/logo"));
}

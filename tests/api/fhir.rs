//! The FHIR R4 read facade (`/fhir/r4`): every type answered and validated by a FHIR model
//! library (fhir.resources, run on the server's real answers), the codes of each eye, search
//! by `patient`, dates with their prefixes, `_id` and a patient's names, `_sort`, the total
//! alone, paging that keeps the query, `$everything`, permissions per type, OperationOutcomes,
//! content negotiation, tenant isolation, the read audit, and searches made by a FHIR client
//! library (fhirpy).
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

mod access;
mod appointments;
mod conditions;
mod documents;
mod edges;
mod fhirpy;
mod names;
mod search;
mod slots;
mod sorting;
mod types;

use serde_json::{Value, json};

use crate::support::{Clinic, Reply, TestApp, assert_status, id_of, reply, tool_present};

const FHIR_JSON: &str = "application/fhir+json";

/// `GET path` as the holder of `token` (none: no Authorization), in `branch`.
async fn get_as(app: &TestApp, token: Option<&str>, path: &str, branch: Option<i64>) -> Reply {
    let mut req = app.http.get(app.url(path)).header("accept", FHIR_JSON);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(branch) = branch {
        req = req.header("x-branch-id", branch.to_string());
    }
    reply(req).await
}

/// `GET path` as the administrator in `branch`: asserts `status` and a FHIR JSON answer.
async fn fhir(app: &TestApp, branch: i64, path: &str, status: u16) -> Value {
    let r = get_as(app, Some(&app.admin_token), path, Some(branch)).await;
    assert_status(&r, status);
    assert_fhir(&r, status);
    r.body
}

#[track_caller]
fn assert_fhir(r: &Reply, status: u16) {
    assert_status(r, status);
    let media = r.header("content-type").unwrap_or_default();
    assert!(media.starts_with(FHIR_JSON), "answered as {media}: {}", r.text);
}

/// An OperationOutcome with `status`, FHIR's issue type `issue` and the server's `code`.
#[track_caller]
fn assert_outcome(r: &Reply, status: u16, issue: &str, code: &str) {
    assert_fhir(r, status);
    assert_eq!(r.body["resourceType"], "OperationOutcome", "{}", r.text);
    assert_eq!(r.body["issue"][0]["severity"], "error");
    assert_eq!(r.body["issue"][0]["code"], issue, "{}", r.text);
    assert_eq!(r.body["issue"][0]["details"]["coding"][0]["code"], code, "{}", r.text);
}

/// The resources of a searchset Bundle.
fn resources(bundle: &Value) -> Vec<Value> {
    assert_eq!(bundle["resourceType"], "Bundle", "{bundle}");
    assert_eq!(bundle["type"], "searchset");
    bundle["entry"].as_array().map(|e| e.iter().map(|e| e["resource"].clone()).collect()).unwrap_or_default()
}

fn ids(bundle: &Value) -> Vec<String> {
    resources(bundle).iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

fn link(bundle: &Value, relation: &str) -> Option<String> {
    bundle["link"]
        .as_array()?
        .iter()
        .find(|l| l["relation"] == relation)
        .map(|l| l["url"].as_str().unwrap().to_owned())
}

/// The resource with `id` among a Bundle's.
fn with_id(bundle: &Value, id: &str) -> Value {
    resources(bundle).into_iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no {id} in {bundle}"))
}

/// The code of a CodeableConcept in `system`.
fn code_in(concept: &Value, system: &str) -> String {
    concept["coding"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["system"] == system))
        .and_then(|c| c["code"].as_str())
        .unwrap_or_else(|| panic!("no {system} code in {concept}"))
        .to_owned()
}

/// The FHIR version the server declares (`CapabilityStatement.fhirVersion`): the answers are
/// validated against the models of this version and no other.
const FHIR_VERSION: &str = "4.0.1";

/// The Python that runs the validator: `FHIR_PYTHON` (CI's holds fhir.resources 6.4, whose
/// models are R4 4.0.1), else `python3`.
fn fhir_python() -> String {
    std::env::var("FHIR_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into())
}

/// Checks every answer with the fhir.resources models of [`FHIR_VERSION`]
/// (`tests/api/data/fhir_validate.py`). CI installs them and sets `FHIR_RESOURCES=required`;
/// elsewhere the check runs when fhir.resources of that version is present.
fn validate_with_fhir_resources(answers: &[Value]) {
    let python = fhir_python();
    let version = std::process::Command::new(&python)
        .args(["-c", "import fhir.resources as f; print(f.__fhir_version__)"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let missing = format!(
        "fhir.resources of FHIR {FHIR_VERSION} not found in {python} (its version: {}; pip install \
         'fhir.resources==6.4.0' 'pydantic[email]==1.10.27' in the Python FHIR_PYTHON names)",
        version.as_deref().unwrap_or("none")
    );
    let skipped = "the FHIR answers are not validated by it";
    if !tool_present(version.as_deref() == Some(FHIR_VERSION), "FHIR_RESOURCES", &missing, skipped) {
        return;
    }
    let file =
        std::env::temp_dir().join(format!("clinic-fhir-{}-{}.json", std::process::id(), answers.len()));
    std::fs::write(&file, serde_json::to_vec(answers).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/data/fhir_validate.py");
    let out = std::process::Command::new(&python).arg(script).arg(&file).arg(FHIR_VERSION).output().unwrap();
    let _ = std::fs::remove_file(&file);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "fhir.resources refused answers: {}", &said[..said.len().min(4000)]);
    assert!(said.contains(&format!("{} answers checked, 0 problems", answers.len())), "{said}");
}

/// What [`seed`] made.
struct Seeded {
    pin: String,
    tonometry: i64,
    acuity: i64,
    near: i64,
    manifest: i64,
    final_rx: i64,
    charge: i64,
    open_charge: i64,
}

async fn exam(clinic: &Clinic, path: &str, body: Value) -> i64 {
    let mut body = body;
    body["patient_visit_id"] = json!(clinic.visit);
    id_of(&clinic.app.created(&format!("/api/v1/{path}"), Some(clinic.branch), body).await)
}

async fn sign(clinic: &Clinic, path: &str, id: i64) {
    let r = clinic.app.post(&format!("/api/v1/{path}/{id}/sign"), Some(clinic.branch), json!({})).await;
    assert_status(&r, 200);
}

/// Ana Cruz's record filled in, an examination of each kind with both eyes (and one eye that
/// could not be assessed), a final refraction signed, a posted charge and an open one.
async fn seed(clinic: &Clinic) -> Seeded {
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let details = json!({
        "middle_name": "Luz", "phone": "+63 912 345 6789", "email": "ana@example.test",
        "address_line": "12 Rizal St", "city": "Cebu", "country": "Philippines", "civil_status": "married",
    });
    let r = app.put(&format!("/api/v1/patients/{patient}"), Some(branch), details).await;
    assert_status(&r, 200);
    let pin = r.body["data"]["pin"].as_str().unwrap().to_owned();
    let reading = |iop: f64, method: &str| json!({ "iop_mmhg": iop, "method": method });
    let tonometry = exam(
        clinic,
        "tonometries",
        json!({
            "examined_at": "2025-03-10T08:00:00Z",
            "right_eye": { "readings": [reading(15.0, "goldmann"), reading(16.5, "goldmann")] },
            "left_eye": { "readings": [reading(14.0, "icare")] },
        }),
    )
    .await;
    sign(clinic, "tonometries", tonometry).await;
    let acuity = exam(
        clinic,
        "visual-acuities",
        json!({
            "examined_at": "2025-03-10T08:05:00Z", "distance": "distance", "correction": "glasses",
            "notation": "snellen_m", "right_eye": { "value": "6/12" }, "left_eye": { "value": "6/6" },
        }),
    )
    .await;
    let near = exam(
        clinic,
        "visual-acuities",
        json!({
            "examined_at": "2025-03-10T08:06:00Z", "distance": "near", "correction": "unaided",
            "notation": "n_point", "right_eye": { "value": "N8" }, "left_eye": { "unable_to_assess": true },
        }),
    )
    .await;
    let manifest = exam(
        clinic,
        "refractions",
        json!({
            "examined_at": "2025-03-10T08:10:00Z", "kind": "manifest",
            "right_eye": { "sphere": -2.25, "cylinder": -0.75, "axis": 90 }, "left_eye": { "sphere": -1.5 },
        }),
    )
    .await;
    let final_rx = exam(
        clinic,
        "refractions",
        json!({
            "examined_at": "2025-03-10T08:20:00Z", "kind": "final_rx",
            "right_eye": {
                "sphere": -2.25, "cylinder": -0.75, "axis": 90, "add": 1.5, "prism_pd": 1.0,
                "prism_base": "in", "va": "6/6",
            },
            "left_eye": { "sphere": -1.5, "add": 1.5 },
        }),
    )
    .await;
    sign(clinic, "refractions", final_rx).await;
    let billing = format!("/api/v1/patients/{patient}/billing-transactions");
    let charge = json!({ "kind": "charge", "unit_price": "150.00", "description": "Consultation", "patient_visit_id": clinic.visit });
    let posted = id_of(&app.created(&billing, Some(branch), charge.clone()).await);
    let r = app.post(&format!("{billing}/{posted}/post"), Some(branch), json!({})).await;
    assert_status(&r, 200);
    let open_charge = id_of(&app.created(&billing, Some(branch), charge).await);
    Seeded { pin, tonometry, acuity, near, manifest, final_rx, charge: posted, open_charge }
}

/// Visits of a new patient on these dates; answers the patient and the visits' ids.
async fn visits_on(clinic: &Clinic, dates: &[&str]) -> (i64, Vec<i64>) {
    let patient = id_of(&clinic.app.create_patient(clinic.branch, "Ben", "Reyes").await);
    let mut visits = Vec::new();
    for date in dates {
        let body = json!({ "patient_id": patient, "visit_date": date });
        visits.push(id_of(&clinic.app.created("/api/v1/patient-visits", Some(clinic.branch), body).await));
    }
    (patient, visits)
}

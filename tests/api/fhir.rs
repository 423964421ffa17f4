//! The FHIR R4 read facade (`/fhir/r4`): every type answered and validated by a FHIR model
//! library (fhir.resources, run on the server's real answers), the codes of each eye, search
//! by `patient`, dates with their prefixes and `_id`, paging that keeps the query,
//! `$everything`, permissions per type, OperationOutcomes, content negotiation, tenant
//! isolation and the read audit.

mod edges;

use serde_json::{Value, json};

use crate::support::{Clinic, Reply, TestApp, id_of, reply};

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
    assert_eq!(r.status, status, "GET {path}: {}", r.text);
    assert_fhir(&r, status);
    r.body
}

#[track_caller]
fn assert_fhir(r: &Reply, status: u16) {
    assert_eq!(r.status, status, "{}", r.text);
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

/// Checks every answer with the fhir.resources models (`tests/api/data/fhir_validate.py`).
/// CI installs fhir.resources and sets `FHIR_RESOURCES=required`; elsewhere the check runs
/// when the package is present.
fn validate_with_fhir_resources(answers: &[Value]) {
    let required = std::env::var("FHIR_RESOURCES").is_ok_and(|v| v == "required");
    let present = std::process::Command::new("python3")
        .args(["-c", "import fhir.resources.R4B"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        assert!(
            !required,
            "fhir.resources is required but not installed (pip install 'fhir.resources==8.3.0')"
        );
        eprintln!("fhir.resources is not installed; the answers were not validated by it");
        return;
    }
    let file =
        std::env::temp_dir().join(format!("clinic-fhir-{}-{}.json", std::process::id(), answers.len()));
    std::fs::write(&file, serde_json::to_vec(answers).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/data/fhir_validate.py");
    let out = std::process::Command::new("python3").arg(script).arg(&file).output().unwrap();
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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
    let open_charge = id_of(&app.created(&billing, Some(branch), charge).await);
    Seeded { pin, tonometry, acuity, near, manifest, final_rx, charge: posted, open_charge }
}

#[tokio::test]
async fn every_type_answers_fhir_that_validates_with_each_eye_coded() {
    let clinic = Clinic::open().await;
    let s = seed(&clinic).await;
    let (app, branch, p) = (&clinic.app, clinic.branch, clinic.patient);
    let mut answers = Vec::new();

    let r = get_as(app, None, "/fhir/r4/metadata", None).await;
    assert_fhir(&r, 200);
    assert_eq!(
        (r.body["resourceType"].as_str(), r.body["fhirVersion"].as_str()),
        (Some("CapabilityStatement"), Some("4.0.1"))
    );
    let served: Vec<&str> = r.body["rest"][0]["resource"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["type"].as_str().unwrap())
        .collect();
    assert_eq!(served, ["Patient", "Encounter", "Observation", "VisionPrescription", "ChargeItem"]);
    answers.push(r.body);

    let patient = fhir(app, branch, &format!("/fhir/r4/Patient/{p}"), 200).await;
    assert_eq!(
        patient["identifier"][0],
        json!({ "use": "usual", "system": "urn:clinic-server:pin", "value": s.pin })
    );
    assert_eq!(patient["name"][0]["family"], "Cruz");
    assert_eq!(patient["name"][0]["given"], json!(["Ana", "Luz"]));
    assert_eq!(
        (patient["gender"].as_str(), patient["birthDate"].as_str()),
        (Some("female"), Some("1980-01-02"))
    );
    assert_eq!(
        (patient["active"].as_bool(), patient["deceasedBoolean"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(
        patient["telecom"],
        json!([{ "system": "phone", "value": "+63 912 345 6789" }, { "system": "email", "value": "ana@example.test" }])
    );
    assert_eq!(patient["address"][0]["city"], "Cebu");
    assert_eq!(
        code_in(&patient["maritalStatus"], "http://terminology.hl7.org/CodeSystem/v3-MaritalStatus"),
        "M"
    );
    answers.push(patient);
    let by_pin =
        fhir(app, branch, &format!("/fhir/r4/Patient?identifier=urn:clinic-server:pin|{}", s.pin), 200).await;
    assert_eq!((by_pin["total"].as_i64(), ids(&by_pin)), (Some(1), vec![p.to_string()]));
    answers.push(by_pin);

    let encounters = fhir(app, branch, &format!("/fhir/r4/Encounter?patient=Patient/{p}"), 200).await;
    assert_eq!(ids(&encounters), vec![clinic.visit.to_string()]);
    let encounter = with_id(&encounters, &clinic.visit.to_string());
    assert_eq!(
        (encounter["status"].as_str(), encounter["class"]["code"].as_str()),
        (Some("planned"), Some("AMB"))
    );
    assert_eq!(encounter["subject"]["reference"], format!("Patient/{p}"));
    assert_eq!(encounter["period"]["start"], "2026-01-05");
    let entry = &encounters["entry"][0];
    assert_eq!(entry["fullUrl"], format!("{}/fhir/r4/Encounter/{}", app.base, clinic.visit));
    answers.push(encounters);
    answers.push(fhir(app, branch, &format!("/fhir/r4/Encounter/{}", clinic.visit), 200).await);

    // Three readings, two distance acuities and one near (the other eye unassessed), two
    // refractions of two eyes each.
    let observations = fhir(app, branch, &format!("/fhir/r4/Observation?patient={p}&_count=100"), 200).await;
    let (t, a, n, m, f) = (s.tonometry, s.acuity, s.near, s.manifest, s.final_rx);
    let mut expected = vec![
        format!("iop-{t}-right-1"),
        format!("iop-{t}-right-2"),
        format!("iop-{t}-left-1"),
        format!("va-{a}-right"),
        format!("va-{a}-left"),
        format!("va-{n}-right"),
        format!("refraction-{m}-right"),
        format!("refraction-{m}-left"),
        format!("refraction-{f}-right"),
        format!("refraction-{f}-left"),
    ];
    let mut found = ids(&observations);
    assert_eq!(observations["total"], 10);
    found.sort();
    expected.sort();
    assert_eq!(found, expected);
    for (id, loinc, site, side) in [
        (format!("iop-{t}-right-2"), "79892-6", "1290043002", "24028007"),
        (format!("iop-{t}-left-1"), "79893-4", "1290041000", "7771000"),
        (format!("va-{n}-right"), "98499-7", "1290043002", "24028007"),
        (format!("refraction-{m}-right"), "79895-9", "1290043002", "24028007"),
        (format!("refraction-{m}-left"), "79895-9", "1290041000", "7771000"),
    ] {
        let o = with_id(&observations, &id);
        assert_eq!(code_in(&o["code"], "http://loinc.org"), loinc, "{o}");
        assert_eq!(code_in(&o["bodySite"], "http://snomed.info/sct"), site, "{o}");
        let laterality = &o["bodySite"]["extension"][0];
        assert_eq!(laterality["url"], "urn:clinic-server:fhir:laterality");
        assert_eq!(code_in(&laterality["valueCodeableConcept"], "http://snomed.info/sct"), side);
        assert_eq!(o["subject"]["reference"], format!("Patient/{p}"));
        assert_eq!(o["encounter"]["reference"], format!("Encounter/{}", clinic.visit));
        assert_eq!(o["category"][0]["coding"][0]["code"], "exam");
    }
    let iop = with_id(&observations, &format!("iop-{t}-right-2"));
    assert_eq!(
        iop["valueQuantity"],
        json!({ "value": 16.5, "unit": "mmHg", "system": "http://unitsofmeasure.org", "code": "mm[Hg]" })
    );
    assert_eq!(
        (iop["status"].as_str(), iop["effectiveDateTime"].as_str().map(|t| &t[..19])),
        (Some("final"), Some("2025-03-10T08:00:00"))
    );
    assert_eq!(iop["performer"][0]["display"], "Administrator", "{iop}");
    // Acuity through the patient's glasses has no eye-level LOINC code: the server's own.
    for (eye, display) in
        [("right", "Visual acuity, glasses, right eye"), ("left", "Visual acuity, glasses, left eye")]
    {
        let o = with_id(&observations, &format!("va-{a}-{eye}"));
        assert_eq!(
            o["code"]["coding"],
            json!([{ "system": "urn:clinic-server:observation", "code": "visual-acuity", "display": display }]),
            "{o}"
        );
        assert_eq!(code_in(&o["method"], "urn:clinic-server:va-correction"), "glasses", "{o}");
    }
    let acuity = with_id(&observations, &format!("va-{a}-right"));
    assert_eq!(
        (acuity["valueQuantity"]["value"].as_f64(), acuity["valueQuantity"]["code"].as_str()),
        (Some(0.3), Some("{logMAR}"))
    );
    assert_eq!(acuity["status"], "preliminary");
    assert_eq!(acuity["component"][1]["valueString"], "6/12");
    assert_eq!(with_id(&observations, &format!("va-{n}-right"))["valueString"], "N8");
    let refraction = with_id(&observations, &format!("refraction-{m}-right"));
    let components: Vec<(String, Value, String)> = refraction["component"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["code"]["coding"][0]["code"].as_str().unwrap().to_owned(),
                c["valueQuantity"]["value"].clone(),
                c["valueQuantity"]["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        components,
        [
            ("sphere".into(), json!(-2.25), "[diop]".into()),
            ("cylinder".into(), json!(-0.75), "[diop]".into()),
            ("axis".into(), json!(90), "deg".into())
        ]
    );
    answers.push(observations);
    let one = fhir(app, branch, &format!("/fhir/r4/Observation/iop-{t}-left-1"), 200).await;
    assert_eq!(
        (one["id"].as_str(), one["valueQuantity"]["value"].as_f64()),
        (Some(format!("iop-{t}-left-1").as_str()), Some(14.0))
    );
    answers.push(one);

    let prescriptions = fhir(app, branch, &format!("/fhir/r4/VisionPrescription?patient={p}"), 200).await;
    assert_eq!(ids(&prescriptions), vec![f.to_string()], "only the final refraction is a prescription");
    let rx = with_id(&prescriptions, &f.to_string());
    assert_eq!(
        (rx["status"].as_str(), rx["dateWritten"].as_str().map(|t| &t[..19])),
        (Some("active"), Some("2025-03-10T08:20:00"))
    );
    assert_eq!(rx["prescriber"]["identifier"]["system"], "urn:clinic-server:user");
    let right = &rx["lensSpecification"][0];
    assert_eq!(
        (right["eye"].as_str(), right["sphere"].as_f64(), right["cylinder"].as_f64(), right["axis"].as_i64()),
        (Some("right"), Some(-2.25), Some(-0.75), Some(90))
    );
    assert_eq!(right["prism"], json!([{ "amount": 1.0, "base": "in" }]));
    assert_eq!(right["add"].as_f64(), Some(1.5));
    let left = &rx["lensSpecification"][1];
    assert_eq!((left["eye"].as_str(), left["sphere"].as_f64()), (Some("left"), Some(-1.5)));
    answers.push(prescriptions);
    answers.push(fhir(app, branch, &format!("/fhir/r4/VisionPrescription/{f}"), 200).await);
    let r =
        get_as(app, Some(&app.admin_token), &format!("/fhir/r4/VisionPrescription/{m}"), Some(branch)).await;
    assert_outcome(&r, 404, "not-found", "not_found");
    answers.push(r.body);

    let charges = fhir(app, branch, &format!("/fhir/r4/ChargeItem?patient={p}"), 200).await;
    assert_eq!(ids(&charges), vec![s.charge.to_string()], "only the posted charge is a charge item");
    let charge = with_id(&charges, &s.charge.to_string());
    assert_eq!(
        (charge["status"].as_str(), charge["code"]["text"].as_str()),
        (Some("billed"), Some("Consultation"))
    );
    assert_eq!(charge["priceOverride"]["value"].to_string(), "150.00");
    assert_eq!(charge["context"]["reference"], format!("Encounter/{}", clinic.visit));
    assert_eq!(charge["identifier"][0]["system"], "urn:clinic-server:billing-number");
    answers.push(charges);
    let r =
        get_as(app, Some(&app.admin_token), &format!("/fhir/r4/ChargeItem/{}", s.open_charge), Some(branch))
            .await;
    assert_outcome(&r, 404, "not-found", "not_found");

    let everything = fhir(app, branch, &format!("/fhir/r4/Patient/{p}/$everything?_count=100"), 200).await;
    let kinds: Vec<String> =
        resources(&everything).iter().map(|r| r["resourceType"].as_str().unwrap().to_owned()).collect();
    let mut expected = vec!["Patient", "Encounter"];
    expected.extend(["Observation"; 10]);
    expected.extend(["VisionPrescription", "ChargeItem"]);
    assert_eq!(
        (everything["total"].as_i64(), kinds),
        (Some(14), expected.iter().map(|k| k.to_string()).collect())
    );
    answers.push(everything);

    for (path, status, issue, code) in [
        ("/fhir/r4/Patient/999999".to_owned(), 404, "not-found", "not_found"),
        ("/fhir/r4/Observation/iop-1-middle-1".to_owned(), 404, "not-found", "not_found"),
        ("/fhir/r4/Patient/999999/$everything".to_owned(), 404, "not-found", "not_found"),
        (format!("/fhir/r4/Encounter?patient={p}&colour=red"), 400, "invalid", "invalid_search"),
    ] {
        let r = get_as(app, Some(&app.admin_token), &path, Some(branch)).await;
        assert_outcome(&r, status, issue, code);
        answers.push(r.body);
    }
    validate_with_fhir_resources(&answers);
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

#[tokio::test]
async fn dates_with_prefixes_patient_and_id_select_and_pages_keep_the_query() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let (ben, v) =
        visits_on(&clinic, &["2025-01-10", "2025-02-10", "2025-03-10", "2025-03-20", "2026-02-01"]).await;
    let visits = |query: &str| {
        let path = format!("/fhir/r4/Encounter?patient={ben}&_count=100&{query}");
        async move {
            let mut found: Vec<i64> =
                ids(&fhir(app, branch, &path, 200).await).iter().map(|id| id.parse().unwrap()).collect();
            found.sort();
            found
        }
    };
    // Dates against whole days (the branch's zone is UTC here).
    assert_eq!(visits("date=ge2025-02-10&date=le2025-03-10").await, [v[1], v[2]]);
    assert_eq!(visits("date=gt2025-02-10").await, [v[2], v[3], v[4]]);
    assert_eq!(visits("date=lt2025-02-10").await, [v[0]]);
    assert_eq!(visits("date=eq2025-03").await, [v[2], v[3]]);
    assert_eq!(visits("date=2025").await, [v[0], v[1], v[2], v[3]]);
    assert_eq!(visits("date=ge2025-03-10T12:00:00Z").await, [v[2], v[3], v[4]], "a day reaches past noon");
    assert_eq!(visits("date=lt2025-03-10T12:00Z").await, [v[0], v[1], v[2]]);
    assert_eq!(visits(&format!("_id={},{}", v[0], v[4])).await, [v[0], v[4]]);
    assert_eq!(visits("_id=abc").await, Vec::<i64>::new(), "an id that cannot exist matches nothing");
    assert_eq!(
        visits(&format!("patient={}", clinic.patient)).await,
        Vec::<i64>::new(),
        "both patients must match"
    );
    let theirs =
        fhir(app, branch, &format!("/fhir/r4/Encounter?patient={},{ben}&_count=100", clinic.patient), 200)
            .await;
    assert_eq!(theirs["total"], 6, "a list matches any of its values");

    // Dates against moments.
    let tonometry = |at: &str| {
        let body = json!({ "patient_visit_id": clinic.visit, "examined_at": at, "right_eye": { "readings": [{ "iop_mmhg": 12, "method": "goldmann" }] } });
        async move { id_of(&app.created("/api/v1/tonometries", Some(branch), body).await) }
    };
    let (early, late) = (tonometry("2025-03-10T08:00:00Z").await, tonometry("2025-03-10T15:00:00Z").await);
    let observed = |query: &str| {
        let path = format!("/fhir/r4/Observation?patient={}&{query}", clinic.patient);
        async move { ids(&fhir(app, branch, &path, 200).await) }
    };
    let (early, late) = (format!("iop-{early}-right-1"), format!("iop-{late}-right-1"));
    assert_eq!(observed("date=2025-03-10").await, [late.clone(), early.clone()], "newest first");
    assert_eq!(observed("date=lt2025-03-10T12:00Z").await, vec![early.clone()]);
    assert_eq!(observed("date=ge2025-03-10T12:00Z").await, vec![late.clone()]);
    assert_eq!(observed("date=eq2025-03-10T08:00Z").await, vec![early.clone()], "a minute is a span");
    assert_eq!(observed("date=gt2025-03-10").await, Vec::<String>::new());
    assert_eq!(observed(&format!("_id={late}")).await, vec![late.clone()]);

    // Pages: `next` and `previous` keep the query; following `next` reaches every entry once.
    let all = ids(&fhir(app, branch, &format!("/fhir/r4/Encounter?patient={ben}&_count=100"), 200).await);
    let mut page = fhir(app, branch, &format!("/fhir/r4/Encounter?patient={ben}&_count=2"), 200).await;
    assert_eq!((page["total"].as_i64(), link(&page, "previous")), (Some(5), None));
    let mut walked = ids(&page);
    let mut pages = 1;
    while let Some(next) = link(&page, "next") {
        assert!(
            next.starts_with(&app.base)
                && next.contains(&format!("patient={ben}"))
                && next.contains("_count=2"),
            "{next}"
        );
        page = fhir(app, branch, next.strip_prefix(&app.base).unwrap(), 200).await;
        let previous = link(&page, "previous").expect("a later page links back");
        assert!(previous.contains(&format!("patient={ben}")), "{previous}");
        walked.extend(ids(&page));
        pages += 1;
    }
    assert_eq!((pages, walked), (3, all));
    let second = link(&page, "self").unwrap();
    assert!(second.ends_with("_offset=4"), "{second}");

    for query in [
        "_count=0",
        "_count=101",
        "_offset=-1",
        "date=ne2025",
        "date=2025-02-30",
        "date=lastweek",
        "patient=Practitioner/1",
        "colour=red",
        "_sort=date",
        "identifier=x",
    ] {
        let r =
            get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Encounter?{query}"), Some(branch)).await;
        assert_outcome(&r, 400, "invalid", "invalid_search");
    }
}

#[tokio::test]
async fn each_type_needs_its_permission_and_everything_leaves_out_what_cannot_be_read() {
    let clinic = Clinic::open().await;
    let s = seed(&clinic).await;
    let (app, branch, p) = (&clinic.app, clinic.branch, clinic.patient);
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    let (_, nurse) = app.create_user("nurse", &["nurse"], &[branch]).await;
    let read = |token: &str, path: String| {
        let token = token.to_owned();
        async move { get_as(app, Some(&token), &path, Some(branch)).await }
    };
    // The front desk reads patients and billing, not examinations.
    assert_outcome(
        &read(&desk, format!("/fhir/r4/Observation?patient={p}")).await,
        403,
        "forbidden",
        "forbidden",
    );
    assert_outcome(
        &read(&desk, format!("/fhir/r4/VisionPrescription/{}", s.final_rx)).await,
        403,
        "forbidden",
        "forbidden",
    );
    assert_fhir(&read(&desk, format!("/fhir/r4/ChargeItem?patient={p}")).await, 200);
    let r = read(&desk, format!("/fhir/r4/Patient/{p}/$everything")).await;
    assert_fhir(&r, 200);
    let kinds: Vec<&str> = r.body["entry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["resource"]["resourceType"].as_str().unwrap())
        .collect();
    assert_eq!((r.body["total"].as_i64(), kinds), (Some(3), vec!["Patient", "Encounter", "ChargeItem"]));
    // A nurse reads examinations, not billing.
    assert_outcome(
        &read(&nurse, format!("/fhir/r4/ChargeItem/{}", s.charge)).await,
        403,
        "forbidden",
        "forbidden",
    );
    let r = read(&nurse, format!("/fhir/r4/Patient/{p}/$everything?_count=100")).await;
    let kinds: Vec<&str> = r.body["entry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["resource"]["resourceType"].as_str().unwrap())
        .collect();
    assert_eq!(r.body["total"], 13);
    assert!(!kinds.contains(&"ChargeItem") && kinds.contains(&"VisionPrescription"), "{kinds:?}");

    // The rest of the server's refusals, as OperationOutcomes.
    assert_outcome(
        &get_as(app, None, "/fhir/r4/Patient", Some(branch)).await,
        401,
        "login",
        "unauthenticated",
    );
    assert_outcome(
        &get_as(app, Some("made-up"), "/fhir/r4/Patient", Some(branch)).await,
        401,
        "login",
        "unauthenticated",
    );
    assert_outcome(
        &get_as(app, Some(&app.admin_token), "/fhir/r4/Patient", None).await,
        400,
        "invalid",
        "branch_required",
    );
    let elsewhere = app.create_branch("NORTH").await;
    assert_outcome(
        &get_as(app, Some(&desk), "/fhir/r4/Patient", Some(elsewhere)).await,
        403,
        "forbidden",
        "branch_forbidden",
    );
    assert_fhir(&get_as(app, None, "/fhir/r4/metadata", None).await, 200);

    // Accept: FHIR JSON or JSON, nothing else.
    let accept = |media: &str| {
        let req = app
            .http
            .get(app.url("/fhir/r4/Patient"))
            .bearer_auth(&app.admin_token)
            .header("x-branch-id", branch.to_string())
            .header("accept", media.to_owned());
        reply(req)
    };
    let r = accept("application/json").await;
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/json; charset=utf-8")),
        "{}",
        r.text
    );
    assert_eq!(r.body["resourceType"], "Bundle");
    assert_fhir(&accept("application/fhir+json;fhirVersion=4.0").await, 200);
    let r = accept("text/html").await;
    assert_outcome(&r, 406, "not-supported", "not_acceptable");
}

#[tokio::test]
async fn a_branch_never_answers_with_another_branchs_patients() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let ana = id_of(&app.create_patient(main, "Ana", "Cruz").await);
    for name in ["Ben", "Carla"] {
        app.create_patient(north, name, "Norte").await;
    }
    let dina = id_of(&app.create_patient(north, "Dina", "Norte").await);
    let visit = app
        .created(
            "/api/v1/patient-visits",
            Some(north),
            json!({ "patient_id": dina, "visit_date": "2025-05-01" }),
        )
        .await;
    let body = json!({ "patient_visit_id": id_of(&visit), "right_eye": { "readings": [{ "iop_mmhg": 21, "method": "icare" }] } });
    let tonometry = id_of(&app.created("/api/v1/tonometries", Some(north), body).await);

    let pins = |bundle: &Value| -> Vec<String> {
        resources(bundle).iter().map(|p| p["identifier"][0]["value"].as_str().unwrap().to_owned()).collect()
    };
    let here = fhir(&app, main, "/fhir/r4/Patient?_count=100", 200).await;
    assert_eq!(ids(&here), vec![ana.to_string()]);
    assert!(pins(&here).iter().all(|pin| pin.starts_with("MAIN-")), "{here}");
    let there = fhir(&app, north, "/fhir/r4/Patient?_count=100", 200).await;
    assert_eq!(there["total"], 3);
    assert!(pins(&there).iter().all(|pin| pin.starts_with("NORTH-")), "{there}");
    // NORTH's patient, records and observation are not found through MAIN.
    for path in [
        format!("/fhir/r4/Patient/{dina}"),
        format!("/fhir/r4/Patient/{dina}/$everything"),
        format!("/fhir/r4/Observation/iop-{tonometry}-right-1"),
    ] {
        let r = get_as(&app, Some(&app.admin_token), &path, Some(main)).await;
        assert_outcome(&r, 404, "not-found", "not_found");
    }
    for path in [
        format!("/fhir/r4/Encounter?patient={dina}"),
        format!("/fhir/r4/Observation?patient={dina}"),
        format!("/fhir/r4/Patient?_id={dina}"),
    ] {
        assert_eq!(fhir(&app, main, &path, 200).await["total"], 0, "{path}");
    }
    assert_eq!(fhir(&app, north, &format!("/fhir/r4/Observation?patient={dina}"), 200).await["total"], 1);
    // A user of MAIN only cannot name NORTH.
    let (_, main_only) = app.create_user("main-doctor", &["doctor"], &[main]).await;
    let r = get_as(&app, Some(&main_only), "/fhir/r4/Patient", Some(north)).await;
    assert_outcome(&r, 403, "forbidden", "branch_forbidden");
}

/// The audit rows of FHIR reads of patients in `branch`: (action, record_id, ids, route).
async fn fhir_reads(app: &TestApp, branch: i64) -> Vec<(String, Option<i64>, Value, String)> {
    app.state.read_audit.flush().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client
        .query(
            &format!(
                "SELECT action, record_id, coalesce(after->'ids', 'null'), after->>'route' FROM branch_{branch}.audit_log
                  WHERE resource = 'patients' AND after->>'route' LIKE '/fhir/%' ORDER BY id"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

#[tokio::test]
async fn fhir_reads_are_recorded_as_reads_of_the_patients_they_show() {
    let clinic = Clinic::open().await;
    let s = seed(&clinic).await;
    let (app, branch, p) = (&clinic.app, clinic.branch, clinic.patient);
    let ben = id_of(&app.create_patient(branch, "Ben", "Reyes").await);
    fhir(app, branch, &format!("/fhir/r4/Patient/{p}"), 200).await;
    fhir(app, branch, "/fhir/r4/Patient?_count=100", 200).await;
    fhir(app, branch, &format!("/fhir/r4/Observation?patient={p}&_count=1"), 200).await;
    fhir(app, branch, &format!("/fhir/r4/Observation/va-{}-left", s.acuity), 200).await;
    fhir(app, branch, &format!("/fhir/r4/Patient/{p}/$everything"), 200).await;
    fhir(app, branch, &format!("/fhir/r4/Encounter?patient={ben}"), 200).await;
    get_as(app, None, "/fhir/r4/metadata", None).await;
    let r = get_as(app, Some(&app.admin_token), "/fhir/r4/Patient/999999", Some(branch)).await;
    assert_outcome(&r, 404, "not-found", "not_found");

    let none = Value::Null;
    assert_eq!(
        fhir_reads(app, branch).await,
        [
            ("view".into(), Some(p), none.clone(), "/fhir/r4/Patient".into()),
            ("search".into(), None, json!([p, ben]), "/fhir/r4/Patient".into()),
            ("search".into(), None, json!([p]), "/fhir/r4/Observation".into()),
            ("view".into(), Some(p), none.clone(), "/fhir/r4/Observation".into()),
            ("view".into(), Some(p), none, "/fhir/r4/Patient/{id}/$everything".into()),
            ("search".into(), None, json!([]), "/fhir/r4/Encounter".into()),
        ],
        "one record per answer that showed patient data, naming the patients"
    );
    let by = app.admin_id().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let users: Vec<Option<i64>> = client
        .query(
            &format!(
                "SELECT DISTINCT user_id FROM branch_{branch}.audit_log WHERE after->>'route' LIKE '/fhir/%'"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(users, [Some(by)]);
}

#[tokio::test]
async fn the_api_document_describes_every_fhir_route_in_fhir_json() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let paths = r.body["paths"].as_object().unwrap();
    let mut described: Vec<String> = paths.keys().filter(|p| p.starts_with("/fhir/r4")).cloned().collect();
    described.sort();
    let mut expected = vec!["/fhir/r4/metadata".to_owned(), "/fhir/r4/Patient/{id}/$everything".to_owned()];
    for kind in ["Patient", "Encounter", "Observation", "VisionPrescription", "ChargeItem"] {
        expected.extend([format!("/fhir/r4/{kind}"), format!("/fhir/r4/{kind}/{{id}}")]);
    }
    expected.sort();
    assert_eq!(described, expected);
    for path in &described {
        let operation = &paths[path.as_str()]["get"];
        for (status, response) in operation["responses"].as_object().unwrap() {
            let media = response["content"].as_object().unwrap();
            assert!(
                media.contains_key(FHIR_JSON) && media.contains_key("application/json"),
                "{path} {status}: {response}"
            );
        }
        let has = |status: &str| operation["responses"].get(status).is_some();
        assert!(has("200") && has("406") && has("503"), "{path}");
        if path != "/fhir/r4/metadata" {
            assert!(has("400") && has("401") && has("403") && has("429"), "{path}");
            assert!(operation["description"].as_str().unwrap().starts_with("Needs `"), "{path}");
        }
    }
}

#[tokio::test]
async fn a_merged_patient_is_inactive_and_linked_to_the_patient_that_replaced_it() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let survivor = id_of(&app.create_patient(main, "Ana", "Merged").await);
    let duplicate = id_of(&app.create_patient(main, "Ana", "Merged").await);
    let r = app
        .post(
            &format!("/api/v1/patients/{survivor}/merge"),
            Some(main),
            json!({ "duplicate_id": duplicate, "reason": "registered twice" }),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let merge_id = id_of(&r.body["data"]);

    let gone = fhir(&app, main, &format!("/fhir/r4/Patient/{duplicate}"), 200).await;
    assert_eq!(gone["active"], false, "{gone}");
    assert_eq!(
        gone["link"],
        json!([{ "other": { "reference": format!("Patient/{survivor}") }, "type": "replaced-by" }])
    );
    let kept = fhir(&app, main, &format!("/fhir/r4/Patient/{survivor}"), 200).await;
    assert_eq!(kept["active"], true, "{kept}");
    assert_eq!(
        kept["link"],
        json!([{ "other": { "reference": format!("Patient/{duplicate}") }, "type": "replaces" }])
    );
    // A search finds both, each with its link.
    let both = fhir(&app, main, "/fhir/r4/Patient?_count=10", 200).await;
    assert_eq!(both["total"], 2, "{both}");
    assert_eq!(with_id(&both, &duplicate.to_string())["link"][0]["type"], "replaced-by");
    assert_eq!(with_id(&both, &survivor.to_string())["link"][0]["type"], "replaces");
    validate_with_fhir_resources(&[gone, kept, both]);

    // Undone, neither carries a link.
    let r = app
        .post(&format!("/api/v1/patients/{survivor}/unmerge"), Some(main), json!({ "merge_id": merge_id }))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let back = fhir(&app, main, &format!("/fhir/r4/Patient/{duplicate}"), 200).await;
    assert_eq!((back["active"].as_bool(), back.get("link")), (Some(true), None), "{back}");
    let kept = fhir(&app, main, &format!("/fhir/r4/Patient/{survivor}"), 200).await;
    assert_eq!(kept.get("link"), None, "{kept}");
}

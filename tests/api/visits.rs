//! Visit records (visits, plans, prescribed medicines, complaints, medical certificates) and
//! the branch audit log. One rule per test, over HTTP against a real server and a fresh
//! database. Patients themselves are in patients.rs.

use std::collections::BTreeSet;

use crate::support::{Clinic, Reply, TestApp, assert_invalid, assert_status, id_of, ids, reply};
use reqwest::Method;
use serde_json::{Value, json};

const PATIENTS: &str = "/api/v1/patients";
const VISITS: &str = "/api/v1/patient-visits";
const PLANS: &str = "/api/v1/patient-visit-plans";
const MEDICINES: &str = "/api/v1/patient-visit-prescribed-medicines";
const COMPLAINTS: &str = "/api/v1/complaints";
const CERTIFICATES: &str = "/api/v1/medical-certificates";
const AUDIT: &str = "/api/v1/audit-logs";

/// The four records that hang off a visit.
const VISIT_RECORDS: [&str; 4] = [PLANS, MEDICINES, COMPLAINTS, CERTIFICATES];

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn id_set(body: &Value) -> BTreeSet<i64> {
    ids(body).into_iter().collect()
}

async fn patient(app: &TestApp, branch: i64, first: &str, last: &str) -> i64 {
    id_of(&app.create_patient(branch, first, last).await)
}

async fn visit(app: &TestApp, branch: i64, patient: i64) -> i64 {
    id_of(
        &app.created(VISITS, Some(branch), json!({ "patient_id": patient, "visit_date": "2026-01-05" }))
            .await,
    )
}

/// A valid body for a visit record (except that no medicine exists), with `extra` merged in.
fn record_body(path: &str, visit: i64, extra: Value) -> Value {
    let mut body = match path {
        PLANS => json!({ "plan": "Refraction in two weeks" }),
        MEDICINES => json!({ "medicine_id": 1, "dosage": "1 drop" }),
        COMPLAINTS => json!({ "complaint": "Eye pain" }),
        CERTIFICATES => json!({ "diagnosis": "Conjunctivitis" }),
        other => panic!("not a visit record: {other}"),
    };
    body["patient_visit_id"] = json!(visit);
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
    body
}

/// The 422 fields of a visit-record create whose only problem is `fields`: prescribed
/// medicines also name `medicine_id`, since no medicine exists.
fn with_medicine<'a>(path: &str, fields: &[&'a str]) -> Vec<&'a str> {
    let mut all = fields.to_vec();
    if path == MEDICINES {
        all.push("medicine_id");
    }
    all
}

/// A branch NORTH with three patients and three visits; returns (branch, patient id, visit
/// id) of ids that exist there but not in a MAIN holding fewer than three of each.
async fn other_branch(app: &TestApp) -> (i64, i64, i64) {
    let north = app.create_branch("NORTH").await;
    let mut last = (0, 0);
    for i in 0..3 {
        let p = patient(app, north, &format!("North{i}"), "Patient").await;
        last = (p, visit(app, north, p).await);
    }
    assert_eq!(last, (3, 3), "ids of a fresh branch start at 1");
    (north, last.0, last.1)
}

fn today() -> time::Date {
    time::OffsetDateTime::now_utc().date()
}

async fn audit_rows(app: &TestApp, branch: i64, query: &str) -> Reply {
    reply(app.request(Method::GET, &format!("{AUDIT}?perPage=100&{query}"), Some(branch))).await
}

/// (action, resource, record_id) of each row, in the order given.
fn audit_summary(body: &Value) -> Vec<(String, String, i64)> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data: {body}"))
        .iter()
        .map(|row| {
            (
                row["action"].as_str().unwrap_or_else(|| panic!("no action in {row}")).to_owned(),
                row["resource"].as_str().unwrap_or_else(|| panic!("no resource in {row}")).to_owned(),
                row["record_id"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

async fn audit_count(app: &TestApp, branch: i64) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    client.query_one(&format!("SELECT count(*) FROM branch_{branch}.audit_log"), &[]).await.unwrap().get(0)
}

// ---------------------------------------------------------------------------------------
// Visits
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn visit_crud_round_trip() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let sent = json!({
        "patient_id": p,
        "visit_date": "2026-03-10",
        "visit_type": "follow_up",
        "reason": "Blurred vision, left eye",
        "status": "checked_in",
        "notes": "Bring old glasses.\nFasting not needed.",
        "doctor_id": null,
    });
    let r = app.post(VISITS, Some(main), sent.clone()).await;
    assert_status(&r, 201);
    assert!(r.header("etag").is_some(), "ETag on create");
    let data = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&data[field], value, "{field} echoed: {data}");
    }
    assert_eq!(data["version"], 1);
    let id = id_of(data);
    let path = format!("{VISITS}/{id}");

    let r = app.get(&path, Some(main)).await;
    assert_status(&r, 200);
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&r.body["data"][field], value, "{field} stored");
    }

    let r = app.put(&path, Some(main), json!({ "status": "completed", "visit_type": "post_op" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "completed");
    assert_eq!(r.body["data"]["visit_type"], "post_op");
    assert_eq!(r.body["data"]["reason"], "Blurred vision, left eye", "fields not sent are kept");
    assert_eq!(r.body["data"]["version"], 2);

    let r = app.delete(&path, Some(main)).await;
    assert_status(&r, 200);
    assert_status(&app.get(&path, Some(main)).await, 404);
    assert_status(&app.put(&path, Some(main), json!({ "status": "cancelled" })).await, 404);
    let r = app.get(VISITS, Some(main)).await;
    assert_eq!(r.body["meta"]["total"], 0, "{}", r.body);
}

#[tokio::test]
async fn a_visit_without_a_status_is_scheduled() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let v = app.created(VISITS, Some(main), json!({ "patient_id": p, "visit_date": "2026-03-10" })).await;
    assert_eq!(v["status"], "scheduled", "{v}");
    assert_eq!(v["patient_id"], p);
}

#[tokio::test]
async fn visit_patient_and_date_are_required() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = app.post(VISITS, Some(main), json!({})).await;
    assert_invalid(&r, &["patient_id", "visit_date"]);
    let r = app.post(VISITS, Some(main), json!({ "patient_id": null, "visit_date": "" })).await;
    assert_invalid(&r, &["patient_id", "visit_date"]);
    // And cannot be cleared later.
    let p = patient(&app, main, "Ana", "Cruz").await;
    let v = visit(&app, main, p).await;
    let r = app
        .put(&format!("{VISITS}/{v}"), Some(main), json!({ "visit_date": null, "patient_id": null }))
        .await;
    assert_invalid(&r, &["patient_id", "visit_date"]);
}

#[tokio::test]
async fn visit_type_status_and_date_are_validated() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let r = app
        .post(
            VISITS,
            Some(main),
            json!({ "patient_id": p, "visit_date": "2026-02-30", "visit_type": "walk_in", "status": "done" }),
        )
        .await;
    assert_invalid(&r, &["visit_date", "visit_type", "status"]);
    let r = app.post(VISITS, Some(main), json!({ "patient_id": "abc", "visit_date": "10/03/2026" })).await;
    assert_invalid(&r, &["patient_id", "visit_date"]);
    for visit_type in ["new", "follow_up", "emergency", "post_op"] {
        let v = app
            .created(
                VISITS,
                Some(main),
                json!({ "patient_id": p, "visit_date": "2026-03-10", "visit_type": visit_type }),
            )
            .await;
        assert_eq!(v["visit_type"], visit_type);
    }
    for status in ["scheduled", "checked_in", "in_progress", "completed", "cancelled"] {
        let v = app
            .created(
                VISITS,
                Some(main),
                json!({ "patient_id": p, "visit_date": "2026-03-10", "status": status }),
            )
            .await;
        assert_eq!(v["status"], status);
    }
    let v = visit(&app, main, p).await;
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "status": "finished" })).await;
    assert_invalid(&r, &["status"]);
}

#[tokio::test]
async fn visit_doctor_id_is_422_while_no_doctor_exists() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let r = app
        .post(VISITS, Some(main), json!({ "patient_id": p, "visit_date": "2026-03-10", "doctor_id": 1 }))
        .await;
    assert_invalid(&r, &["doctor_id"]);
    let r = app.get(VISITS, Some(main)).await;
    assert_eq!(r.body["meta"]["total"], 0, "nothing was created");
    let v = visit(&app, main, p).await;
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "doctor_id": 2 })).await;
    assert_invalid(&r, &["doctor_id"]);
}

#[tokio::test]
async fn a_visit_for_a_patient_of_another_branch_is_422_on_patient_id() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let own = patient(&app, main, "Ana", "Cruz").await;
    let (north, foreign, _) = other_branch(&app).await;
    let r = app.post(VISITS, Some(main), json!({ "patient_id": foreign, "visit_date": "2026-03-10" })).await;
    assert_invalid(&r, &["patient_id"]);
    let r = app.post(VISITS, Some(main), json!({ "patient_id": 999_999, "visit_date": "2026-03-10" })).await;
    assert_invalid(&r, &["patient_id"]);
    // Moving a visit to a foreign patient is refused too.
    let v = visit(&app, main, own).await;
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "patient_id": foreign })).await;
    assert_invalid(&r, &["patient_id"]);
    // The other branch still has only its own visits.
    let r = app.get(&format!("{VISITS}?filters[patient_id]={foreign}"), Some(north)).await;
    assert_eq!(r.body["meta"]["total"], 1, "{}", r.body);
}

#[tokio::test]
async fn visits_filter_by_patient_status_and_type() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Cruz").await;
    let ben = patient(&app, main, "Ben", "Reyes").await;
    let mut of_ana = BTreeSet::new();
    for (who, status, kind) in
        [(ana, "completed", "new"), (ana, "scheduled", "follow_up"), (ben, "completed", "follow_up")]
    {
        let v = app.created(VISITS, Some(main), json!({ "patient_id": who, "visit_date": "2026-03-10", "status": status, "visit_type": kind }))
        .await;
        if who == ana {
            of_ana.insert(id_of(&v));
        }
    }
    let r = app.get(&format!("{VISITS}?filters[patient_id]={ana}"), Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(id_set(&r.body), of_ana);
    assert_eq!(r.body["meta"]["total"], 2);
    let r =
        app.get(&format!("{VISITS}?filters[patient_id]={ben}&filters[status]=completed"), Some(main)).await;
    assert_eq!(r.body["meta"]["total"], 1);
    let r = app
        .get(&format!("{VISITS}?filters[patient_id]={ana}&filters[visit_type]=follow_up"), Some(main))
        .await;
    assert_eq!(r.body["meta"]["total"], 1);
    assert_eq!(r.body["data"][0]["status"], "scheduled");
    let r = app.get(&format!("{VISITS}?filters[status]=completed"), Some(main)).await;
    assert_eq!(r.body["meta"]["total"], 2);
    let r = app.get(&format!("{VISITS}?filters[patient_id]=abc"), Some(main)).await;
    assert_invalid(&r, &["filters[patient_id]"]);
    let r = app.get(&format!("{VISITS}?filters[status]=done"), Some(main)).await;
    assert_invalid(&r, &["filters[status]"]);
}

#[tokio::test]
async fn visit_status_sent_as_null_is_scheduled_or_a_422_never_a_500() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let r = app
        .post(VISITS, Some(main), json!({ "patient_id": p, "visit_date": "2026-03-10", "status": null }))
        .await;
    match r.status {
        201 => assert_eq!(r.body["data"]["status"], "scheduled", "{}", r.body),
        _ => assert_invalid(&r, &["status"]),
    }
    let v = visit(&app, main, p).await;
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "status": null })).await;
    match r.status {
        200 => assert_eq!(r.body["data"]["status"], "scheduled", "{}", r.body),
        _ => assert_invalid(&r, &["status"]),
    }
}

#[tokio::test]
async fn certificate_number_sent_as_null_or_empty_is_generated_or_a_422_never_a_500() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    for blank in [json!(null), json!(""), json!("   ")] {
        let r = app
            .post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "certificate_number": blank }))
            .await;
        match r.status {
            201 => {
                let number = r.body["data"]["certificate_number"].as_str().unwrap_or_default();
                assert!(number.starts_with("MC-MAIN-"), "{blank}: {}", r.body);
            }
            _ => assert_invalid(&r, &["certificate_number"]),
        }
    }
    let c = app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await;
    let r = app
        .put(&format!("{CERTIFICATES}/{}", id_of(&c)), Some(main), json!({ "certificate_number": null }))
        .await;
    match r.status {
        200 => assert_eq!(r.body["data"]["certificate_number"], c["certificate_number"], "{}", r.body),
        _ => assert_invalid(&r, &["certificate_number"]),
    }
}

#[tokio::test]
async fn certificate_issued_on_defaults_to_today_even_when_sent_as_null() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let c = app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await;
    assert_eq!(c["issued_on"], today().to_string(), "{c}");
    let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "issued_on": null })).await;
    match r.status {
        201 => assert_eq!(r.body["data"]["issued_on"], today().to_string(), "{}", r.body),
        _ => assert_invalid(&r, &["issued_on"]),
    }
}

// ---------------------------------------------------------------------------------------
// Visit plans, prescribed medicines, complaints
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn plan_crud_round_trip() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let sent = json!({
        "patient_visit_id": v,
        "plan": "Start lubricating drops; refraction next visit.",
        "follow_up_date": "2026-04-01",
        "instructions": "Four times a day.\nAvoid screens at night.",
    });
    let r = app.post(PLANS, Some(main), sent.clone()).await;
    assert_status(&r, 201);
    let data = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&data[field], value, "{field} echoed: {data}");
    }
    assert_eq!(data["patient_id"], p, "taken from the visit");
    let path = format!("{PLANS}/{}", id_of(data));
    let r = app.get(&path, Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["plan"], sent["plan"]);
    assert_eq!(r.body["data"]["patient_id"], p);
    let r = app.put(&path, Some(main), json!({ "follow_up_date": "2026-04-15", "instructions": null })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["follow_up_date"], "2026-04-15");
    assert!(r.body["data"]["instructions"].is_null());
    assert_eq!(r.body["data"]["plan"], sent["plan"]);
    assert_status(&app.delete(&path, Some(main)).await, 200);
    assert_status(&app.get(&path, Some(main)).await, 404);
    assert_eq!(app.get(PLANS, Some(main)).await.body["meta"]["total"], 0);
}

#[tokio::test]
async fn plan_visit_and_text_are_required_and_dates_checked() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let r = app.post(PLANS, Some(main), json!({})).await;
    assert_invalid(&r, &["patient_visit_id", "plan"]);
    let r = app.post(PLANS, Some(main), json!({ "patient_visit_id": v, "plan": "  " })).await;
    assert_invalid(&r, &["plan"]);
    let r = app
        .post(
            PLANS,
            Some(main),
            json!({ "patient_visit_id": v, "plan": "X", "follow_up_date": "2026-04-31" }),
        )
        .await;
    assert_invalid(&r, &["follow_up_date"]);
    let r = app.post(PLANS, Some(main), json!({ "patient_visit_id": v, "plan": 12 })).await;
    assert_invalid(&r, &["plan"]);
}

#[tokio::test]
async fn a_prescribed_medicine_is_422_on_medicine_id_while_no_medicine_exists() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let before = audit_count(&app, main).await;
    for medicine in [json!(1), json!(42), json!("7")] {
        let r = app
            .post(
                MEDICINES,
                Some(main),
                json!({ "patient_visit_id": v, "medicine_id": medicine, "eye": "both", "quantity": 2 }),
            )
            .await;
        assert_invalid(&r, &["medicine_id"]);
    }
    let r = app.post(MEDICINES, Some(main), json!({ "patient_visit_id": v, "medicine_id": "abc" })).await;
    assert_invalid(&r, &["medicine_id"]);
    let r = app.get(MEDICINES, Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 0);
    assert_eq!(audit_count(&app, main).await, before, "refused writes leave no audit row");
}

#[tokio::test]
async fn prescribed_medicine_visit_and_medicine_are_required() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = app.post(MEDICINES, Some(main), json!({})).await;
    assert_invalid(&r, &["medicine_id", "patient_visit_id"]);
    let r = app.post(MEDICINES, Some(main), json!({ "medicine_id": null, "patient_visit_id": null })).await;
    assert_invalid(&r, &["medicine_id", "patient_visit_id"]);
}

#[tokio::test]
async fn prescribed_medicine_eye_and_quantity_are_validated() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let base = |extra: Value| record_body(MEDICINES, v, extra);
    // Every bad field is named at once, the medicine that does not exist (no master data yet)
    // included.
    let r = app.post(MEDICINES, Some(main), base(json!({ "eye": "middle", "quantity": "two" }))).await;
    assert_invalid(&r, &["eye", "medicine_id", "quantity"]);
    for quantity in [json!(1.5), json!(true), json!([2]), json!(-3)] {
        let r = app.post(MEDICINES, Some(main), base(json!({ "quantity": quantity }))).await;
        assert_invalid(&r, &["medicine_id", "quantity"]);
    }
    // Valid values pass validation: only the absent medicine is left.
    for eye in ["right", "left", "both", "n_a"] {
        let r = app.post(MEDICINES, Some(main), base(json!({ "eye": eye, "quantity": 3 }))).await;
        assert_invalid(&r, &["medicine_id"]);
    }
}

#[tokio::test]
async fn prescribed_medicines_list_takes_the_patient_and_visit_filters() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let r = app
        .get(&format!("{MEDICINES}?filters[patient_id]={p}&filters[patient_visit_id]={v}"), Some(main))
        .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"], json!([]));
    let r = app.get(&format!("{MEDICINES}?filters[patient_visit_id]=x"), Some(main)).await;
    assert_invalid(&r, &["filters[patient_visit_id]"]);
    let r = app.get(&format!("{MEDICINES}?filters[eye]=middle"), Some(main)).await;
    assert_invalid(&r, &["filters[eye]"]);
}

#[tokio::test]
async fn complaint_crud_round_trip() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let sent = json!({
        "patient_id": p,
        "patient_visit_id": v,
        "complaint": "Floaters in the right eye",
        "eye": "right",
        "onset": "sudden",
        "duration": "3 days",
        "severity": "severe",
        "notes": "Flashes at night.",
    });
    let r = app.post(COMPLAINTS, Some(main), sent.clone()).await;
    assert_status(&r, 201);
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&r.body["data"][field], value, "{field} echoed: {}", r.body);
    }
    let path = format!("{COMPLAINTS}/{}", id_of(&r.body["data"]));
    let r = app.get(&path, Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["complaint"], "Floaters in the right eye");
    let r = app.put(&path, Some(main), json!({ "severity": "mild", "eye": "both" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["severity"], "mild");
    assert_eq!(r.body["data"]["eye"], "both");
    assert_eq!(r.body["data"]["duration"], "3 days");
    assert_eq!(r.body["data"]["version"], 2);
    assert_status(&app.delete(&path, Some(main)).await, 200);
    assert_status(&app.get(&path, Some(main)).await, 404);
    assert_status(&app.delete(&path, Some(main)).await, 404);
}

#[tokio::test]
async fn complaint_text_is_required_and_eye_and_severity_checked() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let r = app.post(COMPLAINTS, Some(main), json!({})).await;
    assert_invalid(&r, &["patient_visit_id", "complaint"]);
    let r = app
        .post(
            COMPLAINTS,
            Some(main),
            json!({ "patient_visit_id": v, "complaint": "Pain", "eye": "middle", "severity": "unbearable" }),
        )
        .await;
    assert_invalid(&r, &["eye", "severity"]);
    let r = app
        .post(COMPLAINTS, Some(main), json!({ "patient_visit_id": v, "complaint": "x".repeat(501) }))
        .await;
    assert_invalid(&r, &["complaint"]);
}

// ---------------------------------------------------------------------------------------
// Rules shared by every visit record
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn patient_id_is_taken_from_the_visit_for_each_visit_record() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Other", "Person").await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let v = visit(&app, main, p).await;
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        assert_eq!(record["patient_id"], p, "{path}: {record}");
        assert_eq!(record["patient_visit_id"], v, "{path}");
        let record = app.created(path, Some(main), record_body(path, v, json!({ "patient_id": p }))).await;
        assert_eq!(record["patient_id"], p, "{path}: the matching patient is accepted");
    }
}

#[tokio::test]
async fn a_patient_other_than_the_visits_is_422_on_patient_id_for_each_visit_record() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let owner = patient(&app, main, "Ana", "Cruz").await;
    let stranger = patient(&app, main, "Ben", "Reyes").await;
    let v = visit(&app, main, owner).await;
    for path in VISIT_RECORDS {
        let r = app.post(path, Some(main), record_body(path, v, json!({ "patient_id": stranger }))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_id"]));
    }
    for path in [PLANS, CERTIFICATES] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        let r = app
            .put(&format!("{path}/{}", id_of(&record)), Some(main), json!({ "patient_id": stranger }))
            .await;
        assert_invalid(&r, &["patient_id"]);
        let r = app.get(&format!("{path}/{}", id_of(&record)), Some(main)).await;
        assert_eq!(r.body["data"]["patient_id"], owner, "{path}: unchanged");
    }
}

#[tokio::test]
async fn a_visit_of_another_branch_is_422_on_patient_visit_id_for_each_visit_record() {
    let Clinic { app, branch: main, patient: p, visit: own } = Clinic::open().await;
    let (_, _, foreign_visit) = other_branch(&app).await;
    for path in VISIT_RECORDS {
        let r = app.post(path, Some(main), record_body(path, foreign_visit, json!({}))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_visit_id"]));
        let r = app.post(path, Some(main), record_body(path, 999_999, json!({ "patient_id": p }))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_visit_id"]));
    }
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        let record = app.created(path, Some(main), record_body(path, own, json!({}))).await;
        let r = app
            .put(
                &format!("{path}/{}", id_of(&record)),
                Some(main),
                json!({ "patient_visit_id": foreign_visit }),
            )
            .await;
        assert_invalid(&r, &["patient_visit_id"]);
    }
}

#[tokio::test]
async fn a_patient_of_another_branch_is_422_on_patient_id_for_each_visit_record() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let (_, foreign_patient, _) = other_branch(&app).await;
    for path in VISIT_RECORDS {
        let r =
            app.post(path, Some(main), record_body(path, v, json!({ "patient_id": foreign_patient }))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_id"]));
    }
}

#[tokio::test]
async fn a_deleted_visit_cannot_be_referenced() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    assert_status(&app.delete(&format!("{VISITS}/{v}"), Some(main)).await, 200);
    for path in VISIT_RECORDS {
        let r = app.post(path, Some(main), record_body(path, v, json!({}))).await;
        assert_invalid(&r, &with_medicine(path, &["patient_visit_id"]));
    }
}

#[tokio::test]
async fn visit_records_filter_by_patient_id_and_patient_visit_id() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Cruz").await;
    let ben = patient(&app, main, "Ben", "Reyes").await;
    let (first, second, bens) =
        (visit(&app, main, ana).await, visit(&app, main, ana).await, visit(&app, main, ben).await);
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        let mut of_ana = BTreeSet::new();
        let mut of_second = BTreeSet::new();
        let mut of_ben = BTreeSet::new();
        for v in [first, second, second, bens] {
            let id = id_of(&app.created(path, Some(main), record_body(path, v, json!({}))).await);
            if v == bens {
                of_ben.insert(id);
            } else {
                of_ana.insert(id);
            }
            if v == second {
                of_second.insert(id);
            }
        }
        let r = app.get(&format!("{path}?filters[patient_id]={ana}"), Some(main)).await;
        assert_status(&r, 200);
        assert_eq!(id_set(&r.body), of_ana, "{path} by patient");
        assert_eq!(r.body["meta"]["total"], 3);
        let r = app.get(&format!("{path}?filters[patient_id]={ben}"), Some(main)).await;
        assert_eq!(id_set(&r.body), of_ben, "{path} by the other patient");
        let r = app.get(&format!("{path}?filters[patient_visit_id]={second}"), Some(main)).await;
        assert_eq!(id_set(&r.body), of_second, "{path} by visit");
        let r = app
            .get(&format!("{path}?filters[patient_visit_id]={first}&filters[patient_id]={ben}"), Some(main))
            .await;
        assert_eq!(r.body["meta"]["total"], 0, "{path}: visit and patient together");
        let r = app.get(&format!("{path}?filters[patient_id]=abc"), Some(main)).await;
        assert_invalid(&r, &["filters[patient_id]"]);
    }
}

#[tokio::test]
async fn visit_records_refuse_a_stale_if_match() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let mut targets = vec![(format!("{VISITS}/{v}"), json!({ "reason": "mine" }), "reason")];
    for (path, field) in [(PLANS, "plan"), (COMPLAINTS, "complaint"), (CERTIFICATES, "diagnosis")] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        targets.push((format!("{path}/{}", id_of(&record)), json!({ field: "mine" }), field));
    }
    for (path, body, field) in targets {
        let r = app.get(&path, Some(main)).await;
        let stale = r.header("etag").unwrap_or_else(|| panic!("ETag on {path}")).to_owned();
        let r = app.put(&path, Some(main), json!({ field: "theirs" })).await;
        assert_status(&r, 200);
        let current = r.header("etag").expect("ETag on update").to_owned();
        assert_ne!(current, stale, "{path}");
        let r =
            reply(app.request(Method::PUT, &path, Some(main)).header("if-match", &stale).json(&body)).await;
        assert_status(&r, 412);
        let r = reply(app.request(Method::DELETE, &path, Some(main)).header("if-match", &stale)).await;
        assert_status(&r, 412);
        let r = app.get(&path, Some(main)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"][field], "theirs", "{path}: nothing changed");
        let r =
            reply(app.request(Method::PUT, &path, Some(main)).header("if-match", &current).json(&body)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"][field], "mine");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_visit_updates_with_the_same_etag_let_exactly_one_win() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let path = format!("{VISITS}/{v}");
    let rounds = 10;
    for round in 0..rounds {
        let etag = app.get(&path, Some(main)).await.header("etag").expect("ETag").to_owned();
        let tasks: Vec<_> = ["left", "right"]
            .iter()
            .map(|side| {
                let req = app
                    .request(Method::PUT, &path, Some(main))
                    .header("if-match", &etag)
                    .json(&json!({ "reason": format!("{side} {round}") }));
                tokio::spawn(reply(req))
            })
            .collect();
        let mut statuses = Vec::new();
        for task in tasks {
            statuses.push(task.await.unwrap().status);
        }
        statuses.sort_unstable();
        assert_eq!(statuses, vec![200, 412], "round {round}");
    }
    let r = app.get(&path, Some(main)).await;
    assert_eq!(r.body["data"]["version"], rounds + 1);
}

// ---------------------------------------------------------------------------------------
// Medical certificates
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn certificate_crud_round_trip() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let sent = json!({
        "patient_visit_id": v,
        "issued_on": "2026-03-10",
        "diagnosis": "Acute conjunctivitis, both eyes",
        "recommendation": "Rest; avoid contact lenses.",
        "rest_days": 3,
        "valid_until": "2026-03-13",
    });
    let r = app.post(CERTIFICATES, Some(main), sent.clone()).await;
    assert_status(&r, 201);
    let data = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&data[field], value, "{field} echoed: {data}");
    }
    assert_eq!(data["patient_id"], p);
    assert_eq!(data["certificate_number"], "MC-MAIN-000001");
    let path = format!("{CERTIFICATES}/{}", id_of(data));
    let r = app.get(&path, Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["certificate_number"], "MC-MAIN-000001");
    assert_eq!(r.body["data"]["rest_days"], 3);
    let r = app.put(&path, Some(main), json!({ "rest_days": 5, "valid_until": "2026-03-15" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["rest_days"], 5);
    assert_eq!(r.body["data"]["valid_until"], "2026-03-15");
    assert_eq!(r.body["data"]["certificate_number"], "MC-MAIN-000001", "the number stays");
    assert_status(&app.delete(&path, Some(main)).await, 200);
    assert_status(&app.get(&path, Some(main)).await, 404);
}

#[tokio::test]
async fn certificate_numbers_are_generated_per_branch() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let north = app.create_branch("NORTH").await;
    let np = patient(&app, north, "Ben", "Reyes").await;
    let nv = visit(&app, north, np).await;
    let number = |record: Value| record["certificate_number"].as_str().unwrap().to_owned();
    assert_eq!(
        number(app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await),
        "MC-MAIN-000001"
    );
    assert_eq!(
        number(app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await),
        "MC-MAIN-000002"
    );
    assert_eq!(
        number(app.created(CERTIFICATES, Some(north), json!({ "patient_visit_id": nv })).await),
        "MC-NORTH-000001"
    );
    assert_eq!(
        number(app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await),
        "MC-MAIN-000003"
    );
    assert_eq!(
        number(app.created(CERTIFICATES, Some(north), json!({ "patient_visit_id": nv })).await),
        "MC-NORTH-000002"
    );
    // An explicit number is kept as given.
    let record = app
        .created(
            CERTIFICATES,
            Some(main),
            json!({ "patient_visit_id": v, "certificate_number": "MC-2026-A7" }),
        )
        .await;
    assert_eq!(number(record), "MC-2026-A7");
}

#[tokio::test]
async fn a_duplicate_certificate_number_is_422_on_certificate_number() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "certificate_number": "CERT-1" }))
        .await;
    let generated = app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await;
    let before = audit_count(&app, main).await;
    for taken in ["CERT-1", "  CERT-1 "] {
        let r = app
            .post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "certificate_number": taken }))
            .await;
        assert_invalid(&r, &["certificate_number"]);
    }
    let r = app
        .post(
            CERTIFICATES,
            Some(main),
            json!({ "patient_visit_id": v, "certificate_number": "MC-MAIN-000001" }),
        )
        .await;
    assert_invalid(&r, &["certificate_number"]);
    // Renaming one to a taken number too.
    let path = format!("{CERTIFICATES}/{}", id_of(&generated));
    let r = app.put(&path, Some(main), json!({ "certificate_number": "CERT-1" })).await;
    assert_invalid(&r, &["certificate_number"]);
    assert_eq!(app.get(&path, Some(main)).await.body["data"]["certificate_number"], "MC-MAIN-000001");
    assert_eq!(app.get(CERTIFICATES, Some(main)).await.body["meta"]["total"], 2);
    assert_eq!(audit_count(&app, main).await, before, "refused writes leave no audit row");
    // Another branch has its own numbers.
    let north = app.create_branch("NORTH").await;
    let nv = visit(&app, north, patient(&app, north, "Ben", "Reyes").await).await;
    app.created(CERTIFICATES, Some(north), json!({ "patient_visit_id": nv, "certificate_number": "CERT-1" }))
        .await;
}

#[tokio::test]
async fn a_generated_certificate_number_skips_numbers_already_taken() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    // A clinic typing the next number by hand must not break the generator.
    app.created(
        CERTIFICATES,
        Some(main),
        json!({ "patient_visit_id": v, "certificate_number": "MC-MAIN-000001" }),
    )
    .await;
    let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await;
    assert_status(&r, 201);
    let number = r.body["data"]["certificate_number"].as_str().unwrap_or_default().to_owned();
    assert_ne!(number, "MC-MAIN-000001");
    let digits = number.strip_prefix("MC-MAIN-").unwrap_or_else(|| panic!("number {number}"));
    assert!(digits.len() == 6 && digits.bytes().all(|b| b.is_ascii_digit()), "number {number}");
}

#[tokio::test]
async fn certificate_rest_days_are_0_to_365_and_dates_checked() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    for bad in [json!(-1), json!(366), json!("three"), json!(2.5)] {
        let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "rest_days": bad })).await;
        assert_invalid(&r, &["rest_days"]);
    }
    for ok in [0, 365] {
        let c =
            app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "rest_days": ok })).await;
        assert_eq!(c["rest_days"], ok);
    }
    let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "issued_on": "2026-02-29", "valid_until": "soon", "certificate_number": 5 }))
    .await;
    assert_invalid(&r, &["issued_on", "valid_until", "certificate_number"]);
}

#[tokio::test]
async fn certificate_doctor_id_is_422_while_no_doctor_exists() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "doctor_id": 1 })).await;
    assert_invalid(&r, &["doctor_id"]);
    assert_eq!(app.get(CERTIFICATES, Some(main)).await.body["meta"]["total"], 0);
}

#[tokio::test]
async fn certificates_list_by_issued_on_between_start_and_end_date() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let mut by_day = std::collections::BTreeMap::new();
    for day in ["2026-01-10", "2026-01-15", "2026-01-20"] {
        let c =
            app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "issued_on": day })).await;
        by_day.insert(day, id_of(&c));
    }
    let expect = |days: &[&str]| days.iter().map(|d| by_day[d]).collect::<BTreeSet<i64>>();
    let cases: [(&str, &[&str]); 6] = [
        ("start_date=2026-01-15", &["2026-01-15", "2026-01-20"]),
        ("end_date=2026-01-15", &["2026-01-10", "2026-01-15"]),
        ("start_date=2026-01-15&end_date=2026-01-15", &["2026-01-15"]),
        ("start_date=2026-01-11&end_date=2026-01-19", &["2026-01-15"]),
        ("start_date=2026-01-21", &[]),
        ("start_date=2026-01-01&end_date=2026-01-31", &["2026-01-10", "2026-01-15", "2026-01-20"]),
    ];
    for (query, days) in cases {
        let r = app.get(&format!("{CERTIFICATES}?{query}"), Some(main)).await;
        assert_status(&r, 200);
        assert_eq!(id_set(&r.body), expect(days), "{query}");
        assert_eq!(r.body["meta"]["total"], days.len(), "{query}");
    }
    // Newest first by default.
    let r = app.get(CERTIFICATES, Some(main)).await;
    assert_eq!(ids(&r.body), vec![by_day["2026-01-20"], by_day["2026-01-15"], by_day["2026-01-10"]]);
}

#[tokio::test]
async fn certificate_date_range_with_a_bad_date_or_end_before_start_is_422() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["2026-13-01", "yesterday", "15/01/2026", "2026-02-30"] {
        let r = app.get(&format!("{CERTIFICATES}?start_date={bad}"), Some(main)).await;
        assert_invalid(&r, &["start_date"]);
        let r = app.get(&format!("{CERTIFICATES}?end_date={bad}"), Some(main)).await;
        assert_invalid(&r, &["end_date"]);
    }
    let r = app.get(&format!("{CERTIFICATES}?start_date=2026-02-01&end_date=2026-01-31"), Some(main)).await;
    assert_invalid(&r, &["end_date"]);
}

// ---------------------------------------------------------------------------------------
// Audit log
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn patient_writes_are_listed_newest_first_with_before_and_after() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let r = app.put(&format!("{PATIENTS}/{p}"), Some(main), json!({ "first_name": "Ann" })).await;
    assert_status(&r, 200);
    assert_status(&app.delete(&format!("{PATIENTS}/{p}"), Some(main)).await, 200);

    let r = audit_rows(&app, main, "filters[resource]=patients").await;
    assert_status(&r, 200);
    let p_rows = |action: &str| (action.to_owned(), "patients".to_owned(), p);
    assert_eq!(audit_summary(&r.body), vec![p_rows("delete"), p_rows("update"), p_rows("create")]);
    let rows = r.body["data"].as_array().unwrap();
    for row in rows {
        assert_eq!(row["user_id"], admin, "{row}");
        assert!(row["at"].as_str().is_some_and(|at| at.len() >= 19), "timestamp: {row}");
    }
    let (deleted, updated, create) = (&rows[0], &rows[1], &rows[2]);
    assert!(create["before"].is_null(), "{create}");
    assert_eq!(create["after"]["first_name"], "Ana");
    assert_eq!(create["after"]["pin"], "MAIN-000001");
    assert_eq!(updated["before"]["first_name"], "Ana");
    assert_eq!(updated["after"]["first_name"], "Ann");
    assert_eq!(updated["after"]["version"], 2);
    assert_eq!(deleted["before"]["first_name"], "Ann");
    assert!(deleted["after"].is_null(), "{deleted}");
    // A single row can be read too.
    let r = app.get(&format!("{AUDIT}/{}", id_of(updated)), Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["action"], "update");
    assert_eq!(r.body["data"]["after"]["first_name"], "Ann");
}

#[tokio::test]
async fn every_visit_record_write_is_audited() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let mut cases = vec![("patient-visits", format!("{VISITS}/{v}"), "reason")];
    for (path, resource, field) in [
        (PLANS, "patient-visit-plans", "plan"),
        (COMPLAINTS, "complaints", "complaint"),
        (CERTIFICATES, "medical-certificates", "diagnosis"),
    ] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        cases.push((resource, format!("{path}/{}", id_of(&record)), field));
    }
    for (resource, path, field) in &cases {
        let r = app.put(path, Some(main), json!({ *field: "changed" })).await;
        assert_status(&r, 200);
        assert_status(&app.delete(path, Some(main)).await, 200);
        let id: i64 = path.rsplit('/').next().unwrap().parse().unwrap();
        let r =
            audit_rows(&app, main, &format!("filters[resource]={resource}&filters[record_id]={id}")).await;
        assert_status(&r, 200);
        let actions: Vec<String> = audit_summary(&r.body).into_iter().map(|(a, _, _)| a).collect();
        assert_eq!(actions, vec!["delete", "update", "create"], "{resource}");
        let rows = r.body["data"].as_array().unwrap();
        assert_eq!(rows[1]["after"][*field], "changed", "{resource}");
        assert_eq!(rows[2]["after"]["patient_id"], p, "{resource}");
    }
}

#[tokio::test]
async fn opening_a_patient_is_audited_as_a_view_by_its_reader() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let (doctor, token) = app.create_user("doc1", &["doctor"], &[main]).await;
    let r = reply(app.request_as(&token, Method::GET, &format!("{PATIENTS}/{p}"), Some(main))).await;
    assert_status(&r, 200);
    let r = audit_rows(&app, main, "filters[action]=view").await;
    assert_status(&r, 200);
    assert_eq!(audit_summary(&r.body), vec![("view".to_owned(), "patients".to_owned(), p)]);
    assert_eq!(r.body["data"][0]["user_id"], doctor);
    // A 404 read is not a view of anything.
    let r = reply(app.request_as(&token, Method::GET, &format!("{PATIENTS}/999"), Some(main))).await;
    assert_status(&r, 404);
    assert_eq!(audit_rows(&app, main, "filters[action]=view").await.body["meta"]["total"], 1);
}

#[tokio::test]
async fn exporting_patients_is_audited() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    patient(&app, main, "Ana", "Cruz").await;
    let r = reply(
        app.http
            .get(app.url(&format!("{PATIENTS}/export?filters[sex]=female")))
            .bearer_auth(&app.admin_token)
            .header("x-branch-id", main.to_string()),
    )
    .await;
    assert_status(&r, 200);
    let r = audit_rows(&app, main, "filters[action]=export").await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 1, "{}", r.body);
    assert_eq!(r.body["data"][0]["resource"], "patients");
    assert_eq!(r.body["data"][0]["user_id"], admin);
}

#[tokio::test]
async fn audit_log_filters_each_narrow_the_result() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let (doctor, token) = app.create_user("doc1", &["doctor"], &[main]).await;
    let ana = patient(&app, main, "Ana", "Cruz").await; // admin: create
    let r = reply(app.request_as(&token, Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Ben", "last_name": "Reyes", "birth_date": "1980-01-02", "sex": "male",
    })))
    .await;
    assert_status(&r, 201);
    let ben = id_of(&r.body["data"]); // doctor: create
    let r = reply(
        app.request_as(&token, Method::PUT, &format!("{PATIENTS}/{ana}"), Some(main))
            .json(&json!({ "first_name": "Ann" })),
    )
    .await;
    assert_status(&r, 200); // doctor: update ana
    let v = visit(&app, main, ana).await; // admin: create visit

    let all = audit_rows(&app, main, "").await;
    assert_status(&all, 200);
    assert_eq!(all.body["meta"]["total"], 4, "{}", all.body);
    let summary = |query: &str| {
        let app = &app;
        let query = query.to_owned();
        async move {
            let r = audit_rows(app, main, &query).await;
            assert_status(&r, 200);
            audit_summary(&r.body)
        }
    };
    let row = |action: &str, resource: &str, id: i64| (action.to_owned(), resource.to_owned(), id);
    assert_eq!(
        summary("filters[resource]=patients").await,
        vec![row("update", "patients", ana), row("create", "patients", ben), row("create", "patients", ana)]
    );
    assert_eq!(summary("filters[resource]=patient-visits").await, vec![row("create", "patient-visits", v)]);
    assert_eq!(
        summary(&format!("filters[resource]=patients&filters[record_id]={ana}")).await,
        vec![row("update", "patients", ana), row("create", "patients", ana)]
    );
    assert_eq!(
        summary(&format!("filters[user_id]={doctor}")).await,
        vec![row("update", "patients", ana), row("create", "patients", ben)]
    );
    assert_eq!(
        summary(&format!("filters[user_id]={admin}")).await,
        vec![row("create", "patient-visits", v), row("create", "patients", ana)]
    );
    assert_eq!(summary("filters[action]=update").await, vec![row("update", "patients", ana)]);
    assert_eq!(
        summary(&format!("filters[action]=create&filters[user_id]={doctor}")).await,
        vec![row("create", "patients", ben)]
    );
    assert_eq!(summary("filters[action]=delete").await, vec![]);
    let r = audit_rows(&app, main, "filters[record_id]=abc").await;
    assert_invalid(&r, &["filters[record_id]"]);
    let r = audit_rows(&app, main, "filters[user_id]=x").await;
    assert_invalid(&r, &["filters[user_id]"]);
    let r = audit_rows(&app, main, "filters[password]=x").await;
    assert_invalid(&r, &["filters[password]"]);
}

#[tokio::test]
async fn audit_log_start_and_end_date_bound_the_rows() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let day = today();
    patient(&app, main, "Ana", "Cruz").await;
    patient(&app, main, "Ben", "Reyes").await;
    let total = |query: String| {
        let app = &app;
        async move {
            let r = audit_rows(app, main, &query).await;
            assert_status(&r, 200);
            r.body["meta"]["total"].as_i64().unwrap()
        }
    };
    let d = |offset: i64| (day + time::Duration::days(offset)).to_string();
    assert_eq!(
        total(format!("start_date={}&end_date={}", d(0), d(0))).await,
        2,
        "today, inclusive on both ends"
    );
    assert_eq!(total(format!("start_date={}", d(-1))).await, 2);
    assert_eq!(total(format!("end_date={}", d(1))).await, 2);
    assert_eq!(total(format!("end_date={}", d(-1))).await, 0, "before today");
    assert_eq!(total(format!("start_date={}", d(1))).await, 0, "after today");
    assert_eq!(total(format!("start_date={}&end_date={}", d(-30), d(-2))).await, 0);
    let r = audit_rows(&app, main, "start_date=2026-99-01").await;
    assert_invalid(&r, &["start_date"]);
    let r = audit_rows(&app, main, &format!("start_date={}&end_date={}", d(0), d(-1))).await;
    assert_invalid(&r, &["end_date"]);
}

#[tokio::test]
async fn audit_log_is_for_admins_only() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    let row = id_of(&audit_rows(&app, main, "").await.body["data"][0]);
    for role in ["doctor", "receptionist", "nurse", "cashier"] {
        let (_, token) = app.create_user(&format!("{role}1"), &[role], &[main]).await;
        let r = reply(app.request_as(&token, Method::GET, AUDIT, Some(main))).await;
        assert_status(&r, 403);
        assert!(!r.text.contains("Cruz"), "{}", r.text);
        let r = reply(app.request_as(&token, Method::GET, &format!("{AUDIT}/{row}"), Some(main))).await;
        assert_status(&r, 403);
    }
    let r = audit_rows(&app, main, "").await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn audit_log_is_branch_scoped() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let own = patient(&app, main, "Ana", "Cruz").await;
    patient(&app, north, "Ben", "Reyes").await;
    patient(&app, north, "Carl", "Santos").await;
    let r = audit_rows(&app, main, "").await;
    assert_eq!(audit_summary(&r.body), vec![("create".to_owned(), "patients".to_owned(), own)]);
    let r = audit_rows(&app, north, "").await;
    assert_eq!(r.body["meta"]["total"], 2);
    assert!(
        r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["after"]["pin"].as_str().unwrap().starts_with("NORTH-"))
    );
}

#[tokio::test]
async fn refused_writes_leave_no_audit_row() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let path = format!("{PATIENTS}/{p}");
    let stale = app.get(&path, Some(main)).await.header("etag").unwrap().to_owned();
    assert_status(&app.put(&path, Some(main), json!({ "first_name": "Ann" })).await, 200);
    let before = audit_rows(&app, main, "").await.body["meta"]["total"].as_i64().unwrap();
    assert_eq!(before, 3, "create, view (the GET) and update");
    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .header("if-match", &stale)
            .json(&json!({ "first_name": "X" })),
    )
    .await;
    assert_status(&r, 412);
    let r = reply(app.request(Method::DELETE, &path, Some(main)).header("if-match", &stale)).await;
    assert_status(&r, 412);
    assert_status(&app.put(&path, Some(main), json!({ "insurance_id": 3 })).await, 422);
    assert_status(&app.put(&path, Some(main), json!({ "sex": "robot" })).await, 422);
    let r = app
        .post(VISITS, Some(main), json!({ "patient_id": p, "visit_date": "2026-01-05", "doctor_id": 9 }))
        .await;
    assert_status(&r, 422);
    let after = audit_rows(&app, main, "").await.body["meta"]["total"].as_i64().unwrap();
    assert_eq!(after, before);
}

#[tokio::test]
async fn audit_log_cannot_be_written_through_the_api() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    let row = id_of(&audit_rows(&app, main, "").await.body["data"][0]);
    let r = app.post(AUDIT, Some(main), json!({ "action": "create", "resource": "patients" })).await;
    assert_status(&r, 405);
    let r = app.put(&format!("{AUDIT}/{row}"), Some(main), json!({ "action": "forged" })).await;
    assert_status(&r, 405);
    let r = app.delete(&format!("{AUDIT}/{row}"), Some(main)).await;
    assert_status(&r, 405);
    let r = app.get(&format!("{AUDIT}/{row}"), Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["action"], "create");
    assert_eq!(audit_rows(&app, main, "").await.body["meta"]["total"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_certificates_get_distinct_consecutive_numbers() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(reply(
                app.request(Method::POST, CERTIFICATES, Some(main)).json(&json!({ "patient_visit_id": v })),
            ))
        })
        .collect();
    let mut numbers = BTreeSet::new();
    for task in tasks {
        let r = task.await.unwrap();
        assert_status(&r, 201);
        numbers.insert(r.body["data"]["certificate_number"].as_str().unwrap().to_owned());
    }
    let expected: BTreeSet<String> = (1..=20).map(|n| format!("MC-MAIN-{n:06}")).collect();
    assert_eq!(numbers, expected);
}

#[tokio::test]
async fn moving_a_record_to_another_patients_visit_keeps_patient_and_visit_consistent() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Cruz").await;
    let ben = patient(&app, main, "Ben", "Reyes").await;
    let (anas, bens) = (visit(&app, main, ana).await, visit(&app, main, ben).await);
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        // Both ids together: accepted.
        let record = app.created(path, Some(main), record_body(path, anas, json!({}))).await;
        let member = format!("{path}/{}", id_of(&record));
        let r = app.put(&member, Some(main), json!({ "patient_visit_id": bens, "patient_id": ben })).await;
        assert_status(&r, 200);
        assert_eq!(
            (&r.body["data"]["patient_id"], &r.body["data"]["patient_visit_id"]),
            (&json!(ben), &json!(bens))
        );
        // The visit alone: the record's patient stays, so it no longer matches the visit's:
        // refused on patient_id, and nothing changes.
        let record = app.created(path, Some(main), record_body(path, anas, json!({}))).await;
        let member = format!("{path}/{}", id_of(&record));
        let r = app.put(&member, Some(main), json!({ "patient_visit_id": bens })).await;
        assert_invalid(&r, &["patient_id"]);
        let now = app.get(&member, Some(main)).await.body["data"].clone();
        assert_eq!(
            (&now["patient_id"], &now["patient_visit_id"]),
            (&json!(ana), &json!(anas)),
            "{path}: {now}"
        );
    }
}

#[tokio::test]
async fn moving_a_visit_to_another_patient_never_leaves_its_records_behind() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Cruz").await;
    let ben = patient(&app, main, "Ben", "Reyes").await;
    let v = visit(&app, main, ana).await;
    let mut records = Vec::new();
    for path in [PLANS, COMPLAINTS, CERTIFICATES] {
        let record = app.created(path, Some(main), record_body(path, v, json!({}))).await;
        records.push(format!("{path}/{}", id_of(&record)));
    }
    // The visit keeps its patient while records derive theirs from it.
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "patient_id": ben })).await;
    assert_invalid(&r, &["patient_id"]);
    let owner = app.get(&format!("{VISITS}/{v}"), Some(main)).await.body["data"]["patient_id"].clone();
    assert_eq!(owner, json!(ana));
    for member in records {
        let record = app.get(&member, Some(main)).await.body["data"].clone();
        assert_eq!(record["patient_visit_id"], v);
        assert_eq!(record["patient_id"], owner, "{member} names a patient other than its visit's: {record}");
    }
}

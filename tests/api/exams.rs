//! The fourteen eye examinations: their common fields, each type's
//! ranges, steps and rules between fields with dotted error paths, signing and amending,
//! the examiner, the visit summary, measurements over time and the OpenAPI description.
//! Over HTTP against a real server and a fresh database.

use std::collections::BTreeSet;

use crate::support::{
    Clinic, Reply, TestApp, assert_error, assert_invalid, assert_status, id_of, ids, reply,
};
use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const VISITS: &str = "/api/v1/patient-visits";
const AUDIT: &str = "/api/v1/audit-logs";

/// Every examination's path, in the order of the contract.
const EXAMS: [&str; 14] = [
    "visual-acuities",
    "refractions",
    "tonometries",
    "slit-lamps",
    "funduscopies",
    "gonioscopies",
    "corneal-topographies",
    "amsler-grids",
    "eoms",
    "exophthalmometries",
    "lacrimal-irrigations",
    "radiologies",
    "gross-examinations",
    "indirect-ophthalmoscopies",
];

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn path(exam: &str) -> String {
    format!("/api/v1/{exam}")
}

/// A valid body of each examination without its eyes, and one valid eye (`None` for
/// radiology, which is not recorded per eye).
fn sample(exam: &str) -> (Value, Option<Value>) {
    match exam {
        "visual-acuities" => (
            json!({ "distance": "distance", "correction": "unaided", "notation": "snellen_m" }),
            Some(json!({ "value": "6/12" })),
        ),
        "refractions" => {
            (json!({ "kind": "manifest" }), Some(json!({ "sphere": -2.25, "cylinder": -0.5, "axis": 90 })))
        }
        "tonometries" => (
            json!({}),
            Some(
                json!({ "readings": [{ "iop_mmhg": 15.5, "method": "goldmann", "measured_at": "09:30" }], "cct_um": 540 }),
            ),
        ),
        "slit-lamps" => (
            json!({}),
            Some(json!({
                "cornea": { "status": "normal" },
                "lens": { "status": "abnormal", "findings": "Nuclear sclerosis" },
                "nuclear_cataract": "mild",
                "pupil_mm": 3,
            })),
        ),
        "funduscopies" => {
            (json!({ "dilated": true }), Some(json!({ "cd_ratio": 0.3, "disc": "Pink, sharp margins" })))
        }
        "gonioscopies" => (
            json!({}),
            Some(
                json!({ "superior": 3, "inferior": 4, "nasal": 3, "temporal": 3, "iris_configuration": "flat", "pas_clock_hours": [1, 2] }),
            ),
        ),
        "corneal-topographies" => (
            json!({ "device": "Pentacam" }),
            Some(
                json!({ "k1": 42.5, "k2": 43.25, "kmax": 44.1, "k1_axis": 180, "k2_axis": 90, "thinnest_pachymetry_um": 530 }),
            ),
        ),
        "amsler-grids" => (json!({}), Some(json!({ "grade": 0, "distortion": false }))),
        "eoms" => (
            json!({ "deviation": "esotropia", "deviation_pd": 15, "diplopia": false }),
            Some(json!({ "gaze": { "primary": 0, "up": -1 } })),
        ),
        "exophthalmometries" => {
            (json!({ "base_mm": 100, "instrument": "Hertel" }), Some(json!({ "reading_mm": 16.5 })))
        }
        "lacrimal-irrigations" => (
            json!({}),
            Some(
                json!({ "upper_punctum": "patent", "passage": "free", "regurgitation": "none", "schirmer_mm": 15 }),
            ),
        ),
        "radiologies" => (
            json!({ "studies": [{ "modality": "ct", "region": "Orbits", "laterality": "both", "performed_on": today() }] }),
            None,
        ),
        "gross-examinations" => {
            (json!({}), Some(json!({ "brow": "Normal", "mrd1_mm": 4, "levator_function_mm": 15 })))
        }
        "indirect-ophthalmoscopies" => (
            json!({}),
            Some(
                json!({ "scleral_depression": true, "vitreous": "pvd", "periphery": [{ "finding": "lattice", "clock_hours": [1, 2] }] }),
            ),
        ),
        other => panic!("not an examination: {other}"),
    }
}

/// A valid create body for `exam` on `visit` (both eyes when it is per eye), `extra` merged in.
fn body(exam: &str, visit: i64, extra: Value) -> Value {
    let (mut body, eye) = sample(exam);
    body["patient_visit_id"] = json!(visit);
    if let Some(eye) = eye {
        body["right_eye"] = eye.clone();
        body["left_eye"] = eye;
    }
    merge(&mut body, extra);
    body
}

fn merge(body: &mut Value, extra: Value) {
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
}

async fn create(clinic: &Clinic, exam: &str, extra: Value) -> Value {
    clinic.app.created(&path(exam), Some(clinic.branch), body(exam, clinic.visit, extra)).await
}

async fn post(clinic: &Clinic, exam: &str, body: Value) -> Reply {
    clinic.app.post(&path(exam), Some(clinic.branch), body).await
}

/// Creates `exam` with `eye` as its right eye (and no left eye), `extra` merged in; answers
/// the reply so that a test can assert a 422.
async fn with_right_eye(clinic: &Clinic, exam: &str, eye: Value, extra: Value) -> Reply {
    let mut b = body(exam, clinic.visit, extra);
    b["right_eye"] = eye;
    b.as_object_mut().unwrap().remove("left_eye");
    post(clinic, exam, b).await
}

fn today() -> String {
    OffsetDateTime::now_utc().date().to_string()
}

/// An RFC 3339 instant `minutes` from now (negative: in the past).
fn from_now(minutes: i64) -> String {
    (OffsetDateTime::now_utc() + time::Duration::minutes(minutes)).format(&Rfc3339).unwrap()
}

fn instant(value: &Value) -> OffsetDateTime {
    let text = value.as_str().unwrap_or_else(|| panic!("not a timestamp: {value}"));
    OffsetDateTime::parse(text, &Rfc3339).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// A JSON number's text as sent (the tests' serde_json keeps it exactly).
fn raw(value: &Value) -> String {
    assert!(value.is_number(), "not a JSON number: {value}");
    value.to_string()
}

async fn sign(app: &TestApp, branch: i64, exam: &str, id: i64) -> Reply {
    app.post(&format!("{}/{id}/sign", path(exam)), Some(branch), json!({})).await
}

// ---------------------------------------------------------------------------------------
// Every examination: create, common fields, sign, delete
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn every_examination_is_created_with_the_common_fields() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let admin = app.admin_id().await;
    for exam in EXAMS {
        let sent = body(exam, clinic.visit, json!({ "notes": "  Routine check.\nNo complaints. " }));
        let r = post(&clinic, exam, sent.clone()).await;
        assert_status(&r, 201);
        assert_eq!(r.header("etag"), Some("\"1\""), "{exam}");
        let data = &r.body["data"];
        assert_eq!(data["patient_visit_id"], clinic.visit, "{exam}");
        assert_eq!(data["patient_id"], clinic.patient, "{exam}: the patient comes from the visit");
        assert_eq!(data["examiner_id"], admin, "{exam}: the examiner defaults to the caller");
        assert_eq!(data["notes"], "Routine check.\nNo complaints.", "{exam}");
        assert_eq!(data["status"], "draft", "{exam}");
        assert_eq!(data["version"], 1, "{exam}");
        for unset in ["signed_by", "signed_at", "amendment_reason", "amended_by", "amended_at"] {
            assert!(data[unset].is_null(), "{exam}: {unset} is null on create: {data}");
        }
        let examined = instant(&data["examined_at"]);
        let drift = (OffsetDateTime::now_utc() - examined).abs();
        assert!(drift < time::Duration::minutes(1), "{exam}: examined_at defaults to now: {examined}");
        if exam == "radiologies" {
            assert!(data["right_eye"].is_null() && data["left_eye"].is_null(), "{data}");
            assert_eq!(data["studies"][0]["region"], "Orbits");
            assert_eq!(data["studies"][0]["modality"], "ct");
        } else {
            for eye in ["right_eye", "left_eye"] {
                assert_eq!(data[eye]["unable_to_assess"], false, "{exam}: {eye} defaults: {data}");
                for (field, value) in sent[eye].as_object().unwrap() {
                    assert!(!data[eye][field].is_null(), "{exam}: {eye}.{field} stored as {value}: {data}");
                }
            }
        }
        let id = id_of(data);
        let r = app.get(&format!("{}/{id}", path(exam)), Some(branch)).await;
        assert_status(&r, 200);
        assert_eq!(&r.body["data"], data, "{exam}: read back as answered");
        let r = app
            .get(&format!("{}?filters[patient_visit_id]={}", path(exam), clinic.visit), Some(branch))
            .await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id], "{exam}");
    }
}

#[tokio::test]
async fn every_examination_is_signed_once_and_then_kept() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let admin = app.admin_id().await;
    for exam in EXAMS {
        let id = id_of(&create(&clinic, exam, json!({})).await);
        let r = sign(app, branch, exam, id).await;
        assert_status(&r, 200);
        assert_eq!(r.header("etag"), Some("\"2\""), "{exam}");
        let data = &r.body["data"];
        assert_eq!(data["status"], "signed", "{exam}");
        assert_eq!(data["signed_by"], admin, "{exam}");
        let signed = instant(&data["signed_at"]);
        assert!((OffsetDateTime::now_utc() - signed).abs() < time::Duration::minutes(1), "{exam}");
        assert_eq!(data["version"], 2, "{exam}");
        let again = sign(app, branch, exam, id).await;
        assert_error(&again, 409, "invalid_transition");
        assert_eq!(again.body["status"], "signed", "{exam}");
        let r = app.delete(&format!("{}/{id}", path(exam)), Some(branch)).await;
        assert_error(&r, 409, "record_signed");
        assert_eq!(r.body["status"], "signed", "{exam}");
        assert_status(&app.get(&format!("{}/{id}", path(exam)), Some(branch)).await, 200);
    }
}

#[tokio::test]
async fn concurrent_signatures_sign_once() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let id = id_of(&create(&clinic, "refractions", json!({})).await);
    let replies = join_all((0..6).map(|_| sign(app, branch, "refractions", id))).await;
    assert_eq!(replies.iter().filter(|r| r.status == 200).count(), 1);
    for r in replies.iter().filter(|r| r.status != 200) {
        assert_error(r, 409, "invalid_transition");
    }
    let r = app.get(&format!("{}/{id}", path("refractions")), Some(branch)).await;
    assert_eq!(r.body["data"]["version"], 2, "signed once");
    let rows = app.audit_rows(AUDIT, Some(branch), "refractions", id).await;
    assert_eq!(rows.iter().filter(|r| r["action"] == "sign").count(), 1);
}

#[tokio::test]
async fn a_draft_examination_is_deleted_softly() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let id = id_of(&create(&clinic, "tonometries", json!({})).await);
    let member = format!("{}/{id}", path("tonometries"));
    assert_status(&app.delete(&member, Some(branch)).await, 200);
    assert_error(&app.get(&member, Some(branch)).await, 404, "not_found");
    assert_error(&sign(app, branch, "tonometries", id).await, 404, "not_found");
    let r = app.get(&path("tonometries"), Some(branch)).await;
    assert_eq!(r.body["meta"]["total"], 0, "{}", r.body);
    let kept: i64 = app
        .state
        .registry
        .get()
        .await
        .unwrap()
        .query_one(
            &format!(
                "SELECT count(*) FROM branch_{branch}.tonometries WHERE id = $1 AND deleted_at IS NOT NULL"
            ),
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 1, "the row stays, hidden");
}

#[tokio::test]
async fn an_amendment_needs_a_reason_keeps_the_signature_and_is_audited() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let admin = app.admin_id().await;
    let id = id_of(&create(&clinic, "refractions", json!({ "notes": "First reading" })).await);
    let member = format!("{}/{id}", path("refractions"));
    assert_status(&sign(app, branch, "refractions", id).await, 200);

    let r = app.put(&member, Some(branch), json!({ "notes": "Corrected" })).await;
    assert_invalid(&r, &["amendment_reason"]);
    let r = app.put(&member, Some(branch), json!({ "notes": "Corrected", "amendment_reason": "   " })).await;
    assert_invalid(&r, &["amendment_reason"]);
    assert_eq!(
        app.get(&member, Some(branch)).await.body["data"]["notes"],
        "First reading",
        "nothing written"
    );

    let r = app
        .put(
            &member,
            Some(branch),
            json!({ "notes": "Corrected", "amendment_reason": "Transcription error" }),
        )
        .await;
    assert_status(&r, 200);
    let data = &r.body["data"];
    assert_eq!(data["status"], "signed", "an amendment stays signed");
    assert_eq!(data["notes"], "Corrected");
    assert_eq!(data["amendment_reason"], "Transcription error");
    assert_eq!(data["amended_by"], admin);
    assert!(!data["amended_at"].is_null(), "{data}");
    assert_eq!(data["signed_by"], admin, "the signature stays");
    assert_eq!(data["version"], 3);

    let rows = app.audit_rows(AUDIT, Some(branch), "refractions", id).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "sign", "amend"]);
    let amend = &rows[2];
    assert_eq!(amend["before"]["version"], 2, "the previous version is kept: {amend}");
    assert_eq!(amend["before"]["notes"], "First reading");
    assert_eq!(amend["before"]["status"], "signed");
    assert_eq!(amend["after"]["notes"], "Corrected");
    assert_eq!(amend["user_id"], admin);
}

#[tokio::test]
async fn a_stale_if_match_on_sign_is_412_and_signs_nothing() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let id = id_of(&create(&clinic, "amsler-grids", json!({})).await);
    let member = format!("{}/{id}", path("amsler-grids"));
    assert_status(&app.put(&member, Some(branch), json!({ "notes": "Second look" })).await, 200);
    let signing = |tag: &'static str| {
        app.request(Method::POST, &format!("{member}/sign"), Some(branch)).header("if-match", tag)
    };
    assert_error(&reply(signing("\"1\"")).await, 412, "precondition_failed");
    let r = app.get(&member, Some(branch)).await;
    assert_eq!(r.body["data"]["status"], "draft");
    assert_eq!(r.body["data"]["version"], 2);
    let r = reply(signing("\"2\"")).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["version"], 3);
}

#[tokio::test]
async fn examinations_need_clinical_permissions() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let id = id_of(&create(&clinic, "refractions", json!({})).await);
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    let member = format!("{}/{id}", path("refractions"));
    let b = body("refractions", clinic.visit, json!({}));
    for (method, route, sent) in [
        (Method::GET, path("refractions"), Value::Null),
        (Method::GET, member.clone(), Value::Null),
        (Method::POST, path("refractions"), b.clone()),
        (Method::PUT, member.clone(), json!({ "notes": "x" })),
        (Method::POST, format!("{member}/sign"), Value::Null),
        (Method::DELETE, member.clone(), Value::Null),
        (Method::GET, format!("/api/v1/patients/{}/measurements?kind=sphere", clinic.patient), Value::Null),
    ] {
        let r = app.call_as(&desk, method.clone(), &route, Some(branch), sent).await;
        assert_error(&r, 403, "forbidden");
    }
    let (nurse_id, nurse) = app.create_user("nurse", &["nurse"], &[branch]).await;
    let r = app.call_as(&nurse, Method::POST, &path("refractions"), Some(branch), b).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["examiner_id"], nurse_id);
    let r = app.call_as(&nurse, Method::POST, &format!("{member}/sign"), Some(branch), Value::Null).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["signed_by"], nurse_id);
}

// ---------------------------------------------------------------------------------------
// Common fields
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_examiner_is_an_active_user_of_the_branch() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let (doctor, _) = app.create_user("doc", &["doctor"], &[branch]).await;
    let north = app.create_branch("NORTH").await;
    let (elsewhere, _) = app.create_user("north", &["doctor"], &[north]).await;
    let (gone, _) = app.create_user("gone", &["doctor"], &[branch]).await;
    app.state
        .registry
        .get()
        .await
        .unwrap()
        .execute("UPDATE users SET active = false WHERE id = $1", &[&gone])
        .await
        .unwrap();

    let named = create(&clinic, "funduscopies", json!({ "examiner_id": doctor })).await;
    assert_eq!(named["examiner_id"], doctor);
    for bad in [json!(elsewhere), json!(gone), json!(999_999), json!("someone")] {
        let r =
            post(&clinic, "funduscopies", body("funduscopies", clinic.visit, json!({ "examiner_id": bad })))
                .await;
        assert_invalid(&r, &["examiner_id"]);
    }
    let r = post(&clinic, "funduscopies", body("funduscopies", clinic.visit, json!({ "examiner_id": null })))
        .await;
    assert_invalid(&r, &["examiner_id"]);
    let member = format!("{}/{}", path("funduscopies"), id_of(&named));
    assert_invalid(&app.put(&member, Some(branch), json!({ "examiner_id": gone })).await, &["examiner_id"]);
    let r = app.put(&member, Some(branch), json!({ "examiner_id": app.admin_id().await })).await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn examined_at_is_not_in_the_future_and_is_answered_in_utc() {
    let clinic = Clinic::open().await;
    let exam = "gross-examinations";
    let r = post(&clinic, exam, body(exam, clinic.visit, json!({ "examined_at": from_now(10) }))).await;
    assert_invalid(&r, &["examined_at"]);
    let skewed = create(&clinic, exam, json!({ "examined_at": from_now(3) })).await;
    assert!(instant(&skewed["examined_at"]) > OffsetDateTime::now_utc(), "5 minutes of skew are allowed");
    let local = create(&clinic, exam, json!({ "examined_at": "2026-01-05T10:15:00+08:00" })).await;
    assert_eq!(
        instant(&local["examined_at"]),
        OffsetDateTime::parse("2026-01-05T02:15:00Z", &Rfc3339).unwrap()
    );
    assert!(local["examined_at"].as_str().unwrap().starts_with("2026-01-05T02:15:00"), "{local}");
    let r = post(&clinic, exam, body(exam, clinic.visit, json!({ "examined_at": "yesterday" }))).await;
    assert_invalid(&r, &["examined_at"]);
}

#[tokio::test]
async fn the_visit_and_its_patient_must_agree() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let other = id_of(&app.create_patient(branch, "Ben", "Reyes").await);
    let exam = "amsler-grids";
    let r = post(&clinic, exam, body(exam, clinic.visit, json!({ "patient_id": other }))).await;
    assert_invalid(&r, &["patient_id"]);
    let same = create(&clinic, exam, json!({ "patient_id": clinic.patient })).await;
    assert_eq!(same["patient_id"], clinic.patient);
    let r = post(&clinic, exam, body(exam, 999_999, json!({}))).await;
    assert_invalid(&r, &["patient_visit_id"]);
    let mut missing = body(exam, clinic.visit, json!({}));
    missing.as_object_mut().unwrap().remove("patient_visit_id");
    assert_invalid(&post(&clinic, exam, missing).await, &["patient_visit_id"]);
}

#[tokio::test]
async fn a_visit_keeps_its_patient_once_an_examination_names_it() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let other = id_of(&app.create_patient(branch, "Ben", "Reyes").await);
    let visit = format!("{VISITS}/{}", clinic.visit);
    let exam = create(&clinic, "eoms", json!({})).await;
    let r = app.put(&visit, Some(branch), json!({ "patient_id": other })).await;
    assert_invalid(&r, &["patient_id"]);
    assert_eq!(app.get(&visit, Some(branch)).await.body["data"]["patient_id"], clinic.patient);
    // Sending the same patient back is no change.
    assert_status(&app.put(&visit, Some(branch), json!({ "patient_id": clinic.patient })).await, 200);
    // Once the examination is gone, the visit may move.
    let member = format!("{}/{}", path("eoms"), id_of(&exam));
    assert_status(&app.delete(&member, Some(branch)).await, 200);
    let r = app.put(&visit, Some(branch), json!({ "patient_id": other })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["patient_id"], other);
}

// ---------------------------------------------------------------------------------------
// Eyes
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn at_least_one_eye_is_recorded() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    for exam in EXAMS.into_iter().filter(|e| *e != "radiologies") {
        let mut none = body(exam, clinic.visit, json!({}));
        none.as_object_mut().unwrap().retain(|k, _| !k.ends_with("_eye"));
        assert_invalid(&post(&clinic, exam, none.clone()).await, &["right_eye"]);
        merge(&mut none, json!({ "right_eye": null, "left_eye": null }));
        assert_invalid(&post(&clinic, exam, none).await, &["right_eye"]);
        // One eye is enough; then it cannot be emptied.
        let (_, eye) = sample(exam);
        let r = with_right_eye(&clinic, exam, json!({ "unable_to_assess": true }), json!({})).await;
        assert_status(&r, 201);
        let id = id_of(&r);
        assert_eq!(r.body["data"]["right_eye"], json!({ "unable_to_assess": true }), "{exam}");
        assert!(r.body["data"]["left_eye"].is_null(), "{exam}");
        let member = format!("{}/{id}", path(exam));
        assert_invalid(&app.put(&member, Some(branch), json!({ "right_eye": null })).await, &["right_eye"]);
        let r = app.put(&member, Some(branch), json!({ "right_eye": null, "left_eye": eye })).await;
        assert_status(&r, 200);
        assert!(r.body["data"]["right_eye"].is_null(), "{exam}");
    }
}

#[tokio::test]
async fn an_unassessed_eye_takes_no_measurement_and_an_assessed_one_holds_a_finding() {
    let clinic = Clinic::open().await;
    let r =
        with_right_eye(&clinic, "refractions", json!({ "unable_to_assess": true, "sphere": 1 }), json!({}))
            .await;
    assert_invalid(&r, &["right_eye.sphere"]);
    let r = with_right_eye(
        &clinic,
        "tonometries",
        json!({ "unable_to_assess": true, "readings": [{ "iop_mmhg": 12, "method": "icare" }], "cct_um": 500 }),
        json!({}),
    )
    .await;
    assert_invalid(&r, &["right_eye.readings", "right_eye.cct_um"]);
    // Null measurements are no measurements.
    let r = with_right_eye(
        &clinic,
        "refractions",
        json!({ "unable_to_assess": true, "sphere": null }),
        json!({}),
    )
    .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["right_eye"], json!({ "unable_to_assess": true }));
    // An eye object with no finding.
    for eye in [json!({}), json!({ "unable_to_assess": false }), json!({ "cd_ratio": null, "disc": "  " })] {
        let r = with_right_eye(&clinic, "funduscopies", eye, json!({})).await;
        assert_invalid(&r, &["right_eye"]);
    }
    // A required measurement is required when the eye is assessed.
    assert_invalid(
        &with_right_eye(&clinic, "refractions", json!({}), json!({})).await,
        &["right_eye.sphere"],
    );
    let r = with_right_eye(&clinic, "refractions", json!({ "unable_to_assess": "no" }), json!({})).await;
    assert_invalid(&r, &["right_eye.unable_to_assess"]);
    assert_invalid(&with_right_eye(&clinic, "refractions", json!(-2), json!({})).await, &["right_eye"]);
    // Unknown keys are dropped.
    let r = with_right_eye(&clinic, "funduscopies", json!({ "cd_ratio": 0.4, "colour": "pink" }), json!({}))
        .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["right_eye"], parsed(r#"{"unable_to_assess":false,"cd_ratio":0.40}"#));
}

#[tokio::test]
async fn a_put_of_one_eye_replaces_it_and_checks_it_whole() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let created = create(
        &clinic,
        "refractions",
        json!({
            "right_eye": { "sphere": -1, "cylinder": -0.5, "axis": 90, "va": "6/6" },
            "left_eye": { "sphere": 1.5 },
        }),
    )
    .await;
    let member = format!("{}/{}", path("refractions"), id_of(&created));
    let r = app.put(&member, Some(branch), json!({ "right_eye": { "sphere": "-1.25" } })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["right_eye"], json!({ "unable_to_assess": false, "sphere": -1.25 }));
    assert_eq!(r.body["data"]["left_eye"], created["left_eye"], "the other eye is kept");
    // The stored sphere does not complete a sent eye that lacks one.
    let r = app.put(&member, Some(branch), json!({ "right_eye": { "cylinder": -1, "axis": 10 } })).await;
    assert_invalid(&r, &["right_eye.sphere"]);
    let r = app.put(&member, Some(branch), json!({ "right_eye": { "sphere": -1, "cylinder": -1 } })).await;
    assert_invalid(&r, &["right_eye.axis"]);
    assert_eq!(
        app.get(&member, Some(branch)).await.body["data"]["right_eye"]["sphere"].as_f64(),
        Some(-1.25)
    );
}

// ---------------------------------------------------------------------------------------
// Each type's rules
// ---------------------------------------------------------------------------------------

/// `(eye sent as the right eye, the fields a 422 names)` for one examination.
async fn refuses(clinic: &Clinic, exam: &str, cases: &[(Value, &[&str])]) {
    for (eye, fields) in cases {
        let r = with_right_eye(clinic, exam, eye.clone(), json!({})).await;
        assert_eq!(r.status, 422, "{exam} {eye}: {}", r.text);
        assert_invalid(&r, fields);
    }
}

/// Each eye is created and its `field` answered as the JSON text `expected` (numbers
/// compare with their scale: `-2.50` is not `-2.5`).
async fn accepts(clinic: &Clinic, exam: &str, cases: &[(Value, &str, &str)]) {
    for (eye, field, expected) in cases {
        let r = with_right_eye(clinic, exam, eye.clone(), json!({})).await;
        assert_eq!(r.status, 201, "{exam} {eye}: {}", r.text);
        let got = &r.body["data"]["right_eye"][*field];
        assert_eq!(got, &parsed(expected), "{exam} {eye}: {field} answered {got}");
    }
}

/// JSON text as a value, numbers kept as written.
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[tokio::test]
async fn refraction_values_are_exact_decimals_on_their_steps() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "refractions",
        &[
            (json!({ "sphere": 1.13 }), &["right_eye.sphere"]),
            (json!({ "sphere": "30.25" }), &["right_eye.sphere"]),
            (json!({ "sphere": "-2,25" }), &["right_eye.sphere"]),
            (json!({ "sphere": "1e1" }), &["right_eye.sphere"]),
            (json!({ "sphere": true }), &["right_eye.sphere"]),
            (json!({ "sphere": 0, "cylinder": -10.25, "axis": 10 }), &["right_eye.cylinder"]),
            (json!({ "sphere": 0, "add": 0 }), &["right_eye.add"]),
            (json!({ "sphere": 0, "add": 4.25 }), &["right_eye.add"]),
            (json!({ "sphere": 0, "prism_pd": 0.75, "prism_base": "in" }), &["right_eye.prism_pd"]),
            (json!({ "sphere": 0, "prism_pd": 1, "prism_base": "sideways" }), &["right_eye.prism_base"]),
            (json!({ "sphere": 0, "va": "x".repeat(21) }), &["right_eye.va"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "refractions",
        &[
            (json!({ "sphere": "-2.25" }), "sphere", "-2.25"),
            (json!({ "sphere": -2.5 }), "sphere", "-2.50"),
            (json!({ "sphere": "-30" }), "sphere", "-30.00"),
            (json!({ "sphere": 30 }), "sphere", "30.00"),
            (json!({ "sphere": "-0" }), "sphere", "0.00"),
            (json!({ "sphere": 0, "add": 2 }), "add", "2.00"),
            (json!({ "sphere": 0, "prism_pd": 1, "prism_base": "IN" }), "prism_pd", "1.0"),
            (json!({ "sphere": 0, "prism_pd": 1, "prism_base": "IN" }), "prism_base", "\"in\""),
            (json!({ "sphere": 0, "cylinder": "-0.75", "axis": "180" }), "axis", "180"),
        ],
    )
    .await;
    let r = with_right_eye(&clinic, "refractions", json!({ "sphere": "-2.25" }), json!({})).await;
    let sphere = &r.body["data"]["right_eye"]["sphere"];
    assert_eq!(sphere.as_f64(), Some(-2.25), "a string in, a number out");
    assert!(r.text.contains("\"sphere\":-2.25"), "{}", r.text);
    let r = with_right_eye(&clinic, "refractions", json!({ "sphere": -2.5 }), json!({})).await;
    assert!(r.text.contains("\"sphere\":-2.50"), "the step's scale is kept: {}", r.text);
}

#[tokio::test]
async fn refraction_axis_goes_with_a_cylinder_and_prism_base_with_a_prism() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "refractions",
        &[
            (json!({ "sphere": -1, "cylinder": -1.5 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "cylinder": 0, "axis": 90 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "cylinder": "0.00", "axis": 90 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "axis": 90 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "cylinder": -1, "axis": 0 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "cylinder": -1, "axis": 181 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "prism_pd": 2 }), &["right_eye.prism_base"]),
            (json!({ "sphere": -1, "prism_base": "up" }), &["right_eye.prism_base"]),
            (
                json!({ "sphere": -1, "cylinder": 1, "prism_pd": 2 }),
                &["right_eye.axis", "right_eye.prism_base"],
            ),
        ],
    )
    .await;
    // The left eye's errors are the left eye's.
    let mut b = body("refractions", clinic.visit, json!({}));
    b["left_eye"] = json!({ "sphere": 1, "cylinder": 2 });
    assert_invalid(&post(&clinic, "refractions", b).await, &["left_eye.axis"]);
    accepts(&clinic, "refractions", &[(json!({ "sphere": -1, "cylinder": 0 }), "cylinder", "0.00")]).await;
}

#[tokio::test]
async fn tonometry_readings_are_checked_one_by_one() {
    let clinic = Clinic::open().await;
    let mut b = body("tonometries", clinic.visit, json!({}));
    b["left_eye"] = json!({ "readings": [
        { "iop_mmhg": 14, "method": "goldmann" },
        { "iop_mmhg": 15, "method": "palpation" },
    ] });
    assert_invalid(&post(&clinic, "tonometries", b).await, &["left_eye.readings.1.method"]);
    let reading = |iop: Value| json!({ "iop_mmhg": iop, "method": "icare" });
    let eleven: Vec<Value> = (0..11).map(|_| reading(json!(12))).collect();
    refuses(
        &clinic,
        "tonometries",
        &[
            (json!({ "readings": [] }), &["right_eye.readings"]),
            (json!({ "readings": eleven }), &["right_eye.readings"]),
            (json!({ "readings": "15" }), &["right_eye.readings"]),
            (json!({ "cct_um": 540 }), &["right_eye.readings"]),
            (json!({ "readings": [reading(json!(80.1))] }), &["right_eye.readings.0.iop_mmhg"]),
            (json!({ "readings": [reading(json!(15.05))] }), &["right_eye.readings.0.iop_mmhg"]),
            (json!({ "readings": [reading(json!(-1))] }), &["right_eye.readings.0.iop_mmhg"]),
            (json!({ "readings": [{ "method": "icare" }] }), &["right_eye.readings.0.iop_mmhg"]),
            (json!({ "readings": [null] }), &["right_eye.readings.0"]),
            (
                json!({ "readings": [{ "iop_mmhg": 12, "method": "icare", "measured_at": "9:30" }] }),
                &["right_eye.readings.0.measured_at"],
            ),
            (
                json!({ "readings": [{ "iop_mmhg": 12, "method": "icare", "measured_at": "24:00" }] }),
                &["right_eye.readings.0.measured_at"],
            ),
            (json!({ "readings": [reading(json!(12))], "cct_um": 299 }), &["right_eye.cct_um"]),
            (json!({ "readings": [reading(json!(12))], "cct_um": 801 }), &["right_eye.cct_um"]),
        ],
    )
    .await;
    let r = with_right_eye(
        &clinic,
        "tonometries",
        json!({ "readings": [{ "iop_mmhg": "21", "method": "NON_CONTACT", "measured_at": "08:05", "extra": 1 }] }),
        json!({}),
    )
    .await;
    assert_status(&r, 201);
    assert_eq!(
        r.body["data"]["right_eye"]["readings"],
        parsed(r#"[{"iop_mmhg":21.0,"method":"non_contact","measured_at":"08:05"}]"#)
    );
}

#[tokio::test]
async fn slit_lamp_structures_describe_what_is_abnormal() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "slit-lamps",
        &[
            (json!({ "cornea": { "status": "abnormal" } }), &["right_eye.cornea.findings"]),
            (json!({ "cornea": { "status": "abnormal", "findings": " " } }), &["right_eye.cornea.findings"]),
            (json!({ "cornea": { "findings": "Clear" } }), &["right_eye.cornea.status"]),
            (json!({ "cornea": { "status": "cloudy" } }), &["right_eye.cornea.status"]),
            (json!({ "cornea": "normal" }), &["right_eye.cornea"]),
            (
                json!({ "lens": { "status": "normal", "findings": "x".repeat(1001) } }),
                &["right_eye.lens.findings"],
            ),
            (json!({ "ac_cells": 0.25 }), &["right_eye.ac_cells"]),
            (json!({ "ac_cells": 4.5 }), &["right_eye.ac_cells"]),
            (json!({ "ac_flare": 5 }), &["right_eye.ac_flare"]),
            (json!({ "ac_flare": 1.5 }), &["right_eye.ac_flare"]),
            (json!({ "nuclear_cataract": "white" }), &["right_eye.nuclear_cataract"]),
            (json!({ "cortical_cataract": "brunescent" }), &["right_eye.cortical_cataract"]),
            (json!({ "pupil_mm": 0.5 }), &["right_eye.pupil_mm"]),
            (json!({ "pupil_mm": 3.2 }), &["right_eye.pupil_mm"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "slit-lamps",
        &[
            (
                json!({ "iris": { "status": "abnormal", "findings": "Rubeosis" } }),
                "iris",
                r#"{"findings":"Rubeosis","status":"abnormal"}"#,
            ),
            (
                json!({ "anterior_vitreous": { "status": "not_examined" } }),
                "anterior_vitreous",
                r#"{"status":"not_examined"}"#,
            ),
            (json!({ "ac_cells": 0.5, "ac_flare": 0 }), "ac_cells", "0.5"),
            (json!({ "pupil_mm": 10 }), "pupil_mm", "10.0"),
            (json!({ "cortical_cataract": "white" }), "cortical_cataract", "\"white\""),
        ],
    )
    .await;
}

#[tokio::test]
async fn funduscopy_cup_to_disc_ratio_is_in_steps_of_five_hundredths() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "funduscopies",
        &[
            (json!({ "cd_ratio": 0.33 }), &["right_eye.cd_ratio"]),
            (json!({ "cd_ratio": 1.05 }), &["right_eye.cd_ratio"]),
            (json!({ "cd_ratio": -0.05 }), &["right_eye.cd_ratio"]),
            (json!({ "macula": "x".repeat(1001) }), &["right_eye.macula"]),
            (json!({ "vessels": 3 }), &["right_eye.vessels"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "funduscopies",
        &[
            (json!({ "cd_ratio": "0.85" }), "cd_ratio", "0.85"),
            (json!({ "cd_ratio": 1 }), "cd_ratio", "1.00"),
        ],
    )
    .await;
    let mut undilated = body("funduscopies", clinic.visit, json!({}));
    undilated.as_object_mut().unwrap().remove("dilated");
    let r = post(&clinic, "funduscopies", undilated).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["dilated"], false, "dilated defaults to false");
    let r =
        post(&clinic, "funduscopies", body("funduscopies", clinic.visit, json!({ "dilated": "yes" }))).await;
    assert_invalid(&r, &["dilated"]);
}

#[tokio::test]
async fn gonioscopy_grades_and_distinct_clock_hours() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "gonioscopies",
        &[
            (json!({ "superior": 5 }), &["right_eye.superior"]),
            (json!({ "temporal": -1 }), &["right_eye.temporal"]),
            (json!({ "iris_configuration": "steep" }), &["right_eye.iris_configuration"]),
            (json!({ "pas_clock_hours": [3, 4, 3] }), &["right_eye.pas_clock_hours.2"]),
            (json!({ "pas_clock_hours": [0] }), &["right_eye.pas_clock_hours.0"]),
            (json!({ "pas_clock_hours": [12, 13] }), &["right_eye.pas_clock_hours.1"]),
            (json!({ "pas_clock_hours": 3 }), &["right_eye.pas_clock_hours"]),
            (json!({ "pas_clock_hours": (1..=13).collect::<Vec<i64>>() }), &["right_eye.pas_clock_hours"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "gonioscopies",
        &[
            (json!({ "pas_clock_hours": [12, 1, 2] }), "pas_clock_hours", "[12,1,2]"),
            (json!({ "nasal": 0, "iris_configuration": "Plateau" }), "iris_configuration", "\"plateau\""),
        ],
    )
    .await;
}

#[tokio::test]
async fn corneal_topography_keratometry_is_ordered() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "corneal-topographies",
        &[
            (json!({ "k1": 44, "k2": 43.5 }), &["right_eye.k2"]),
            (json!({ "k1": 43, "k2": 44, "kmax": 43.99 }), &["right_eye.kmax"]),
            (json!({ "k1": 45, "k2": 44, "kmax": 43 }), &["right_eye.k2", "right_eye.kmax"]),
            (json!({ "k1": 43 }), &["right_eye.k2"]),
            (json!({ "k1": 29.99, "k2": 43 }), &["right_eye.k1"]),
            (json!({ "k1": 43, "k2": 70.01 }), &["right_eye.k2"]),
            (json!({ "k1": 43.005, "k2": 44 }), &["right_eye.k1"]),
            (json!({ "k1": 43, "k2": 44, "k1_axis": 181 }), &["right_eye.k1_axis"]),
            (
                json!({ "k1": 43, "k2": 44, "thinnest_pachymetry_um": 99 }),
                &["right_eye.thinnest_pachymetry_um"],
            ),
        ],
    )
    .await;
    accepts(
        &clinic,
        "corneal-topographies",
        &[
            (json!({ "k1": 43, "k2": 43, "kmax": 43 }), "kmax", "43.00"),
            (json!({ "k1": "42.1", "k2": 44 }), "k1", "42.10"),
            (json!({ "k1": 42, "k2": 44, "k2_axis": 0 }), "k2_axis", "0"),
        ],
    )
    .await;
    let r = post(
        &clinic,
        "corneal-topographies",
        body("corneal-topographies", clinic.visit, json!({ "device": "x".repeat(101) })),
    )
    .await;
    assert_invalid(&r, &["device"]);
}

#[tokio::test]
async fn amsler_grid_grade_is_required_from_zero_to_five() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "amsler-grids",
        &[
            (json!({ "distortion": true }), &["right_eye.grade"]),
            (json!({ "grade": 6 }), &["right_eye.grade"]),
            (json!({ "grade": 2.5 }), &["right_eye.grade"]),
            (json!({ "grade": 1, "scotoma": "yes" }), &["right_eye.scotoma"]),
        ],
    )
    .await;
    accepts(&clinic, "amsler-grids", &[(json!({ "grade": 5, "scotoma": true }), "grade", "5")]).await;
}

#[tokio::test]
async fn eom_gaze_steps_and_no_deviation_measure_with_orthophoria() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "eoms",
        &[
            (json!({ "gaze": { "primary": 4.5 } }), &["right_eye.gaze.primary"]),
            (json!({ "gaze": { "up_left": 0.25 } }), &["right_eye.gaze.up_left"]),
            (
                json!({ "gaze": { "down_right": -4.5, "left": 5 } }),
                &["right_eye.gaze.down_right", "right_eye.gaze.left"],
            ),
            (json!({ "gaze": [1] }), &["right_eye.gaze"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "eoms",
        &[(json!({ "gaze": { "down_left": -4, "up": 0.5 } }), "gaze", r#"{"up":0.5,"down_left":-4.0}"#)],
    )
    .await;
    let r = post(
        &clinic,
        "eoms",
        body("eoms", clinic.visit, json!({ "deviation": "orthophoria", "deviation_pd": 5 })),
    )
    .await;
    assert_invalid(&r, &["deviation_pd"]);
    let r = post(
        &clinic,
        "eoms",
        body("eoms", clinic.visit, json!({ "deviation": "orthophoria", "deviation_pd": 0 })),
    )
    .await;
    assert_invalid(&r, &["deviation_pd"]);
    let r = post(&clinic, "eoms", body("eoms", clinic.visit, json!({ "deviation_pd": 101 }))).await;
    assert_invalid(&r, &["deviation_pd"]);
    let r = post(&clinic, "eoms", body("eoms", clinic.visit, json!({ "deviation": "hypertropia" }))).await;
    assert_invalid(&r, &["deviation"]);
    let ortho = create(
        &clinic,
        "eoms",
        json!({ "deviation": "orthophoria", "deviation_pd": null, "nystagmus": true }),
    )
    .await;
    assert!(ortho["deviation_pd"].is_null(), "{ortho}");
    // The rule holds on the stored record with the change over it.
    let member = format!("{}/{}", path("eoms"), id_of(&ortho));
    let r = clinic.app.put(&member, Some(clinic.branch), json!({ "deviation_pd": 10 })).await;
    assert_invalid(&r, &["deviation_pd"]);
    let r = clinic
        .app
        .put(&member, Some(clinic.branch), json!({ "deviation": "exotropia", "deviation_pd": 10 }))
        .await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn exophthalmometry_asymmetry_follows_both_readings() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    refuses(
        &clinic,
        "exophthalmometries",
        &[
            (json!({ "reading_mm": 16.3 }), &["right_eye.reading_mm"]),
            (json!({ "reading_mm": 40.5 }), &["right_eye.reading_mm"]),
            (json!({ "instrument_note": "x" }), &["right_eye.reading_mm"]),
        ],
    )
    .await;
    for base in [json!(79), json!(131), json!(null)] {
        let r = post(
            &clinic,
            "exophthalmometries",
            body("exophthalmometries", clinic.visit, json!({ "base_mm": base })),
        )
        .await;
        assert_invalid(&r, &["base_mm"]);
    }
    let both = create(
        &clinic,
        "exophthalmometries",
        json!({ "right_eye": { "reading_mm": 18.5 }, "left_eye": { "reading_mm": 21 } }),
    )
    .await;
    assert_eq!(both["asymmetry_mm"].as_f64(), Some(2.5), "{both}");
    let one = with_right_eye(&clinic, "exophthalmometries", json!({ "reading_mm": 18 }), json!({})).await;
    assert_status(&one, 201);
    assert!(one.body["data"]["asymmetry_mm"].is_null(), "null with one eye: {}", one.body);
    let member = format!("{}/{}", path("exophthalmometries"), id_of(&both));
    let r =
        app.put(&member, Some(branch), json!({ "left_eye": { "reading_mm": 14 }, "asymmetry_mm": 99 })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["asymmetry_mm"].as_f64(), Some(4.5), "never taken from input: {}", r.body);
    let r = app.put(&member, Some(branch), json!({ "left_eye": { "unable_to_assess": true } })).await;
    assert_status(&r, 200);
    assert!(r.body["data"]["asymmetry_mm"].is_null(), "{}", r.body);
}

#[tokio::test]
async fn lacrimal_irrigation_states_and_times() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "lacrimal-irrigations",
        &[
            (json!({ "upper_punctum": "open" }), &["right_eye.upper_punctum"]),
            (json!({ "lower_punctum": "free" }), &["right_eye.lower_punctum"]),
            (json!({ "passage": "blocked" }), &["right_eye.passage"]),
            (json!({ "regurgitation": "both" }), &["right_eye.regurgitation"]),
            (json!({ "schirmer_mm": 36 }), &["right_eye.schirmer_mm"]),
            (json!({ "tbut_s": 61 }), &["right_eye.tbut_s"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "lacrimal-irrigations",
        &[
            (
                json!({ "lower_punctum": "stenosed", "regurgitation": "opposite_punctum" }),
                "regurgitation",
                "\"opposite_punctum\"",
            ),
            (json!({ "tbut_s": 0 }), "tbut_s", "0"),
        ],
    )
    .await;
}

#[tokio::test]
async fn radiology_has_studies_and_no_eyes() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let study = json!({ "modality": "mri", "region": "Orbit" });
    let tomorrow = (OffsetDateTime::now_utc().date() + time::Duration::days(1)).to_string();
    for (extra, fields) in [
        (json!({ "studies": [] }), vec!["studies"]),
        (json!({ "studies": null }), vec!["studies"]),
        (json!({ "studies": vec![study.clone(); 21] }), vec!["studies"]),
        (json!({ "studies": [{ "region": "Orbit" }] }), vec!["studies.0.modality"]),
        (json!({ "studies": [study, { "modality": "pet", "region": "Orbit" }] }), vec!["studies.1.modality"]),
        (json!({ "studies": [{ "modality": "ct", "region": " " }] }), vec!["studies.0.region"]),
        (
            json!({ "studies": [{ "modality": "ct", "region": "Orbit", "laterality": "middle" }] }),
            vec!["studies.0.laterality"],
        ),
        (
            json!({ "studies": [{ "modality": "ct", "region": "Orbit", "performed_on": tomorrow }] }),
            vec!["studies.0.performed_on"],
        ),
        (json!({ "right_eye": { "findings": "x" } }), vec!["right_eye"]),
        (json!({ "left_eye": { "unable_to_assess": true } }), vec!["left_eye"]),
        (json!({ "right_eye": {}, "left_eye": {} }), vec!["right_eye", "left_eye"]),
    ] {
        let r = post(&clinic, "radiologies", body("radiologies", clinic.visit, extra.clone())).await;
        assert_eq!(r.status, 422, "{extra}: {}", r.text);
        assert_invalid(&r, &fields);
    }
    let mut missing = body("radiologies", clinic.visit, json!({}));
    missing.as_object_mut().unwrap().remove("studies");
    assert_invalid(&post(&clinic, "radiologies", missing).await, &["studies"]);
    let created = create(&clinic, "radiologies", json!({ "right_eye": null, "left_eye": null })).await;
    let member = format!("{}/{}", path("radiologies"), id_of(&created));
    let r = app.put(&member, Some(branch), json!({ "right_eye": { "findings": "x" } })).await;
    assert_invalid(&r, &["right_eye"]);
    let twenty =
        vec![json!({ "modality": "oct", "region": "Macula", "impression": "Normal\nfoveal contour" }); 20];
    let r = app.put(&member, Some(branch), json!({ "studies": twenty })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["studies"].as_array().unwrap().len(), 20);
}

#[tokio::test]
async fn gross_examination_lid_measurements() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "gross-examinations",
        &[
            (json!({ "mrd1_mm": 8.5 }), &["right_eye.mrd1_mm"]),
            (json!({ "mrd1_mm": -5.5 }), &["right_eye.mrd1_mm"]),
            (json!({ "mrd1_mm": 2.25 }), &["right_eye.mrd1_mm"]),
            (json!({ "levator_function_mm": 26 }), &["right_eye.levator_function_mm"]),
            (json!({ "fissure_height_mm": 15.5 }), &["right_eye.fissure_height_mm"]),
            (json!({ "adnexa": "x".repeat(501) }), &["right_eye.adnexa"]),
            (json!({ "brow": "Line one\nline two" }), &["right_eye.brow"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "gross-examinations",
        &[
            (json!({ "mrd1_mm": -5 }), "mrd1_mm", "-5.0"),
            (json!({ "fissure_height_mm": "9.5" }), "fissure_height_mm", "9.5"),
        ],
    )
    .await;
}

#[tokio::test]
async fn indirect_ophthalmoscopy_periphery_findings() {
    let clinic = Clinic::open().await;
    let finding = |hours: Value| json!({ "periphery": [{ "finding": "tear", "clock_hours": hours }] });
    refuses(
        &clinic,
        "indirect-ophthalmoscopies",
        &[
            (finding(json!([])), &["right_eye.periphery.0.clock_hours"]),
            (finding(json!(null)), &["right_eye.periphery.0.clock_hours"]),
            (json!({ "periphery": [{ "finding": "tear" }] }), &["right_eye.periphery.0.clock_hours"]),
            (finding(json!([13])), &["right_eye.periphery.0.clock_hours.0"]),
            (finding(json!([2, 2])), &["right_eye.periphery.0.clock_hours.1"]),
            (
                json!({ "periphery": [{ "finding": "drusen", "clock_hours": [1] }] }),
                &["right_eye.periphery.0.finding"],
            ),
            (
                json!({ "periphery": vec![json!({ "finding": "hole", "clock_hours": [1] }); 25] }),
                &["right_eye.periphery"],
            ),
            (json!({ "vitreous": "cloudy" }), &["right_eye.vitreous"]),
            (json!({ "scleral_depression": 1 }), &["right_eye.scleral_depression"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "indirect-ophthalmoscopies",
        &[
            (json!({ "periphery": [], "findings": "Flat retina" }), "periphery", "[]"),
            (json!({ "vitreous": "haemorrhage" }), "vitreous", "\"haemorrhage\""),
            (
                json!({ "periphery": [{ "finding": "detachment", "clock_hours": [6, 7], "notes": " Inferior " }] }),
                "periphery",
                r#"[{"notes":"Inferior","finding":"detachment","clock_hours":[6,7]}]"#,
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn visual_acuity_logmar_follows_the_notation() {
    let clinic = Clinic::open().await;
    let cases = [
        ("snellen_m", "6/12", "6/12", "0.30"),
        ("snellen_m", "6/6", "6/6", "0.00"),
        ("snellen_m", "6/60", "6/60", "1.00"),
        ("snellen_m", "cf", "CF", "1.90"),
        ("snellen_m", "Hm", "HM", "2.30"),
        ("snellen_ft", "LP", "LP", "2.70"),
        ("decimal", "nlp", "NLP", "3.00"),
        ("snellen_ft", "20/40", "20/40", "0.30"),
        ("decimal", "0.5", "0.5", "0.30"),
        ("decimal", "2.0", "2.0", "-0.30"),
        ("logmar", "0.2", "0.2", "0.20"),
        ("etdrs_letters", "85", "85", "0.00"),
        ("etdrs_letters", "0", "0", "1.70"),
        ("etdrs_letters", "35", "35", "1.00"),
    ];
    for (notation, value, stored, logmar) in cases {
        let r = with_right_eye(
            &clinic,
            "visual-acuities",
            json!({ "value": value }),
            json!({ "notation": notation }),
        )
        .await;
        assert_eq!(r.status, 201, "{notation} {value}: {}", r.text);
        let eye = &r.body["data"]["right_eye"];
        assert_eq!(eye["value"], stored, "{notation} {value}");
        assert_eq!(raw(&eye["logmar"]), logmar, "{notation} {value}: {eye}");
    }
    // Outside N-point the logMAR is computed, whatever is sent.
    let r = with_right_eye(&clinic, "visual-acuities", json!({ "value": "6/12", "logmar": 1.0 }), json!({}))
        .await;
    assert_eq!(raw(&r.body["data"]["right_eye"]["logmar"]), "0.30", "{}", r.text);
    // N-point: the value names a print size; the logMAR is given.
    let near = json!({ "notation": "n_point", "distance": "near" });
    let r = with_right_eye(&clinic, "visual-acuities", json!({ "value": "n5", "logmar": 0.1 }), near.clone())
        .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["right_eye"]["value"], "N5");
    assert_eq!(raw(&r.body["data"]["right_eye"]["logmar"]), "0.10");
    let r = with_right_eye(&clinic, "visual-acuities", json!({ "value": "N80" }), near.clone()).await;
    assert_status(&r, 201);
    for (notation, value) in [
        ("n_point", "N4"),
        ("n_point", "N90"),
        ("n_point", "6/12"),
        ("snellen_m", "20/20"),
        ("snellen_m", "6/0"),
        ("snellen_ft", "6/12"),
        ("decimal", "3"),
        ("decimal", "0.0001"),
        ("logmar", "3.1"),
        ("logmar", "-0.4"),
        ("etdrs_letters", "101"),
        ("etdrs_letters", "8.5"),
        ("snellen_m", "6/12000"),
    ] {
        let r = with_right_eye(
            &clinic,
            "visual-acuities",
            json!({ "value": value }),
            json!({ "notation": notation }),
        )
        .await;
        assert_eq!(r.status, 422, "{notation} {value}: {}", r.text);
        assert_invalid(&r, &["right_eye.value"]);
    }
    let r = with_right_eye(&clinic, "visual-acuities", json!({ "value": "N5", "logmar": 3.05 }), near).await;
    assert_invalid(&r, &["right_eye.logmar"]);
    for (field, value) in [("distance", "far"), ("correction", "laser"), ("notation", "jaeger")] {
        let r =
            post(&clinic, "visual-acuities", body("visual-acuities", clinic.visit, json!({ field: value })))
                .await;
        assert_invalid(&r, &[field]);
    }
}

// ---------------------------------------------------------------------------------------
// Visit summary
// ---------------------------------------------------------------------------------------

const VISIT_RECORD_KEYS: [&str; 4] =
    ["complaints", "patient_visit_plans", "patient_visit_prescribed_medicines", "medical_certificates"];

#[tokio::test]
async fn a_visit_summary_holds_every_live_record_by_kind_in_order() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let b = Some(branch);
    let medicine = app
        .created(
            "/api/v1/medicines",
            None,
            json!({ "generic_name": "Timolol", "form": "drops", "route": "ophthalmic", "unit": "bottle" }),
        )
        .await;
    let visit = clinic.visit;
    let complaint = app
        .created("/api/v1/complaints", b, json!({ "patient_visit_id": visit, "complaint": "Blurred vision" }))
        .await;
    let plan = app
        .created("/api/v1/patient-visit-plans", b, json!({ "patient_visit_id": visit, "plan": "Review" }))
        .await;
    let prescribed = app
        .created(
            "/api/v1/patient-visit-prescribed-medicines",
            b,
            json!({ "patient_visit_id": visit, "medicine_id": id_of(&medicine), "dosage": "1 drop" }),
        )
        .await;
    let certificate = app
        .created(
            "/api/v1/medical-certificates",
            b,
            json!({ "patient_visit_id": visit, "diagnosis": "Myopia" }),
        )
        .await;
    let later = create(&clinic, "refractions", json!({ "examined_at": from_now(-30) })).await;
    let earlier = create(&clinic, "refractions", json!({ "examined_at": from_now(-90) })).await;
    let same_time = from_now(-60);
    let first = create(&clinic, "tonometries", json!({ "examined_at": same_time })).await;
    let second = create(&clinic, "tonometries", json!({ "examined_at": same_time })).await;
    let deleted = create(&clinic, "tonometries", json!({})).await;
    assert_status(&app.delete(&format!("{}/{}", path("tonometries"), id_of(&deleted)), b).await, 200);
    // Another visit's records stay out.
    let other =
        app.created(VISITS, b, json!({ "patient_id": clinic.patient, "visit_date": "2026-02-01" })).await;
    app.created(&path("refractions"), b, body("refractions", id_of(&other), json!({}))).await;

    let r = app.get(&format!("{VISITS}/{visit}/summary"), b).await;
    assert_status(&r, 200);
    let data = &r.body["data"];
    assert_eq!(data["visit"]["id"], visit);
    assert_eq!(data["visit"]["patient_id"], clinic.patient);
    let patient = app.get(&format!("/api/v1/patients/{}", clinic.patient), b).await.body["data"].clone();
    assert_eq!(
        data["patient"],
        json!({ "id": clinic.patient, "pin": patient["pin"], "first_name": "Ana", "last_name": "Cruz" })
    );
    let records = data["records"].as_object().unwrap();
    let keys: BTreeSet<&str> = records.keys().map(String::as_str).collect();
    let mut expected: BTreeSet<String> = VISIT_RECORD_KEYS.iter().map(|k| k.to_string()).collect();
    expected.extend(EXAMS.iter().map(|e| e.replace('-', "_")));
    assert_eq!(keys, expected.iter().map(String::as_str).collect(), "one key per kind");
    let ids_of = |key: &str| -> Vec<i64> { records[key].as_array().unwrap().iter().map(id_of).collect() };
    assert_eq!(ids_of("complaints"), vec![id_of(&complaint)]);
    assert_eq!(ids_of("patient_visit_plans"), vec![id_of(&plan)]);
    assert_eq!(ids_of("patient_visit_prescribed_medicines"), vec![id_of(&prescribed)]);
    assert_eq!(ids_of("medical_certificates"), vec![id_of(&certificate)]);
    assert_eq!(ids_of("refractions"), vec![id_of(&earlier), id_of(&later)], "by examined_at");
    assert_eq!(ids_of("tonometries"), vec![id_of(&first), id_of(&second)], "then by id; deleted left out");
    assert_eq!(records["refractions"][0], earlier, "records as the resource answers them");
    for exam in EXAMS.iter().filter(|e| !["refractions", "tonometries"].contains(e)) {
        assert_eq!(records[&exam.replace('-', "_")], json!([]), "{exam}");
    }
}

#[tokio::test]
async fn a_summary_without_clinical_read_leaves_out_the_examinations() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    create(&clinic, "refractions", json!({})).await;
    app.created(
        "/api/v1/complaints",
        Some(branch),
        json!({ "patient_visit_id": clinic.visit, "complaint": "Itch" }),
    )
    .await;
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    let summary = format!("{VISITS}/{}/summary", clinic.visit);
    let r = app.call_as(&desk, Method::GET, &summary, Some(branch), Value::Null).await;
    assert_status(&r, 200);
    let records = r.body["data"]["records"].as_object().unwrap();
    let keys: BTreeSet<&str> = records.keys().map(String::as_str).collect();
    assert_eq!(keys, VISIT_RECORD_KEYS.into_iter().collect());
    assert_eq!(records["complaints"].as_array().unwrap().len(), 1);
    let (_, cashier) = app.create_user("till", &["cashier"], &[branch]).await;
    let r = app.call_as(&cashier, Method::GET, &summary, Some(branch), Value::Null).await;
    assert_status(&r, 200);
    assert!(r.body["data"]["records"].get("refractions").is_none(), "{}", r.body);
}

#[tokio::test]
async fn the_summary_of_an_unknown_or_deleted_visit_is_404() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    assert_error(&app.get(&format!("{VISITS}/999999/summary"), Some(branch)).await, 404, "not_found");
    let gone = app
        .created(VISITS, Some(branch), json!({ "patient_id": clinic.patient, "visit_date": "2026-02-01" }))
        .await;
    assert_status(&app.delete(&format!("{VISITS}/{}", id_of(&gone)), Some(branch)).await, 200);
    assert_error(
        &app.get(&format!("{VISITS}/{}/summary", id_of(&gone)), Some(branch)).await,
        404,
        "not_found",
    );
}

// ---------------------------------------------------------------------------------------
// Measurements
// ---------------------------------------------------------------------------------------

async fn measurements(clinic: &Clinic, query: &str) -> Reply {
    let route = format!("/api/v1/patients/{}/measurements?{query}", clinic.patient);
    clinic.app.get(&route, Some(clinic.branch)).await
}

/// `(record_id, eye, value)` of each point, in the order answered.
fn points(r: &Reply) -> Vec<(i64, String, f64)> {
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data: {}", r.text))
        .iter()
        .map(|p| {
            let value = p["value"].as_f64().unwrap_or_else(|| panic!("value is not a number: {p}"));
            (p["record_id"].as_i64().unwrap(), p["eye"].as_str().unwrap().to_owned(), value)
        })
        .collect()
}

#[tokio::test]
async fn intraocular_pressure_over_time_is_the_last_reading_of_each_tonometry() {
    let clinic = Clinic::open().await;
    let reading = |iop: f64| json!({ "iop_mmhg": iop, "method": "goldmann" });
    let recent = create(
        &clinic,
        "tonometries",
        json!({
            "examined_at": from_now(-10),
            "right_eye": { "readings": [reading(15.0), reading(18.5)] },
            "left_eye": { "unable_to_assess": true },
        }),
    )
    .await;
    let older = create(
        &clinic,
        "tonometries",
        json!({ "examined_at": from_now(-600), "right_eye": { "readings": [reading(12.0)] }, "left_eye": { "readings": [reading(13.0)] } }),
    )
    .await;
    let (recent, older) = (id_of(&recent), id_of(&older));
    assert_status(&sign(&clinic.app, clinic.branch, "tonometries", older).await, 200);
    let deleted = create(&clinic, "tonometries", json!({ "examined_at": from_now(-5) })).await;
    let member = format!("{}/{}", path("tonometries"), id_of(&deleted));
    assert_status(&clinic.app.delete(&member, Some(clinic.branch)).await, 200);

    let r = measurements(&clinic, "kind=iop&eye=right").await;
    assert_eq!(points(&r), vec![(older, "right".into(), 12.0), (recent, "right".into(), 18.5)]);
    let first = &r.body["data"][0];
    assert_eq!(first["exam"], "tonometry");
    assert_eq!(
        instant(&first["at"]),
        instant(
            &clinic.app.get(&format!("{}/{older}", path("tonometries")), Some(clinic.branch)).await.body["data"]
                ["examined_at"]
        )
    );
    assert_eq!(points(&measurements(&clinic, "kind=iop&eye=left").await), vec![(older, "left".into(), 13.0)]);
    let both = points(&measurements(&clinic, "kind=iop").await);
    assert_eq!(
        both,
        vec![(older, "left".into(), 13.0), (older, "right".into(), 12.0), (recent, "right".into(), 18.5)]
    );
    let r = measurements(&clinic, "kind=IOP&eye=both").await;
    assert_eq!(points(&r).len(), 3, "kind and eye ignore case");
}

#[tokio::test]
async fn refraction_sphere_and_cylinder_over_time() {
    let clinic = Clinic::open().await;
    let at = from_now(-60);
    let a = id_of(
        &create(
            &clinic,
            "refractions",
            json!({ "examined_at": at, "right_eye": { "sphere": -2.25 }, "left_eye": { "sphere": 1, "cylinder": -0.75, "axis": 10 } }),
        )
        .await,
    );
    let b = id_of(
        &create(
            &clinic,
            "refractions",
            json!({ "examined_at": at, "right_eye": { "sphere": -2.5, "cylinder": 0 }, "left_eye": null }),
        )
        .await,
    );
    create(
        &clinic,
        "refractions",
        json!({ "examined_at": from_now(-30), "right_eye": { "unable_to_assess": true }, "left_eye": null }),
    )
    .await;
    let right = points(&measurements(&clinic, "kind=sphere&eye=right").await);
    assert_eq!(right, vec![(a, "right".into(), -2.25), (b, "right".into(), -2.5)], "same time: by record id");
    let cylinders = points(&measurements(&clinic, "kind=cylinder&eye=right").await);
    assert_eq!(cylinders, vec![(a, "right".into(), 0.0), (b, "right".into(), 0.0)], "no cylinder is 0");
    let left = points(&measurements(&clinic, "kind=cylinder&eye=left").await);
    assert_eq!(left, vec![(a, "left".into(), -0.75)]);
    let r = measurements(&clinic, "kind=sphere&eye=left").await;
    assert_eq!(r.body["data"][0]["exam"], "refraction");
}

#[tokio::test]
async fn distance_acuity_and_cup_to_disc_ratio_over_time() {
    let clinic = Clinic::open().await;
    let far = id_of(
        &create(&clinic, "visual-acuities", json!({ "examined_at": from_now(-20), "left_eye": null })).await,
    );
    create(
        &clinic,
        "visual-acuities",
        json!({ "distance": "near", "notation": "n_point", "right_eye": { "value": "N8", "logmar": 0.4 }, "left_eye": null }),
    )
    .await;
    let cf = id_of(
        &create(
            &clinic,
            "visual-acuities",
            json!({ "examined_at": from_now(-10), "right_eye": { "value": "CF" }, "left_eye": null }),
        )
        .await,
    );
    let r = measurements(&clinic, "kind=va_logmar&eye=right").await;
    assert_eq!(points(&r), vec![(far, "right".into(), 0.3), (cf, "right".into(), 1.9)], "distance only");
    assert_eq!(r.body["data"][0]["exam"], "visual_acuity");
    let fundus = id_of(
        &create(
            &clinic,
            "funduscopies",
            json!({ "right_eye": { "cd_ratio": 0.35 }, "left_eye": { "disc": "Pale" } }),
        )
        .await,
    );
    let r = measurements(&clinic, "kind=cd_ratio").await;
    assert_eq!(points(&r), vec![(fundus, "right".into(), 0.35)], "an eye without the value gives none");
    assert_eq!(r.body["data"][0]["exam"], "funduscopy");
    assert_eq!(points(&measurements(&clinic, "kind=iop").await), vec![]);
}

#[tokio::test]
async fn measurements_need_a_known_kind_and_patient() {
    let clinic = Clinic::open().await;
    for (query, field) in [("", "kind"), ("kind=pressure", "kind"), ("kind=iop&eye=middle", "eye")] {
        assert_invalid(&measurements(&clinic, query).await, &[field]);
    }
    let r = clinic.app.get("/api/v1/patients/999999/measurements?kind=iop", Some(clinic.branch)).await;
    assert_error(&r, 404, "not_found");
    let query = "kind=iop&start_date=2026-02-02&end_date=2026-02-01";
    assert_invalid(&measurements(&clinic, query).await, &["end_date"]);
    assert_invalid(&measurements(&clinic, "kind=iop&start_date=02/01/2026").await, &["start_date"]);
}

#[tokio::test]
async fn measurements_keep_to_the_dates_asked_for() {
    let clinic = Clinic::open().await;
    let on = |at: &str| json!({ "examined_at": at, "left_eye": null });
    create(&clinic, "tonometries", on("2026-01-04T23:59:00Z")).await;
    let inside = id_of(&create(&clinic, "tonometries", on("2026-01-05T00:00:00Z")).await);
    let last = id_of(&create(&clinic, "tonometries", on("2026-01-06T23:59:00Z")).await);
    create(&clinic, "tonometries", on("2026-01-07T00:00:00Z")).await;
    let r = measurements(&clinic, "kind=iop&start_date=2026-01-05&end_date=2026-01-06").await;
    assert_eq!(points(&r), vec![(inside, "right".into(), 15.5), (last, "right".into(), 15.5)]);
    assert_eq!(points(&measurements(&clinic, "kind=iop&end_date=2026-01-05").await).len(), 2);
}

// ---------------------------------------------------------------------------------------
// Lists
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn examination_lists_filter_by_date_status_and_search() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let old = id_of(
        &create(
            &clinic,
            "slit-lamps",
            json!({ "examined_at": "2026-01-05T10:00:00Z", "notes": "Quiet eye" }),
        )
        .await,
    );
    let new = id_of(&create(&clinic, "slit-lamps", json!({ "notes": "Red eye" })).await);
    assert_status(&sign(app, branch, "slit-lamps", old).await, 200);
    let list = |query: &str| {
        let route = format!("{}?{query}", path("slit-lamps"));
        async move { app.get(&route, Some(branch)).await }
    };
    assert_eq!(ids(&list("").await.body), vec![new, old], "newest examination first");
    assert_eq!(ids(&list("start_date=2026-01-05&end_date=2026-01-05").await.body), vec![old]);
    assert_eq!(ids(&list(&format!("start_date={}", today())).await.body), vec![new]);
    assert_eq!(ids(&list("filters[status]=signed").await.body), vec![old]);
    assert_eq!(ids(&list("filters[status]=draft").await.body), vec![new]);
    assert_eq!(ids(&list("search=red").await.body), vec![new]);
    assert_eq!(ids(&list(&format!("filters[patient_id]={}", clinic.patient)).await.body).len(), 2);
    assert_invalid(&list("filters[status]=final").await, &["filters[status]"]);
}

// ---------------------------------------------------------------------------------------
// OpenAPI
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn openapi_describes_each_examination_its_structures_and_sign_route() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_status(&r, 200);
    let doc = &r.body;
    let schemas = &doc["components"]["schemas"];
    let labels = [
        ("visual-acuities", "VisualAcuity", "VisualAcuityEye"),
        ("refractions", "Refraction", "RefractionEye"),
        ("tonometries", "Tonometry", "TonometryEye"),
        ("slit-lamps", "SlitLampExamination", "SlitLampEye"),
        ("funduscopies", "Funduscopy", "FunduscopyEye"),
        ("gonioscopies", "Gonioscopy", "GonioscopyEye"),
        ("corneal-topographies", "CornealTopography", "CornealTopographyEye"),
        ("amsler-grids", "AmslerGrid", "AmslerGridEye"),
        ("eoms", "ExtraocularMuscleExamination", "EomEye"),
        ("exophthalmometries", "Exophthalmometry", "ExophthalmometryEye"),
        ("lacrimal-irrigations", "LacrimalIrrigation", "LacrimalIrrigationEye"),
        ("radiologies", "Radiology", "RadiologyStudy"),
        ("gross-examinations", "GrossExamination", "GrossExaminationEye"),
        ("indirect-ophthalmoscopies", "IndirectOphthalmoscopy", "IndirectOphthalmoscopyEye"),
    ];
    for (exam, label, structure) in labels {
        for name in [label.to_owned(), format!("{label}Input"), structure.to_owned()] {
            assert!(schemas[&name].is_object(), "{exam}: schema {name} missing");
        }
        for field in [
            "patient_visit_id",
            "patient_id",
            "examined_at",
            "examiner_id",
            "status",
            "signed_by",
            "right_eye",
        ] {
            assert!(!schemas[label]["properties"][field].is_null(), "{label}.{field}");
        }
        let sign = &doc["paths"][format!("/api/v1/{exam}/{{id}}/sign")]["post"];
        assert!(sign.is_object(), "{exam}: sign route documented");
        assert!(!sign["responses"]["409"].is_null(), "{exam}: sign answers 409: {sign}");
    }
    for name in ["TonometryReading", "SlitLampStructure", "Gaze", "PeripheryFinding"] {
        assert!(schemas[name].is_object(), "schema {name} missing");
    }
    // Sent as a number on its range and step, or as a string of digits.
    let bounds = |schema: &str, field: &str| {
        let p = &schemas[schema]["properties"][field]["anyOf"][0];
        (p["minimum"].as_f64(), p["maximum"].as_f64(), p["multipleOf"].as_f64())
    };
    assert_eq!(bounds("RefractionEye", "sphere"), (Some(-30.0), Some(30.0), Some(0.25)));
    assert_eq!(bounds("RefractionEye", "prism_pd"), (Some(0.5), Some(20.0), Some(0.5)));
    assert_eq!(bounds("TonometryReading", "iop_mmhg"), (Some(0.0), Some(80.0), Some(0.1)));
    assert_eq!(bounds("FunduscopyEye", "cd_ratio"), (Some(0.0), Some(1.0), Some(0.05)));
    assert_eq!(bounds("CornealTopographyEye", "kmax"), (Some(30.0), Some(70.0), Some(0.01)));
    assert_eq!(bounds("Gaze", "primary"), (Some(-4.0), Some(4.0), Some(0.5)));
    assert_eq!(bounds("VisualAcuityEye", "logmar"), (Some(-0.3), Some(3.0), Some(0.01)));
    let axis = &schemas["RefractionEye"]["properties"]["axis"];
    assert_eq!((axis["minimum"].as_i64(), axis["maximum"].as_i64()), (Some(1), Some(180)));
    let required: BTreeSet<&str> = schemas["RefractionEye"]["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, BTreeSet::from(["sphere"]));
    assert!(!doc["paths"]["/api/v1/patients/{id}/measurements"]["get"].is_null());
    assert!(!doc["paths"]["/api/v1/patient-visits/{id}/summary"]["get"].is_null());
}

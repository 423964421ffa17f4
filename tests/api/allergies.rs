//! A patient's allergies (`/patients/{patient_id}/allergies`): kept, checked (a medicine or a
//! substance, a severity, a status, a day not in the future), written by those who may,
//! printed on the spectacle prescription and the visit summary, and served as FHIR
//! `AllergyIntolerance`.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::printed::{self, pdf_of, squashed};
use crate::support::{Clinic, assert_error, assert_invalid, assert_status, id_of, ids, reply};

fn allergies(patient: i64) -> String {
    format!("/api/v1/patients/{patient}/allergies")
}

async fn medicine(clinic: &Clinic) -> i64 {
    let body = json!({ "generic_name": "Atropine", "strength": "1%", "form": "drops", "route": "ophthalmic",
                       "unit": "bottle" });
    id_of(&clinic.app.created("/api/v1/medicines", None, body).await)
}

#[track_caller]
fn shows(text: &str, value: &str) {
    assert!(squashed(text).contains(&squashed(value)), "{value:?} is not in the document:\n{text}");
}

#[tokio::test]
async fn allergies_are_kept_under_their_patient_and_checked() {
    let clinic = Clinic::open().await;
    let (app, branch, path) = (&clinic.app, Some(clinic.branch), allergies(clinic.patient));
    let atropine = medicine(&clinic).await;

    assert_invalid(&app.post(&path, branch, json!({ "substance": "Latex" })).await, &["severity"]);
    let neither = app.post(&path, branch, json!({ "severity": "mild", "reaction": "Itching" })).await;
    assert_invalid(&neither, &["medicine_id", "substance"]);
    let blank = app.post(&path, branch, json!({ "severity": "mild", "substance": "  " })).await;
    assert_invalid(&blank, &["medicine_id", "substance"]);
    let tomorrow = (crate::support::today() + time::Duration::days(1)).to_string();
    let bad = json!({ "substance": "Latex", "severity": "fatal", "status": "gone", "noted_on": tomorrow,
                      "medicine_id": 999_999 });
    assert_invalid(&app.post(&path, branch, bad).await, &["severity", "status", "noted_on", "medicine_id"]);

    let latex = app
        .created(
            &path,
            branch,
            json!({ "substance": "Latex", "severity": "moderate", "noted_on": "2025-03-01" }),
        )
        .await;
    assert_eq!(latex["status"], "active");
    assert_eq!(latex["patient_id"], clinic.patient);
    let drops = json!({ "medicine_id": atropine, "severity": "severe", "reaction": "Tachycardia" });
    let drops = id_of(&app.created(&path, branch, drops).await);
    let one = format!("{path}/{}", id_of(&latex));
    let r =
        app.put(&one, branch, json!({ "status": "resolved", "notes": "Tolerated gloves in 2026." })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "resolved");
    // Taking the substance away leaves neither.
    assert_invalid(&app.put(&one, branch, json!({ "substance": null })).await, &["medicine_id", "substance"]);

    let active = app.get(&format!("{path}?status=active"), branch).await;
    assert_status(&active, 200);
    assert_eq!(ids(&active.body), vec![drops]);
    // Another patient's list does not show them, and an unknown patient is 404.
    let other = id_of(&app.create_patient(clinic.branch, "Ben", "Santos").await);
    let theirs = app.get(&allergies(other), branch).await;
    assert_status(&theirs, 200);
    assert_eq!(ids(&theirs.body), Vec::<i64>::new());
    assert_status(&app.get(&format!("{}/{}", allergies(other), drops), branch).await, 404);
    assert_status(&app.get(&allergies(999_999), branch).await, 404);

    assert_status(&app.delete(&one, branch).await, 200);
    assert_status(&app.get(&one, branch).await, 404);
}

#[tokio::test]
async fn clinicians_record_allergies_and_the_front_desk_reads_them() {
    let clinic = Clinic::open().await;
    let (app, branch, path) = (&clinic.app, clinic.branch, allergies(clinic.patient));
    let (_, nurse) = app.create_user("nurse1", &["nurse"], &[branch]).await;
    let (_, desk) = app.create_user("desk1", &["receptionist"], &[branch]).await;
    let body = json!({ "substance": "Iodine", "severity": "mild" });
    let r = app.call_as(&nurse, Method::POST, &path, Some(branch), body.clone()).await;
    assert_status(&r, 201);
    assert_error(&app.call_as(&desk, Method::POST, &path, Some(branch), body).await, 403, "forbidden");
    let read = app.call_as(&desk, Method::GET, &path, Some(branch), Value::Null).await;
    assert_status(&read, 200);
    assert_eq!(ids(&read.body), vec![id_of(&r)]);
}

#[tokio::test]
async fn active_allergies_print_on_the_prescription_and_the_visit_summary() {
    let clinic = Clinic::open().await;
    let (app, branch, path) = (&clinic.app, clinic.branch, allergies(clinic.patient));
    let atropine = medicine(&clinic).await;
    let rx =
        json!({ "patient_visit_id": clinic.visit, "kind": "final_rx", "right_eye": { "sphere": "-1.00" } });
    let rx = id_of(&app.created("/api/v1/refractions", Some(branch), rx).await);
    let prescription = format!("/api/v1/refractions/{rx}");
    let summary = format!("/api/v1/patient-visits/{}/summary", clinic.visit);
    for document in [&prescription, &summary] {
        let text = printed::text(&pdf_of(app, &app.admin_token, document, branch).await);
        shows(&text, "Allergies None recorded");
    }

    let drops = json!({ "medicine_id": atropine, "severity": "severe", "reaction": "Tachycardia" });
    app.created(&path, Some(branch), drops).await;
    app.created(&path, Some(branch), json!({ "substance": "Sulfonamides", "severity": "moderate" })).await;
    let gone = json!({ "substance": "Latex", "severity": "mild", "status": "resolved" });
    app.created(&path, Some(branch), gone).await;
    for document in [&prescription, &summary] {
        let text = printed::text(&pdf_of(app, &app.admin_token, document, branch).await);
        shows(&text, "Allergies Atropine 1% (severe: Tachycardia); Sulfonamides (moderate)");
        assert!(!text.contains("Latex"), "a resolved allergy printed:\n{text}");
    }
}

#[tokio::test]
async fn allergies_are_served_as_fhir_allergy_intolerances() {
    let clinic = Clinic::open().await;
    let (app, branch, path) = (&clinic.app, clinic.branch, allergies(clinic.patient));
    let atropine = medicine(&clinic).await;
    let drops = json!({ "medicine_id": atropine, "severity": "severe", "reaction": "Tachycardia",
                        "noted_on": "2025-06-01", "notes": "After dilation." });
    let drops = id_of(&app.created(&path, Some(branch), drops).await);
    let latex = json!({ "substance": "Latex", "severity": "mild", "status": "resolved" });
    let latex = id_of(&app.created(&path, Some(branch), latex).await);
    let fhir = |path: String| {
        let req = app
            .http
            .get(app.url(&path))
            .bearer_auth(&app.admin_token)
            .header("accept", "application/fhir+json")
            .header("x-branch-id", branch.to_string());
        reply(req)
    };

    let r = fhir(format!("/fhir/r4/AllergyIntolerance/{drops}")).await;
    assert_status(&r, 200);
    let read = &r.body;
    assert_eq!(read["resourceType"], "AllergyIntolerance");
    assert_eq!(read["id"], drops.to_string());
    assert_eq!(read["clinicalStatus"]["coding"][0]["code"], "active");
    assert_eq!(read["criticality"], "high");
    assert_eq!(read["category"], json!(["medication"]));
    assert_eq!(read["code"]["coding"][0]["code"], atropine.to_string());
    assert_eq!(read["code"]["coding"][0]["display"], "Atropine 1%");
    assert_eq!(read["patient"]["reference"], format!("Patient/{}", clinic.patient));
    assert_eq!(read["recordedDate"], "2025-06-01");
    assert_eq!(read["reaction"][0]["manifestation"][0]["text"], "Tachycardia");
    assert_eq!(read["reaction"][0]["severity"], "severe");
    assert_eq!(read["note"][0]["text"], "After dilation.");

    let r = fhir(format!("/fhir/r4/AllergyIntolerance?patient={}", clinic.patient)).await;
    assert_status(&r, 200);
    let found: Vec<Value> =
        r.body["entry"].as_array().unwrap().iter().map(|e| e["resource"].clone()).collect();
    let found_ids: Vec<&str> = found.iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(found_ids, vec![latex.to_string(), drops.to_string()]);
    assert_eq!(found[0]["clinicalStatus"]["coding"][0]["code"], "resolved");
    assert_eq!(found[0]["code"]["text"], "Latex");

    let everything = fhir(format!("/fhir/r4/Patient/{}/$everything", clinic.patient)).await;
    assert_status(&everything, 200);
    let kinds: Vec<&str> = everything.body["entry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["resource"]["resourceType"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "AllergyIntolerance").count(), 2, "{kinds:?}");

    let metadata = fhir("/fhir/r4/metadata".into()).await;
    assert_status(&metadata, 200);
    let types: Vec<&str> = metadata.body["rest"][0]["resource"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"AllergyIntolerance"), "{types:?}");

    assert_status(&app.delete(&format!("{path}/{drops}"), Some(branch)).await, 200);
    assert_status(&fhir(format!("/fhir/r4/AllergyIntolerance/{drops}")).await, 410);
}

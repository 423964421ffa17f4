//! Printed documents: a medical certificate, a spectacle prescription, a receipt and a visit
//! summary answer `application/pdf` when asked for it, under the branch's letterhead, with
//! every field (enumerations in words), a DRAFT mark until signed, and after it the place
//! where the printed copy is signed by hand and who signed it in the system; their text is
//! read back with pdftotext and every page rendered with pdftoppm. JSON stays the default,
//! unchanged.

mod letterhead;
mod logo_images;
mod scripts;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::printed::{self, get_accepting, get_pdf, pdf_of, squashed};
use crate::support::{Clinic, TestApp, assert_error, assert_status, id_of, reply};

const CERTIFICATES: &str = "/api/v1/medical-certificates";
const REFRACTIONS: &str = "/api/v1/refractions";

/// Whether `text` holds `value`, lines wrapped anywhere in it.
#[track_caller]
fn shows(text: &str, value: &str) {
    assert!(squashed(text).contains(&squashed(value)), "{value:?} is not in the document:\n{text}");
}

/// Gives branch `branch` an address, a phone and a logo.
async fn letterhead(app: &TestApp, branch: i64) {
    let r = app
        .put(
            &format!("/api/v1/branches/{branch}"),
            None,
            json!({ "address": "12 Rizal Avenue, Quezon City", "phone": "+63 2 8123 4567" }),
        )
        .await;
    assert_status(&r, 200);
    let logo = app
        .request(Method::PUT, &format!("/api/v1/branches/{branch}/logo"), None)
        .header("content-type", "image/png")
        .body(printed::png_logo(96));
    assert_status(&reply(logo).await, 200);
}

/// A patient whose name needs diacritics, with a visit.
async fn nguyen(app: &TestApp, branch: i64) -> (Value, i64) {
    let body = json!({ "first_name": "Nguyễn Thị", "last_name": "Peña", "birth_date": "1984-07-09", "sex": "female" });
    let patient = app.created("/api/v1/patients", Some(branch), body).await;
    let visit = json!({ "patient_id": id_of(&patient), "visit_date": "2026-01-05" });
    let visit = id_of(&app.created("/api/v1/patient-visits", Some(branch), visit).await);
    (patient, visit)
}

/// The letterhead and the patient lines every document carries.
#[track_caller]
fn shows_letterhead_and_patient(text: &str, patient: &Value) {
    for value in ["Main Branch", "12 Rizal Avenue, Quezon City", "Tel. +63 2 8123 4567", "Nguyễn Thị Peña"]
    {
        shows(text, value);
    }
    shows(text, patient["pin"].as_str().unwrap());
    shows(text, "1984-07-09");
    shows(text, "Sex Female");
    assert!(!text.contains("female"), "the sex prints as a word, not as its value:\n{text}");
    shows(text, "Printed");
    shows(text, "by Administrator");
    shows(text, "Page 1 of 1");
}

#[tokio::test]
async fn a_certificate_prints_every_field_as_a_draft_until_a_clinician_signs_it() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    letterhead(&app, branch).await;
    let (patient, visit) = nguyen(&app, branch).await;
    let doctor = json!({ "first_name": "Iris", "last_name": "Tan", "license_no": "PRC-0457731" });
    let doctor = id_of(&app.created("/api/v1/doctors", None, doctor).await);
    let sent = json!({
        "patient_visit_id": visit, "doctor_id": doctor, "issued_on": "2026-01-06",
        "diagnosis": "Acute conjunctivitis, both eyes", "recommendation": "Rest; avoid contact lenses.",
        "rest_days": 3, "valid_until": "2026-01-09",
    });
    let certificate = app.created(CERTIFICATES, Some(branch), sent).await;
    let path = format!("{CERTIFICATES}/{}", id_of(&certificate));

    // JSON is the default, and the same whatever else the client would take.
    let json = app.get(&path, Some(branch)).await;
    assert_status(&json, 200);
    for accept in ["*/*", "application/json, application/pdf", "application/json"] {
        let r = reply(get_accepting(&app, &app.admin_token, &path, branch, accept)).await;
        assert_status(&r, 200);
        assert_eq!(r.text, json.text, "Accept: {accept}");
        assert!(r.header("content-type").unwrap().starts_with("application/json"));
    }
    assert_error(
        &reply(get_accepting(&app, &app.admin_token, &path, branch, "text/html")).await,
        406,
        "not_acceptable",
    );

    let draft = printed::text(&pdf_of(&app, &app.admin_token, &path, branch).await);
    shows_letterhead_and_patient(&draft, &patient);
    for value in [
        "Medical certificate",
        "MC-MAIN-000001",
        "Visit date 2026-01-05",
        "Issued on 2026-01-06",
        "Doctor Dr. Iris Tan",
        "Acute conjunctivitis, both eyes",
        "Rest; avoid contact lenses.",
        "Rest 3 days",
        "Valid until 2026-01-09",
        "This is to certify that Nguyễn Thị Peña was seen at Main Branch on 2026-01-05.",
        "DRAFT: not signed",
    ] {
        shows(&draft, value);
    }
    // A draft is not signed by hand either: no place to sign it.
    for absent in ["Signed in the system", "Clinic stamp", "Licence no."] {
        assert!(!draft.contains(absent), "{absent}: {draft}");
    }

    let signed = app.post(&format!("{path}/sign"), Some(branch), json!({})).await;
    assert_status(&signed, 200);
    let at = signed.body["data"]["signed_at"].as_str().unwrap().to_owned();
    let pdf = pdf_of(&app, &app.admin_token, &path, branch).await;
    let text = printed::text(&pdf);
    // The certifying doctor signs the printed copy, under the line, beside the stamp's box;
    // the account that signed it in the system is named apart, with the time (the branch's
    // zone is UTC here) as the branch reads it.
    shows(&text, "Dr. Iris Tan Licence no. PRC-0457731 Clinic stamp");
    shows(&text, &format!("Signed in the system by Administrator on {} {} (UTC)", &at[..10], &at[11..16]));
    assert!(!text.contains("Administrator Licence") && !text.contains("DRAFT"), "{text}");
    assert_eq!(printed::render_pages(&pdf, "certificate"), 1);

    // A signed certificate is kept as it was handed out.
    assert_error(&app.put(&path, Some(branch), json!({ "rest_days": 5 })).await, 409, "record_signed");
    assert_error(&app.delete(&path, Some(branch)).await, 409, "record_signed");
}

#[tokio::test]
async fn a_final_refraction_prints_as_a_spectacle_prescription_and_other_kinds_do_not() {
    let Clinic { app, branch, .. } = Clinic::open().await;
    letterhead(&app, branch).await;
    let (patient, visit) = nguyen(&app, branch).await;
    let final_rx = json!({
        "patient_visit_id": visit, "kind": "final_rx", "notes": "Progressive lenses advised.",
        "right_eye": { "sphere": "-1.25", "cylinder": "-0.50", "axis": 90, "add": "1.50", "va": "6/6" },
        "left_eye": { "sphere": "0.75", "add": "1.50", "prism_pd": "1.5", "prism_base": "in", "va": "6/9" },
    });
    let rx = id_of(&app.created(REFRACTIONS, Some(branch), final_rx).await);
    let path = format!("{REFRACTIONS}/{rx}");
    let text = printed::text(&pdf_of(&app, &app.admin_token, &path, branch).await);
    shows_letterhead_and_patient(&text, &patient);
    for value in [
        "Spectacle prescription",
        &format!("Rx {rx}"),
        "Examiner Administrator",
        "Eye Sphere Cylinder Axis Add Prism Base VA",
        "Right (OD) -1.25 -0.50 90° +1.50 6/6",
        "Left (OS) +0.75 +1.50 1.5 Δ In 6/9",
        "Notes Progressive lenses advised.",
        "DRAFT: not signed",
    ] {
        shows(&text, value);
    }
    assert!(!text.contains("Clinic stamp"), "a draft has no place to sign: {text}");
    assert_status(&app.post(&format!("{path}/sign"), Some(branch), json!({})).await, 200);
    let pdf = pdf_of(&app, &app.admin_token, &path, branch).await;
    let text = printed::text(&pdf);
    shows(&text, "Administrator Examiner Clinic stamp Signed in the system by Administrator on");
    assert!(!text.contains("DRAFT"), "{text}");
    assert_eq!(printed::render_pages(&pdf, "prescription"), 1);

    let manifest =
        json!({ "patient_visit_id": visit, "kind": "manifest", "right_eye": { "sphere": "-1.00" } });
    let manifest =
        format!("{REFRACTIONS}/{}", id_of(&app.created(REFRACTIONS, Some(branch), manifest).await));
    let refused = get_pdf(&app, &app.admin_token, &manifest, branch).await;
    assert_error(&refused, 406, "not_printable");
    assert!(refused.body["message"].as_str().unwrap().contains("final_rx"), "{}", refused.body);
    assert_status(&app.get(&manifest, Some(branch)).await, 200);
}

#[tokio::test]
async fn a_posted_payment_prints_as_a_receipt_signed_by_whoever_posted_it() {
    let Clinic { app, branch, .. } = Clinic::open().await;
    letterhead(&app, branch).await;
    let (patient, _) = nguyen(&app, branch).await;
    let (_, cashier) = app.create_user("cashier.lim", &["cashier"], &[branch]).await;
    let transactions = format!("/api/v1/patients/{}/billing-transactions", id_of(&patient));
    let payment = json!({ "kind": "payment", "amount": "1250.5", "payment_method_id": 2, "reference": "AUTH-99812",
                          "description": "Consultation and refraction" });
    let r = app.call_as(&cashier, Method::POST, &transactions, Some(branch), payment).await;
    assert_status(&r, 201);
    let receipt = format!("{transactions}/{}", id_of(&r));
    assert_error(&get_pdf(&app, &cashier, &receipt, branch).await, 406, "not_printable");
    let posted =
        app.call_as(&cashier, Method::POST, &format!("{receipt}/post"), Some(branch), json!({})).await;
    assert_status(&posted, 200);
    let (number, at) =
        (posted.body["data"]["number"].as_str().unwrap(), posted.body["data"]["posted_at"].as_str().unwrap());

    let pdf = pdf_of(&app, &cashier, &receipt, branch).await;
    let text = printed::text(&pdf);
    for value in [
        "Receipt",
        number,
        "Amount received 1250.50",
        "Payment method Card",
        "Reference AUTH-99812",
        &format!("Transaction date {}", posted.body["data"]["transaction_date"].as_str().unwrap()),
        "Description Consultation and refraction",
        // The cashier's line, signed by hand; who posted it in the system, and when.
        "cashier.lim Cashier",
        &format!("Signed in the system by cashier.lim on {} {} (UTC)", &at[..10], &at[11..16]),
        "by cashier.lim",
    ] {
        shows(&text, value);
    }
    assert!(!text.contains("Clinic stamp"), "a receipt takes no stamp: {text}");
    shows(&text, "Nguyễn Thị Peña");
    assert!(!text.contains("DRAFT"), "{text}");
    assert_eq!(printed::render_pages(&pdf, "receipt"), 1);

    // A charge has no receipt, nor does a reader without billing.read.
    let charge =
        json!({ "kind": "charge", "unit_price": "300", "description": "Consultation", "status": "posted" });
    let charge = format!("{transactions}/{}", id_of(&app.created(&transactions, Some(branch), charge).await));
    assert_error(&get_pdf(&app, &app.admin_token, &charge, branch).await, 406, "not_printable");
    let (_, nurse) = app.create_user("nurse.dee", &["nurse"], &[branch]).await;
    assert_error(&get_pdf(&app, &nurse, &receipt, branch).await, 403, "forbidden");
}

#[tokio::test]
async fn a_visit_summary_prints_its_records_as_a_draft_until_the_visit_is_completed_and_signed() {
    let Clinic { app, branch, .. } = Clinic::open().await;
    letterhead(&app, branch).await;
    let (patient, visit) = nguyen(&app, branch).await;
    let complaint =
        json!({ "patient_visit_id": visit, "complaint": "Blurred distance vision", "eye": "both" });
    app.created("/api/v1/complaints", Some(branch), complaint).await;
    let rx = json!({ "patient_visit_id": visit, "kind": "final_rx", "right_eye": { "sphere": "-2.00" },
                     "left_eye": { "unable_to_assess": true } });
    let rx = id_of(&app.created(REFRACTIONS, Some(branch), rx).await);
    let reading = json!({ "readings": [{ "iop_mmhg": 15, "method": "goldmann" }] });
    let tonometry = json!({ "patient_visit_id": visit, "right_eye": reading });
    let tonometry = id_of(&app.created("/api/v1/tonometries", Some(branch), tonometry).await);
    let path = format!("/api/v1/patient-visits/{visit}/summary");
    let json = app.get(&path, Some(branch)).await;
    assert_status(&json, 200);
    assert_eq!(json.body["data"]["records"]["complaints"][0]["complaint"], "Blurred distance vision");

    let draft = printed::text(&pdf_of(&app, &app.admin_token, &path, branch).await);
    shows_letterhead_and_patient(&draft, &patient);
    for value in [
        "Visit summary",
        "Date 2026-01-05",
        "Status Scheduled",
        "Complaint (1)",
        "Complaint Blurred distance vision",
        "Eye Both",
        "Refraction (1)",
        "Examiner Administrator",
        "Kind Final prescription",
        "Right eye sphere -2.00",
        "Left eye not assessed",
        "Tonometry (1)",
        "Right eye readings iop mmhg 15.0, method Goldmann",
        "Signed DRAFT: not signed",
        "DRAFT: not signed",
    ] {
        shows(&draft, value);
    }

    for exam in [format!("{REFRACTIONS}/{rx}"), format!("/api/v1/tonometries/{tonometry}")] {
        assert_status(&app.post(&format!("{exam}/sign"), Some(branch), json!({})).await, 200);
    }
    let still = printed::text(&pdf_of(&app, &app.admin_token, &path, branch).await);
    shows(&still, "DRAFT: not signed"); // the visit is not completed yet
    let done = app
        .put(&format!("/api/v1/patient-visits/{visit}"), Some(branch), json!({ "status": "completed" }))
        .await;
    assert_status(&done, 200);
    let pdf = pdf_of(&app, &app.admin_token, &path, branch).await;
    let text = printed::text(&pdf);
    shows(&text, "Status Completed");
    assert!(!text.contains("+00:00"), "times are the branch's local times: {text}");
    assert!(!text.contains("DRAFT"), "{text}");
    // The visit names no doctor: the line is left for one to sign and write their name. The
    // place to sign does not fit under the records: it is kept whole on a page of its own.
    let pages: Vec<&str> = text.split('\u{c}').filter(|p| !p.trim().is_empty()).collect();
    assert_eq!(pages.len(), 2, "{text}");
    shows(pages[1], "Signature over printed name Clinic stamp Signed in the system by Administrator on");
    assert_eq!(printed::render_pages(&pdf, "visit-summary"), 2);

    // Every print is a disclosure of the patient, recorded with its route.
    app.state.read_audit.flush().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let printed: Vec<(String, Option<String>)> = client
        .query(
            &format!(
                "SELECT resource, route FROM branch_{branch}.audit_log
                  WHERE action = 'print' AND (after->>'patient_id')::bigint = $1 AND after->>'format' = 'pdf'"
            ),
            &[&id_of(&patient)],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let summary = ("patient-visits".to_owned(), Some("GET /api/v1/patient-visits/{id}/summary".to_owned()));
    assert_eq!(printed, vec![summary; 3]);
}

#[tokio::test]
async fn the_api_description_offers_pdf_on_the_printable_reads() {
    let app = TestApp::spawn().await;
    let doc = reply(app.http.get(app.url("/docs/api/openapi.json"))).await.body;
    for path in [
        "/api/v1/medical-certificates/{id}",
        "/api/v1/refractions/{id}",
        "/api/v1/patients/{patient_id}/billing-transactions/{id}",
        "/api/v1/patient-visits/{id}/summary",
    ] {
        let get = &doc["paths"][path]["get"];
        let content = &get["responses"]["200"]["content"];
        assert!(
            content["application/json"].is_object() && content["application/pdf"].is_object(),
            "{path}: {get}"
        );
        assert!(get["responses"]["406"].is_object(), "{path}");
    }
    let plain = &doc["paths"]["/api/v1/complaints/{id}"]["get"]["responses"]["200"]["content"];
    assert!(plain["application/pdf"].is_null(), "complaints do not print: {plain}");
}

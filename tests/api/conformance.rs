//! Every declared resource, now and later, behaves the shared way: create, get, list, update,
//! delete, a 422 for a missing required field, a 412 for a stale If-Match, 404 (or the
//! resource's own outcome) after delete, and an audit row for each write.
//!
//! The test walks `app::resources()`: a declaration without a sample below fails it, so a
//! new resource cannot slip past.

use clinic_server::app::resources;
use clinic_server::resource::{Resource, Scope};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{TestApp, assert_status, id_of, reply};

/// Rows the samples refer to.
pub struct World {
    pub item: i64,
    pub lot: i64,
    pub supplier: i64,
    pub branch: i64,
    pub patient: i64,
    pub visit: i64,
    pub medicine: i64,
    pub procedure: i64,
    pub doctor: i64,
    /// A branch service of the branch.
    pub service: i64,
}

/// What becomes of a record after DELETE.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum AfterDelete {
    Gone,
    /// Kept and shown (a deactivated user, an archived branch).
    Kept,
    /// Neither PUT nor DELETE is possible: 409 with this code (an append-only ledger).
    Immutable(&'static str),
}

pub struct Sample {
    /// A valid body for create.
    pub body: Value,
    /// A change for PUT.
    change: Value,
    after_delete: AfterDelete,
}

pub fn sample(path: &str, w: &World) -> Option<Sample> {
    let eye = |findings: Value| json!({ "patient_visit_id": w.visit, "right_eye": findings });
    let exam = |findings: Value| Sample {
        body: eye(findings),
        change: json!({ "notes": "seen again" }),
        after_delete: AfterDelete::Gone,
    };
    let plain = |body: Value, change: Value| Some(Sample { body, change, after_delete: AfterDelete::Gone });
    match path {
        "patients" => plain(
            json!({ "first_name": "Cora", "last_name": "Lim", "birth_date": "1970-03-04", "sex": "female" }),
            json!({ "city": "Cebu" }),
        ),
        "patient-visits" => plain(
            json!({ "patient_id": w.patient, "visit_date": "2026-02-01" }),
            json!({ "reason": "check" }),
        ),
        "complaints" => {
            plain(json!({ "patient_visit_id": w.visit, "complaint": "Itch" }), json!({ "severity": "mild" }))
        }
        "patient-visit-plans" => {
            plain(json!({ "patient_visit_id": w.visit, "plan": "Drops" }), json!({ "instructions": "x" }))
        }
        "patient-visit-prescribed-medicines" => plain(
            json!({ "patient_visit_id": w.visit, "medicine_id": w.medicine }),
            json!({ "dosage": "1 drop" }),
        ),
        "medical-certificates" => {
            plain(json!({ "patient_visit_id": w.visit }), json!({ "diagnosis": "Dry eye" }))
        }
        "visual-acuities" => Some(Sample {
            body: json!({ "patient_visit_id": w.visit, "distance": "distance", "correction": "unaided",
                          "notation": "snellen_m", "right_eye": { "value": "6/9" } }),
            change: json!({ "notes": "seen again" }),
            after_delete: AfterDelete::Gone,
        }),
        "refractions" => Some(Sample {
            body: json!({ "patient_visit_id": w.visit, "kind": "manifest", "right_eye": { "sphere": "-1.25" } }),
            change: json!({ "notes": "seen again" }),
            after_delete: AfterDelete::Gone,
        }),
        "tonometries" => Some(exam(json!({ "readings": [{ "iop_mmhg": 15, "method": "goldmann" }] }))),
        "slit-lamps" => Some(exam(json!({ "cornea": { "status": "normal" } }))),
        "funduscopies" => Some(exam(json!({ "cd_ratio": 0.3 }))),
        "gonioscopies" => Some(exam(json!({ "superior": 3 }))),
        "corneal-topographies" => Some(exam(json!({ "k1": 43.25, "k2": 44.5 }))),
        "amsler-grids" => Some(exam(json!({ "grade": 0 }))),
        "eoms" => Some(exam(json!({ "gaze": { "primary": 0 } }))),
        "exophthalmometries" => Some(Sample {
            body: json!({ "patient_visit_id": w.visit, "base_mm": 100, "right_eye": { "reading_mm": 16 } }),
            change: json!({ "notes": "seen again" }),
            after_delete: AfterDelete::Gone,
        }),
        "lacrimal-irrigations" => Some(exam(json!({ "passage": "free" }))),
        "radiologies" => plain(
            json!({ "patient_visit_id": w.visit, "studies": [{ "modality": "oct", "region": "macula" }] }),
            json!({ "notes": "seen again" }),
        ),
        "gross-examinations" => Some(exam(json!({ "brow": "normal" }))),
        "indirect-ophthalmoscopies" => Some(exam(json!({ "vitreous": "clear" }))),
        "patients/{patient_id}/allergies" => plain(
            json!({ "medicine_id": w.medicine, "severity": "moderate", "reaction": "Eyelid swelling" }),
            json!({ "status": "resolved" }),
        ),
        "patients/{patient_id}/billing-transactions" => plain(
            json!({ "kind": "charge", "unit_price": "25", "description": "Consult" }),
            json!({ "quantity": 2 }),
        ),
        "patient-visits/{patient_visit_id}/diagnoses" => plain(
            json!({ "code": "H40.1111", "laterality": "right", "primary": true }),
            json!({ "note": "Stable" }),
        ),
        "patients/{patient_id}/problems" => plain(
            json!({ "code": "H52.13", "onset": "2025-01-02" }),
            json!({ "status": "resolved", "resolved_on": "2026-01-02" }),
        ),
        "bill-items" => plain(
            json!({ "code": "cf-1", "name": "Consultation fee", "bill_item_category_id": 1, "unit_price": 500 }),
            json!({ "unit_price": "550.50" }),
        ),
        "medicines" => plain(
            json!({ "generic_name": "Timolol", "form": "drops", "route": "ophthalmic", "unit": "bottle" }),
            json!({ "strength": "0.5%" }),
        ),
        "procedures" => plain(
            json!({ "code": "yag", "name": "YAG capsulotomy", "category": "laser" }),
            json!({ "price": "1500" }),
        ),
        "insurances" => plain(
            json!({ "code": "hmo-9", "payer_name": "Payer", "coverage_percent": "80", "valid_from": "2026-01-01" }),
            json!({ "plan_name": "Gold" }),
        ),
        "services" => {
            plain(json!({ "code": "REF", "name": "Refraction", "price": 300 }), json!({ "description": "x" }))
        }
        "doctors" => plain(
            json!({ "first_name": "Iris", "last_name": "Tan", "license_no": "PRC-77" }),
            json!({ "specialization": "Retina" }),
        ),
        "surgery-schedules" => plain(
            json!({ "branch_id": w.branch, "patient_id": w.patient, "procedure_id": w.procedure, "doctor_id": w.doctor,
                    "eye": "left", "scheduled_at": "2027-06-01T09:00:00+08:00" }),
            json!({ "notes": "fasting" }),
        ),
        "doctor-schedules" => plain(
            json!({ "doctor_id": w.doctor, "weekday": 1, "start_time": "08:00", "end_time": "12:00" }),
            json!({ "slot_minutes": 20 }),
        ),
        "schedule-exceptions" => plain(
            json!({ "starts_on": "2027-01-01", "ends_on": "2027-01-01", "reason": "New Year" }),
            json!({ "reason": "Holiday" }),
        ),
        // Overbooked: the doctor keeps no hours in this world.
        "appointments" => plain(
            json!({ "patient_id": w.patient, "doctor_id": w.doctor, "branch_service_id": w.service,
                    "starts_at": "2027-06-01T09:00:00+08:00", "duration_minutes": 20,
                    "overbook": true, "overbook_reason": "squeezed in" }),
            json!({ "notes": "bring glasses" }),
        ),
        "recalls" => plain(
            json!({ "patient_id": w.patient, "due_on": "2027-06-01", "reason": "Glaucoma check" }),
            json!({ "notes": "call in the morning" }),
        ),
        "bill-item-categories" => plain(json!({ "name": "Contact lenses" }), json!({ "description": "x" })),
        "payment-methods" => {
            plain(json!({ "code": "voucher", "name": "Voucher" }), json!({ "requires_reference": true }))
        }
        "suppliers" => plain(json!({ "name": "Optics Co" }), json!({ "contact_name": "Mia" })),
        "roles" => plain(
            json!({ "name": "auditor", "permissions": ["patients.read"] }),
            json!({ "description": "x" }),
        ),
        "branches/{branch_id}/services" => {
            plain(json!({ "name": "Triage", "code": "T" }), json!({ "description": "x" }))
        }
        "branch-services/{branch_service_id}/display-keys" => Some(Sample {
            body: json!({ "name": "Lobby screen" }),
            change: json!({ "name": "Lobby screen, left" }),
            // Revoked, and still listed.
            after_delete: AfterDelete::Kept,
        }),
        "branches" => Some(Sample {
            body: json!({ "code": "CONF", "name": "Conformance" }),
            change: json!({ "name": "Conformance 2" }),
            after_delete: AfterDelete::Kept,
        }),
        "pharmacy-items" => plain(
            json!({ "code": "brim", "name": "Brimonidine", "unit": "bottle", "sale_price": "250" }),
            json!({ "reorder_level": 5 }),
        ),
        "stock-availables" => plain(
            json!({ "branch_id": w.branch, "pharmacy_item_id": w.item, "lot_no": "L-9", "expiry_date": "2030-01-31" }),
            json!({ "lot_no": "L-9B" }),
        ),
        "stock-movements" => Some(Sample {
            body: json!({ "branch_id": w.branch, "stock_available_id": w.lot, "kind": "adjustment", "quantity": 5,
                          "reason": "count" }),
            change: json!({ "reason": "recount" }),
            after_delete: AfterDelete::Immutable("ledger_immutable"),
        }),
        "purchase-orders" => plain(
            json!({ "branch_id": w.branch, "supplier_id": w.supplier,
                    "lines": [{ "pharmacy_item_id": w.item, "quantity_ordered": 10, "unit_cost": "40" }] }),
            json!({ "notes": "urgent" }),
        ),
        "deliveries" => plain(
            json!({ "branch_id": w.branch, "supplier_id": w.supplier,
                    "lines": [{ "pharmacy_item_id": w.item, "lot_no": "D-1", "expiry_date": "2030-05-31",
                                "quantity": 4, "unit_cost": "40" }] }),
            json!({ "invoice_no": "INV-7" }),
        ),
        "transactions" => plain(
            json!({ "branch_id": w.branch, "patient_id": w.patient, "lines": [{ "pharmacy_item_id": w.item, "quantity": 1 }] }),
            json!({ "notes": "counter" }),
        ),
        "users" => Some(Sample {
            body: json!({ "name": "Vic", "email": "vic@example.test", "username": "vic", "password": "violet-harbour-27",
                          "branch_ids": [w.branch] }),
            change: json!({ "name": "Vic B" }),
            after_delete: AfterDelete::Kept,
        }),
        _ => None,
    }
}

/// The concrete collection path of a resource in this world.
pub fn collection(r: &Resource, w: &World) -> String {
    let path = r
        .path
        .replace("{patient_id}", &w.patient.to_string())
        .replace("{patient_visit_id}", &w.visit.to_string())
        .replace("{branch_id}", &w.branch.to_string())
        .replace("{branch_service_id}", &w.service.to_string());
    format!("/api/v1/{path}")
}

pub async fn world(app: &TestApp) -> World {
    let branch = app.main_branch().await;
    let patient = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let visit = id_of(
        &app.created(
            "/api/v1/patient-visits",
            Some(branch),
            json!({ "patient_id": patient, "visit_date": "2026-01-05" }),
        )
        .await,
    );
    let medicine = id_of(
        &app.created(
            "/api/v1/medicines",
            None,
            json!({ "generic_name": "Latanoprost", "form": "drops", "route": "ophthalmic", "unit": "bottle" }),
        )
        .await,
    );
    let procedure = id_of(
        &app.created(
            "/api/v1/procedures",
            None,
            json!({ "code": "phaco", "name": "Phaco", "category": "major_surgery" }),
        )
        .await,
    );
    let doctor = id_of(
        &app.created(
            "/api/v1/doctors",
            None,
            json!({ "first_name": "Jo", "last_name": "Reyes", "license_no": "L-1" }),
        )
        .await,
    );
    let supplier = id_of(&app.created("/api/v1/suppliers", None, json!({ "name": "Pharma Co" })).await);
    let item = json!({ "code": "tim", "name": "Timolol", "unit": "bottle", "sale_price": 120 });
    let item = id_of(&app.created("/api/v1/pharmacy-items", None, item).await);
    let lot =
        json!({ "branch_id": branch, "pharmacy_item_id": item, "lot_no": "A1", "expiry_date": "2030-01-01" });
    let lot = id_of(&app.created("/api/v1/stock-availables", None, lot).await);
    let service = json!({ "name": "Reception", "code": "REC" });
    let service = id_of(&app.created(&format!("/api/v1/branches/{branch}/services"), None, service).await);
    World { item, lot, supplier, branch, patient, visit, medicine, procedure, doctor, service }
}

/// A field the declaration requires on create that nothing fills in by itself.
fn plainly_required(r: &Resource, body: &Value) -> Option<&'static str> {
    r.all_fields()
        .chain(r.write_only)
        .filter(|f| f.required && !f.caller_by_default && !r.derived.iter().any(|d| d.field == f.name))
        .map(|f| f.name)
        .find(|name| body.get(*name).is_some())
}

async fn audit_actions(app: &TestApp, r: &Resource, branch: i64, id: i64) -> Vec<String> {
    let (path, branch) = match r.scope {
        Scope::Branch => ("/api/v1/audit-logs", Some(branch)),
        Scope::Registry => ("/api/v1/system-audit-logs", None),
    };
    let query = format!("filters[resource]={}&filters[record_id]={id}", r.path);
    let list = app.audit_list(path, branch, &query).await;
    assert_status(&list, 200);
    list.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["action"].as_str().unwrap().to_owned())
        .collect()
}

pub fn branch_of(r: &Resource, w: &World) -> Option<i64> {
    (r.scope == Scope::Branch).then_some(w.branch)
}

async fn check_writable(app: &TestApp, r: &Resource, w: &World, s: Sample) {
    let (path, branch) = (collection(r, w), branch_of(r, w));
    // 422 naming a required field that is left out.
    if let Some(field) = plainly_required(r, &s.body) {
        let mut missing = s.body.clone();
        missing.as_object_mut().unwrap().remove(field);
        let refused = app.post(&path, branch, missing).await;
        assert_status(&refused, 422);
        assert!(
            refused.body["errors"].get(field).is_some(),
            "{}: 422 does not name {field}: {}",
            r.path,
            refused.text
        );
    }
    let created = app.post(&path, branch, s.body.clone()).await;
    assert_status(&created, 201);
    let id = id_of(&created);
    let member = format!("{path}/{id}");
    let got = app.get(&member, branch).await;
    assert_status(&got, 200);
    assert_eq!(
        got.header("etag"),
        Some(format!("\"{}\"", got.body["data"]["version"]).as_str()),
        "{}",
        r.path
    );
    let listed = app.get(&format!("{path}?perPage=100"), branch).await;
    assert_status(&listed, 200);
    assert!(crate::support::ids(&listed.body).contains(&id), "{}: list misses {id}", r.path);
    if let AfterDelete::Immutable(code) = s.after_delete {
        crate::support::assert_error(&app.put(&member, branch, s.change).await, 409, code);
        crate::support::assert_error(&app.delete(&member, branch).await, 409, code);
        let actions = audit_actions(app, r, w.branch, id).await;
        assert_eq!(actions, ["create"], "{}: audit", r.path);
        return;
    }
    // A stale If-Match changes nothing.
    let stale =
        reply(app.request(Method::PUT, &member, branch).header("if-match", "\"999\"").json(&s.change)).await;
    crate::support::assert_error(&stale, 412, "precondition_failed");
    let version = got.body["data"]["version"].as_i64().unwrap();
    let updated = reply(
        app.request(Method::PUT, &member, branch)
            .header("if-match", format!("\"{version}\""))
            .json(&s.change),
    )
    .await;
    assert_status(&updated, 200);
    assert_eq!(updated.body["data"]["version"], json!(version + 1), "{}", r.path);
    let deleted = app.delete(&member, branch).await;
    assert_status(&deleted, 200);
    let after = app.get(&member, branch).await;
    let expected = if s.after_delete == AfterDelete::Gone { 404 } else { 200 };
    assert_status(&after, expected);
    let actions = audit_actions(app, r, w.branch, id).await;
    assert!(
        actions.iter().any(|a| a == "create") && actions.iter().any(|a| a == "update"),
        "{}: audit {actions:?}",
        r.path
    );
    assert!(actions.len() >= 3, "{}: the delete is not audited: {actions:?}", r.path);
}

async fn check_read_only(app: &TestApp, r: &Resource, w: &World) {
    let (path, branch) = (collection(r, w), branch_of(r, w));
    let listed = app.get(&format!("{path}?perPage=5"), branch).await;
    assert_status(&listed, 200);
    if let Some(first) = listed.body["data"].as_array().and_then(|rows| rows.first()) {
        let got = app.get(&format!("{path}/{}", id_of(first)), branch).await;
        assert_status(&got, 200);
    }
    // Attachments are added by uploading a file (`attachments/`), not by a JSON body.
    if r.path != "patients/{patient_id}/attachments" {
        let refused = app.post(&path, branch, json!({})).await;
        assert_status(&refused, 405);
    }
}

#[tokio::test]
async fn every_declared_resource_behaves_the_shared_way() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let w = world(&app).await;
    let mut missing = Vec::new();
    for r in resources() {
        if !r.writable {
            check_read_only(&app, r, &w).await;
            continue;
        }
        match sample(r.path, &w) {
            Some(s) => check_writable(&app, r, &w, s).await,
            None => missing.push(r.path),
        }
    }
    assert!(missing.is_empty(), "declarations without a conformance sample: {missing:?}");
}

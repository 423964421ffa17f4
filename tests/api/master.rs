//! Master data, lookups and enumerations: money and codes,
//! status toggles, references that must name live and active rows, surgery schedules with
//! their moves and conflicts (concurrent bookings included), and branch time zones. Global
//! routes, over HTTP against a real server and a fresh database.

use std::collections::BTreeSet;

use crate::support::{
    Clinic, Reply, TestApp, assert_error, assert_invalid, assert_status, column, id_of, ids, reply,
};
use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const BILL_ITEMS: &str = "/api/v1/bill-items";
const MEDICINES: &str = "/api/v1/medicines";
const PROCEDURES: &str = "/api/v1/procedures";
const INSURANCES: &str = "/api/v1/insurances";
const SERVICES: &str = "/api/v1/services";
const DOCTORS: &str = "/api/v1/doctors";
const SCHEDULES: &str = "/api/v1/surgery-schedules";
const CATEGORIES: &str = "/api/v1/bill-item-categories";
const PAYMENT_METHODS: &str = "/api/v1/payment-methods";
const SUPPLIERS: &str = "/api/v1/suppliers";
const PO_STATUSES: &str = "/api/v1/purchase-order-statuses";
const SYSTEM_AUDIT: &str = "/api/v1/system-audit-logs";
const BRANCHES: &str = "/api/v1/branches";

/// Every enumeration `/enums` lists, values in order.
const ENUMS: &[(&str, &[&str])] = &[
    ("sex", &["male", "female", "other", "unknown"]),
    ("civil_status", &["single", "married", "widowed", "separated", "divorced"]),
    ("patient_status", &["active", "inactive", "deceased"]),
    ("visit_type", &["new", "follow_up", "emergency", "post_op"]),
    ("visit_status", &["scheduled", "checked_in", "in_progress", "completed", "cancelled"]),
    ("eye", &["right", "left", "both", "n_a"]),
    ("severity", &["mild", "moderate", "severe"]),
    ("branch_status", &["provisioning", "active", "archived"]),
    ("migration_state", &["pending", "current", "failed"]),
    ("record_status", &["active", "inactive"]),
    (
        "exam_kind",
        &[
            "visual_acuity",
            "refraction",
            "tonometry",
            "slit_lamp",
            "funduscopy",
            "gonioscopy",
            "corneal_topography",
            "amsler_grid",
            "eom",
            "exophthalmometry",
            "lacrimal_irrigation",
            "radiology",
            "gross_examination",
            "indirect_ophthalmoscopy",
        ],
    ),
    ("exam_status", &["draft", "signed"]),
    ("measurement_kind", &["iop", "va_logmar", "sphere", "cylinder", "cd_ratio"]),
    ("va_distance", &["distance", "near"]),
    (
        "va_correction",
        &["unaided", "glasses", "contact_lens", "pinhole", "auto_refraction", "formal_refraction"],
    ),
    ("va_notation", &["snellen_m", "snellen_ft", "decimal", "logmar", "etdrs_letters", "n_point"]),
    ("refraction_kind", &["auto", "retinoscopy", "manifest", "cycloplegic", "own_glasses", "final_rx"]),
    ("prism_base", &["up", "down", "in", "out"]),
    (
        "tonometry_method",
        &[
            "goldmann",
            "perkins",
            "tonopen",
            "icare",
            "non_contact",
            "dynamic_contour",
            "schiotz",
            "digital",
            "other",
        ],
    ),
    ("structure_status", &["normal", "abnormal", "not_examined"]),
    ("nuclear_cataract", &["none", "mild", "moderate", "brunescent"]),
    ("cortical_cataract", &["none", "mild", "moderate", "white"]),
    ("iris_configuration", &["flat", "plateau", "concave", "bombe"]),
    (
        "eom_deviation",
        &[
            "orthophoria",
            "esophoria",
            "esotropia",
            "exophoria",
            "exotropia",
            "right_hypertropia",
            "left_hypertropia",
        ],
    ),
    ("punctum_state", &["patent", "stenosed", "absent"]),
    ("lacrimal_passage", &["free", "partial", "none"]),
    ("regurgitation", &["none", "same_punctum", "opposite_punctum"]),
    ("vitreous_state", &["clear", "pvd", "haemorrhage", "cells", "other"]),
    (
        "periphery_finding",
        &["tear", "hole", "detachment", "lattice", "schisis", "neovascularisation", "other"],
    ),
    ("imaging_modality", &["xray", "ct", "mri", "b_scan", "oct", "ffa", "ultrasound", "other"]),
    (
        "medicine_form",
        &[
            "tablet",
            "capsule",
            "syrup",
            "suspension",
            "drops",
            "ointment",
            "gel",
            "cream",
            "injection",
            "spray",
            "other",
        ],
    ),
    (
        "medicine_route",
        &[
            "oral",
            "ophthalmic",
            "topical",
            "intravenous",
            "intramuscular",
            "subcutaneous",
            "intravitreal",
            "subconjunctival",
            "other",
        ],
    ),
    (
        "procedure_category",
        &["consultation", "diagnostic", "laser", "injection", "minor_surgery", "major_surgery", "other"],
    ),
    ("surgery_eye", &["right", "left", "both"]),
    ("anaesthesia", &["topical", "sub_tenon", "peribulbar", "retrobulbar", "local", "sedation", "general"]),
    ("surgery_priority", &["routine", "urgent", "emergency"]),
    ("surgery_status", &["scheduled", "confirmed", "completed", "cancelled", "postponed"]),
    (
        "stock_movement_kind",
        &["receipt", "dispense", "return", "adjustment", "transfer_out", "transfer_in", "expired", "damaged"],
    ),
    ("purchase_order_status", &["draft", "ordered", "partially_received", "received", "closed", "cancelled"]),
    ("delivery_status", &["draft", "posted", "cancelled"]),
    ("pharmacy_transaction_status", &["draft", "completed", "voided"]),
    ("billing_kind", &["charge", "discount", "payment", "refund"]),
    ("billing_status", &["open", "posted", "voided"]),
    ("queue_priority", &["normal", "priority", "urgent"]),
    ("queue_status", &["waiting", "called", "serving", "completed", "skipped", "no_show", "transferred"]),
];

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn merged(mut body: Value, extra: Value) -> Value {
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
    body
}

fn day(offset: i64) -> String {
    (OffsetDateTime::now_utc().date() + time::Duration::days(offset)).to_string()
}

/// An RFC 3339 instant `minutes` from now (negative: in the past), to the minute.
fn from_now(minutes: i64) -> String {
    let at = OffsetDateTime::now_utc() + time::Duration::minutes(minutes);
    at.replace_second(0).unwrap().replace_nanosecond(0).unwrap().format(&Rfc3339).unwrap()
}

/// A valid create body for a master-data path, `extra` merged in.
fn master_body(path: &str, extra: Value) -> Value {
    let body = match path {
        BILL_ITEMS => {
            json!({ "code": "cons-01", "name": "Consultation", "bill_item_category_id": 1, "unit_price": 1250 })
        }
        MEDICINES => {
            json!({ "generic_name": "Timolol", "form": "drops", "route": "ophthalmic", "unit": "bottle" })
        }
        PROCEDURES => json!({ "code": "phaco", "name": "Phacoemulsification", "category": "major_surgery" }),
        INSURANCES => json!({
            "code": "hmo-a", "payer_name": "Acme Health", "coverage_percent": 80, "valid_from": day(-30),
        }),
        SERVICES => json!({ "code": "cons", "name": "Consultation", "price": "500" }),
        DOCTORS => json!({ "first_name": "Rosa", "last_name": "Santos", "license_no": "PRC-0001" }),
        other => panic!("no sample for {other}"),
    };
    merged(body, extra)
}

async fn master(app: &TestApp, path: &str, extra: Value) -> Value {
    app.created(path, None, master_body(path, extra)).await
}

/// The booking of a surgery in `branch`.
struct Booking {
    branch: i64,
    patient: i64,
    procedure: i64,
    doctor: i64,
}

impl Booking {
    fn body(&self, extra: Value) -> Value {
        merged(
            json!({
                "branch_id": self.branch,
                "patient_id": self.patient,
                "procedure_id": self.procedure,
                "doctor_id": self.doctor,
                "eye": "right",
                "scheduled_at": from_now(24 * 60),
            }),
            extra,
        )
    }
}

/// A clinic with a procedure (90 minutes by default) and a doctor, ready to book.
async fn booking(clinic: &Clinic) -> Booking {
    let procedure = master(&clinic.app, PROCEDURES, json!({ "default_duration_minutes": 90 })).await;
    let doctor = master(&clinic.app, DOCTORS, json!({})).await;
    Booking {
        branch: clinic.branch,
        patient: clinic.patient,
        procedure: id_of(&procedure),
        doctor: id_of(&doctor),
    }
}

fn conflicts(r: &Reply) -> Vec<i64> {
    assert_error(r, 409, "schedule_conflict");
    r.body["conflicts"]
        .as_array()
        .unwrap_or_else(|| panic!("no conflicts: {}", r.text))
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------
// Master data
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn bill_items_round_trip_with_money_as_strings_and_upper_case_codes() {
    let app = TestApp::spawn().await;
    let r =
        app.post(BILL_ITEMS, None, master_body(BILL_ITEMS, json!({ "description": "First visit" }))).await;
    assert_status(&r, 201);
    let item = r.body["data"].clone();
    assert_eq!(item["code"], "CONS-01");
    assert_eq!(item["unit_price"], "1250.00");
    assert_eq!(item["active"], true);
    assert_eq!(item["bill_item_category_id"], 1);
    let member = format!("{BILL_ITEMS}/{}", id_of(&item));
    assert_eq!(app.get(&member, None).await.body["data"], item);
    let r = app.get(&format!("{BILL_ITEMS}?search=cons-0"), None).await;
    assert_eq!(ids(&r.body), vec![id_of(&item)]);
    let r = app.put(&member, None, json!({ "unit_price": "99.5", "name": "Follow-up" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["unit_price"], "99.50");
    assert_eq!(r.body["data"]["code"], "CONS-01", "fields not sent are kept");
    let r = app.get(&format!("{BILL_ITEMS}?sortField=unit_price"), None).await;
    assert_eq!(column(&r.body, "unit_price"), ["99.50"]);
    assert_status(&app.delete(&member, None).await, 200);
    assert_error(&app.get(&member, None).await, 404, "not_found");
    // Codes are unique among live rows only.
    master(&app, BILL_ITEMS, json!({})).await;
}

/// `(path, valid body, a change)` of every writable master and lookup resource.
fn writable() -> Vec<(&'static str, Value, Value)> {
    let mut all: Vec<(&str, Value, Value)> = vec![
        (BILL_ITEMS, master_body(BILL_ITEMS, json!({})), json!({ "name": "Renamed" })),
        (MEDICINES, master_body(MEDICINES, json!({})), json!({ "brand_name": "Renamed" })),
        (PROCEDURES, master_body(PROCEDURES, json!({})), json!({ "name": "Renamed" })),
        (INSURANCES, master_body(INSURANCES, json!({})), json!({ "plan_name": "Renamed" })),
        (SERVICES, master_body(SERVICES, json!({})), json!({ "name": "Renamed" })),
        (DOCTORS, master_body(DOCTORS, json!({})), json!({ "specialization": "Renamed" })),
    ];
    all.extend([
        (CATEGORIES, json!({ "name": "Laboratory" }), json!({ "description": "Renamed" })),
        (PAYMENT_METHODS, json!({ "code": "gcash", "name": "GCash" }), json!({ "name": "Renamed" })),
        (SUPPLIERS, json!({ "name": "Acme Optical" }), json!({ "contact_name": "Renamed" })),
    ]);
    all
}

#[tokio::test]
async fn every_master_and_lookup_resource_is_created_read_listed_changed_and_deleted() {
    let app = TestApp::spawn().await;
    for (path, body, change) in writable() {
        let r = app.post(path, None, body).await;
        assert_status(&r, 201);
        assert_eq!(r.header("etag"), Some("\"1\""), "{path}");
        let created = r.body["data"].clone();
        let id = id_of(&created);
        let member = format!("{path}/{id}");
        assert_eq!(app.get(&member, None).await.body["data"], created, "{path}");
        let r = app.get(&format!("{path}?perPage=100"), None).await;
        assert!(ids(&r.body).contains(&id), "{path} lists it: {}", r.text);
        let r = app.put(&member, None, change.clone()).await;
        assert_status(&r, 200);
        let (field, value) = change.as_object().unwrap().iter().next().unwrap();
        assert_eq!(&r.body["data"][field], value, "{path}");
        assert_eq!(r.body["data"]["version"], 2, "{path}");
        let stale = app.request(Method::PUT, &member, None).header("if-match", "\"1\"").json(&change);
        assert_error(&reply(stale).await, 412, "precondition_failed");
        assert_status(&app.delete(&member, None).await, 200);
        assert_error(&app.get(&member, None).await, 404, "not_found");
        assert!(!ids(&app.get(&format!("{path}?perPage=100"), None).await.body).contains(&id), "{path}");
        let resource = path.trim_start_matches("/api/v1/");
        let rows = app.audit_rows(SYSTEM_AUDIT, None, resource, id).await;
        let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
        assert_eq!(actions, ["create", "update", "delete"], "{path}");
    }
}

#[tokio::test]
async fn money_is_non_negative_with_at_most_two_decimals() {
    let app = TestApp::spawn().await;
    for (price, field) in [
        (json!(-1), "unit_price"),
        (json!("-0.01"), "unit_price"),
        (json!("12.345"), "unit_price"),
        (json!(0.001), "unit_price"),
        (json!("abc"), "unit_price"),
        (json!("12345678901"), "unit_price"),
        (json!(true), "unit_price"),
    ] {
        let r = app.post(BILL_ITEMS, None, master_body(BILL_ITEMS, json!({ field: price }))).await;
        assert_invalid(&r, &[field]);
    }
    for (sent, answered) in
        [(json!(0), "0.00"), (json!("0.1"), "0.10"), (json!("9999999999.99"), "9999999999.99")]
    {
        let r = app
            .post(
                BILL_ITEMS,
                None,
                master_body(BILL_ITEMS, json!({ "code": format!("C{answered}"), "unit_price": sent })),
            )
            .await;
        assert_status(&r, 201);
        assert_eq!(r.body["data"]["unit_price"], answered);
    }
    let procedure = master(&app, PROCEDURES, json!({})).await;
    assert_eq!(procedure["price"], "0.00");
    assert_invalid(
        &app.post(PROCEDURES, None, master_body(PROCEDURES, json!({ "code": "X", "price": -5 }))).await,
        &["price"],
    );
    let service = master(&app, SERVICES, json!({})).await;
    assert_eq!(service["price"], "500.00");
    assert_invalid(
        &app.post(SERVICES, None, master_body(SERVICES, json!({ "code": "XY", "price": "1.005" }))).await,
        &["price"],
    );
    let doctor = master(&app, DOCTORS, json!({})).await;
    assert_eq!(doctor["consultation_fee"], "0.00");
    let insurance = master(&app, INSURANCES, json!({})).await;
    assert_eq!(insurance["copay"], "0.00");
    let r = app.post(INSURANCES, None, master_body(INSURANCES, json!({ "code": "B", "copay": "-1" }))).await;
    assert_invalid(&r, &["copay"]);
}

#[tokio::test]
async fn codes_are_upper_cased_checked_and_unique() {
    let app = TestApp::spawn().await;
    for path in [BILL_ITEMS, PROCEDURES, INSURANCES, SERVICES] {
        let first = master(&app, path, json!({})).await;
        let code = first["code"].as_str().unwrap().to_owned();
        assert_eq!(code, code.to_uppercase(), "{path}");
        let again = app.post(path, None, master_body(path, json!({ "code": code.to_lowercase() }))).await;
        assert_invalid(&again, &["code"]);
        for bad in [json!("has space"), json!("x".repeat(31)), json!(""), json!("A!")] {
            let r = app.post(path, None, master_body(path, json!({ "code": bad }))).await;
            assert_invalid(&r, &["code"]);
        }
    }
    let r = app.post(PROCEDURES, None, master_body(PROCEDURES, json!({ "code": "yag.laser_2-b" }))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["code"], "YAG.LASER_2-B");
    // Service codes are 2 to 10 letters and digits (they prefix queue tickets).
    for bad in ["a", "ab-1", "abcdefghijk"] {
        assert_invalid(
            &app.post(SERVICES, None, master_body(SERVICES, json!({ "code": bad }))).await,
            &["code"],
        );
    }
    assert_eq!(master(&app, SERVICES, json!({ "code": "opd2" })).await["code"], "OPD2");
}

#[tokio::test]
async fn medicines_procedures_and_services_check_their_enumerations_and_ranges() {
    let app = TestApp::spawn().await;
    let medicine = master(&app, MEDICINES, json!({ "brand_name": "Timoptol", "strength": "0.5%" })).await;
    assert_eq!(medicine["status"], "active");
    assert_eq!(medicine["requires_prescription"], true);
    for (field, value) in [("form", "powder"), ("route", "nasal"), ("status", "retired")] {
        let r = app.post(MEDICINES, None, master_body(MEDICINES, json!({ field: value }))).await;
        assert_invalid(&r, &[field]);
    }
    assert_invalid(&app.post(MEDICINES, None, json!({})).await, &["generic_name", "form", "route", "unit"]);
    for (field, value) in [
        ("category", json!("surgery")),
        ("default_duration_minutes", json!(0)),
        ("default_duration_minutes", json!(721)),
        ("billable", json!("no")),
    ] {
        let r =
            app.post(PROCEDURES, None, master_body(PROCEDURES, json!({ "code": "P2", field: value }))).await;
        assert_invalid(&r, &[field]);
    }
    let r = app.post(SERVICES, None, master_body(SERVICES, json!({ "default_duration_minutes": 721 }))).await;
    assert_invalid(&r, &["default_duration_minutes"]);
    assert_invalid(&app.post(SERVICES, None, json!({ "code": "AB" })).await, &["name", "price"]);
    let r = app.get(&format!("{MEDICINES}?filters[form]=drops&search=timop"), None).await;
    assert_eq!(ids(&r.body), vec![id_of(&medicine)]);
    assert_invalid(&app.get(&format!("{MEDICINES}?filters[form]=powder"), None).await, &["filters[form]"]);
}

#[tokio::test]
async fn insurance_coverage_and_validity_are_checked() {
    let app = TestApp::spawn().await;
    let insurance =
        master(&app, INSURANCES, json!({ "coverage_percent": "12.5", "plan_name": "Gold" })).await;
    assert_eq!(insurance["coverage_percent"].to_string(), "12.50", "a measurement at its step's scale");
    assert_eq!(insurance["status"], "active");
    for (n, coverage) in [json!(100.01), json!(-1), json!("12.345"), json!("x")].into_iter().enumerate() {
        let r = app
            .post(
                INSURANCES,
                None,
                master_body(INSURANCES, json!({ "code": format!("C{n}"), "coverage_percent": coverage })),
            )
            .await;
        assert_invalid(&r, &["coverage_percent"]);
    }
    let r = app
        .post(
            INSURANCES,
            None,
            master_body(
                INSURANCES,
                json!({ "code": "D", "valid_from": "2026-03-01", "valid_to": "2026-02-28" }),
            ),
        )
        .await;
    assert_invalid(&r, &["valid_to"]);
    let same_day = master(
        &app,
        INSURANCES,
        json!({ "code": "E", "valid_from": "2026-03-01", "valid_to": "2026-03-01" }),
    )
    .await;
    let r = app
        .put(&format!("{INSURANCES}/{}", id_of(&same_day)), None, json!({ "valid_from": "2026-03-02" }))
        .await;
    assert_invalid(&r, &["valid_to"]);
    assert_invalid(
        &app.post(INSURANCES, None, json!({})).await,
        &["code", "payer_name", "coverage_percent", "valid_from"],
    );
}

#[tokio::test]
async fn doctors_have_unique_licenses_and_users() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (user, _) = app.create_user("rosa", &["doctor"], &[main]).await;
    let doctor = master(&app, DOCTORS, json!({ "user_id": user, "email": "rosa@example.test", "phone": "+63 917 555 0101", "consultation_fee": 800 })).await;
    assert_eq!(doctor["consultation_fee"], "800.00");
    assert_eq!(doctor["active"], true);
    let r = app.post(DOCTORS, None, master_body(DOCTORS, json!({ "license_no": "prc-0001" }))).await;
    assert_invalid(&r, &["license_no"]);
    let r = app
        .post(DOCTORS, None, master_body(DOCTORS, json!({ "license_no": "PRC-0002", "user_id": user })))
        .await;
    assert_invalid(&r, &["user_id"]);
    let r = app
        .post(DOCTORS, None, master_body(DOCTORS, json!({ "license_no": "PRC-0003", "user_id": 999_999 })))
        .await;
    assert_invalid(&r, &["user_id"]);
    let r = app
        .post(
            DOCTORS,
            None,
            master_body(DOCTORS, json!({ "license_no": "PRC-0004", "email": "rosa@", "phone": "call me" })),
        )
        .await;
    assert_invalid(&r, &["email", "phone"]);
    // A deleted doctor frees the license and the user.
    assert_status(&app.delete(&format!("{DOCTORS}/{}", id_of(&doctor)), None).await, 200);
    master(&app, DOCTORS, json!({ "user_id": user })).await;
}

#[tokio::test]
async fn master_data_is_read_by_its_readers_and_written_by_its_writers() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, doctor) = app.create_user("doc", &["doctor"], &[main]).await;
    let medicine = master(&app, MEDICINES, json!({})).await;
    let member = format!("{MEDICINES}/{}", id_of(&medicine));
    assert_status(&app.call_as(&doctor, Method::GET, MEDICINES, None, Value::Null).await, 200);
    assert_status(&app.call_as(&doctor, Method::GET, &member, None, Value::Null).await, 200);
    for (method, path, body) in [
        (Method::POST, MEDICINES.to_owned(), master_body(MEDICINES, json!({}))),
        (Method::PUT, member.clone(), json!({ "unit": "vial" })),
        (Method::DELETE, member.clone(), Value::Null),
        (Method::PATCH, format!("{member}/toggle-status"), Value::Null),
    ] {
        assert_error(&app.call_as(&doctor, method, &path, None, body).await, 403, "forbidden");
    }
    let r = app.get(MEDICINES, None).await;
    assert_eq!(ids(&r.body), vec![id_of(&medicine)], "global: no branch header needed");
}

// ---------------------------------------------------------------------------------------
// Status toggles
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn toggle_status_flips_active_and_inactive_and_is_audited() {
    let app = TestApp::spawn().await;
    for path in [MEDICINES, PROCEDURES, INSURANCES, SERVICES] {
        let record = master(&app, path, json!({})).await;
        let id = id_of(&record);
        let toggle = format!("{path}/{id}/toggle-status");
        let r = app.patch(&toggle, None).await;
        assert_status(&r, 200);
        assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
        assert_eq!(r.body["data"]["status"], "inactive", "{path}");
        assert_eq!(r.body["data"]["version"], 2, "{path}");
        assert_eq!(r.header("etag"), Some("\"2\""));
        let r = app.patch(&toggle, None).await;
        assert_eq!(r.body["data"]["status"], "active", "{path}");
        assert_eq!(r.body["data"]["version"], 3, "{path}");
        let resource = path.trim_start_matches("/api/v1/");
        let rows = app.audit_rows(SYSTEM_AUDIT, None, resource, id).await;
        let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
        assert_eq!(actions, ["create", "toggle_status", "toggle_status"], "{path}");
        assert_eq!(rows[1]["before"]["status"], "active");
        assert_eq!(rows[1]["after"]["status"], "inactive");
        // A stale If-Match changes nothing.
        let stale = app.request(Method::PATCH, &toggle, None).header("if-match", "\"1\"");
        assert_error(&reply(stale).await, 412, "precondition_failed");
        assert_status(&app.delete(&format!("{path}/{id}"), None).await, 200);
        assert_error(&app.patch(&toggle, None).await, 404, "not_found");
    }
    assert_error(&app.patch(&format!("{MEDICINES}/999999/toggle-status"), None).await, 404, "not_found");
}

// ---------------------------------------------------------------------------------------
// References to master data
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_visit_names_a_live_active_doctor_but_keeps_one_deactivated_later() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    let doctor = id_of(&master(app, DOCTORS, json!({})).await);
    let visit = app
        .created(
            "/api/v1/patient-visits",
            branch,
            json!({ "patient_id": clinic.patient, "visit_date": day(0), "doctor_id": doctor }),
        )
        .await;
    assert_eq!(visit["doctor_id"], doctor);
    let r = app.put(&format!("{DOCTORS}/{doctor}"), None, json!({ "active": false })).await;
    assert_status(&r, 200);
    let r = app
        .post(
            "/api/v1/patient-visits",
            branch,
            json!({ "patient_id": clinic.patient, "visit_date": day(0), "doctor_id": doctor }),
        )
        .await;
    assert_invalid(&r, &["doctor_id"]);
    let member = format!("/api/v1/patient-visits/{}", id_of(&visit));
    let r = app.put(&member, branch, json!({ "reason": "Review", "doctor_id": doctor })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["doctor_id"], doctor, "an unchanged reference stays");
    let r = app
        .put(&format!("/api/v1/patient-visits/{}", clinic.visit), branch, json!({ "doctor_id": doctor }))
        .await;
    assert_invalid(&r, &["doctor_id"]);
    // A deleted doctor is no reference at all.
    let other = id_of(&master(app, DOCTORS, json!({ "license_no": "PRC-9" })).await);
    assert_status(&app.delete(&format!("{DOCTORS}/{other}"), None).await, 200);
    let r = app
        .put(&format!("/api/v1/patient-visits/{}", clinic.visit), branch, json!({ "doctor_id": other }))
        .await;
    assert_invalid(&r, &["doctor_id"]);
}

#[tokio::test]
async fn a_prescription_names_an_active_medicine_but_keeps_one_deactivated_later() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    let medicine = id_of(&master(app, MEDICINES, json!({})).await);
    let path = "/api/v1/patient-visit-prescribed-medicines";
    let body = json!({ "patient_visit_id": clinic.visit, "medicine_id": medicine, "dosage": "1 drop" });
    let prescribed = app.created(path, branch, body.clone()).await;
    assert_status(&app.patch(&format!("{MEDICINES}/{medicine}/toggle-status"), None).await, 200);
    assert_invalid(&app.post(path, branch, body.clone()).await, &["medicine_id"]);
    let member = format!("{path}/{}", id_of(&prescribed));
    let r = app.put(&member, branch, json!({ "dosage": "2 drops", "medicine_id": medicine })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["dosage"], "2 drops");
    assert_status(&app.patch(&format!("{MEDICINES}/{medicine}/toggle-status"), None).await, 200);
    assert_status(&app.post(path, branch, body).await, 201);
}

#[tokio::test]
async fn a_patient_names_an_insurance_valid_today() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    let future = id_of(&master(app, INSURANCES, json!({ "code": "LATER", "valid_from": day(1) })).await);
    let expired = id_of(
        &master(app, INSURANCES, json!({ "code": "OLD", "valid_from": day(-60), "valid_to": day(-1) })).await,
    );
    let current = id_of(
        &master(app, INSURANCES, json!({ "code": "NOW", "valid_from": day(0), "valid_to": day(0) })).await,
    );
    let patient = |insurance: i64| json!({ "first_name": "Ben", "last_name": "Reyes", "birth_date": "1990-01-01", "sex": "male", "insurance_id": insurance });
    for insurance in [future, expired, 999_999] {
        assert_invalid(&app.post("/api/v1/patients", branch, patient(insurance)).await, &["insurance_id"]);
    }
    let insured = app.created("/api/v1/patients", branch, patient(current)).await;
    assert_status(&app.patch(&format!("{INSURANCES}/{current}/toggle-status"), None).await, 200);
    assert_invalid(&app.post("/api/v1/patients", branch, patient(current)).await, &["insurance_id"]);
    let member = format!("/api/v1/patients/{}", id_of(&insured));
    let r = app.put(&member, branch, json!({ "city": "Cebu", "insurance_id": current })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["insurance_id"], current);
}

#[tokio::test]
async fn a_bill_item_names_an_active_category() {
    let app = TestApp::spawn().await;
    let category = app.created(CATEGORIES, None, json!({ "name": "Laboratory" })).await;
    let id = id_of(&category);
    let item = master(&app, BILL_ITEMS, json!({ "bill_item_category_id": id })).await;
    assert_status(&app.put(&format!("{CATEGORIES}/{id}"), None, json!({ "active": false })).await, 200);
    let r = app
        .post(
            BILL_ITEMS,
            None,
            master_body(BILL_ITEMS, json!({ "code": "LAB2", "bill_item_category_id": id })),
        )
        .await;
    assert_invalid(&r, &["bill_item_category_id"]);
    let r = app
        .put(
            &format!("{BILL_ITEMS}/{}", id_of(&item)),
            None,
            json!({ "name": "CBC", "bill_item_category_id": id }),
        )
        .await;
    assert_status(&r, 200);
    let r = app
        .post(
            BILL_ITEMS,
            None,
            master_body(BILL_ITEMS, json!({ "code": "LAB3", "bill_item_category_id": 999 })),
        )
        .await;
    assert_invalid(&r, &["bill_item_category_id"]);
}

#[tokio::test]
async fn a_branch_service_may_name_an_active_service() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let service = id_of(&master(&app, SERVICES, json!({})).await);
    let counters = format!("{BRANCHES}/{main}/services");
    let counter =
        app.created(&counters, None, json!({ "name": "Consults", "code": "C", "service_id": service })).await;
    assert_eq!(counter["service_id"], service);
    assert!(
        app.created(&counters, None, json!({ "name": "Triage", "code": "T" })).await["service_id"].is_null()
    );
    assert_status(&app.patch(&format!("{SERVICES}/{service}/toggle-status"), None).await, 200);
    let r = app.post(&counters, None, json!({ "name": "More", "code": "M", "service_id": service })).await;
    assert_invalid(&r, &["service_id"]);
    let r = app
        .put(
            &format!("{counters}/{}", id_of(&counter)),
            None,
            json!({ "name": "Consults A", "service_id": service }),
        )
        .await;
    assert_status(&r, 200);
    let r = app.post(&counters, None, json!({ "name": "None", "code": "N", "service_id": 999 })).await;
    assert_invalid(&r, &["service_id"]);
}

// ---------------------------------------------------------------------------------------
// Lookups and enumerations
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn lookups_are_seeded_read_by_anyone_and_written_by_admins() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, doctor) = app.create_user("doc", &["doctor"], &[main]).await;
    let r = app
        .call_as(&doctor, Method::GET, &format!("{PAYMENT_METHODS}?sortField=code"), None, Value::Null)
        .await;
    assert_status(&r, 200);
    let methods: Vec<(String, bool)> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["code"].as_str().unwrap().to_owned(), m["requires_reference"].as_bool().unwrap()))
        .collect();
    let expected =
        [("BANK_TRANSFER", true), ("CARD", true), ("CASH", false), ("CHEQUE", true), ("E_WALLET", true)];
    assert_eq!(methods, expected.map(|(c, r)| (c.to_owned(), r)));
    let r = app.call_as(&doctor, Method::GET, CATEGORIES, None, Value::Null).await;
    assert_eq!(
        column(&r.body, "name"),
        ["Consultation", "Diagnostics", "Medicines", "Optical", "Other", "Procedures"]
    );
    for path in [CATEGORIES, PAYMENT_METHODS, SUPPLIERS] {
        let r = app.call_as(&doctor, Method::POST, path, None, json!({ "name": "X", "code": "X" })).await;
        assert_error(&r, 403, "forbidden");
        assert_status(&app.call_as(&doctor, Method::GET, path, None, Value::Null).await, 200);
    }
    let r = app.call_as(&doctor, Method::PUT, &format!("{CATEGORIES}/1"), None, json!({ "name": "Y" })).await;
    assert_error(&r, 403, "forbidden");
    let r = app.call_as(&doctor, Method::DELETE, &format!("{PAYMENT_METHODS}/1"), None, Value::Null).await;
    assert_error(&r, 403, "forbidden");
}

#[tokio::test]
async fn lookup_names_and_codes_are_unique() {
    let app = TestApp::spawn().await;
    assert_invalid(&app.post(CATEGORIES, None, json!({ "name": "consultation" })).await, &["name"]);
    let category =
        app.created(CATEGORIES, None, json!({ "name": "Laboratory", "description": "Blood work" })).await;
    assert_eq!(category["active"], true);
    let method = app
        .created(
            PAYMENT_METHODS,
            None,
            json!({ "code": "gcash", "name": "GCash", "requires_reference": true }),
        )
        .await;
    assert_eq!(method["code"], "GCASH");
    assert_invalid(
        &app.post(PAYMENT_METHODS, None, json!({ "code": "Cash", "name": "Cash again" })).await,
        &["code"],
    );
    let supplier = app
        .created(SUPPLIERS, None, json!({ "name": "Acme Optical", "email": "orders@acme.test", "phone": "02 8123 4567", "tax_id": "123-456" }))
        .await;
    assert_invalid(&app.post(SUPPLIERS, None, json!({ "name": "ACME optical" })).await, &["name"]);
    assert_invalid(&app.post(SUPPLIERS, None, json!({ "name": "Other", "email": "nope" })).await, &["email"]);
    assert_invalid(&app.post(SUPPLIERS, None, json!({})).await, &["name"]);
    let member = format!("{SUPPLIERS}/{}", id_of(&supplier));
    assert_status(&app.put(&member, None, json!({ "active": false })).await, 200);
    let r = app.get(&format!("{SUPPLIERS}?filters[active]=true"), None).await;
    assert_eq!(r.body["meta"]["total"], 0);
    assert_status(&app.delete(&member, None).await, 200);
    assert_error(&app.get(&member, None).await, 404, "not_found");
    app.created(SUPPLIERS, None, json!({ "name": "Acme Optical" })).await;
    let rows = app.audit_rows(SYSTEM_AUDIT, None, "suppliers", id_of(&supplier)).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "update", "delete"]);
}

#[tokio::test]
async fn purchase_order_statuses_are_a_fixed_list_in_lifecycle_order() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, doctor) = app.create_user("doc", &["doctor"], &[main]).await;
    let r = app.call_as(&doctor, Method::GET, PO_STATUSES, None, Value::Null).await;
    assert_status(&r, 200);
    assert_eq!(
        column(&r.body, "value"),
        ["draft", "ordered", "partially_received", "received", "closed", "cancelled"]
    );
    assert_eq!(column(&r.body, "label")[2], "Partially received");
    let r = app.post(PO_STATUSES, None, json!({ "value": "lost", "label": "Lost" })).await;
    assert_error(&r, 405, "method_not_allowed");
    let r = app.put(&format!("{PO_STATUSES}/1"), None, json!({ "label": "Start" })).await;
    assert_error(&r, 405, "method_not_allowed");
}

#[tokio::test]
async fn enums_answer_every_enumeration_in_order() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, desk) = app.create_user("desk", &["receptionist"], &[main]).await;
    let r = app.call_as(&desk, Method::GET, "/api/v1/enums", None, Value::Null).await;
    assert_status(&r, 200);
    let data = r.body["data"].as_object().unwrap();
    let names: BTreeSet<&str> = data.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = ENUMS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected, "exactly the enumerations of the contract");
    for (name, values) in ENUMS {
        assert_eq!(data[*name], json!(values), "{name}");
    }
    let r = reply(app.http.get(app.url("/api/v1/enums"))).await;
    assert_error(&r, 401, "unauthenticated");
}

// ---------------------------------------------------------------------------------------
// Surgery schedules
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_surgery_is_booked_for_a_patient_of_its_branch_with_defaults() {
    let clinic = Clinic::open().await;
    let app = &clinic.app;
    let b = booking(&clinic).await;
    let r =
        app.post(SCHEDULES, None, b.body(json!({ "theatre": " OR 1 ", "anaesthesia": "peribulbar" }))).await;
    assert_status(&r, 201);
    let s = &r.body["data"];
    assert_eq!(s["status"], "scheduled");
    assert_eq!(s["priority"], "routine");
    assert_eq!(s["duration_minutes"], 90, "the procedure's duration");
    assert_eq!(s["branch_id"], clinic.branch);
    assert_eq!(s["theatre"], "OR 1");
    let bare = id_of(&master(app, PROCEDURES, json!({ "code": "YAG" })).await);
    let r = app
        .post(SCHEDULES, None, b.body(json!({ "procedure_id": bare, "scheduled_at": from_now(3 * 24 * 60) })))
        .await;
    assert_eq!(r.body["data"]["duration_minutes"], 60, "else an hour: {}", r.text);
    let r = app
        .post(
            SCHEDULES,
            None,
            b.body(json!({ "duration_minutes": 30, "scheduled_at": from_now(5 * 24 * 60) })),
        )
        .await;
    assert_eq!(r.body["data"]["duration_minutes"], 30);
    for (extra, field) in [
        (json!({ "patient_id": 999_999 }), "patient_id"),
        (json!({ "procedure_id": 999_999 }), "procedure_id"),
        (json!({ "doctor_id": 999_999 }), "doctor_id"),
        (json!({ "eye": "n_a" }), "eye"),
        (json!({ "duration_minutes": 4 }), "duration_minutes"),
        (json!({ "duration_minutes": 721 }), "duration_minutes"),
        (json!({ "priority": "asap" }), "priority"),
        (json!({ "anaesthesia": "hypnosis" }), "anaesthesia"),
        (json!({ "status": "done" }), "status"),
        (json!({ "scheduled_at": "tomorrow" }), "scheduled_at"),
    ] {
        let r = app.post(SCHEDULES, None, b.body(extra.clone())).await;
        assert_eq!(r.status, 422, "{extra}: {}", r.text);
        assert_invalid(&r, &[field]);
    }
    assert_invalid(
        &app.post(SCHEDULES, None, json!({})).await,
        &["branch_id", "patient_id", "procedure_id", "doctor_id", "eye", "scheduled_at"],
    );
    // Inactive master rows are refused.
    assert_status(&app.patch(&format!("{PROCEDURES}/{}/toggle-status", b.procedure), None).await, 200);
    let r = app.post(SCHEDULES, None, b.body(json!({ "scheduled_at": from_now(9 * 24 * 60) }))).await;
    assert_invalid(&r, &["procedure_id"]);
}

#[tokio::test]
async fn surgery_schedules_belong_to_branches_the_caller_may_access() {
    let clinic = Clinic::open().await;
    let app = &clinic.app;
    let b = booking(&clinic).await;
    let north = app.create_branch("NORTH").await;
    let north_patient = id_of(&app.create_patient(north, "Nora", "North").await);
    let hidden = clinic_server::tenancy::branches::provision(
        &app.state,
        clinic_server::tenancy::branches::NewBranch {
            code: "HIDDEN".into(),
            name: "Hidden".into(),
            database_url: None,
            timezone: None,
        },
        &[],
    )
    .await
    .unwrap()
    .id;
    let r = app.post(SCHEDULES, None, b.body(json!({ "branch_id": hidden, "patient_id": 1 }))).await;
    assert_error(&r, 403, "branch_forbidden");
    // The patient must be one of the named branch.
    let r = app
        .post(SCHEDULES, None, b.body(json!({ "branch_id": north, "patient_id": north_patient + 5 })))
        .await;
    assert_invalid(&r, &["patient_id"]);
    let in_main = app.created(SCHEDULES, None, b.body(json!({}))).await;
    let in_north = app
        .created(
            SCHEDULES,
            None,
            b.body(
                json!({ "branch_id": north, "patient_id": north_patient, "scheduled_at": from_now(48 * 60) }),
            ),
        )
        .await;
    let r = app.put(&format!("{SCHEDULES}/{}", id_of(&in_main)), None, json!({ "branch_id": north })).await;
    assert_invalid(&r, &["branch_id"]);

    let (_, desk) = app.create_user("desk", &["receptionist"], &[clinic.branch]).await;
    let r = app.call_as(&desk, Method::GET, SCHEDULES, None, Value::Null).await;
    assert_status(&r, 200);
    assert_eq!(ids(&r.body), vec![id_of(&in_main)], "only rows of accessible branches");
    let north_member = format!("{SCHEDULES}/{}", id_of(&in_north));
    for (method, body) in
        [(Method::GET, Value::Null), (Method::PUT, json!({ "notes": "x" })), (Method::DELETE, Value::Null)]
    {
        assert_error(&app.call_as(&desk, method, &north_member, None, body).await, 404, "not_found");
    }
    let r = app
        .call_as(
            &desk,
            Method::POST,
            SCHEDULES,
            None,
            b.body(
                json!({ "branch_id": north, "patient_id": north_patient, "scheduled_at": from_now(96 * 60) }),
            ),
        )
        .await;
    assert_error(&r, 403, "branch_forbidden");
    let r = app
        .call_as(&desk, Method::POST, SCHEDULES, None, b.body(json!({ "scheduled_at": from_now(96 * 60) })))
        .await;
    assert_status(&r, 201);
    let r = app.get(&format!("{SCHEDULES}?filters[branch_id]={north}"), None).await;
    assert_eq!(ids(&r.body), vec![id_of(&in_north)]);
    let (_, cashier) = app.create_user("till", &["cashier"], &[clinic.branch]).await;
    let r = app
        .call_as(
            &cashier,
            Method::POST,
            SCHEDULES,
            None,
            b.body(json!({ "scheduled_at": from_now(200 * 60) })),
        )
        .await;
    assert_error(&r, 403, "forbidden");
}

#[tokio::test]
async fn surgery_status_moves_only_along_its_lifecycle() {
    let clinic = Clinic::open().await;
    let app = &clinic.app;
    let b = booking(&clinic).await;
    let mut hour = 0;
    let mut book = move |past: bool| {
        hour += 3;
        let at = if past { from_now(-hour * 60) } else { from_now(hour * 60) };
        app.created(SCHEDULES, None, b.body(json!({ "scheduled_at": at })))
    };
    let put = |id: i64, body: Value| {
        let member = format!("{SCHEDULES}/{id}");
        async move { app.put(&member, None, body).await }
    };

    let s = id_of(&book(false).await);
    assert_status(&put(s, json!({ "status": "confirmed" })).await, 200);
    let r = put(s, json!({ "status": "scheduled" })).await;
    assert_error(&r, 409, "invalid_transition");
    assert_eq!(r.body["status"], "confirmed");
    assert_status(&put(s, json!({ "status": "postponed" })).await, 200);
    let r = put(s, json!({ "status": "confirmed" })).await;
    assert_error(&r, 409, "invalid_transition");
    assert_eq!(r.body["status"], "postponed");
    assert_error(&put(s, json!({ "status": "completed" })).await, 409, "invalid_transition");
    assert_status(&put(s, json!({ "status": "scheduled" })).await, 200);
    // Cancelling says why.
    assert_invalid(&put(s, json!({ "status": "cancelled" })).await, &["cancel_reason"]);
    assert_invalid(
        &put(s, json!({ "status": "cancelled", "cancel_reason": "  " })).await,
        &["cancel_reason"],
    );
    let r = put(s, json!({ "status": "cancelled", "cancel_reason": "Patient unwell" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["cancel_reason"], "Patient unwell");
    let r = put(s, json!({ "status": "scheduled" })).await;
    assert_error(&r, 409, "invalid_transition");
    assert_eq!(r.body["status"], "cancelled");
    let r = put(s, json!({ "theatre": "OR 2" })).await;
    assert_error(&r, 409, "not_editable");
    assert_eq!(r.body["status"], "cancelled");
    assert_status(&put(s, json!({ "notes": "Rebook next month" })).await, 200);
    assert_error(&app.delete(&format!("{SCHEDULES}/{s}"), None).await, 409, "not_editable");

    // A future surgery cannot have been completed; a past one can.
    let future = id_of(&book(false).await);
    assert_invalid(&put(future, json!({ "status": "completed" })).await, &["status"]);
    let past = id_of(&book(true).await);
    assert_status(&put(past, json!({ "status": "confirmed" })).await, 200);
    assert_status(&put(past, json!({ "status": "completed" })).await, 200);
    let r = put(past, json!({ "duration_minutes": 45 })).await;
    assert_error(&r, 409, "not_editable");
    assert_eq!(r.body["status"], "completed");
    assert_error(
        &put(past, json!({ "status": "cancelled", "cancel_reason": "x" })).await,
        409,
        "invalid_transition",
    );
    assert_status(&put(past, json!({ "notes": "Uneventful" })).await, 200);
    let r = app.delete(&format!("{SCHEDULES}/{past}"), None).await;
    assert_error(&r, 409, "not_editable");
    assert_eq!(r.body["status"], "completed");
    // Scheduled and postponed rows are deleted softly.
    let gone = id_of(&book(false).await);
    assert_status(&app.delete(&format!("{SCHEDULES}/{gone}"), None).await, 200);
    assert_error(&app.get(&format!("{SCHEDULES}/{gone}"), None).await, 404, "not_found");
}

#[tokio::test]
async fn one_doctor_or_theatre_is_never_double_booked() {
    let clinic = Clinic::open().await;
    let app = &clinic.app;
    let b = booking(&clinic).await;
    let north = app.create_branch("NORTH").await;
    let north_patient = id_of(&app.create_patient(north, "Nora", "North").await);
    let other_doctor = id_of(&master(app, DOCTORS, json!({ "license_no": "PRC-2" })).await);
    let start = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap() + time::Duration::days(2);
    let at = |minutes: i64| (start + time::Duration::minutes(minutes)).format(&Rfc3339).unwrap();

    // 90 minutes from start, theatre "OR 1".
    let first = id_of(
        &app.created(SCHEDULES, None, b.body(json!({ "scheduled_at": at(0), "theatre": "OR 1" }))).await,
    );
    // The same doctor, at another branch, overlapping.
    let r = app
        .post(
            SCHEDULES,
            None,
            b.body(json!({ "branch_id": north, "patient_id": north_patient, "scheduled_at": at(60) })),
        )
        .await;
    assert_eq!(conflicts(&r), vec![first]);
    // The same theatre of the branch, spelled otherwise, another doctor.
    let r = app
        .post(
            SCHEDULES,
            None,
            b.body(json!({ "doctor_id": other_doctor, "scheduled_at": at(-30), "theatre": " or 1 " })),
        )
        .await;
    assert_eq!(conflicts(&r), vec![first]);
    // The same theatre name at another branch is another theatre; back to back is no overlap.
    app.created(
        SCHEDULES,
        None,
        b.body(json!({ "branch_id": north, "patient_id": north_patient, "doctor_id": other_doctor, "scheduled_at": at(30), "theatre": "OR 1" })),
    )
    .await;
    let next =
        app.created(SCHEDULES, None, b.body(json!({ "scheduled_at": at(90), "theatre": "OR 1" }))).await;
    // Moving a booking into another one conflicts too.
    let r = app.put(&format!("{SCHEDULES}/{}", id_of(&next)), None, json!({ "scheduled_at": at(45) })).await;
    assert_eq!(conflicts(&r), vec![first]);
    let r = app
        .put(
            &format!("{SCHEDULES}/{}", id_of(&next)),
            None,
            json!({ "duration_minutes": 60, "scheduled_at": at(100) }),
        )
        .await;
    assert_status(&r, 200);
    // Postponed and cancelled rows free the slot; taking it back up conflicts again.
    assert_status(
        &app.put(&format!("{SCHEDULES}/{first}"), None, json!({ "status": "postponed" })).await,
        200,
    );
    let taken =
        app.created(SCHEDULES, None, b.body(json!({ "scheduled_at": at(0), "theatre": "or 1" }))).await;
    let r = app.put(&format!("{SCHEDULES}/{first}"), None, json!({ "status": "scheduled" })).await;
    assert_eq!(conflicts(&r), vec![id_of(&taken)]);
}

#[tokio::test]
async fn twenty_concurrent_conflicting_bookings_give_one_schedule() {
    let clinic = Clinic::open().await;
    let app = &clinic.app;
    let b = booking(&clinic).await;
    let body = b.body(json!({ "scheduled_at": from_now(7 * 24 * 60), "theatre": "OR 3" }));
    let replies = join_all((0..20).map(|_| app.post(SCHEDULES, None, body.clone()))).await;
    let created: Vec<&Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(created.len(), 1, "statuses: {:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    let winner = id_of(created[0]);
    for r in replies.iter().filter(|r| r.status != 201) {
        assert_error(r, 409, "schedule_conflict");
        let named = r.body["conflicts"].as_array().unwrap();
        assert!(named.is_empty() || named == &vec![json!(winner)], "conflicts name the winner: {}", r.text);
    }
    let client = app.state.registry.get().await.unwrap();
    let rows: i64 = client.query_one("SELECT count(*) FROM surgery_schedules", &[]).await.unwrap().get(0);
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn surgery_schedule_lists_filter_by_date_and_status() {
    let clinic = Clinic::open().await;
    let app = &clinic.app;
    let b = booking(&clinic).await;
    let later = id_of(
        &app.created(SCHEDULES, None, b.body(json!({ "scheduled_at": format!("{}T09:00:00Z", day(10)) })))
            .await,
    );
    let sooner = id_of(
        &app.created(
            SCHEDULES,
            None,
            b.body(json!({ "scheduled_at": format!("{}T09:00:00Z", day(5)), "priority": "urgent" })),
        )
        .await,
    );
    assert_status(
        &app.put(&format!("{SCHEDULES}/{sooner}"), None, json!({ "status": "confirmed" })).await,
        200,
    );
    let list = |query: String| async move { app.get(&format!("{SCHEDULES}?{query}"), None).await };
    assert_eq!(ids(&list(String::new()).await.body), vec![sooner, later], "by scheduled_at");
    assert_eq!(ids(&list(format!("start_date={}&end_date={}", day(10), day(10))).await.body), vec![later]);
    assert_eq!(ids(&list("filters[status]=confirmed".into()).await.body), vec![sooner]);
    assert_eq!(ids(&list("filters[priority]=urgent".into()).await.body), vec![sooner]);
    assert_eq!(ids(&list(format!("filters[doctor_id]={}", b.doctor)).await.body).len(), 2);
    assert_invalid(&list("filters[status]=done".into()).await, &["filters[status]"]);
}

// ---------------------------------------------------------------------------------------
// Branch time zones
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn branches_have_a_known_time_zone() {
    let app = TestApp::spawn().await;
    let r = app
        .post(BRANCHES, None, json!({ "code": "EAST", "name": "East", "timezone": "Mars/Olympus_Mons" }))
        .await;
    assert_invalid(&r, &["timezone"]);
    let r =
        app.post(BRANCHES, None, json!({ "code": "EAST", "name": "East", "timezone": "not a zone!" })).await;
    assert_invalid(&r, &["timezone"]);
    // Names a tz installation carries that are not time zones.
    for not_a_zone in ["localtime", "posixrules", "Factory", "posix/Asia/Manila", "right/UTC"] {
        let r =
            app.post(BRANCHES, None, json!({ "code": "EAST", "name": "East", "timezone": not_a_zone })).await;
        assert_invalid(&r, &["timezone"]);
    }
    // Legacy names IANA keeps as links are zones.
    let japan =
        app.created(BRANCHES, None, json!({ "code": "JP", "name": "Japan", "timezone": "Japan" })).await;
    assert_eq!(japan["timezone"], "Japan");
    let east = app.created(BRANCHES, None, json!({ "code": "EAST", "name": "East" })).await;
    assert_eq!(east["timezone"], "UTC");
    let west = app
        .created(BRANCHES, None, json!({ "code": "WEST", "name": "West", "timezone": "Europe/Lisbon" }))
        .await;
    assert_eq!(west["timezone"], "Europe/Lisbon");
    let member = format!("{BRANCHES}/{}", id_of(&east));
    let r = app.put(&member, None, json!({ "timezone": "Asia/Manila" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["timezone"], "Asia/Manila");
    assert_eq!(app.get(&member, None).await.body["data"]["timezone"], "Asia/Manila");
    assert_invalid(&app.put(&member, None, json!({ "timezone": "Nowhere/City" })).await, &["timezone"]);
    assert_invalid(&app.put(&member, None, json!({ "timezone": "" })).await, &["timezone"]);
    let client = app.state.registry.get().await.unwrap();
    let stored: String = client
        .query_one("SELECT timezone FROM branches WHERE id = $1", &[&id_of(&east)])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, "Asia/Manila");
}

#[tokio::test]
async fn a_new_branch_takes_the_clinic_time_zone_by_default() {
    let app = TestApp::spawn_with(|s| s.clinic_timezone = "Asia/Manila".into()).await;
    let branch = app.created(BRANCHES, None, json!({ "code": "EAST", "name": "East" })).await;
    assert_eq!(branch["timezone"], "Asia/Manila");
}

//! Duplicate patients: found with their reasons, merged (every record moving to the patient
//! who stays, in the branch and in the registry), read and written after the merge, undone,
//! and the tables a merge moves compared with the schemas' catalogues.

use std::collections::BTreeSet;

use clinic_server::clinical::merge::tables;
use clinic_server::resource::registered;

use super::*;
use crate::conformance::{World, world};
use crate::support::{assert_error, patient_reads};

const DUPLICATES: &str = "/api/v1/patients/duplicates";

pub(super) fn merge_path(survivor: i64) -> String {
    format!("{PATIENTS}/{survivor}/merge")
}

/// A patient born on `born`, with `extra` fields.
pub(super) async fn born(
    app: &TestApp,
    branch: i64,
    first: &str,
    last: &str,
    born: &str,
    extra: Value,
) -> i64 {
    let mut body = patient_body(first, last, extra);
    body["birth_date"] = json!(born);
    id_of(&app.created(PATIENTS, Some(branch), body).await)
}

pub(super) async fn merge(app: &TestApp, branch: i64, survivor: i64, duplicate: i64) -> Reply {
    app.post(
        &merge_path(survivor),
        Some(branch),
        json!({ "duplicate_id": duplicate, "reason": "registered twice" }),
    )
    .await
}

/// A branch service taking tickets.
pub(super) async fn service(app: &TestApp, branch: i64, code: &str) -> i64 {
    let body = json!({ "name": format!("Service {code}"), "code": code });
    id_of(&app.created(&format!("/api/v1/branches/{branch}/services"), None, body).await)
}

/// Everything a patient can have, one of each, and what it was created as.
pub(super) struct Chart {
    pub(super) visit: i64,
    pub(super) complaint: i64,
    pub(super) refraction: Value,
    pub(super) charge: i64,
    pub(super) payment: i64,
    pub(super) ticket: i64,
    pub(super) surgery: i64,
    pub(super) dispensing: i64,
}

pub(super) async fn chart(app: &TestApp, w: &World, patient: i64, service: i64, hour: u32) -> Chart {
    let branch = Some(w.branch);
    let visit = id_of(
        &app.created(
            "/api/v1/patient-visits",
            branch,
            json!({ "patient_id": patient, "visit_date": "2026-03-02" }),
        )
        .await,
    );
    let complaint = id_of(
        &app.created(
            "/api/v1/complaints",
            branch,
            json!({ "patient_visit_id": visit, "complaint": "Glare" }),
        )
        .await,
    );
    let refraction = app
        .created(
            "/api/v1/refractions",
            branch,
            json!({ "patient_visit_id": visit, "kind": "final_rx", "right_eye": { "sphere": "-2.25" } }),
        )
        .await;
    let signed =
        app.post(&format!("/api/v1/refractions/{}/sign", id_of(&refraction)), branch, json!({})).await;
    assert_status(&signed, 200);
    let billing = format!("{PATIENTS}/{patient}/billing-transactions");
    let charge = id_of(
        &app.created(
            &billing,
            branch,
            json!({ "kind": "charge", "unit_price": "1200.50", "status": "posted",
                                              "description": "Phaco work-up" }),
        )
        .await,
    );
    let payment = id_of(
        &app.created(
            &billing,
            branch,
            json!({ "kind": "payment", "amount": "500.25", "status": "posted",
                                              "payment_method_id": 1 }),
        )
        .await,
    );
    let ticket = id_of(
        &app.created(
            &format!("/api/v1/queue/branch-services/{service}/queue"),
            branch,
            json!({ "patient_id": patient }),
        )
        .await,
    );
    let surgery = id_of(
        &app.created(
            "/api/v1/surgery-schedules",
            None,
            json!({ "branch_id": w.branch, "patient_id": patient, "procedure_id": w.procedure, "doctor_id": w.doctor,
                    "eye": "left", "scheduled_at": format!("2027-06-01T{hour:02}:00:00+00:00") }),
        )
        .await,
    );
    let dispensing = id_of(
        &app.created(
            "/api/v1/transactions",
            None,
            json!({ "branch_id": w.branch, "patient_id": patient, "lines": [{ "pharmacy_item_id": w.item, "quantity": 1 }] }),
        )
        .await,
    );
    let refraction =
        app.get(&format!("/api/v1/refractions/{}", id_of(&refraction)), branch).await.body["data"].clone();
    Chart { visit, complaint, refraction, charge, payment, ticket, surgery, dispensing }
}

async fn summary(app: &TestApp, branch: i64, patient: i64) -> Value {
    let r = app.get(&format!("{PATIENTS}/{patient}/billing-summary"), Some(branch)).await;
    assert_status(&r, 200);
    r.body["data"].clone()
}

fn cents(money: &Value) -> i64 {
    let text = money.as_str().unwrap_or_else(|| panic!("money {money}"));
    let (units, hundredths) = text.split_once('.').unwrap();
    units.parse::<i64>().unwrap() * 100 + hundredths.parse::<i64>().unwrap()
}

/// The `patient_id` of row `id` of a table, read straight from the database (`branch` for a
/// branch table, `None` for the registry).
pub(super) async fn owner(app: &TestApp, branch: Option<i64>, table: &str, id: i64) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    let table = branch.map_or_else(|| format!("public.{table}"), |b| format!("branch_{b}.{table}"));
    client.query_one(&format!("SELECT patient_id FROM {table} WHERE id = $1"), &[&id]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_merge_moves_every_record_keeping_signatures_totals_and_the_survivors_fields() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor =
        born(&app, b, "Lucia", "Reyes", "1971-04-09", json!({ "phone": "0917 555 0101", "city": "Cebu" }))
            .await;
    let duplicate =
        born(&app, b, "Lucía", "Reyes", "1971-04-09", json!({ "phone": "0917 555 0101", "city": "Davao" }))
            .await;
    let svc = service(&app, b, "EYE").await;
    let kept = chart(&app, &w, survivor, svc, 8).await;
    let moved = chart(&app, &w, duplicate, svc, 11).await;
    let (before_s, before_d) = (summary(&app, b, survivor).await, summary(&app, b, duplicate).await);

    let r = merge(&app, b, survivor, duplicate).await;
    assert_status(&r, 201);
    let id = id_of(&r);
    assert_eq!(r.header("location"), Some(format!("{PATIENTS}/{survivor}/merges/{id}").as_str()));
    let data = &r.body["data"];
    assert_eq!(data["state"], "completed", "{data}");
    assert_eq!(data["survivor_id"], survivor);
    assert_eq!(data["duplicate_id"], duplicate);
    assert_eq!(data["reason"], "registered twice");
    // The survivor kept its own fields; the ones that differed are reported.
    assert_eq!(
        data["differences"],
        json!([{ "field": "first_name", "survivor": "Lucia", "duplicate": "Lucía" },
               { "field": "city", "survivor": "Cebu", "duplicate": "Davao" }]),
    );
    let s = app.get(&format!("{PATIENTS}/{survivor}"), branch).await;
    assert_eq!(
        (s.body["data"]["first_name"].as_str(), s.body["data"]["city"].as_str()),
        (Some("Lucia"), Some("Cebu"))
    );
    // What moved, by table, in each database.
    assert_eq!(data["moved"]["patient_visits"], json!([moved.visit]));
    assert_eq!(data["moved"]["complaints"], json!([moved.complaint]));
    assert_eq!(data["moved"]["refractions"], json!([id_of(&moved.refraction)]));
    assert_eq!(data["moved"]["billing_transactions"], json!([moved.charge, moved.payment]));
    assert_eq!(data["moved"]["queue_tickets"], json!([moved.ticket]));
    assert_eq!(
        data["registry_moved"],
        json!({ "surgery_schedules": [moved.surgery], "transactions": [moved.dispensing] })
    );

    for (table, id) in [
        ("patient_visits", moved.visit),
        ("complaints", moved.complaint),
        ("refractions", id_of(&moved.refraction)),
        ("billing_transactions", moved.charge),
        ("billing_transactions", moved.payment),
        ("queue_tickets", moved.ticket),
    ] {
        assert_eq!(owner(&app, branch, table, id).await, survivor, "{table} {id}");
    }
    for (table, id) in [("surgery_schedules", moved.surgery), ("transactions", moved.dispensing)] {
        assert_eq!(owner(&app, None, table, id).await, survivor, "{table} {id}");
    }
    for (table, id) in [("patient_visits", kept.visit), ("billing_transactions", kept.charge)] {
        assert_eq!(owner(&app, branch, table, id).await, survivor, "{table} {id}");
    }
    // Signatures and amounts stay as they were; the totals add up.
    let refraction = app.get(&format!("/api/v1/refractions/{}", id_of(&moved.refraction)), branch).await.body
        ["data"]
        .clone();
    for field in ["status", "signed_by", "signed_at", "right_eye", "examined_at", "examiner_id"] {
        assert_eq!(refraction[field], moved.refraction[field], "{field}");
    }
    assert_eq!(refraction["patient_id"], survivor);
    let after = summary(&app, b, survivor).await;
    for field in ["charges", "discounts", "payments", "refunds", "covered", "balance"] {
        assert_eq!(
            cents(&after[field]),
            cents(&before_s[field]) + cents(&before_d[field]),
            "{field}: {after}"
        );
    }
    assert_eq!(after["charges"], "2401.00");
    assert_eq!(after["balance"], "1400.50");
    let charge =
        app.get(&format!("{PATIENTS}/{survivor}/billing-transactions/{}", moved.charge), branch).await;
    assert_eq!(
        (charge.body["data"]["amount"].as_str(), charge.body["data"]["status"].as_str()),
        (Some("1200.50"), Some("posted"))
    );
    // The merge log lists it.
    let log = app.get(&format!("{PATIENTS}/{survivor}/merges"), branch).await;
    assert_eq!(ids(&log.body), vec![id]);
}

#[tokio::test]
async fn both_sides_are_audited_in_both_databases() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let b = w.branch;
    let survivor = w.patient;
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let svc = service(&app, b, "AUD").await;
    let moved = chart(&app, &w, duplicate, svc, 9).await;
    assert_status(&merge(&app, b, survivor, duplicate).await, 201);
    let actions =
        |rows: Vec<Value>| rows.iter().map(|r| r["action"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    let dup = app.audit_rows("/api/v1/audit-logs", Some(b), "patients", duplicate).await;
    assert_eq!(actions(dup.clone()).last().map(String::as_str), Some("merged"));
    assert_eq!(dup.last().unwrap()["after"]["merged_into_id"], survivor);
    let kept = app.audit_rows("/api/v1/audit-logs", Some(b), "patients", survivor).await;
    assert!(actions(kept).contains(&"merge".to_owned()));
    let visit = app.audit_rows("/api/v1/audit-logs", Some(b), "patient-visits", moved.visit).await;
    let last = visit.last().unwrap();
    assert_eq!(
        (last["action"].as_str(), &last["before"]["patient_id"], &last["after"]["patient_id"]),
        (Some("merge"), &json!(duplicate), &json!(survivor))
    );
    let surgery = app.audit_rows("/api/v1/system-audit-logs", None, "surgery-schedules", moved.surgery).await;
    assert_eq!(actions(surgery), ["create", "merge"]);
}

#[tokio::test]
async fn a_merged_patient_is_read_at_the_survivor_and_never_written() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor = w.patient;
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    assert_status(&merge(&app, b, survivor, duplicate).await, 201);

    for (path, to) in [
        (format!("{PATIENTS}/{duplicate}"), format!("{PATIENTS}/{survivor}")),
        (format!("{PATIENTS}/{duplicate}/billing-summary"), format!("{PATIENTS}/{survivor}/billing-summary")),
        (
            format!("{PATIENTS}/{duplicate}/billing-transactions?perPage=5"),
            format!("{PATIENTS}/{survivor}/billing-transactions?perPage=5"),
        ),
    ] {
        let r = app.get(&path, branch).await;
        assert_error(&r, 301, "merged");
        assert_eq!(r.header("location"), Some(to.as_str()), "{path}");
        assert_eq!(r.body["merged_into_id"], survivor);
    }
    let member = format!("{PATIENTS}/{duplicate}");
    assert_error(&app.put(&member, branch, json!({ "city": "Iloilo" })).await, 410, "merged");
    assert_error(&app.delete(&member, branch).await, 410, "merged");
    let charge = json!({ "kind": "charge", "unit_price": "10", "description": "x" });
    assert_error(&app.post(&format!("{member}/billing-transactions"), branch, charge).await, 410, "merged");
    let visit = json!({ "patient_id": duplicate, "visit_date": "2026-03-03" });
    let r = app.post("/api/v1/patient-visits", branch, visit).await;
    assert_error(&r, 410, "merged");
    assert_eq!(r.body["location"], format!("{PATIENTS}/{survivor}"));
    let svc = service(&app, b, "GONE").await;
    let queue = format!("/api/v1/queue/branch-services/{svc}/queue");
    let check_in = json!({ "patient_id": duplicate, "branch_service_id": svc });
    let surgery = json!({ "branch_id": b, "patient_id": duplicate, "procedure_id": w.procedure, "doctor_id": w.doctor,
                          "eye": "left", "scheduled_at": "2027-06-02T09:00:00+00:00" });
    // Refused by the checks of the handlers or by the schemas' triggers, each names the survivor.
    for r in [
        app.post(&queue, branch, json!({ "patient_id": duplicate })).await,
        app.post("/api/v1/queue/visits", branch, check_in).await,
        app.post("/api/v1/surgery-schedules", None, surgery).await,
    ] {
        assert_error(&r, 410, "merged");
        assert_eq!(r.body["location"], format!("{PATIENTS}/{survivor}"), "{}", r.text);
    }
    assert_error(&merge(&app, b, duplicate, survivor).await, 410, "merged");
    assert_error(&merge(&app, b, survivor, duplicate).await, 410, "merged");
    // Gone from lists, searches and counts; a patient that never existed is still a 404.
    let list = app.get(&format!("{PATIENTS}?perPage=100"), branch).await;
    assert_eq!(ids(&list.body), vec![survivor]);
    assert_status(&app.get(&format!("{PATIENTS}/999999"), branch).await, 404);
}

#[tokio::test]
async fn a_merge_needs_patients_merge_which_the_administrator_holds() {
    let app = TestApp::spawn().await;
    let b = app.main_branch().await;
    let survivor = born(&app, b, "Rosa", "Lim", "1990-02-03", json!({})).await;
    let duplicate = born(&app, b, "Rosa", "Lim", "1990-02-03", json!({})).await;
    let (_, doctor) = app.create_user("dr-merge", &["doctor"], &[b]).await;
    let body = json!({ "duplicate_id": duplicate, "reason": "twice" });
    let r = app.call_as(&doctor, Method::POST, &merge_path(survivor), Some(b), body.clone()).await;
    assert_error(&r, 403, "forbidden");
    let undo = app
        .call_as(
            &doctor,
            Method::POST,
            &format!("{PATIENTS}/{survivor}/unmerge"),
            Some(b),
            json!({ "merge_id": 1 }),
        )
        .await;
    assert_error(&undo, 403, "forbidden");
    assert_status(&app.get(&format!("{PATIENTS}/{duplicate}"), Some(b)).await, 200);
    let roles = app.get("/api/v1/roles?perPage=100", None).await;
    let admin = roles.body["data"].as_array().unwrap().iter().find(|r| r["name"] == "admin").unwrap().clone();
    assert!(admin["permissions"].as_array().unwrap().contains(&json!("patients.merge")), "{admin}");
    assert_status(&app.post(&merge_path(survivor), Some(b), body).await, 201);
}

#[tokio::test]
async fn a_duplicate_of_another_branch_is_never_merged() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let survivor = born(&app, main, "Elena", "Diaz", "1966-01-01", json!({})).await;
    let mut theirs = 0;
    for n in 0..3 {
        theirs = born(&app, north, "Elena", "Diaz", "1966-01-01", json!({ "city": format!("N{n}") })).await;
    }
    assert!(theirs > survivor, "the other branch's patient must not have an id of this branch");
    let r = merge(&app, main, survivor, theirs).await;
    assert_invalid(&r, &["duplicate_id"]);
    assert_status(&app.get(&format!("{PATIENTS}/{theirs}"), Some(north)).await, 200);
    let listed = app.get(DUPLICATES, Some(main)).await;
    assert_eq!(listed.body["meta"]["total"], 0, "{}", listed.text);
    let listed = app.get(DUPLICATES, Some(north)).await;
    assert_eq!(listed.body["meta"]["total"], 3, "{}", listed.text);
}

#[tokio::test]
async fn duplicates_are_listed_with_each_reason_and_a_merged_pair_leaves_the_list() {
    let app = TestApp::spawn().await;
    let b = app.main_branch().await;
    let branch = Some(b);
    let insurance = id_of(
        &app.created(
            "/api/v1/insurances",
            None,
            json!({ "code": "hmo-1", "payer_name": "Payer", "coverage_percent": "80", "valid_from": "2026-01-01" }),
        )
        .await,
    );
    let same_a = born(&app, b, "José  María", "de la Cruz", "1980-05-06", json!({})).await;
    let same_b = born(&app, b, "JOSE MARIA", "Dela Cruz", "1980-05-06", json!({})).await;
    let similar_a = born(&app, b, "Maria", "Santos", "1975-07-08", json!({})).await;
    let similar_b = born(&app, b, "Marie", "Santos", "1975-07-08", json!({})).await;
    let phone_a = born(&app, b, "Pedro", "Ramos", "1960-01-01", json!({ "phone": "+63 917 555 1234" })).await;
    let phone_b = born(&app, b, "Paulo", "Ocampo", "1999-09-09", json!({ "phone": "0917-555-1234" })).await;
    let member = |no: &str| json!({ "insurance_id": insurance, "insurance_member_no": no });
    let member_a = born(&app, b, "Carmen", "Flores", "1950-03-03", member("ab-123 45")).await;
    let member_b = born(&app, b, "Carmela", "Torres", "1951-04-04", member("AB12345")).await;
    // Not duplicates: a twin (other first name), another birth date, a deleted record.
    born(&app, b, "Marco", "Santos", "1975-07-08", json!({})).await;
    born(&app, b, "Maria", "Santos", "1976-07-08", json!({})).await;
    let deleted = born(&app, b, "Carmen", "Flores", "1950-03-03", json!({})).await;
    let carmen = born(&app, b, "Carmen", "Flores", "1950-03-03", json!({ "phone": "0917-555-1234" })).await;
    assert_status(&app.delete(&format!("{PATIENTS}/{deleted}"), branch).await, 200);

    let r = app.get(&format!("{DUPLICATES}?perPage=100"), branch).await;
    assert_status(&r, 200);
    let listed = pairs_of(&r.body);
    let expected: BTreeSet<(i64, i64, String)> = [
        (same_a, same_b, "same_name_and_birth_date"),
        (similar_a, similar_b, "similar_name_and_birth_date"),
        (phone_a, phone_b, "same_phone"),
        (member_a, member_b, "same_insurance_member_no"),
        (member_a, carmen, "same_name_and_birth_date"),
        (phone_a, carmen, "same_phone"),
        (phone_b, carmen, "same_phone"),
    ]
    .into_iter()
    .map(|(a, b, reason)| (a, b, reason.to_owned()))
    .collect();
    assert_eq!(listed, expected, "{}", r.text);
    assert_eq!(r.body["meta"]["total"], 7);
    // Paginated, newest duplicate first, filterable.
    let page = app.get(&format!("{DUPLICATES}?perPage=2&page=2"), branch).await;
    assert_eq!(
        (page.body["meta"]["last_page"].as_i64(), page.body["data"].as_array().map(Vec::len)),
        (Some(4), Some(2))
    );
    let phones = app.get(&format!("{DUPLICATES}?filters[reason]=same_phone"), branch).await;
    assert_eq!(phones.body["meta"]["total"], 3, "{}", phones.text);
    let of = app.get(&format!("{DUPLICATES}?filters[patient_id]={member_a}"), branch).await;
    assert_eq!(of.body["meta"]["total"], 2, "{}", of.text);
    assert_invalid(
        &app.get(&format!("{DUPLICATES}?filters[reason]=same_shoes"), branch).await,
        &["filters[reason]"],
    );
    assert_invalid(&app.get(&format!("{DUPLICATES}?sortField=pin"), branch).await, &["sortField"]);
    // Who saw which patients is recorded, as for every list of them.
    app.state.read_audit.flush().await;
    assert_eq!(patient_reads(&app.db.url, b, "list").await, 4, "one record per list answered");

    assert_status(&merge(&app, b, same_a, same_b).await, 201);
    let r = app.get(&format!("{DUPLICATES}?perPage=100"), branch).await;
    assert_eq!(r.body["meta"]["total"], 6, "{}", r.text);
    assert!(r.body["data"].as_array().unwrap().iter().all(|p| id_of(&p["duplicate"]) != same_b));
}

#[tokio::test]
async fn an_undo_gives_every_record_back() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor = w.patient;
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({ "city": "Baguio" })).await;
    let svc = service(&app, b, "UND").await;
    let moved = chart(&app, &w, duplicate, svc, 14).await;
    let before = summary(&app, b, survivor).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);

    let r = app.post(&format!("{PATIENTS}/{survivor}/unmerge"), branch, json!({ "merge_id": id })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["state"], "undone");
    assert_eq!(r.body["data"]["undone_by"], app.admin_id().await);
    let back = app.get(&format!("{PATIENTS}/{duplicate}"), branch).await;
    assert_status(&back, 200);
    assert_eq!(back.body["data"]["city"], "Baguio");
    for (table, id) in [
        ("patient_visits", moved.visit),
        ("complaints", moved.complaint),
        ("refractions", id_of(&moved.refraction)),
        ("billing_transactions", moved.charge),
        ("queue_tickets", moved.ticket),
    ] {
        assert_eq!(owner(&app, branch, table, id).await, duplicate, "{table} {id}");
    }
    assert_eq!(owner(&app, None, "surgery_schedules", moved.surgery).await, duplicate);
    assert_eq!(owner(&app, None, "transactions", moved.dispensing).await, duplicate);
    assert_eq!(summary(&app, b, survivor).await, before);
    // A second undo of the same merge is refused; the duplicate can be written and merged again.
    let again = app.post(&format!("{PATIENTS}/{survivor}/unmerge"), branch, json!({ "merge_id": id })).await;
    assert_error(&again, 409, "invalid_transition");
    assert_status(
        &app.put(&format!("{PATIENTS}/{duplicate}"), branch, json!({ "city": "Iloilo" })).await,
        200,
    );
    assert_status(&merge(&app, b, survivor, duplicate).await, 201);
}

#[tokio::test]
async fn an_undo_is_refused_once_a_moved_record_was_written() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor = w.patient;
    let unmerge = format!("{PATIENTS}/{survivor}/unmerge");
    let svc = service(&app, b, "CHG").await;

    // A moved complaint changed in the branch.
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let moved = chart(&app, &w, duplicate, svc, 15).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);
    assert_status(
        &app.put(&format!("/api/v1/complaints/{}", moved.complaint), branch, json!({ "severity": "mild" }))
            .await,
        200,
    );
    let r = app.post(&unmerge, branch, json!({ "merge_id": id })).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "complaints", "id": moved.complaint }]));
    assert_eq!(owner(&app, branch, "patient_visits", moved.visit).await, survivor, "nothing was given back");
    assert_eq!(owner(&app, None, "surgery_schedules", moved.surgery).await, survivor);

    // A moved surgery schedule changed in the registry.
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let moved = chart(&app, &w, duplicate, svc, 17).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);
    let schedule = format!("/api/v1/surgery-schedules/{}", moved.surgery);
    assert_status(&app.put(&schedule, None, json!({ "notes": "fasting" })).await, 200);
    let r = app.post(&unmerge, branch, json!({ "merge_id": id })).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "surgery_schedules", "id": moved.surgery }]));

    // A record written since on a moved visit would be left behind.
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let moved = chart(&app, &w, duplicate, svc, 19).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);
    let plan = app
        .created(
            "/api/v1/patient-visit-plans",
            branch,
            json!({ "patient_visit_id": moved.visit, "plan": "Drops" }),
        )
        .await;
    let r = app.post(&unmerge, branch, json!({ "merge_id": id })).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "patient_visit_plans", "id": id_of(&plan) }]));
    assert_error(&app.get(&format!("{PATIENTS}/{duplicate}"), branch).await, 301, "merged");
}

#[tokio::test]
async fn an_undo_past_its_window_is_refused() {
    let app = TestApp::spawn_with(|s| s.merge_undo_window = std::time::Duration::ZERO).await;
    let b = app.main_branch().await;
    let survivor = born(&app, b, "Ivy", "Go", "1988-08-08", json!({})).await;
    let duplicate = born(&app, b, "Ivy", "Go", "1988-08-08", json!({})).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);
    let r = app.post(&format!("{PATIENTS}/{survivor}/unmerge"), Some(b), json!({ "merge_id": id })).await;
    assert_error(&r, 409, "undo_window_closed");
    let r = app.post(&format!("{PATIENTS}/{survivor}/unmerge"), Some(b), json!({ "merge_id": id + 1 })).await;
    assert_error(&r, 404, "not_found");
}

/// Every table of a branch or of the registry that names a patient is one a merge moves,
/// guarded against rows written for a merged patient, and indexed by patient. A new table
/// naming a patient fails here until the declarations (and a migration) cover it.
#[tokio::test]
async fn every_table_naming_a_patient_is_moved_by_a_merge() {
    let app = TestApp::spawn().await;
    let b = app.main_branch().await;
    let client = app.state.registry.get().await.unwrap();
    let schema = format!("branch_{b}");
    let catalogue = |schema: &str| {
        let schema = schema.to_owned();
        let client = &client;
        async move {
            let rows = client
                .query(
                    "SELECT c.table_name::text FROM information_schema.columns c
                       JOIN information_schema.tables t USING (table_schema, table_name)
                      WHERE c.table_schema::text = $1::text AND c.column_name::text = 'patient_id'
                        AND t.table_type::text = 'BASE TABLE'
                        AND ($1::text <> 'public' OR EXISTS (SELECT 1 FROM information_schema.columns x
                             WHERE x.table_schema = 'public' AND x.table_name = c.table_name AND x.column_name = 'branch_id'))",
                    &[&schema],
                )
                .await
                .unwrap();
            rows.iter().map(|r| r.get::<_, String>(0)).collect::<BTreeSet<String>>()
        }
    };
    let declared = |rows: Vec<tables::PatientRows>| {
        rows.iter().map(|r| r.table().to_owned()).collect::<BTreeSet<String>>()
    };
    let in_branch = declared(tables::in_branch());
    let in_registry = declared(tables::in_registry());
    let named = catalogue(&schema).await;
    assert!(named.len() >= 20, "{named:?}");
    // The billing rows name their patient through their path; every other table by patient_id.
    assert_eq!(named, in_branch, "branch tables naming a patient vs what a merge moves");
    assert_eq!(
        catalogue("public").await,
        in_registry,
        "registry tables naming a patient vs what a merge moves"
    );
    assert!(registered().iter().any(|r| r.merged_into.is_some()));
    // Every foreign key to the patients is from a moved table's patient column, or the
    // bookkeeping of merges.
    let keys = client
        .query(
            "SELECT c.conrelid::regclass::text, a.attname::text FROM pg_constraint c
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
              WHERE c.contype = 'f' AND c.confrelid = $1::text::regclass",
            &[&format!("{schema}.patients")],
        )
        .await
        .unwrap();
    for key in keys {
        let (table, column): (String, String) = (key.get(0), key.get(1));
        let table = table.rsplit('.').next().unwrap().to_owned();
        let bookkeeping = matches!(
            (table.as_str(), column.as_str()),
            ("patients", "merged_into_id") | ("patient_merges", "survivor_id" | "duplicate_id")
        );
        assert!(
            bookkeeping || (in_branch.contains(&table) && column == "patient_id"),
            "{table}.{column} names a patient"
        );
    }
    // Each is guarded by the trigger refusing merged patients, and indexed by patient.
    for (schema, tables) in [(schema.as_str(), &in_branch), ("public", &in_registry)] {
        for table in tables {
            let guarded: bool = client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = $1::text::regclass AND tgname = $2::text)",
                    &[&format!("{schema}.{table}"), &format!("{table}_patient_not_merged")],
                )
                .await
                .unwrap()
                .get(0);
            assert!(guarded, "{schema}.{table} lets rows be written for a merged patient");
        }
    }
}

/// What a writer of the race did: the route, the patient its record is (or was) for, the
/// answer's status and the record's id when created.
#[derive(Debug, Clone)]
struct Written {
    table: &'static str,
    patient: i64,
    status: u16,
    id: Option<i64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_merge_under_concurrent_writes_leaves_every_record_on_the_survivor_exactly_once() {
    use std::sync::Arc;
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let b = app.main_branch().await;
    let survivor = born(&app, b, "Nora", "Vale", "1977-07-07", json!({})).await;
    let duplicate = born(&app, b, "Nora", "Vale", "1977-07-07", json!({})).await;
    let (writers, rounds) = (12, 8);
    let (progress, mut watch) = tokio::sync::watch::channel(0usize);
    let progress = Arc::new(progress);
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let (http, base, token, progress) =
            (app.http.clone(), app.base.clone(), app.admin_token.clone(), progress.clone());
        tasks.push(tokio::spawn(async move {
            let post = |path: String, body: Value| {
                let req = http.post(format!("{base}{path}")).bearer_auth(&token).header("x-branch-id", b.to_string());
                reply(req.header("accept", "application/json").json(&body))
            };
            let mut written = Vec::new();
            for round in 0..rounds {
                let patient = if (writer + round) % 2 == 0 { survivor } else { duplicate };
                let visit = post("/api/v1/patient-visits".into(), json!({ "patient_id": patient, "visit_date": "2026-04-01" })).await;
                written.push(Written { table: "patient_visits", patient, status: visit.status, id: visit.body["data"]["id"].as_i64() });
                if let Some(id) = visit.body["data"]["id"].as_i64() {
                    let complaint = post("/api/v1/complaints".into(), json!({ "patient_visit_id": id, "complaint": "Race" })).await;
                    written.push(Written { table: "complaints", patient, status: complaint.status, id: complaint.body["data"]["id"].as_i64() });
                }
                let charge = json!({ "kind": "charge", "unit_price": "10.00", "status": "posted", "description": "Race" });
                let charge = post(format!("/api/v1/patients/{patient}/billing-transactions"), charge).await;
                written.push(Written { table: "billing_transactions", patient, status: charge.status, id: charge.body["data"]["id"].as_i64() });
                progress.send_modify(|n| *n += 1);
            }
            written
        }));
    }
    // The merge starts while the writers are in full flow.
    tokio::time::timeout(std::time::Duration::from_secs(60), watch.wait_for(|n| *n >= writers * 2))
        .await
        .unwrap()
        .unwrap();
    let merged = merge(&app, b, survivor, duplicate).await;
    assert_status(&merged, 201);
    let mut written = Vec::new();
    for task in tasks {
        written.extend(task.await.unwrap());
    }
    let refused = written.iter().filter(|w| w.status == 410).count();
    for w in &written {
        // A write for the duplicate that came after the merge is refused; nothing else is.
        let allowed: &[u16] = if w.patient == duplicate { &[201, 410] } else { &[201] };
        assert!(allowed.contains(&w.status), "{w:?}");
    }
    assert!(refused > 0 && refused < written.len(), "the merge ran amid the writes: {refused} refused");
    let client = app.state.registry.get().await.unwrap();
    for table in ["patient_visits", "complaints", "billing_transactions"] {
        let created: BTreeSet<i64> =
            written.iter().filter(|w| w.table == table).filter_map(|w| w.id).collect();
        assert_eq!(created.len(), written.iter().filter(|w| w.table == table && w.status == 201).count());
        let rows = client
            .query(&format!("SELECT id, patient_id FROM branch_{b}.{table} ORDER BY id"), &[])
            .await
            .unwrap();
        let on_survivor: BTreeSet<i64> =
            rows.iter().filter(|r| r.get::<_, i64>(1) == survivor).map(|r| r.get(0)).collect();
        assert_eq!(rows.len(), on_survivor.len(), "{table}: a row was left on the duplicate");
        assert_eq!(on_survivor, created, "{table}: every created row, once, on the survivor");
    }
    // The dashboards' figures still equal a recount (the duplicate left the live patients).
    let differences: i64 = client
        .query_one(&format!("SELECT count(*) FROM branch_{b}.dashboard_recount_differences()"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(differences, 0);
    let charges =
        written.iter().filter(|w| w.table == "billing_transactions" && w.status == 201).count() as i64;
    let totals = summary(&app, b, survivor).await;
    assert_eq!(cents(&totals["charges"]), charges * 1000, "{totals}");
    let moved = &merged.body["data"]["moved"]["patient_visits"];
    let before_merge: BTreeSet<i64> = moved.as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    let for_duplicate: BTreeSet<i64> = written
        .iter()
        .filter(|w| w.table == "patient_visits" && w.patient == duplicate)
        .filter_map(|w| w.id)
        .collect();
    assert_eq!(before_merge, for_duplicate, "the merge moved exactly the duplicate's visits");
}

#[tokio::test]
async fn a_merge_cut_between_the_two_databases_is_completed_by_its_retry() {
    let app = TestApp::spawn_with(|s| s.statement_timeout = std::time::Duration::from_millis(1500)).await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor = w.patient;
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let svc = service(&app, b, "CUT").await;
    let moved = chart(&app, &w, duplicate, svc, 7).await;
    // Another session holds the duplicate's registry lock: the merge's registry step cannot
    // run, after its branch step committed.
    let blocker = clinic_server::db::connect(&app.db.url).await.unwrap();
    blocker.execute("SELECT pg_advisory_lock(branch_patient_key($1, $2))", &[&b, &duplicate]).await.unwrap();
    let send = || {
        reply(
            app.request(Method::POST, &merge_path(survivor), branch)
                .header("idempotency-key", "merge-once")
                .json(&json!({ "duplicate_id": duplicate, "reason": "registered twice" })),
        )
    };
    let cut = send().await;
    assert_error(&cut, 503, "database_timeout");
    // The branch's part is done: the duplicate is merged, its registry rows still wait.
    assert_error(&app.get(&format!("{PATIENTS}/{duplicate}"), branch).await, 301, "merged");
    assert_eq!(owner(&app, branch, "patient_visits", moved.visit).await, survivor);
    assert_eq!(owner(&app, None, "surgery_schedules", moved.surgery).await, duplicate);
    let log = app.get(&format!("{PATIENTS}/{survivor}/merges"), branch).await;
    assert_eq!(log.body["data"][0]["state"], "registry_pending", "{}", log.text);
    let surgery = json!({ "branch_id": b, "patient_id": duplicate, "procedure_id": w.procedure, "doctor_id": w.doctor,
                          "eye": "right", "scheduled_at": "2027-07-01T09:00:00+00:00" });
    assert_error(&app.post("/api/v1/surgery-schedules", None, surgery).await, 410, "merged");

    blocker.execute("SELECT pg_advisory_unlock_all()", &[]).await.unwrap();
    let done = send().await;
    assert_status(&done, 201);
    assert_eq!(done.header("idempotent-replayed"), None);
    assert_eq!(done.body["data"]["state"], "completed");
    assert_eq!(
        done.body["data"]["registry_moved"],
        json!({ "surgery_schedules": [moved.surgery], "transactions": [moved.dispensing] })
    );
    assert_eq!(
        done.body["data"]["moved"]["patient_visits"],
        json!([moved.visit]),
        "the branch rows moved once"
    );
    assert_eq!(owner(&app, None, "surgery_schedules", moved.surgery).await, survivor);
    let actions: Vec<String> = app
        .audit_rows("/api/v1/system-audit-logs", None, "surgery-schedules", moved.surgery)
        .await
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(actions, ["create", "merge"]);
    let log = app.get(&format!("{PATIENTS}/{survivor}/merges"), branch).await;
    assert_eq!(log.body["meta"]["total"], 1);
    let again = send().await;
    assert_eq!((again.status, again.header("idempotent-replayed")), (201, Some("true")));
    assert_eq!(again.body, done.body);
}

/// The pairs listed, as (older, newer, reasons).
pub(super) async fn pairs(app: &TestApp, branch: i64) -> BTreeSet<(i64, i64, String)> {
    let r = app.get(&format!("{DUPLICATES}?perPage=100"), Some(branch)).await;
    assert_status(&r, 200);
    pairs_of(&r.body)
}

/// The pairs of a page of the list, as (older, newer, reasons).
fn pairs_of(page: &Value) -> BTreeSet<(i64, i64, String)> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            let reasons: Vec<&str> =
                pair["reasons"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
            (id_of(&pair["patient"]), id_of(&pair["duplicate"]), reasons.join(","))
        })
        .collect()
}

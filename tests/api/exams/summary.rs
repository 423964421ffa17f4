//! The visit summary: every live record of a visit, by kind.

use super::*;

const VISIT_RECORD_KEYS: [&str; 5] = [
    "complaints",
    "patient_visit_plans",
    "patient_visit_prescribed_medicines",
    "medical_certificates",
    "diagnoses",
];

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

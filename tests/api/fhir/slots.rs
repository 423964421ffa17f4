//! `Slot`: the free slots of a doctor's Schedule, as the availability search finds them,
//! searched by `schedule` and `start` and read by id; a slot taken is no longer found.

use super::*;

#[tokio::test]
async fn free_slots_are_searched_by_schedule_and_start_and_a_taken_one_is_gone() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let doctor = json!({ "first_name": "Rosa", "last_name": "Santos", "license_no": "PRC-0001" });
    let doctor = id_of(&app.created("/api/v1/doctors", None, doctor).await);
    let services = format!("/api/v1/branches/{branch}/services");
    let service = id_of(&app.created(&services, None, json!({ "name": "Consultation", "code": "C" })).await);
    let hours = json!({ "doctor_id": doctor, "weekday": 1, "start_time": "08:00", "end_time": "09:00" });
    assert_status(&app.post("/api/v1/doctor-schedules", Some(branch), hours).await, 201);
    // Next week's Monday (the branch's zone is UTC here).
    let today = crate::support::today();
    let monday = today + time::Duration::days(7 - i64::from(today.weekday().number_days_from_monday()));
    let at = |time: &str| format!("{monday}T{time}:00+00:00");
    let booking = json!({ "patient_id": clinic.patient, "doctor_id": doctor, "branch_service_id": service,
        "starts_at": at("08:15"), "duration_minutes": 15 });
    assert_status(&app.post("/api/v1/appointments", Some(branch), booking).await, 201);
    let mut answers = Vec::new();

    let path = format!("/fhir/r4/Slot?schedule=Schedule/{doctor}&start=ge{monday}&start=le{monday}");
    let found = fhir(app, branch, &path, 200).await;
    let starts: Vec<String> =
        resources(&found).iter().map(|s| s["start"].as_str().unwrap().to_owned()).collect();
    let utc = |time: &str| format!("{monday}T{time}:00Z");
    assert_eq!(starts, [utc("08:00"), utc("08:30"), utc("08:45")], "{found}");
    let latest = fhir(app, branch, &format!("{path}&_sort=-start&_count=2"), 200).await;
    let starts: Vec<String> =
        resources(&latest).iter().map(|s| s["start"].as_str().unwrap().to_owned()).collect();
    assert_eq!((latest["total"].as_i64(), starts), (Some(3), vec![utc("08:45"), utc("08:30")]));
    let counted = fhir(app, branch, &format!("{path}&_count=0"), 200).await;
    assert_eq!((counted["total"].as_i64(), counted.get("entry")), (Some(3), None));
    let first = resources(&found)[0].clone();
    assert_eq!(first["schedule"]["reference"], format!("Schedule/{doctor}"));
    assert_eq!(
        (first["status"].as_str(), first["end"].as_str()),
        (Some("free"), Some(utc("08:15").as_str()))
    );
    answers.push(found);

    let id = first["id"].as_str().unwrap().to_owned();
    let read = fhir(app, branch, &format!("/fhir/r4/Slot/{id}"), 200).await;
    assert_eq!(read["start"], utc("08:00"));
    answers.push(read);
    // Taken since: no longer a free slot.
    let booking = json!({ "patient_id": clinic.patient, "doctor_id": doctor, "branch_service_id": service,
        "starts_at": at("08:00"), "duration_minutes": 15 });
    assert_status(&app.post("/api/v1/appointments", Some(branch), booking).await, 201);
    let r = get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Slot/{id}"), Some(branch)).await;
    assert_outcome(&r, 404, "not-found", "not_found");
    let later = fhir(
        app,
        branch,
        &format!("/fhir/r4/Slot?schedule={doctor}&start=gt{monday}T08:20:00Z&start=lt{monday}T09:00:00Z"),
        200,
    )
    .await;
    assert_eq!(later["total"], 2);
    let none =
        fhir(app, branch, &format!("/fhir/r4/Slot?schedule=Schedule/999999&start=ge{monday}"), 200).await;
    assert_eq!(none["total"], 0);

    let far = monday + time::Duration::days(60);
    for query in [
        format!("start=ge{monday}&start=le{far}"),
        format!("start={monday},{far}"),
        "start=2030-01-07T08:00".into(),
    ] {
        let r = get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Slot?{query}"), Some(branch)).await;
        assert_outcome(&r, 400, "invalid", "invalid_search");
        answers.push(r.body);
    }
    validate_with_fhir_resources(&answers);
}

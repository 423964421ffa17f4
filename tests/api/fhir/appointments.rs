//! `Appointment` (read, and search by `patient`, `practitioner`, `date` and `status`),
//! `Schedule` (a doctor's hours at the branch, one per doctor) and the appointments in a
//! patient's `$everything`, validated by fhir.resources.

use super::*;

/// A doctor with Monday hours, a service and four appointments of the clinic's patient and
/// one of another patient, in 2030 (the branch's zone is UTC).
struct Booked {
    doctor: i64,
    other_doctor: i64,
    other_patient: i64,
    /// Booked Monday 09:00, arrived 09:30, cancelled 10:00, no-show 10:30; Ben's 11:00.
    ids: [i64; 5],
}

async fn book(clinic: &Clinic) -> Booked {
    let app = &clinic.app;
    let branch = Some(clinic.branch);
    let doctor = |n: &str| json!({ "first_name": "Rosa", "last_name": n, "license_no": format!("PRC-{n}") });
    let doctor_id = id_of(&app.created("/api/v1/doctors", None, doctor("Santos")).await);
    let other_doctor = id_of(&app.created("/api/v1/doctors", None, doctor("Tan")).await);
    let services = format!("/api/v1/branches/{}/services", clinic.branch);
    let service = id_of(&app.created(&services, None, json!({ "name": "Consultation", "code": "C" })).await);
    for (doctor, weekday, start, end) in [
        (doctor_id, 1, "08:00", "12:00"),
        (doctor_id, 3, "13:00", "17:00"),
        (other_doctor, 2, "08:00", "09:00"),
    ] {
        let hours = json!({ "doctor_id": doctor, "weekday": weekday, "start_time": start, "end_time": end });
        assert_status(&app.post("/api/v1/doctor-schedules", branch, hours).await, 201);
    }
    let other_patient = id_of(&app.create_patient(clinic.branch, "Ben", "Reyes").await);
    let mut ids = [0; 5];
    for (n, time) in ["09:00", "09:30", "10:00", "10:30", "11:00"].iter().enumerate() {
        let patient = if n == 4 { other_patient } else { clinic.patient };
        let body = json!({ "patient_id": patient, "doctor_id": doctor_id, "branch_service_id": service,
            "starts_at": format!("2030-01-07T{time}:00Z"), "duration_minutes": 20, "reason": "Blurred vision" });
        ids[n] = id_of(&app.created("/api/v1/appointments", branch, body).await);
    }
    let act = |id: i64, segment: &str, body: Value| {
        let path = format!("/api/v1/appointments/{id}/{segment}");
        async move { assert_status(&app.post(&path, branch, body).await, 200) }
    };
    act(ids[1], "arrive", json!({})).await;
    act(ids[2], "cancel", json!({ "reason": "Travelling" })).await;
    act(ids[3], "no-show", json!({})).await;
    Booked { doctor: doctor_id, other_doctor, other_patient, ids }
}

#[tokio::test]
async fn appointments_are_read_and_searched_by_patient_practitioner_date_and_status() {
    let clinic = Clinic::open().await;
    let b = book(&clinic).await;
    let (app, branch, p) = (&clinic.app, clinic.branch, clinic.patient);
    let mut answers = Vec::new();

    let one = fhir(app, branch, &format!("/fhir/r4/Appointment/{}", b.ids[0]), 200).await;
    assert_eq!(one["resourceType"], "Appointment");
    assert_eq!(one["status"], "booked");
    assert_eq!(one["start"], "2030-01-07T09:00:00+00:00");
    assert_eq!(one["end"], "2030-01-07T09:20:00+00:00");
    assert_eq!(one["minutesDuration"], 20);
    assert_eq!(one["serviceType"][0]["text"], "Consultation");
    assert_eq!(one["reasonCode"][0]["text"], "Blurred vision");
    assert_eq!(one["participant"][0]["actor"]["reference"], format!("Patient/{p}"));
    assert_eq!(one["participant"][1]["actor"]["reference"], format!("Practitioner/{}", b.doctor));
    assert_eq!(one["participant"][1]["actor"]["display"], "Rosa Santos");
    answers.push(one);

    let search = |query: String| async move {
        let bundle = fhir(app, branch, &format!("/fhir/r4/Appointment?_count=100&{query}"), 200).await;
        let mut found: Vec<i64> = ids(&bundle).iter().map(|id| id.parse().unwrap()).collect();
        found.sort();
        found
    };
    let [booked, arrived, cancelled, missed, bens] = b.ids;
    assert_eq!(search(format!("patient={p}")).await, [booked, arrived, cancelled, missed]);
    assert_eq!(search(format!("patient=Patient/{}", b.other_patient)).await, [bens]);
    assert_eq!(search(format!("practitioner=Practitioner/{}", b.doctor)).await, b.ids);
    assert_eq!(search(format!("practitioner={}", b.other_doctor)).await, Vec::<i64>::new());
    assert_eq!(search("status=cancelled,noshow".into()).await, [cancelled, missed]);
    assert_eq!(search("status=arrived".into()).await, [arrived]);
    assert_eq!(search("date=ge2030-01-07T10:00:00Z".into()).await, [cancelled, missed, bens]);
    assert_eq!(search("date=2030-01-07&date=lt2030-01-07T09:30Z".into()).await, [booked]);
    assert_eq!(search("date=2030-01-08".into()).await, Vec::<i64>::new());
    let statuses = fhir(app, branch, &format!("/fhir/r4/Appointment?patient={p}"), 200).await;
    let codes: Vec<String> =
        resources(&statuses).iter().map(|r| r["status"].as_str().unwrap().to_owned()).collect();
    assert_eq!(codes, ["noshow", "cancelled", "arrived", "booked"], "latest first");
    assert_eq!(with_id(&statuses, &cancelled.to_string())["cancelationReason"]["text"], "Travelling");
    answers.push(statuses);

    for (query, code) in [("status=lost", "invalid_search"), ("practitioner=Patient/1", "invalid_search")] {
        let r =
            get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Appointment?{query}"), Some(branch)).await;
        assert_outcome(&r, 400, "invalid", code);
    }
    // Deleted: 410 on its read.
    assert_status(&app.delete(&format!("/api/v1/appointments/{bens}"), Some(branch)).await, 200);
    let r = get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Appointment/{bens}"), Some(branch)).await;
    assert_outcome(&r, 410, "not-found", "deleted");
    let r = get_as(app, Some(&app.admin_token), "/fhir/r4/Appointment/999999", Some(branch)).await;
    assert_outcome(&r, 404, "not-found", "not_found");

    // The patient's $everything ends with their appointments.
    let everything = fhir(app, branch, &format!("/fhir/r4/Patient/{p}/$everything?_count=100"), 200).await;
    let appointments: Vec<String> = resources(&everything)
        .iter()
        .filter(|r| r["resourceType"] == "Appointment")
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(appointments, [missed, cancelled, arrived, booked].map(|id| id.to_string()));
    assert_eq!(resources(&everything).last().unwrap()["resourceType"], "Appointment");
    answers.push(everything);
    validate_with_fhir_resources(&answers);
}

#[tokio::test]
async fn a_doctors_schedule_holds_their_hours_at_the_branch() {
    let clinic = Clinic::open().await;
    let b = book(&clinic).await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let mut answers = Vec::new();

    let schedule = fhir(app, branch, &format!("/fhir/r4/Schedule/{}", b.doctor), 200).await;
    assert_eq!(schedule["resourceType"], "Schedule");
    assert_eq!(schedule["active"], true);
    assert_eq!(schedule["actor"][0]["reference"], format!("Practitioner/{}", b.doctor));
    assert_eq!(schedule["actor"][0]["display"], "Rosa Santos");
    assert_eq!(schedule["comment"], "Weekly hours: Mon 08:00-12:00 (15 min); Wed 13:00-17:00 (15 min)");
    let today = crate::support::today();
    assert_eq!(schedule["planningHorizon"]["start"], today.to_string());
    assert_eq!(schedule["planningHorizon"]["end"], (today + time::Duration::days(180)).to_string());
    answers.push(schedule);

    let all = fhir(app, branch, "/fhir/r4/Schedule", 200).await;
    let mut found = ids(&all);
    found.sort();
    let mut expected = vec![b.doctor.to_string(), b.other_doctor.to_string()];
    expected.sort();
    assert_eq!(found, expected);
    answers.push(all);
    let theirs =
        fhir(app, branch, &format!("/fhir/r4/Schedule?actor=Practitioner/{}", b.other_doctor), 200).await;
    assert_eq!(ids(&theirs), [b.other_doctor.to_string()]);
    let r = get_as(app, Some(&app.admin_token), "/fhir/r4/Schedule?patient=1", Some(branch)).await;
    assert_outcome(&r, 400, "invalid", "invalid_search");

    // A doctor whose hours were all deleted had a Schedule (410); one who never kept hours, none.
    let hours =
        app.get(&format!("/api/v1/doctor-schedules?doctor_id={}", b.other_doctor), Some(branch)).await;
    for id in crate::support::ids(&hours.body) {
        assert_status(&app.delete(&format!("/api/v1/doctor-schedules/{id}"), Some(branch)).await, 200);
    }
    let r =
        get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Schedule/{}", b.other_doctor), Some(branch))
            .await;
    assert_outcome(&r, 410, "not-found", "deleted");
    let r = get_as(app, Some(&app.admin_token), "/fhir/r4/Schedule/999999", Some(branch)).await;
    assert_outcome(&r, 404, "not-found", "not_found");
    // Another branch keeps none of these hours.
    let east = app.create_branch("EAST").await;
    let none = fhir(app, east, "/fhir/r4/Schedule", 200).await;
    assert_eq!(none["total"], 0);
    validate_with_fhir_resources(&answers);
}

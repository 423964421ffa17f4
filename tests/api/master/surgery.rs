//! Surgery schedules: booking, access by branch, the status lifecycle and conflicts,
//! concurrent bookings included.

use super::*;
use crate::support::conflict_ids;

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
        assert_status(&r, 422);
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
    assert_eq!(conflict_ids(&r, "schedule_conflict"), vec![first]);
    // The same theatre of the branch, spelled otherwise, another doctor.
    let r = app
        .post(
            SCHEDULES,
            None,
            b.body(json!({ "doctor_id": other_doctor, "scheduled_at": at(-30), "theatre": " or 1 " })),
        )
        .await;
    assert_eq!(conflict_ids(&r, "schedule_conflict"), vec![first]);
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
    assert_eq!(conflict_ids(&r, "schedule_conflict"), vec![first]);
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
    assert_eq!(conflict_ids(&r, "schedule_conflict"), vec![id_of(&taken)]);
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

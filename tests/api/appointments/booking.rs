//! Booking: the end and the length, references, lists, the doctor's hours (in the branch's
//! zone, with exceptions), taken slots and overbooking.

use super::*;

#[tokio::test]
async fn an_appointment_is_booked_within_hours_its_end_following_its_length() {
    let desk = Desk::with_monday_hours().await;
    let r = desk.book(&at(MONDAY, "09:00"), json!({})).await;
    assert_status(&r, 201);
    let a = &r.body["data"];
    assert_eq!(a["status"], "booked");
    assert_eq!(a["overbooked"], false);
    assert_eq!(a["duration_minutes"], 15);
    assert_eq!(a["ends_at"], "2030-01-07T09:15:00+00:00", "{}", r.text);

    // The end sent instead of the length.
    let r = desk
        .book(&at(MONDAY, "10:00"), json!({ "duration_minutes": null, "ends_at": at(MONDAY, "10:40") }))
        .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["duration_minutes"], 40, "{}", r.text);
    let r = desk.book(&at(MONDAY, "11:00"), json!({ "duration_minutes": null })).await;
    assert_invalid(&r, &["duration_minutes"]);
    let r = desk
        .book(&at(MONDAY, "11:00"), json!({ "duration_minutes": null, "ends_at": at(MONDAY, "10:00") }))
        .await;
    assert_invalid(&r, &["ends_at"]);

    // References: a live patient of the branch, a doctor, a service of this branch.
    let r = desk.book(&at(MONDAY, "11:00"), json!({ "patient_id": 999_999, "doctor_id": 999_999 })).await;
    assert_invalid(&r, &["patient_id", "doctor_id"]);
    let r = desk.book(&at(MONDAY, "11:00"), json!({ "starts_at": "soon" })).await;
    assert_invalid(&r, &["starts_at"]);
    let east = desk.app().create_branch("EAST").await;
    let services = format!("/api/v1/branches/{east}/services");
    let theirs = id_of(&desk.app().created(&services, None, json!({ "name": "Triage", "code": "T" })).await);
    let r = desk.book(&at(MONDAY, "11:00"), json!({ "branch_service_id": theirs })).await;
    assert_invalid(&r, &["branch_service_id"]);
}

#[tokio::test]
async fn appointments_are_listed_by_doctor_patient_status_and_dates() {
    let desk = Desk::open().await;
    for weekday in 1..=2 {
        assert_status(&desk.hours(weekday, "08:00", "12:00", json!({})).await, 201);
    }
    let other = id_of(&desk.app().create_patient(desk.clinic.branch, "Ben", "Reyes").await);
    let first = id_of(&desk.book(&at(MONDAY, "08:00"), json!({})).await);
    let second = id_of(&desk.book(&at(MONDAY, "08:30"), json!({ "patient_id": other })).await);
    let third = id_of(&desk.book(&at(TUESDAY, "08:00"), json!({})).await);
    assert_status(&desk.act(second, "no-show", json!({})).await, 200);

    let desk = &desk;
    let list = |query: String| async move {
        let r = desk.app().get(&format!("{APPOINTMENTS}?{query}"), desk.branch()).await;
        assert_status(&r, 200);
        crate::support::ids(&r.body)
    };
    assert_eq!(list(String::new()).await, vec![first, second, third], "by start");
    assert_eq!(list(format!("patient_id={other}")).await, vec![second]);
    assert_eq!(list("status=booked".into()).await, vec![first, third]);
    assert_eq!(list(format!("doctor_id={}&start_date={TUESDAY}", desk.doctor)).await, vec![third]);
    assert_eq!(list(format!("end_date={MONDAY}&perPage=1")).await, vec![first], "paged");
    let r = desk.app().get(&format!("{APPOINTMENTS}?status=lost"), desk.branch()).await;
    assert_invalid(&r, &["filters[status]"]);
}

#[tokio::test]
async fn outside_the_doctors_hours_is_refused_on_the_start() {
    let desk = Desk::with_monday_hours().await;
    let outside = |r: &Reply| {
        assert_invalid(r, &["starts_at"]);
        assert_eq!(r.body["code"], "outside_hours", "{}", r.text);
    };
    outside(&desk.book(&at(MONDAY, "07:45"), json!({})).await);
    outside(&desk.book(&at(MONDAY, "11:50"), json!({})).await);
    outside(&desk.book(&at(TUESDAY, "09:00"), json!({})).await);
    assert_status(&desk.book(&at(MONDAY, "11:45"), json!({})).await, 201);

    // Hours valid from a date hold from that date only.
    let later = json!({ "effective_from": "2030-01-14" });
    assert_status(&desk.hours(2, "08:00", "12:00", later).await, 201);
    outside(&desk.book(&at(TUESDAY, "09:00"), json!({})).await);
    assert_status(&desk.book(&at("2030-01-15", "09:00"), json!({})).await, 201);

    // A closed day of the branch, closed hours of the doctor, open hours on a Sunday.
    let app = desk.app();
    let closed = json!({ "starts_on": "2030-01-21", "ends_on": "2030-01-21", "reason": "Holiday" });
    assert_status(&app.post(EXCEPTIONS, desk.branch(), closed).await, 201);
    outside(&desk.book(&at("2030-01-21", "09:00"), json!({})).await);
    let meeting = json!({ "doctor_id": desk.doctor, "starts_on": "2030-01-28", "ends_on": "2030-01-28",
                          "start_time": "09:00", "end_time": "10:00", "reason": "Meeting" });
    assert_status(&app.post(EXCEPTIONS, desk.branch(), meeting).await, 201);
    outside(&desk.book(&at("2030-01-28", "08:50"), json!({})).await);
    assert_status(&desk.book(&at("2030-01-28", "10:00"), json!({})).await, 201);
    let sunday = json!({ "doctor_id": desk.doctor, "starts_on": "2030-01-13", "ends_on": "2030-01-13",
                         "closed": false, "start_time": "10:00", "end_time": "12:00" });
    assert_status(&app.post(EXCEPTIONS, desk.branch(), sunday).await, 201);
    assert_status(&desk.book(&at("2030-01-13", "10:30"), json!({})).await, 201);

    // A reschedule out of hours is refused the same way.
    let booked = desk.book(&at(MONDAY, "10:00"), json!({})).await;
    let r = desk.reschedule(id_of(&booked), 1, json!({ "starts_at": at(MONDAY, "13:00") })).await;
    outside(&r);
    // A change of notes alone is not held to hours changed since; a move is.
    let schedules = app.get(SCHEDULES, desk.branch()).await;
    for id in crate::support::ids(&schedules.body) {
        assert_status(&app.delete(&format!("{SCHEDULES}/{id}"), desk.branch()).await, 200);
    }
    let r = desk.reschedule(id_of(&booked), 1, json!({ "notes": "Bring the old glasses" })).await;
    assert_status(&r, 200);
    outside(&desk.reschedule(id_of(&booked), 2, json!({ "duration_minutes": 20 })).await);
}

#[tokio::test]
async fn hours_are_read_in_the_branchs_time_zone() {
    let desk = Desk::with_monday_hours().await;
    let branch = format!("/api/v1/branches/{}", desk.clinic.branch);
    let r = desk.app().put(&branch, None, json!({ "timezone": "Asia/Manila" })).await;
    assert_status(&r, 200);
    // 09:00 in Manila is 01:00 UTC; 09:00 UTC is 17:00 there.
    let r = desk.book(&at(MONDAY, "09:00"), json!({})).await;
    assert_invalid(&r, &["starts_at"]);
    assert_eq!(r.body["code"], "outside_hours");
    let r = desk.book("2030-01-07T09:00:00+08:00", json!({})).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["starts_at"], "2030-01-07T01:00:00+00:00", "{}", r.text);
}

#[tokio::test]
async fn a_taken_slot_is_409_unless_overbooked_by_one_allowed_to() {
    let desk = Desk::with_monday_hours().await;
    let app = desk.app();
    let taken = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    assert_eq!(slot_taken(&desk.book(&at(MONDAY, "09:10"), json!({})).await), vec![taken]);
    assert_eq!(slot_taken(&desk.book(&at(MONDAY, "08:50"), json!({})).await), vec![taken]);
    assert_status(&desk.book(&at(MONDAY, "09:15"), json!({})).await, 201);

    let (_, nurse) = app.create_user("nurse1", &["nurse"], &[desk.clinic.branch]).await;
    let (_, desk_clerk) = app.create_user("front1", &["receptionist"], &[desk.clinic.branch]).await;
    let over = json!({ "overbook": true, "overbook_reason": "Urgent pressure check" });
    let r = desk.book_as(&nurse, &at(MONDAY, "09:00"), over.clone()).await;
    assert_error(&r, 403, "forbidden");
    let r = desk.book_as(&nurse, &at(MONDAY, "09:30"), json!({})).await;
    assert_status(&r, 201);
    let r = desk.book(&at(MONDAY, "09:00"), json!({ "overbook": true })).await;
    assert_invalid(&r, &["overbook_reason"]);

    let r = desk.book_as(&desk_clerk, &at(MONDAY, "09:00"), over.clone()).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["overbooked"], true);
    assert_eq!(r.body["data"]["overbook_reason"], "Urgent pressure check");
    // Overbooked outside the hours too.
    let r = desk.book(&at(MONDAY, "18:00"), over).await;
    assert_status(&r, 201);
    assert_eq!(desk.overlapping_pairs().await, 0, "overbooked ones aside");
}

//! A doctor's weekly hours and the days that differ from them.

use super::*;

#[tokio::test]
async fn a_doctors_weekly_hours_are_kept_and_never_overlap() {
    let desk = Desk::open().await;
    let r = desk.hours(1, "08:00", "12:00", json!({})).await;
    assert_status(&r, 201);
    let monday = &r.body["data"];
    assert_eq!(monday["weekday"], 1);
    assert_eq!(monday["start_time"], "08:00");
    assert_eq!(monday["end_time"], "12:00");
    assert_eq!(monday["slot_minutes"], 15, "the default slot");

    assert_invalid(&desk.hours(1, "12:00", "09:00", json!({})).await, &["end_time"]);
    assert_invalid(&desk.hours(8, "08:00", "09:00", json!({})).await, &["weekday"]);
    assert_invalid(&desk.hours(2, "25:00", "26:00", json!({})).await, &["start_time", "end_time"]);
    let backwards = json!({ "effective_from": "2030-02-01", "effective_to": "2030-01-01" });
    assert_invalid(&desk.hours(2, "08:00", "09:00", backwards).await, &["effective_to"]);

    // Overlapping hours of the same weekday: held by the database, a 422 on the start.
    assert_invalid(&desk.hours(1, "11:00", "13:00", json!({})).await, &["start_time"]);
    assert_invalid(&desk.hours(1, "07:00", "20:00", json!({})).await, &["start_time"]);
    // Touching hours, another weekday, or another validity do not overlap.
    assert_status(&desk.hours(1, "12:00", "14:00", json!({})).await, 201);
    assert_status(&desk.hours(2, "08:00", "12:00", json!({})).await, 201);
    let spring = json!({ "effective_from": "2030-03-01", "effective_to": "2030-05-31" });
    assert_status(&desk.hours(3, "08:00", "12:00", spring).await, 201);
    let summer = json!({ "effective_from": "2030-06-01" });
    assert_status(&desk.hours(3, "09:00", "13:00", summer.clone()).await, 201);
    assert_invalid(&desk.hours(3, "12:30", "15:00", summer).await, &["start_time"]);

    // A change into another's hours is refused the same way; a deleted schedule frees them.
    let tuesday =
        desk.app().get(&format!("{SCHEDULES}?doctor_id={}&weekday=2", desk.doctor), desk.branch()).await;
    assert_status(&tuesday, 200);
    assert_eq!(tuesday.body["data"].as_array().unwrap().len(), 1, "{}", tuesday.text);
    let tuesday = id_of(&tuesday.body["data"][0]);
    let r = desk.app().put(&format!("{SCHEDULES}/{tuesday}"), desk.branch(), json!({ "weekday": 1 })).await;
    assert_invalid(&r, &["start_time"]);
    let first = id_of(monday);
    assert_status(&desk.app().delete(&format!("{SCHEDULES}/{first}"), desk.branch()).await, 200);
    let r = desk.app().put(&format!("{SCHEDULES}/{tuesday}"), desk.branch(), json!({ "weekday": 1 })).await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn schedule_exceptions_close_days_or_open_hours() {
    let desk = Desk::open().await;
    let app = desk.app();
    let holiday = json!({ "starts_on": "2030-01-01", "ends_on": "2030-01-01", "reason": "New Year" });
    let r = app.post(EXCEPTIONS, desk.branch(), holiday).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["closed"], true, "closed by default");
    assert_eq!(r.body["data"]["doctor_id"], Value::Null, "the whole branch");

    let leave = json!({ "doctor_id": desk.doctor, "starts_on": "2030-02-10", "ends_on": "2030-02-01" });
    assert_invalid(&app.post(EXCEPTIONS, desk.branch(), leave).await, &["ends_on"]);
    let open = json!({ "doctor_id": desk.doctor, "starts_on": "2030-02-10", "ends_on": "2030-02-10", "closed": false });
    assert_invalid(&app.post(EXCEPTIONS, desk.branch(), open.clone()).await, &["start_time"]);
    let half = merged(open.clone(), json!({ "start_time": "09:00" }));
    assert_invalid(&app.post(EXCEPTIONS, desk.branch(), half).await, &["end_time"]);
    let evening =
        merged(open, json!({ "start_time": "17:00", "end_time": "20:00", "reason": "Clinic night" }));
    assert_status(&app.post(EXCEPTIONS, desk.branch(), evening).await, 201);
    let unknown = json!({ "doctor_id": 999_999, "starts_on": "2030-02-10", "ends_on": "2030-02-10" });
    assert_invalid(&app.post(EXCEPTIONS, desk.branch(), unknown).await, &["doctor_id"]);

    let listed = app.get(&format!("{EXCEPTIONS}?doctor_id={}", desk.doctor), desk.branch()).await;
    assert_status(&listed, 200);
    assert_eq!(listed.body["data"].as_array().unwrap().len(), 1, "{}", listed.text);
}

#[tokio::test]
async fn hours_need_the_appointments_permissions() {
    let desk = Desk::open().await;
    let app = desk.app();
    let branch = desk.clinic.branch;
    let (_, pharmacist) = app.create_user("pharma", &["pharmacist"], &[branch]).await;
    let (_, cashier) = app.create_user("cash", &["cashier"], &[branch]).await;
    let r = reply(app.request_as(&pharmacist, Method::GET, SCHEDULES, desk.branch())).await;
    assert_error(&r, 403, "forbidden");
    let r = reply(app.request_as(&cashier, Method::GET, SCHEDULES, desk.branch())).await;
    assert_status(&r, 200);
    let body = json!({ "doctor_id": desk.doctor, "weekday": 1, "start_time": "08:00", "end_time": "12:00" });
    let r = reply(app.request_as(&cashier, Method::POST, SCHEDULES, desk.branch()).json(&body)).await;
    assert_error(&r, 403, "forbidden");
}

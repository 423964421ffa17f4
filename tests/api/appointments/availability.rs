//! The free slots: the doctor's hours less the days that differ, the appointments booked and
//! the surgeries, in the branch's zone across a daylight-saving change; and the lists of
//! appointments bounded by local days or instants.

use super::*;

const AVAILABILITY: &str = "/api/v1/appointments/availability";

impl Desk {
    /// The free slots answered for `query`.
    async fn free(&self, query: &str) -> Vec<Value> {
        let r = self.app().get(&format!("{AVAILABILITY}?{query}"), self.branch()).await;
        assert_status(&r, 200);
        r.body["data"].as_array().unwrap().clone()
    }

    /// The starts of the doctor's free slots on `day`.
    async fn free_starts(&self, day: &str) -> Vec<String> {
        let slots = self.free(&format!("doctor_id={}&from={day}&to={day}", self.doctor)).await;
        slots.iter().map(|s| s["starts_at"].as_str().unwrap().to_owned()).collect()
    }

    async fn set_zone(&self, zone: &str) {
        let branch = format!("/api/v1/branches/{}", self.clinic.branch);
        assert_status(&self.app().put(&branch, None, json!({ "timezone": zone })).await, 200);
    }
}

/// `day` from `first` on, every `minutes`, `count` times (UTC, as the test branch's zone).
fn every(day: &str, first: &str, minutes: i64, count: i64) -> Vec<String> {
    let (h, m) = first.split_once(':').unwrap();
    let start: i64 = h.parse::<i64>().unwrap() * 60 + m.parse::<i64>().unwrap();
    (0..count)
        .map(|i| {
            let t = start + i * minutes;
            at(day, &format!("{:02}:{:02}", t / 60, t % 60))
        })
        .collect()
}

#[tokio::test]
async fn free_slots_are_the_hours_less_bookings_and_closed_hours() {
    let desk = Desk::with_monday_hours().await;
    let all = every(MONDAY, "08:00", 15, 16);
    assert_eq!(desk.free_starts(MONDAY).await, all, "08:00 to 12:00 in slots of 15 minutes");
    let slots = desk.free(&format!("doctor_id={}&from={MONDAY}&to={MONDAY}", desk.doctor)).await;
    assert_eq!(
        slots[0],
        json!({ "starts_at": at(MONDAY, "08:00"), "ends_at": at(MONDAY, "08:15"), "doctor_id": desk.doctor })
    );

    // A booking of 30 minutes takes two slots; a cancelled one frees them again.
    let booked = desk.book(&at(MONDAY, "09:00"), json!({ "duration_minutes": 30 })).await;
    assert_status(&booked, 201);
    let free = desk.free_starts(MONDAY).await;
    assert!(!free.contains(&at(MONDAY, "09:00")) && !free.contains(&at(MONDAY, "09:15")), "{free:?}");
    assert_eq!(free.len(), 14);
    // A slot answered is one that can be booked.
    assert_status(&desk.book(&free[0], json!({})).await, 201);
    let cancel = desk.act(id_of(&booked), "cancel", json!({ "reason": "Travelling" })).await;
    assert_status(&cancel, 200);
    assert_eq!(desk.free_starts(MONDAY).await, all[1..].to_vec());

    // Closed hours of the doctor, then the whole branch closed.
    let app = desk.app();
    let meeting = json!({ "doctor_id": desk.doctor, "starts_on": MONDAY, "ends_on": MONDAY,
                          "start_time": "10:00", "end_time": "11:00" });
    assert_status(&app.post(EXCEPTIONS, desk.branch(), meeting).await, 201);
    let free = desk.free_starts(MONDAY).await;
    assert_eq!(free, [&all[1..8], &all[12..]].concat());
    let holiday = json!({ "starts_on": MONDAY, "ends_on": MONDAY, "reason": "Holiday" });
    assert_status(&app.post(EXCEPTIONS, desk.branch(), holiday).await, 201);
    assert_eq!(desk.free_starts(MONDAY).await, Vec::<String>::new());
}

#[tokio::test]
async fn changed_hours_replace_the_day_and_a_shorter_branch_day_cuts_it() {
    let desk = Desk::with_monday_hours().await;
    let app = desk.app();
    let next = "2030-01-14";
    // The doctor's own changed hours replace their weekly ones that day.
    let evening = json!({ "doctor_id": desk.doctor, "starts_on": MONDAY, "ends_on": MONDAY, "closed": false,
                          "start_time": "16:00", "end_time": "17:00" });
    assert_status(&app.post(EXCEPTIONS, desk.branch(), evening).await, 201);
    assert_eq!(desk.free_starts(MONDAY).await, every(MONDAY, "16:00", 15, 4));
    outside(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    assert_status(&desk.book(&at(MONDAY, "16:00"), json!({})).await, 201);
    // The branch open only until 10:00 another Monday: the doctor's hours end there too.
    let short = json!({ "starts_on": next, "ends_on": next, "closed": false, "start_time": "07:00", "end_time": "10:00" });
    assert_status(&app.post(EXCEPTIONS, desk.branch(), short).await, 201);
    assert_eq!(desk.free_starts(next).await, every(next, "08:00", 15, 8));
    outside(&desk.book(&at(next, "10:00"), json!({})).await);
}

fn outside(r: &Reply) {
    assert_invalid(r, &["starts_at"]);
    assert_eq!(r.body["code"], "outside_hours", "{}", r.text);
}

#[tokio::test]
async fn a_surgery_takes_the_doctors_time_at_every_branch() {
    let desk = Desk::with_monday_hours().await;
    let app = desk.app();
    let procedure = json!({ "code": "phaco", "name": "Phacoemulsification", "category": "major_surgery" });
    let procedure = id_of(&app.created("/api/v1/procedures", None, procedure).await);
    let surgery = json!({ "branch_id": desk.clinic.branch, "patient_id": desk.clinic.patient,
                          "procedure_id": procedure, "doctor_id": desk.doctor, "eye": "right",
                          "scheduled_at": at(MONDAY, "10:00"), "duration_minutes": 30 });
    let surgery = id_of(&app.created("/api/v1/surgery-schedules", None, surgery).await);
    let free = desk.free_starts(MONDAY).await;
    assert_eq!(free, [&every(MONDAY, "08:00", 15, 8)[..], &every(MONDAY, "10:30", 15, 6)[..]].concat());
    let r = desk.book(&at(MONDAY, "10:15"), json!({})).await;
    assert_error(&r, 409, "slot_taken");
    assert_eq!(r.body["surgeries"], json!([surgery]), "{}", r.text);
    let over = json!({ "overbook": true, "overbook_reason": "Seen between cases" });
    assert_status(&desk.book(&at(MONDAY, "10:15"), over).await, 201);
}

#[tokio::test]
async fn every_doctor_keeping_hours_is_searched_without_one_named() {
    let desk = Desk::with_monday_hours().await;
    let app = desk.app();
    let other = json!({ "first_name": "Ana", "last_name": "Cruz", "license_no": "PRC-0002" });
    let other = id_of(&app.created("/api/v1/doctors", None, other).await);
    let hours = json!({ "doctor_id": other, "weekday": 1, "start_time": "11:30", "end_time": "12:30", "slot_minutes": 30 });
    assert_status(&app.post(SCHEDULES, desk.branch(), hours).await, 201);
    let slots = desk.free(&format!("from={MONDAY}T11:00:00Z&to={MONDAY}T13:00:00Z")).await;
    let seen: Vec<(String, i64)> = slots
        .iter()
        .map(|s| (s["starts_at"].as_str().unwrap().to_owned(), s["doctor_id"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            (at(MONDAY, "11:00"), desk.doctor),
            (at(MONDAY, "11:15"), desk.doctor),
            (at(MONDAY, "11:30"), desk.doctor),
            (at(MONDAY, "11:30"), other),
            (at(MONDAY, "11:45"), desk.doctor),
            (at(MONDAY, "12:00"), other),
        ]
    );
    assert_eq!(slots[3]["ends_at"], at(MONDAY, "12:00"), "the other doctor's slots are 30 minutes");
    // A service whose staff is the other doctor's user names only them.
    let (user, _) = app.create_user("ana", &["doctor"], &[desk.clinic.branch]).await;
    let r = app.put(&format!("/api/v1/doctors/{other}"), None, json!({ "user_id": user })).await;
    assert_status(&r, 200);
    let staff = format!("/api/v1/branches/{}/services/{}/staff", desk.clinic.branch, desk.service);
    assert_status(&app.post(&staff, None, json!({ "user_id": user })).await, 200);
    let slots = desk.free(&format!("branch_service_id={}&from={MONDAY}&to={MONDAY}", desk.service)).await;
    assert_eq!(slots.len(), 2, "{slots:?}");
    assert!(slots.iter().all(|s| s["doctor_id"] == other));
    let r = desk
        .app()
        .get(
            &format!("{AVAILABILITY}?doctor_id={}&branch_service_id={}", desk.doctor, desk.service),
            desk.branch(),
        )
        .await;
    assert_invalid(&r, &["doctor_id"]);
}

#[tokio::test]
async fn a_search_is_checked_and_covers_at_most_31_days() {
    let desk = &Desk::with_monday_hours().await;
    let get = |query: String| async move {
        desk.app().get(&format!("{AVAILABILITY}?{query}"), desk.branch()).await
    };
    let d = desk.doctor;
    assert_status(&get(format!("doctor_id={d}&from=2030-01-01&to=2030-01-31")).await, 200);
    assert_invalid(&get(format!("doctor_id={d}&from=2030-01-01&to=2030-02-01")).await, &["to"]);
    assert_invalid(
        &get(format!("doctor_id={d}&from=2030-01-01T00:00:00Z&to=2030-02-01T00:00:01Z")).await,
        &["to"],
    );
    assert_invalid(&get(format!("doctor_id={d}&from=2030-01-08&to=2030-01-07")).await, &["to"]);
    assert_invalid(&get(format!("doctor_id={d}&from=monday")).await, &["from"]);
    assert_invalid(&get(format!("doctor_id={d}&days=3")).await, &["days"]);
    assert_invalid(&get("doctor_id=999999".into()).await, &["doctor_id"]);
    assert_invalid(&get(format!("doctor_id={d}&branch_service_id=999999")).await, &["branch_service_id"]);
    // Slots already begun are not free: the search starts now at the earliest.
    let past = desk.free(&format!("doctor_id={d}&from=2020-01-06&to=2020-01-06")).await;
    assert_eq!(past, Vec::<Value>::new());
}

#[tokio::test]
async fn a_day_of_a_daylight_saving_change_has_the_hours_it_really_has() {
    let desk = Desk::open().await;
    desk.set_zone("Europe/Berlin").await;
    let sunday = json!({ "slot_minutes": 30 });
    assert_status(&desk.hours(7, "01:00", "04:00", sunday).await, 201);
    // 2030-03-31: 02:00 becomes 03:00, so 01:00 to 04:00 is two hours (00:00 to 02:00 UTC).
    let spring = desk.free_starts("2030-03-31").await;
    assert_eq!(spring, every("2030-03-31", "00:00", 30, 4));
    // 2030-10-27: 03:00 becomes 02:00 again, so the same hours are four (23:00 to 03:00 UTC).
    let autumn = desk.free_starts("2030-10-27").await;
    let mut expected = every("2030-10-26", "23:00", 30, 2);
    expected.extend(every("2030-10-27", "00:00", 30, 6));
    assert_eq!(autumn, expected);
    // Booked by the wall clock's offset, the second 02:30 of that night is its own slot.
    let r = desk.book("2030-10-27T02:30:00+01:00", json!({ "duration_minutes": 30 })).await;
    assert_status(&r, 201);
    let r = desk.book("2030-10-27T02:30:00+02:00", json!({ "duration_minutes": 30 })).await;
    assert_status(&r, 201);
    assert_eq!(desk.free_starts("2030-10-27").await.len(), 6);
}

#[tokio::test]
async fn appointments_are_listed_by_local_days_or_instants() {
    let desk = &Desk::open().await;
    desk.set_zone("Asia/Manila").await;
    for weekday in [1, 2] {
        assert_status(&desk.hours(weekday, "06:00", "12:00", json!({})).await, 201);
    }
    // 09:00 Monday in Manila is 01:00 UTC; 07:00 Tuesday there is still Monday in UTC.
    let monday = id_of(&desk.book("2030-01-07T09:00:00+08:00", json!({})).await);
    let tuesday = id_of(&desk.book("2030-01-08T07:00:00+08:00", json!({})).await);
    let list = |query: &str| {
        let path = format!("{APPOINTMENTS}?doctor_id={}&{query}", desk.doctor);
        async move {
            let r = desk.app().get(&path, desk.branch()).await;
            assert_status(&r, 200);
            crate::support::ids(&r.body)
        }
    };
    assert_eq!(list(&format!("start_date={MONDAY}&end_date={MONDAY}")).await, vec![monday]);
    assert_eq!(list(&format!("from={MONDAY}&to={MONDAY}")).await, vec![monday]);
    assert_eq!(list(&format!("from={TUESDAY}")).await, vec![tuesday]);
    assert_eq!(list("from=2030-01-07T01:00:00Z&to=2030-01-07T23:00:00Z").await, vec![monday], "to excluded");
    assert_eq!(list("from=2030-01-07T01:00:01Z").await, vec![tuesday]);
    let r = desk.app().get(&format!("{APPOINTMENTS}?from=soon"), desk.branch()).await;
    assert_invalid(&r, &["from"]);
    let r = desk.app().get(&format!("{APPOINTMENTS}?from={TUESDAY}&to={MONDAY}"), desk.branch()).await;
    assert_invalid(&r, &["to"]);
    // A list of days alone takes no instants.
    let r = desk.app().get(&format!("{SCHEDULES}?from={MONDAY}"), desk.branch()).await;
    assert_invalid(&r, &["from"]);
}

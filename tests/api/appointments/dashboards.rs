//! Appointments on the dashboards: `/dashboard/appointments` counts each local day of a
//! range by status, in all and per doctor, and the flow board lists the day's appointments
//! still to be seen. The branch is eight hours east of UTC, so that local and UTC dates differ.

use super::*;

/// `GET /dashboard/<path>` in the desk's branch; its data.
async fn dashboard(desk: &Desk, path: &str) -> Value {
    let r = desk.app().get(&format!("/api/v1/dashboard/{path}"), desk.branch()).await;
    assert_status(&r, 200);
    assert!(r.body["message"].is_string());
    r.body["data"].clone()
}

/// Counts of every status and their total, the ones not named zero.
fn counts(named: &[(&str, i64)]) -> Value {
    let mut all =
        json!({ "booked": 0, "arrived": 0, "in_progress": 0, "completed": 0, "cancelled": 0, "no_show": 0 });
    for (status, n) in named {
        all[*status] = json!(n);
    }
    all["total"] = json!(named.iter().map(|(_, n)| n).sum::<i64>());
    all
}

/// A desk in Singapore (UTC+8) whose doctor Rosa Santos and a second doctor, Ben Lim, keep
/// 06:00 to 12:00 local on Mondays and Tuesdays; the second doctor's id.
async fn eastern_desk() -> (Desk, i64) {
    let desk = Desk::open().await;
    let app = desk.app();
    let path = format!("/api/v1/branches/{}", desk.clinic.branch);
    assert_status(&app.put(&path, None, json!({ "timezone": "Asia/Singapore" })).await, 200);
    let other = json!({ "first_name": "Ben", "last_name": "Lim", "license_no": "PRC-0003" });
    let other = id_of(&app.created("/api/v1/doctors", None, other).await);
    for doctor in [desk.doctor, other] {
        for weekday in [1, 2] {
            let hours = json!({ "doctor_id": doctor, "weekday": weekday, "start_time": "06:00", "end_time": "12:00" });
            assert_status(&app.post(SCHEDULES, desk.branch(), hours).await, 201);
        }
    }
    (desk, other)
}

/// Local `time` on `day` in Singapore, as an instant in UTC.
fn local(day: &str, time: &str) -> String {
    format!("{day}T{time}:00+08:00")
}

#[tokio::test]
async fn the_calendar_counts_appointments_by_status_and_doctor_on_local_dates() {
    let (desk, lim) = eastern_desk().await;
    let rosa = desk.doctor;
    // Monday 07:00 in Singapore is Sunday 23:00 in UTC.
    let arrived = id_of(&desk.book(&local(MONDAY, "07:00"), json!({})).await);
    let cancelled = id_of(&desk.book(&local(MONDAY, "07:30"), json!({})).await);
    desk.book(&local(MONDAY, "08:00"), json!({})).await;
    let missed = id_of(&desk.book(&local(MONDAY, "08:00"), json!({ "doctor_id": lim })).await);
    let completed = id_of(&desk.book(&local(TUESDAY, "07:00"), json!({})).await);
    let deleted = id_of(&desk.book(&local(TUESDAY, "09:00"), json!({})).await);
    assert_status(&desk.act(arrived, "arrive", json!({})).await, 200);
    assert_status(&desk.act(cancelled, "cancel", json!({ "reason": "Unwell" })).await, 200);
    assert_status(&desk.act(missed, "no-show", json!({})).await, 200);
    for step in ["arrive", "start", "complete"] {
        assert_status(&desk.act(completed, step, json!({})).await, 200);
    }
    let app = desk.app();
    assert_status(&app.delete(&format!("{APPOINTMENTS}/{deleted}"), desk.branch()).await, 200);

    let data = dashboard(&desk, "appointments?start_date=2030-01-06&end_date=2030-01-08").await;
    assert_eq!(
        (data["start_date"].as_str(), data["end_date"].as_str()),
        (Some("2030-01-06"), Some("2030-01-08"))
    );
    assert_eq!(
        data["appointments"],
        counts(&[("booked", 1), ("arrived", 1), ("completed", 1), ("cancelled", 1), ("no_show", 1)])
    );
    // Doctors by name, each with their counts over the range.
    assert_eq!(
        data["doctors"],
        json!([
            { "doctor": { "id": lim, "first_name": "Ben", "last_name": "Lim" }, "appointments": counts(&[("no_show", 1)]) },
            { "doctor": { "id": rosa, "first_name": "Rosa", "last_name": "Santos" },
              "appointments": counts(&[("booked", 1), ("arrived", 1), ("completed", 1), ("cancelled", 1)]) },
        ])
    );
    // Every day of the range, on the branch's dates: Sunday in UTC is Monday here.
    assert_eq!(
        data["days"],
        json!([
            { "date": "2030-01-06", "appointments": counts(&[]), "doctors": [] },
            { "date": MONDAY, "appointments": counts(&[("booked", 1), ("arrived", 1), ("cancelled", 1), ("no_show", 1)]),
              "doctors": [
                  { "doctor_id": rosa, "appointments": counts(&[("booked", 1), ("arrived", 1), ("cancelled", 1)]) },
                  { "doctor_id": lim, "appointments": counts(&[("no_show", 1)]) },
              ] },
            { "date": TUESDAY, "appointments": counts(&[("completed", 1)]),
              "doctors": [{ "doctor_id": rosa, "appointments": counts(&[("completed", 1)]) }] },
        ])
    );
    // The Sunday of UTC alone holds none of them; one day by default.
    let sunday = dashboard(&desk, "appointments?start_date=2030-01-06&end_date=2030-01-06").await;
    assert_eq!(sunday["appointments"]["total"], 0);
    let today = dashboard(&desk, "appointments").await;
    assert_eq!(today["days"].as_array().map(Vec::len), Some(1));
    assert_eq!(today["start_date"], today["end_date"]);

    for (path, field) in [
        ("appointments?start_date=2030-01-08&end_date=2030-01-07", "end_date"),
        ("appointments?start_date=2030-01-01&end_date=2031-01-02", "end_date"),
        ("appointments?start_date=monday", "start_date"),
        ("appointments?doctor_id=1", "doctor_id"),
    ] {
        assert_invalid(&app.get(&format!("/api/v1/dashboard/{path}"), desk.branch()).await, &[field]);
    }
}

#[tokio::test]
async fn the_flow_board_lists_the_days_appointments_booked_and_arrived() {
    let (desk, lim) = eastern_desk().await;
    let other = id_of(&desk.app().create_patient(desk.clinic.branch, "Ben", "Reyes").await);
    let later = id_of(&desk.book(&local(MONDAY, "09:00"), json!({ "patient_id": other })).await);
    // Sunday 23:00 in UTC: Monday's first appointment here.
    let first = id_of(&desk.book(&local(MONDAY, "07:00"), json!({})).await);
    let arrived = id_of(&desk.book(&local(MONDAY, "08:00"), json!({ "doctor_id": lim })).await);
    assert_status(&desk.act(arrived, "arrive", json!({})).await, 200);
    let started = id_of(&desk.book(&local(MONDAY, "10:00"), json!({})).await);
    assert_status(&desk.act(started, "arrive", json!({})).await, 200);
    assert_status(&desk.act(started, "start", json!({})).await, 200);
    let cancelled = id_of(&desk.book(&local(MONDAY, "11:00"), json!({})).await);
    assert_status(&desk.act(cancelled, "cancel", json!({ "reason": "Unwell" })).await, 200);
    desk.book(&local(TUESDAY, "07:00"), json!({})).await;

    let data = dashboard(&desk, &format!("patient-flow?date={MONDAY}")).await;
    let appointments = &data["appointments"];
    assert_eq!((appointments["booked"].as_i64(), appointments["arrived"].as_i64()), (Some(2), Some(1)));
    let list = appointments["list"].as_array().unwrap();
    let ids: Vec<i64> = list.iter().map(|a| a["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [first, arrived, later], "by start, only those booked or arrived");
    let shown = &list[0];
    assert_eq!(shown["starts_at"], "2030-01-06T23:00:00+00:00");
    assert_eq!(shown["ends_at"], "2030-01-06T23:15:00+00:00");
    assert_eq!(shown["status"], "booked");
    assert_eq!(shown["arrived_at"], Value::Null);
    assert_eq!(shown["branch_service_id"], desk.service);
    assert_eq!(
        shown["patient"],
        json!({ "id": desk.clinic.patient, "pin": "MAIN-000001", "first_name": "Ana", "last_name": "Cruz" })
    );
    assert_eq!(shown["doctor"], json!({ "id": desk.doctor, "first_name": "Rosa", "last_name": "Santos" }));
    assert_eq!(list[1]["status"], "arrived");
    assert!(list[1]["arrived_at"].is_string(), "{}", list[1]);
    assert_eq!(list[1]["doctor"]["last_name"], "Lim");
    // The queue's figures are still there; another day has its own appointments.
    assert_eq!(data["tickets"]["total"], 0);
    let sunday = dashboard(&desk, "patient-flow?date=2030-01-06").await;
    assert_eq!(sunday["appointments"], json!({ "booked": 0, "arrived": 0, "list": [] }));
}

//! Appointments: a doctor's hours and the days that differ, bookings within them, the
//! overbooking a permission allows, the moves of an appointment, and concurrent bookings and
//! reschedules of one doctor's slots, checked against the rows afterwards.
//!
//! The helpers shared by the topics are here; the tests are in the modules below.

use crate::support::{
    Clinic, Reply, TestApp, assert_error, assert_invalid, assert_status, conflict_ids, id_of, reply,
};
use reqwest::Method;
use serde_json::{Value, json};

mod availability;
mod booking;
mod branches;
mod calendar;
mod concurrency;
mod dashboards;
mod hours;
mod merging;
mod moves;
mod recalls;
mod reminders;
mod slip;

const SCHEDULES: &str = "/api/v1/doctor-schedules";
const EXCEPTIONS: &str = "/api/v1/schedule-exceptions";
const APPOINTMENTS: &str = "/api/v1/appointments";

/// A Monday well ahead: bookings are in the future.
const MONDAY: &str = "2030-01-07";
const TUESDAY: &str = "2030-01-08";

/// `day` at `time` in UTC, the zone of the test branch unless a test changes it.
fn at(day: &str, time: &str) -> String {
    format!("{day}T{time}:00+00:00")
}

/// A clinic with a doctor and a service of its branch, ready to book.
struct Desk {
    clinic: Clinic,
    doctor: i64,
    service: i64,
}

impl Desk {
    async fn open() -> Self {
        Self::at(Clinic::open().await).await
    }

    async fn open_with(configure: impl FnOnce(&mut clinic_server::config::Settings)) -> Self {
        Self::at(Clinic::open_with(configure).await).await
    }

    /// A doctor and a service for `clinic`.
    async fn at(clinic: Clinic) -> Self {
        let app = &clinic.app;
        let doctor = json!({ "first_name": "Rosa", "last_name": "Santos", "license_no": "PRC-0001" });
        let doctor = id_of(&app.created("/api/v1/doctors", None, doctor).await);
        let services = format!("/api/v1/branches/{}/services", clinic.branch);
        let service =
            id_of(&app.created(&services, None, json!({ "name": "Consultation", "code": "C" })).await);
        Self { clinic, doctor, service }
    }

    /// A desk whose doctor keeps Monday 08:00 to 12:00.
    async fn with_monday_hours() -> Self {
        Self::with_monday_hours_and(|_| {}).await
    }

    /// [`Desk::with_monday_hours`] on a server with its own settings.
    async fn with_monday_hours_and(configure: impl FnOnce(&mut clinic_server::config::Settings)) -> Self {
        let desk = Self::open_with(configure).await;
        assert_status(&desk.hours(1, "08:00", "12:00", json!({})).await, 201);
        desk
    }

    fn app(&self) -> &TestApp {
        &self.clinic.app
    }

    fn branch(&self) -> Option<i64> {
        Some(self.clinic.branch)
    }

    async fn hours(&self, weekday: i64, start: &str, end: &str, extra: Value) -> Reply {
        let body = merged(
            json!({ "doctor_id": self.doctor, "weekday": weekday, "start_time": start, "end_time": end }),
            extra,
        );
        self.app().post(SCHEDULES, self.branch(), body).await
    }

    fn booking(&self, starts_at: &str, extra: Value) -> Value {
        merged(
            json!({
                "patient_id": self.clinic.patient,
                "doctor_id": self.doctor,
                "branch_service_id": self.service,
                "starts_at": starts_at,
                "duration_minutes": 15,
                "reason": "Blurred vision",
            }),
            extra,
        )
    }

    async fn book(&self, starts_at: &str, extra: Value) -> Reply {
        self.app().post(APPOINTMENTS, self.branch(), self.booking(starts_at, extra)).await
    }

    async fn book_as(&self, token: &str, starts_at: &str, extra: Value) -> Reply {
        let req = self.app().request_as(token, Method::POST, APPOINTMENTS, self.branch());
        reply(req.json(&self.booking(starts_at, extra))).await
    }

    /// `PUT` of an appointment under `If-Match` of `version`.
    async fn reschedule(&self, id: i64, version: i64, change: Value) -> Reply {
        let path = format!("{APPOINTMENTS}/{id}");
        let req = self
            .app()
            .request(Method::PUT, &path, self.branch())
            .header("if-match", format!("\"{version}\""));
        reply(req.json(&change)).await
    }

    /// `POST /appointments/{id}/{segment}`.
    async fn act(&self, id: i64, segment: &str, body: Value) -> Reply {
        self.app().post(&format!("{APPOINTMENTS}/{id}/{segment}"), self.branch(), body).await
    }

    /// Pairs of active appointments of one doctor that overlap (neither overbooked), by SQL.
    async fn overlapping_pairs(&self) -> i64 {
        let client = self.app().state.registry.get().await.unwrap();
        let sql = format!(
            "SELECT count(*) FROM branch_{b}.appointments x JOIN branch_{b}.appointments y
                ON x.id < y.id AND x.doctor_id = y.doctor_id
               AND tstzrange(x.starts_at, x.ends_at) && tstzrange(y.starts_at, y.ends_at)
             WHERE x.deleted_at IS NULL AND y.deleted_at IS NULL
               AND x.status IN ('booked', 'arrived', 'in_progress') AND y.status IN ('booked', 'arrived', 'in_progress')
               AND NOT x.overbooked AND NOT y.overbooked",
            b = self.clinic.branch
        );
        client.query_one(&sql, &[]).await.unwrap().get(0)
    }
}

fn merged(mut body: Value, extra: Value) -> Value {
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    body
}

/// The ids a 409 `slot_taken` names as in the way.
fn slot_taken(r: &Reply) -> Vec<i64> {
    conflict_ids(r, "slot_taken")
}

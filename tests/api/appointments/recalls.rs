//! An arrival makes the visit and the queue ticket in one unit, once; recalls are made under a
//! patient, listed for the front desk, and follow the appointment booked from them.

use super::*;

const RECALLS: &str = "/api/v1/recalls";

impl Desk {
    fn recalls_of(&self, patient: i64) -> String {
        format!("/api/v1/patients/{patient}/recalls")
    }

    async fn recall(&self, due_on: &str, reason: &str) -> i64 {
        let body = json!({ "due_on": due_on, "reason": reason, "doctor_id": self.doctor });
        let r = self.app().post(&self.recalls_of(self.clinic.patient), self.branch(), body).await;
        assert_status(&r, 201);
        id_of(&r.body["data"])
    }

    async fn recall_status(&self, id: i64) -> Value {
        let r = self.app().get(&format!("{RECALLS}/{id}"), self.branch()).await;
        assert_status(&r, 200);
        r.body["data"]["status"].clone()
    }

    /// How many rows of `table` the desk's patient has, by SQL.
    async fn patient_rows(&self, table: &str) -> i64 {
        let client = self.app().state.registry.get().await.unwrap();
        let sql = format!("SELECT count(*) FROM branch_{}.{table} WHERE patient_id = $1", self.clinic.branch);
        client.query_one(&sql, &[&self.clinic.patient]).await.unwrap().get(0)
    }
}

#[tokio::test]
async fn an_arrival_checks_the_patient_in_and_queues_them_once() {
    let desk = Desk::with_monday_hours().await;
    let (visits, tickets) =
        (desk.patient_rows("patient_visits").await, desk.patient_rows("queue_tickets").await);
    let booked = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let r = desk.act(booked, "arrive", json!({})).await;
    assert_status(&r, 200);
    let arrived = &r.body["data"];
    assert_eq!(arrived["status"], "arrived");
    let visit = arrived["patient_visit_id"].as_i64().expect("a visit");
    let ticket = arrived["queue_ticket_id"].as_i64().expect("a ticket");
    let v = desk.app().get(&format!("/api/v1/patient-visits/{visit}"), desk.branch()).await;
    assert_status(&v, 200);
    assert_eq!(v.body["data"]["status"], "checked_in");
    assert_eq!(v.body["data"]["visit_date"], crate::support::today().to_string(), "dated the day they came");
    assert_eq!(v.body["data"]["doctor_id"], desk.doctor);
    assert_eq!(v.body["data"]["reason"], "Blurred vision");
    let t = desk.app().get(&format!("/api/v1/queue/queue-tickets/{ticket}"), desk.branch()).await;
    assert_status(&t, 200);
    assert_eq!(t.body["data"]["branch_service_id"], desk.service);
    assert_eq!(t.body["data"]["patient_visit_id"], visit);
    assert_eq!(t.body["data"]["status"], "waiting");

    // Retried, it makes neither again.
    assert_error(&desk.act(booked, "arrive", json!({})).await, 409, "invalid_transition");
    assert_eq!(desk.patient_rows("patient_visits").await, visits + 1);
    assert_eq!(desk.patient_rows("queue_tickets").await, tickets + 1);

    // Under one Idempotency-Key the answer is kept, and nothing is made twice.
    let again = id_of(&desk.book(&at(MONDAY, "10:00"), json!({})).await);
    let path = format!("{APPOINTMENTS}/{again}/arrive");
    let keyed =
        || desk.app().request(Method::POST, &path, desk.branch()).header("idempotency-key", "arrive-10");
    let first = reply(keyed().json(&json!({}))).await;
    assert_status(&first, 200);
    let second = reply(keyed().json(&json!({}))).await;
    assert_status(&second, 200);
    assert_eq!(first.body["data"]["queue_ticket_id"], second.body["data"]["queue_ticket_id"]);
    assert_eq!(desk.patient_rows("queue_tickets").await, tickets + 2);
}

#[tokio::test]
async fn concurrent_arrivals_of_one_appointment_make_one_visit() {
    let desk = Desk::with_monday_hours().await;
    let (visits, tickets) =
        (desk.patient_rows("patient_visits").await, desk.patient_rows("queue_tickets").await);
    let booked = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let arrivals = (0..10).map(|_| desk.act(booked, "arrive", json!({})));
    let statuses: Vec<u16> =
        futures_util::future::join_all(arrivals).await.iter().map(|r| r.status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 9, "{statuses:?}");
    assert_eq!(desk.patient_rows("patient_visits").await, visits + 1);
    assert_eq!(desk.patient_rows("queue_tickets").await, tickets + 1);
}

#[tokio::test]
async fn an_arrival_at_a_closed_service_makes_nothing() {
    let desk = Desk::with_monday_hours().await;
    let visits = desk.patient_rows("patient_visits").await;
    let booked = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let service = format!("/api/v1/branches/{}/services/{}", desk.clinic.branch, desk.service);
    assert_status(&desk.app().put(&service, None, json!({ "active": false })).await, 200);
    assert_invalid(&desk.act(booked, "arrive", json!({})).await, &["branch_service_id"]);
    let r = desk.app().get(&format!("{APPOINTMENTS}/{booked}"), desk.branch()).await;
    assert_eq!(r.body["data"]["status"], "booked");
    assert_eq!(desk.patient_rows("patient_visits").await, visits);
}

#[tokio::test]
async fn recalls_are_made_under_a_patient_and_listed_by_due_day_and_status() {
    let desk = Desk::open().await;
    let app = desk.app();
    let r = app
        .post(&desk.recalls_of(desk.clinic.patient), desk.branch(), json!({ "due_on": "2031-01-07" }))
        .await;
    assert_invalid(&r, &["reason"]);
    let other = json!({ "due_on": "2031-01-07", "reason": "x", "patient_id": desk.clinic.patient + 1 });
    assert_invalid(
        &app.post(&desk.recalls_of(desk.clinic.patient), desk.branch(), other).await,
        &["patient_id"],
    );
    let none = json!({ "due_on": "2031-01-07", "reason": "Glaucoma check" });
    assert_status(&app.post(&desk.recalls_of(999_999), desk.branch(), none.clone()).await, 404);
    assert_invalid(&app.post(RECALLS, desk.branch(), none).await, &["patient_id"]);

    let glaucoma = desk.recall("2031-01-07", "Glaucoma check in 12 months").await;
    let cataract = desk.recall("2030-07-01", "Cataract review").await;
    let r = app.get(&format!("{RECALLS}/{glaucoma}"), desk.branch()).await;
    assert_eq!(r.body["data"]["status"], "pending");
    assert_eq!(r.body["data"]["patient_id"], desk.clinic.patient);
    assert_eq!(r.body["data"]["appointment_id"], Value::Null);
    let list = |query: &str| {
        let path = format!("{RECALLS}?{query}");
        let desk = &desk;
        async move {
            let r = desk.app().get(&path, desk.branch()).await;
            assert_status(&r, 200);
            crate::support::ids(&r.body)
        }
    };
    assert_eq!(list("").await, vec![cataract, glaucoma], "by due day");
    assert_eq!(list("due_from=2030-12-01&due_to=2031-01-31").await, vec![glaucoma]);
    assert_eq!(list("due_to=2030-07-01&status=pending").await, vec![cataract]);
    let r = app
        .post(&format!("{RECALLS}/{cataract}/cancel"), desk.branch(), json!({ "reason": "Moved away" }))
        .await;
    assert_status(&r, 200);
    assert_eq!(list("status=pending").await, vec![glaucoma]);
    assert_eq!(list("status=cancelled").await, vec![cataract]);
    let r = app.get(&format!("{RECALLS}?status=late"), desk.branch()).await;
    assert_invalid(&r, &["filters[status]"]);
}

#[tokio::test]
async fn a_recall_follows_the_appointment_booked_from_it() {
    let desk = Desk::with_monday_hours().await;
    let recall = desk.recall("2030-01-07", "Pressure check").await;
    let first = desk.book(&at(MONDAY, "09:00"), json!({ "recall_id": recall })).await;
    assert_status(&first, 201);
    let first = id_of(&first);
    assert_eq!(desk.recall_status(recall).await, "booked");
    let r = desk.app().get(&format!("{RECALLS}/{recall}"), desk.branch()).await;
    assert_eq!(r.body["data"]["appointment_id"], first);
    // One appointment at a time per recall.
    let r = desk.book(&at(MONDAY, "10:00"), json!({ "recall_id": recall })).await;
    assert_invalid(&r, &["recall_id"]);

    // Cancelled, the recall is to be booked again; then booked and seen, it is done.
    assert_status(&desk.act(first, "cancel", json!({ "reason": "Ill" })).await, 200);
    assert_eq!(desk.recall_status(recall).await, "pending");
    let second = id_of(&desk.book(&at(MONDAY, "10:00"), json!({ "recall_id": recall })).await);
    for step in ["arrive", "start", "complete"] {
        assert_status(&desk.act(second, step, json!({})).await, 200);
    }
    assert_eq!(desk.recall_status(recall).await, "done");
    let r = desk.book(&at(MONDAY, "11:00"), json!({ "recall_id": recall })).await;
    assert_invalid(&r, &["recall_id"]);

    // Another patient's recall is not booked for this one.
    let theirs =
        json!({ "first_name": "Lea", "last_name": "Cruz", "birth_date": "1970-01-01", "sex": "female" });
    let theirs = id_of(&desk.app().created("/api/v1/patients", desk.branch(), theirs).await);
    let body = json!({ "due_on": "2030-01-07", "reason": "Review" });
    let r = desk.app().post(&desk.recalls_of(theirs), desk.branch(), body).await;
    let their_recall = id_of(&r.body["data"]);
    let r = desk.book(&at(MONDAY, "11:00"), json!({ "recall_id": their_recall })).await;
    assert_invalid(&r, &["recall_id"]);
}

#[tokio::test]
async fn a_missed_appointment_closed_with_its_day_reopens_its_recall() {
    let desk = Desk::with_monday_hours().await;
    let recall = desk.recall("2030-01-07", "Pressure check").await;
    let missed = id_of(&desk.book(&at(MONDAY, "09:00"), json!({ "recall_id": recall })).await);
    let client = desk.app().state.registry.get().await.unwrap();
    let sql = format!(
        "UPDATE branch_{b}.appointments SET starts_at = now() - interval '2 days', ends_at = now() - interval '2 days' + interval '15 minutes'
          WHERE id = {missed}",
        b = desk.clinic.branch
    );
    client.batch_execute(&sql).await.unwrap();
    assert_eq!(clinic_server::appointments::close_past_days(&desk.app().state).await.unwrap(), 1);
    assert_eq!(desk.recall_status(recall).await, "pending");
    let audit = desk.app().audit_rows("/api/v1/audit-logs", desk.branch(), "recalls", recall).await;
    assert_eq!(audit.last().unwrap()["action"], "auto_reopen");
}

#[tokio::test]
async fn concurrent_bookings_from_one_recall_book_one() {
    let desk = Desk::with_monday_hours().await;
    let recall = desk.recall("2030-01-07", "Pressure check").await;
    let desk = &desk;
    let bookings = (0..10).map(|i| async move {
        let starts = at(MONDAY, &format!("{:02}:{:02}", 8 + i / 4, (i % 4) * 15));
        desk.book(&starts, json!({ "recall_id": recall })).await.status
    });
    let statuses = futures_util::future::join_all(bookings).await;
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 422).count(), 9, "{statuses:?}");
    assert_eq!(desk.recall_status(recall).await, "booked");
}

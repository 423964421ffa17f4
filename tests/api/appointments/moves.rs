//! The moves of an appointment, and rescheduling under `If-Match`.

use super::*;

#[tokio::test]
async fn an_appointment_moves_through_its_day_and_refuses_other_moves() {
    let desk = Desk::with_monday_hours().await;
    let id = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let wrong = |r: &Reply, status: &str| {
        assert_error(r, 409, "invalid_transition");
        assert_eq!(r.body["status"], status, "{}", r.text);
    };
    wrong(&desk.act(id, "start", json!({})).await, "booked");
    wrong(&desk.act(id, "complete", json!({})).await, "booked");

    let r = desk.act(id, "arrive", json!({})).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "arrived");
    assert!(r.body["data"]["arrived_at"].is_string(), "{}", r.text);
    wrong(&desk.act(id, "cancel", json!({ "reason": "Changed mind" })).await, "arrived");
    wrong(&desk.act(id, "no-show", json!({})).await, "arrived");
    let r = desk.act(id, "start", json!({})).await;
    assert_eq!(r.body["data"]["status"], "in_progress", "{}", r.text);
    let r = desk.act(id, "complete", json!({})).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "completed");
    assert!(r.body["data"]["completed_at"].is_string(), "{}", r.text);
    wrong(&desk.act(id, "arrive", json!({})).await, "completed");

    // A completed appointment keeps its time; its notes may still be written.
    let path = format!("{APPOINTMENTS}/{id}");
    let r = desk.app().put(&path, desk.branch(), json!({ "starts_at": at(MONDAY, "10:00") })).await;
    assert_error(&r, 409, "not_editable");
    let r = desk.app().put(&path, desk.branch(), json!({ "notes": "Follow up in a month" })).await;
    assert_status(&r, 200);
    assert_error(&desk.app().delete(&path, desk.branch()).await, 409, "not_editable");
    let audit = desk.app().audit_count(desk.branch(), Some("complete")).await;
    assert_eq!(audit, 1);
}

#[tokio::test]
async fn a_cancelled_or_missed_appointment_frees_its_slot() {
    let desk = Desk::with_monday_hours().await;
    let first = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let r = desk.act(first, "cancel", json!({})).await;
    assert_invalid(&r, &["reason"]);
    let r = desk.act(first, "cancel", json!({ "reason": "Travelling" })).await;
    assert_status(&r, 200);
    let cancelled = &r.body["data"];
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["cancel_reason"], "Travelling");
    assert_eq!(cancelled["cancelled_by"], desk.app().admin_id().await);
    assert!(cancelled["cancelled_at"].is_string(), "{}", r.text);

    let second = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let r = desk.act(second, "no-show", json!({})).await;
    assert_eq!(r.body["data"]["status"], "no_show", "{}", r.text);
    assert_status(&desk.book(&at(MONDAY, "09:00"), json!({})).await, 201);
    assert_eq!(desk.overlapping_pairs().await, 0);
}

#[tokio::test]
async fn a_reschedule_under_if_match_frees_the_old_slot() {
    let desk = Desk::with_monday_hours().await;
    let nine = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let half_past = id_of(&desk.book(&at(MONDAY, "09:30"), json!({})).await);

    let r = desk.reschedule(half_past, 1, json!({ "starts_at": at(MONDAY, "09:05") })).await;
    assert_eq!(slot_taken(&r), vec![nine]);
    let r =
        desk.reschedule(nine, 1, json!({ "starts_at": at(MONDAY, "10:00"), "duration_minutes": 30 })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["ends_at"], "2030-01-07T10:30:00+00:00", "{}", r.text);
    assert_eq!(r.body["data"]["version"], 2);
    // The stale version is refused; the freed 09:00 is taken by the other.
    let r = desk.reschedule(nine, 1, json!({ "starts_at": at(MONDAY, "11:00") })).await;
    assert_error(&r, 412, "precondition_failed");
    let r = desk.reschedule(half_past, 1, json!({ "starts_at": at(MONDAY, "09:00") })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["ends_at"], "2030-01-07T09:15:00+00:00", "the length kept: {}", r.text);
    // Moving within its own time overlaps nothing but itself.
    let r = desk.reschedule(half_past, 2, json!({ "starts_at": at(MONDAY, "09:05") })).await;
    assert_status(&r, 200);
    assert_eq!(desk.overlapping_pairs().await, 0);
}

#[tokio::test]
async fn appointments_still_booked_after_their_day_become_no_shows() {
    let desk = Desk::with_monday_hours().await;
    let missed = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let came = id_of(&desk.book(&at(MONDAY, "09:30"), json!({})).await);
    let ahead = id_of(&desk.book(&at(MONDAY, "10:00"), json!({})).await);
    assert_status(&desk.act(came, "arrive", json!({})).await, 200);
    // The first two were yesterday's.
    let client = desk.app().state.registry.get().await.unwrap();
    let sql = format!(
        "UPDATE branch_{b}.appointments
            SET starts_at = starts_at - (date_trunc('day', starts_at) - date_trunc('day', now())) - interval '1 day',
                ends_at = ends_at - (date_trunc('day', starts_at) - date_trunc('day', now())) - interval '1 day'
          WHERE id IN ({missed}, {came})",
        b = desk.clinic.branch
    );
    client.batch_execute(&sql).await.unwrap();

    assert_eq!(clinic_server::appointments::close_past_days(&desk.app().state).await.unwrap(), 1);
    let desk = &desk;
    let status = |id: i64| async move {
        desk.app().get(&format!("{APPOINTMENTS}/{id}"), desk.branch()).await.body["data"]["status"].clone()
    };
    assert_eq!(status(missed).await, "no_show");
    assert_eq!(status(came).await, "arrived");
    assert_eq!(status(ahead).await, "booked");
    let audit = desk.app().audit_rows("/api/v1/audit-logs", desk.branch(), "appointments", missed).await;
    let last = audit.last().unwrap();
    assert_eq!(last["action"], "auto_no_show");
    assert!(last["user_id"].is_null(), "{last}");
    // Nothing left to close; the queue's closing leaves appointments alone.
    assert_eq!(clinic_server::appointments::close_past_days(&desk.app().state).await.unwrap(), 0);
}

//! Appointment reminders: queued with the booking, sent by e-mail when due (passes driven
//! here at chosen instants through `send_due`), withdrawn when the appointment is cancelled,
//! missed or moved, never sent to a patient who opted out, never sent twice by concurrent
//! workers, tried again and then failed, and posted signed to a webhook.

use std::time::Duration;

use clinic_server::appointments::{MAX_ATTEMPTS, send_due};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use time::OffsetDateTime;
use time::macros::datetime;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::*;
use crate::support::smtp::SmtpReceiver;

const EMAIL: &str = "ana.cruz@example.com";

/// One row of the branch's reminder outbox.
#[derive(Debug, Clone)]
struct Reminder {
    appointment: i64,
    due_at: OffsetDateTime,
    state: String,
    attempts: i32,
    next_attempt_at: OffsetDateTime,
    reason: Option<String>,
    sent_at: Option<OffsetDateTime>,
}

impl Desk {
    /// A desk with Monday hours whose mail goes to `smtp`, and whose patient has an e-mail.
    async fn mailing(smtp: &SmtpReceiver) -> Self {
        Self::mailing_with(smtp, |_| {}).await
    }

    async fn mailing_with(
        smtp: &SmtpReceiver,
        configure: impl FnOnce(&mut clinic_server::config::Settings),
    ) -> Self {
        let url = smtp.url.clone();
        let desk = Self::with_monday_hours_and(|s| {
            s.smtp_url = Some(url);
            configure(s);
        })
        .await;
        desk.patient_sets(desk.clinic.patient, json!({ "email": EMAIL })).await;
        desk
    }

    async fn patient_sets(&self, patient: i64, change: Value) {
        let r = self.app().put(&format!("/api/v1/patients/{patient}"), self.branch(), change).await;
        assert_status(&r, 200);
    }

    /// The outbox's rows, by appointment and due time.
    async fn reminders(&self) -> Vec<Reminder> {
        let client = self.app().state.registry.get().await.unwrap();
        let sql = format!(
            "SELECT appointment_id, due_at, status, attempts, next_attempt_at, reason, sent_at
               FROM branch_{}.appointment_reminders ORDER BY appointment_id, due_at, id",
            self.clinic.branch
        );
        let rows = client.query(&sql, &[]).await.unwrap();
        rows.iter()
            .map(|r| Reminder {
                appointment: r.get(0),
                due_at: r.get(1),
                state: r.get(2),
                attempts: r.get(3),
                next_attempt_at: r.get(4),
                reason: r.get(5),
                sent_at: r.get(6),
            })
            .collect()
    }

    /// One pass of the worker at `now`.
    async fn pass(&self, now: OffsetDateTime) -> usize {
        send_due(&self.app().state, now).await.expect("a pass runs")
    }
}

fn statuses(reminders: &[Reminder]) -> Vec<(&str, Option<&str>)> {
    reminders.iter().map(|r| (r.state.as_str(), r.reason.as_deref())).collect()
}

#[tokio::test]
async fn a_reminder_is_sent_once_at_its_time_and_not_before() {
    let smtp = SmtpReceiver::start().await;
    let desk = Desk::mailing(&smtp).await;
    let id = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let queued = desk.reminders().await;
    let due: Vec<_> = queued.iter().map(|r| (r.appointment, r.due_at, r.state.as_str())).collect();
    assert_eq!(
        due,
        vec![
            (id, datetime!(2030-01-06 09:00 UTC), "pending"),
            (id, datetime!(2030-01-07 07:00 UTC), "pending")
        ]
    );

    assert_eq!(desk.pass(datetime!(2030-01-06 08:59:59 UTC)).await, 0);
    assert!(smtp.mails().is_empty(), "nothing is sent before its time");
    assert_eq!(desk.pass(datetime!(2030-01-06 09:00 UTC)).await, 1);
    let mails = smtp.mails();
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].recipients, vec![EMAIL.to_owned()]);
    assert!(mails[0].text.contains("Subject: Appointment reminder"), "{}", mails[0].text);
    assert!(mails[0].text.contains("Monday, 07 Jan 2030 at 09:00"), "{}", mails[0].text);
    // Passes after it send nothing more until the next one is due.
    assert_eq!(desk.pass(datetime!(2030-01-06 09:00 UTC)).await, 0);
    assert_eq!(desk.pass(datetime!(2030-01-07 06:59 UTC)).await, 0);
    assert_eq!(desk.pass(datetime!(2030-01-07 07:00:30 UTC)).await, 1);
    assert_eq!(desk.pass(datetime!(2030-01-07 08:00 UTC)).await, 0);
    assert_eq!(smtp.mails().len(), 2);

    let sent = desk.reminders().await;
    assert_eq!(statuses(&sent), vec![("sent", None), ("sent", None)]);
    let stamps: Vec<_> = sent.iter().map(|r| (r.sent_at, r.attempts)).collect();
    assert_eq!(
        stamps,
        vec![(Some(datetime!(2030-01-06 09:00 UTC)), 1), (Some(datetime!(2030-01-07 07:00:30 UTC)), 1)]
    );
}

#[tokio::test]
async fn cancelling_missing_moving_or_deleting_an_appointment_withdraws_its_pending_reminders() {
    let smtp = SmtpReceiver::start().await;
    let desk = Desk::mailing(&smtp).await;
    let cancelled = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    let missed = id_of(&desk.book(&at(MONDAY, "10:00"), json!({})).await);
    let moved = id_of(&desk.book(&at(MONDAY, "11:00"), json!({})).await);
    let deleted = id_of(&desk.book(&at(MONDAY, "11:45"), json!({})).await);
    assert_status(&desk.app().delete(&format!("{APPOINTMENTS}/{deleted}"), desk.branch()).await, 200);
    assert_status(&desk.act(cancelled, "cancel", json!({ "reason": "Travelling" })).await, 200);
    assert_status(&desk.act(missed, "no-show", json!({})).await, 200);
    let r = desk.reschedule(moved, 1, json!({ "starts_at": at(MONDAY, "11:30") })).await;
    assert_status(&r, 200);
    // A change of notes alone is no move: the new reminders stay as they are.
    let r = desk.reschedule(moved, 2, json!({ "notes": "Bring glasses" })).await;
    assert_status(&r, 200);

    let rows = desk.reminders().await;
    let of = |id: i64| rows.iter().filter(|r| r.appointment == id).cloned().collect::<Vec<_>>();
    assert_eq!(statuses(&of(cancelled)), vec![("withdrawn", Some("cancel")); 2]);
    assert_eq!(statuses(&of(missed)), vec![("withdrawn", Some("no_show")); 2]);
    assert_eq!(statuses(&of(deleted)), vec![("withdrawn", Some("deleted")); 2]);
    let moves: Vec<_> = of(moved).iter().map(|r| (r.due_at, r.state.clone(), r.reason.clone())).collect();
    let withdrawn = (String::from("withdrawn"), Some(String::from("moved")));
    let pending = (String::from("pending"), None);
    assert_eq!(
        moves,
        vec![
            (datetime!(2030-01-06 11:00 UTC), withdrawn.0.clone(), withdrawn.1.clone()),
            (datetime!(2030-01-06 11:30 UTC), pending.0.clone(), pending.1.clone()),
            (datetime!(2030-01-07 09:00 UTC), withdrawn.0, withdrawn.1),
            (datetime!(2030-01-07 09:30 UTC), pending.0, pending.1),
        ]
    );

    // Only the moved appointment's new reminders go.
    assert_eq!(desk.pass(datetime!(2030-01-07 10:00 UTC)).await, 2);
    assert_eq!(smtp.mails().len(), 2);
    assert!(smtp.mails().iter().all(|m| m.text.contains("at 11:30")), "{:?}", smtp.mails());
}

#[tokio::test]
async fn a_patient_who_opted_out_is_never_sent_a_reminder() {
    let smtp = SmtpReceiver::start().await;
    let desk = Desk::mailing(&smtp).await;
    // Opted out before the booking: nothing is queued.
    let declined = id_of(&desk.app().create_patient(desk.clinic.branch, "Ben", "Reyes").await);
    desk.patient_sets(declined, json!({ "email": "ben@example.com", "reminders_opt_out": true })).await;
    let r = desk.book(&at(MONDAY, "09:00"), json!({ "patient_id": declined })).await;
    assert_status(&r, 201);
    assert!(desk.reminders().await.is_empty());

    // Opted out after it: what was queued is withdrawn when it falls due.
    let r = desk.app().get(&format!("/api/v1/patients/{}", desk.clinic.patient), desk.branch()).await;
    assert_eq!(r.body["data"]["reminders_opt_out"], false, "the default: {}", r.text);
    desk.book(&at(MONDAY, "10:00"), json!({})).await;
    assert_eq!(desk.reminders().await.len(), 2);
    desk.patient_sets(desk.clinic.patient, json!({ "reminders_opt_out": true })).await;
    assert_eq!(desk.pass(datetime!(2030-01-07 09:00 UTC)).await, 0);
    assert_eq!(statuses(&desk.reminders().await), vec![("withdrawn", Some("opted out")); 2]);
    assert!(smtp.mails().is_empty(), "{:?}", smtp.mails());
}

#[tokio::test]
async fn concurrent_workers_send_each_due_reminder_exactly_once() {
    let smtp = SmtpReceiver::start().await;
    let desk = Desk::mailing(&smtp).await;
    for slot in 0..12 {
        let time = format!("{:02}:{:02}", 8 + slot / 4, slot % 4 * 15);
        assert_status(&desk.book(&at(MONDAY, &time), json!({})).await, 201);
    }
    // Every reminder of the day before, and the two-hour ones of 08:00 to 09:45.
    let now = datetime!(2030-01-07 07:45 UTC);
    let due = desk.reminders().await.iter().filter(|r| r.next_attempt_at <= now).count();
    assert_eq!(due, 12 + 8);

    // Rounds of eight passes at once: the first sends them all between them, the others none.
    let mut sent = Vec::new();
    for _ in 0..3 {
        let passes: Vec<_> = (0..8).map(|_| desk.pass(now)).collect();
        sent.push(futures_util::future::join_all(passes).await.into_iter().sum::<usize>());
    }
    assert_eq!(sent, vec![due, 0, 0]);
    assert_eq!(smtp.mails().len(), due, "each due reminder is mailed once");
    let rows = desk.reminders().await;
    assert_eq!(rows.iter().filter(|r| r.state == "sent").count(), due);
    assert!(rows.iter().filter(|r| r.state == "sent").all(|r| r.attempts == 1), "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r.state == "pending").count(), 24 - due);
}

#[tokio::test]
async fn a_reminder_already_due_at_booking_goes_at_once_and_one_for_a_past_appointment_never() {
    let smtp = SmtpReceiver::start().await;
    let desk = Desk::mailing(&smtp).await;
    let overbooked = json!({ "overbook": true, "overbook_reason": "Fitted in" });
    let instant = |t: OffsetDateTime| t.format(&time::format_description::well_known::Rfc3339).unwrap();
    let soon = OffsetDateTime::now_utc() + Duration::from_secs(3600);
    let r = desk.book(&instant(soon), overbooked.clone()).await;
    assert_status(&r, 201);
    let past = OffsetDateTime::now_utc() - Duration::from_secs(3600);
    let r = desk.book(&instant(past), overbooked).await;
    assert_status(&r, 201);

    // Both offsets (24 and 2 hours) have passed: one reminder, the nearest, due now.
    let rows = desk.reminders().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].next_attempt_at <= OffsetDateTime::now_utc(), "{rows:?}");
    assert_eq!(desk.pass(OffsetDateTime::now_utc()).await, 1);
    assert_eq!(smtp.mails().len(), 1);
}

#[tokio::test]
async fn a_failed_send_is_tried_again_later_and_then_fails_with_its_reason() {
    // A mail server that is not there: every connection is refused.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let smtp_url = format!("smtp://{}", closed.local_addr().unwrap());
    drop(closed);
    let smtp = SmtpReceiver::start().await;
    let desk = Desk::mailing_with(&smtp, |s| s.smtp_url = Some(smtp_url)).await;
    desk.book(&at(MONDAY, "09:00"), json!({})).await;
    let no_address = id_of(&desk.app().create_patient(desk.clinic.branch, "Cy", "Lim").await);
    desk.book(&at(MONDAY, "10:00"), json!({ "patient_id": no_address })).await;

    let mut now = datetime!(2030-01-06 10:00 UTC);
    assert_eq!(desk.pass(now).await, 0);
    let rows = desk.reminders().await;
    assert_eq!(rows[0].state, "pending");
    assert_eq!(rows[0].attempts, 1);
    assert_eq!(rows[0].next_attempt_at, now + Duration::from_secs(60));
    assert!(rows[0].reason.as_deref().is_some_and(|r| r.contains("sending mail")), "{rows:?}");
    let failed = &rows[2];
    assert_eq!(
        (failed.state.as_str(), failed.reason.as_deref()),
        ("failed", Some("the patient has no e-mail address"))
    );

    // Not before its time; then 2, 4 and 8 minutes apart, and the fifth attempt fails it.
    assert_eq!(desk.pass(now + Duration::from_secs(59)).await, 0);
    assert_eq!(desk.reminders().await[0].attempts, 1);
    for wait in [1, 2, 4, 8] {
        now += Duration::from_secs(60 * wait);
        desk.pass(now).await;
    }
    let first = &desk.reminders().await[0];
    assert_eq!((first.state.as_str(), first.attempts), ("failed", MAX_ATTEMPTS), "{first:?}");
    assert!(first.reason.as_deref().is_some_and(|r| r.contains("sending mail")), "{first:?}");
    assert!(smtp.mails().is_empty());
}

/// A request the webhook listener received: its headers (lower-cased names) and body.
struct Posted {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Answers 204 to each request on `listener`, handing each over.
fn receive(listener: TcpListener) -> tokio::sync::mpsc::UnboundedReceiver<Posted> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (read, mut write) = socket.into_split();
            let mut read = BufReader::new(read);
            let mut headers = Vec::new();
            let mut line = String::new();
            while read.read_line(&mut line).await.unwrap_or(0) > 0 && line != "\r\n" {
                if let Some((name, value)) = line.split_once(':') {
                    headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
                }
                line.clear();
            }
            let length =
                headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
            let mut body = vec![0; length];
            read.read_exact(&mut body).await.unwrap();
            let _ = write.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n").await;
            let _ = tx.send(Posted { headers, body });
        }
    });
    rx
}

#[tokio::test]
async fn each_sent_reminder_is_posted_to_the_webhook_signed_with_its_secret() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/reminders", listener.local_addr().unwrap());
    let mut posted = receive(listener);
    let smtp = SmtpReceiver::start().await;
    let desk = Desk::mailing_with(&smtp, |s| {
        s.reminder_webhook_url = Some(url);
        s.reminder_webhook_secret = Some("webhook-secret-1".into());
    })
    .await;
    let id = id_of(&desk.book(&at(MONDAY, "09:00"), json!({})).await);
    assert_eq!(desk.pass(datetime!(2030-01-06 09:00 UTC)).await, 1);

    let post = posted.recv().await.expect("the webhook was posted to");
    let header = |name: &str| post.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let mut mac = Hmac::<Sha256>::new_from_slice(b"webhook-secret-1").unwrap();
    mac.update(&post.body);
    let expected: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(header("x-signature-sha256"), Some(expected));
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    let body: Value = serde_json::from_slice(&post.body).unwrap();
    assert_eq!(body["appointment_id"], id);
    assert_eq!(body["starts_at"], "2030-01-07T09:00:00Z");
    assert_eq!(body["due_at"], "2030-01-06T09:00:00Z");
    assert_eq!(desk.reminders().await[0].reason, None, "the post succeeded");
    assert_eq!(smtp.mails().len(), 1);
}

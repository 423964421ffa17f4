//! Calendar feeds: an administrator's keys of a doctor at a branch (made with the secret shown
//! once, listed without it, revoked), and the feed they open, read back by the icalendar
//! library: the doctor's appointments at the key's branch in the window, times in UTC,
//! statuses, and patients' names only where the key includes them; a wrong, revoked or other
//! doctor's key is a 401.

use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

use super::*;
use crate::support::tool_present;

/// The keys' routes of `doctor`.
fn keys_of(doctor: i64) -> String {
    format!("/api/v1/doctors/{doctor}/calendar-keys")
}

/// The minute the test binary started: every start is counted from it, so that one test's
/// starts never straddle a minute.
static STARTED: std::sync::LazyLock<OffsetDateTime> = std::sync::LazyLock::new(|| {
    OffsetDateTime::now_utc().replace_second(0).unwrap().replace_nanosecond(0).unwrap()
});

/// A start `days` from now at a whole minute, in UTC, and how the server writes it back.
fn days_ahead(days: i64) -> (String, OffsetDateTime) {
    let at = *STARTED + Duration::days(days);
    (at.format(&Rfc3339).unwrap(), at)
}

/// Books for `doctor` at `days` from now, past the doctor's hours (overbooked, which an
/// administrator may).
async fn book_at(desk: &Desk, doctor: i64, patient: i64, days: i64) -> i64 {
    let (starts_at, _) = days_ahead(days);
    let body = desk.booking(
        &starts_at,
        json!({ "doctor_id": doctor, "patient_id": patient, "overbook": true, "overbook_reason": "Feed" }),
    );
    id_of(&desk.app().created(APPOINTMENTS, desk.branch(), body).await)
}

/// The feed at `url` (a key's), as answered.
async fn feed(app: &TestApp, url: &str) -> Reply {
    let path = url.split_once("/calendar/").map(|(_, rest)| format!("/calendar/{rest}")).unwrap();
    reply(app.http.get(app.url(&path))).await
}

/// The feed read by the icalendar library (`tests/api/data/ical_events.py`); `None` where the
/// library is not installed and not required (CI installs it and sets `ICALENDAR=required`).
fn parsed(r: &Reply) -> Option<Value> {
    let present = std::process::Command::new("python3")
        .args(["-c", "import icalendar"])
        .output()
        .is_ok_and(|o| o.status.success());
    let missing = "icalendar not found (pip install icalendar)";
    if !tool_present(present, "ICALENDAR", missing, "the feed is not read back by it") {
        return None;
    }
    let file = std::env::temp_dir().join(format!("clinic-feed-{}-{}.ics", std::process::id(), r.bytes.len()));
    std::fs::write(&file, &r.bytes).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/data/ical_events.py");
    let out = std::process::Command::new("python3").arg(script).arg(&file).output().unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "icalendar refused the feed: {}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The feed's own form: CRLF line ends, no line over 75 octets, the calendar's frame.
#[track_caller]
fn assert_icalendar(r: &Reply) {
    assert_status(r, 200);
    assert_eq!(r.header("content-type"), Some("text/calendar; charset=utf-8"));
    let text = &r.text;
    assert!(text.starts_with("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:"), "{text}");
    assert!(text.ends_with("END:VCALENDAR\r\n"), "{text}");
    assert!(!text.replace("\r\n", "").contains('\n'), "a line ends without CR");
    for line in text.split("\r\n") {
        assert!(line.len() <= 75, "a line of {} octets: {line}", line.len());
    }
}

/// The event of appointment `id` among the feed's.
fn event(feed: &Value, branch: i64, id: i64) -> Option<&Value> {
    let uid = format!("appointment-{branch}-{id}@");
    feed["events"].as_array().unwrap().iter().find(|e| e["uid"].as_str().unwrap().starts_with(&uid))
}

#[tokio::test]
async fn a_feed_holds_the_doctors_appointments_at_the_keys_branch_in_its_window() {
    let desk = Desk::open().await;
    let app = desk.app();
    let (branch, doctor, patient) = (desk.clinic.branch, desk.doctor, desk.clinic.patient);
    let other_doctor = json!({ "first_name": "Leo", "last_name": "Tan", "license_no": "PRC-0002" });
    let other_doctor = id_of(&app.created("/api/v1/doctors", None, other_doctor).await);
    let ben = id_of(&app.create_patient(branch, "Ben", "Reyes, Jr.").await);

    let booked = book_at(&desk, doctor, patient, 2).await;
    let cancelled = book_at(&desk, doctor, ben, 3).await;
    assert_status(&desk.act(cancelled, "cancel", json!({ "reason": "Travelling" })).await, 200);
    let missed = book_at(&desk, doctor, patient, 4).await;
    assert_status(&desk.act(missed, "no-show", json!({})).await, 200);
    let deleted = book_at(&desk, doctor, patient, 5).await;
    assert_status(&app.delete(&format!("{APPOINTMENTS}/{deleted}"), desk.branch()).await, 200);
    let far = book_at(&desk, doctor, patient, 200).await;
    let theirs = book_at(&desk, other_doctor, patient, 2).await;
    // Two seen before now: 10 days ago (in the window) and 40 days ago (out of it).
    let (recent, old) = (book_at(&desk, doctor, patient, 6).await, book_at(&desk, doctor, patient, 7).await);
    for step in ["arrive", "start", "complete"] {
        assert_status(&desk.act(recent, step, json!({})).await, 200);
    }
    let client = app.state.registry.get().await.unwrap();
    let sql = format!(
        "UPDATE branch_{branch}.appointments
            SET starts_at = starts_at - make_interval(days => $2), ends_at = ends_at - make_interval(days => $2)
          WHERE id = $1"
    );
    client.execute(&sql, &[&recent, &16i32]).await.unwrap();
    client.execute(&sql, &[&old, &47i32]).await.unwrap();
    // The same doctor at another branch.
    let east = app.create_branch("EAST").await;
    let services = format!("/api/v1/branches/{east}/services");
    let east_service = id_of(&app.created(&services, None, json!({ "name": "Triage", "code": "T" })).await);
    let east_patient = id_of(&app.create_patient(east, "Eve", "Lim").await);
    let (starts_at, _) = days_ahead(2);
    let body = json!({ "patient_id": east_patient, "doctor_id": doctor, "branch_service_id": east_service,
        "starts_at": starts_at, "duration_minutes": 15, "overbook": true, "overbook_reason": "Feed" });
    assert_status(&app.post(APPOINTMENTS, Some(east), body).await, 201);

    let r = app.post(&keys_of(doctor), desk.branch(), json!({ "name": "Phone" })).await;
    assert_status(&r, 201);
    let key = &r.body["data"];
    assert_eq!(key["include_patient_names"], false);
    assert_eq!((key["doctor_id"].as_i64(), key["branch_id"].as_i64()), (Some(doctor), Some(branch)));
    let secret = key["key"].as_str().unwrap();
    assert!(secret.starts_with("ck_") && secret.len() == 67, "{secret}");
    let url = key["url"].as_str().unwrap();
    assert!(url.ends_with(&format!("/calendar/doctors/{doctor}.ics?key={secret}")), "{url}");

    let r = feed(app, url).await;
    assert_icalendar(&r);
    assert!(!r.text.contains("Ana") && !r.text.contains("Reyes"), "no names without the scope: {}", r.text);
    let Some(feed) = parsed(&r) else { return };
    assert_eq!(feed["version"], "2.0");
    let shown: Vec<i64> = [booked, cancelled, missed, deleted, far, theirs, recent, old]
        .into_iter()
        .filter(|id| event(&feed, branch, *id).is_some())
        .collect();
    assert_eq!(shown, vec![booked, cancelled, missed, recent], "{feed}");
    assert_eq!(feed["events"].as_array().unwrap().len(), 4, "nothing of the other branch: {feed}");

    let (_, starts) = days_ahead(2);
    let first = event(&feed, branch, booked).unwrap();
    let utc = |at: OffsetDateTime| at.format(&Rfc3339).unwrap().replace('Z', "+00:00");
    assert_eq!(first["start"], utc(starts), "{first}");
    assert_eq!(first["end"], utc(starts + Duration::minutes(15)), "{first}");
    assert!(first["dtstamp"].as_str().unwrap().ends_with("+00:00"), "{first}");
    assert_eq!(first["summary"], "Consultation");
    assert_eq!(first["status"], "CONFIRMED");
    assert_eq!(event(&feed, branch, cancelled).unwrap()["status"], "CANCELLED");
    assert_eq!(event(&feed, branch, missed).unwrap()["status"], "CANCELLED");
    assert_eq!(event(&feed, branch, recent).unwrap()["status"], "CONFIRMED");

    // The UID stays when the appointment moves.
    let (later, _) = days_ahead(9);
    let moved = desk.reschedule(booked, 1, json!({ "starts_at": later })).await;
    assert_status(&moved, 200);
    let again = parsed(&feed_of(app, url).await).unwrap();
    assert_eq!(event(&again, branch, booked).unwrap()["uid"], first["uid"]);
}

async fn feed_of(app: &TestApp, url: &str) -> Reply {
    let r = feed(app, url).await;
    assert_icalendar(&r);
    r
}

#[tokio::test]
async fn patients_names_are_in_the_feed_only_with_the_keys_scope() {
    let desk = Desk::open().await;
    let app = desk.app();
    let ben = id_of(&app.create_patient(desk.clinic.branch, "Ben", "Reyes, Jr.").await);
    let booked = book_at(&desk, desk.doctor, ben, 1).await;

    let with_names = json!({ "name": "Desk; front, left", "include_patient_names": true });
    let r = app.post(&keys_of(desk.doctor), desk.branch(), with_names).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["include_patient_names"], true);
    let named = feed_of(app, r.body["data"]["url"].as_str().unwrap()).await;
    assert!(named.text.contains("SUMMARY:Consultation: Ben Reyes\\, Jr.\r\n"), "escaped: {}", named.text);
    let plain = app.post(&keys_of(desk.doctor), desk.branch(), json!({})).await;
    let plain = feed_of(app, plain.body["data"]["url"].as_str().unwrap()).await;
    assert!(!plain.text.contains("Ben") && !plain.text.contains("Reyes"), "{}", plain.text);
    let (Some(named), Some(plain)) = (parsed(&named), parsed(&plain)) else { return };
    let branch = desk.clinic.branch;
    assert_eq!(event(&named, branch, booked).unwrap()["summary"], "Consultation: Ben Reyes, Jr.");
    assert_eq!(event(&plain, branch, booked).unwrap()["summary"], "Consultation");
}

#[tokio::test]
async fn keys_are_listed_without_their_secret_revoked_and_audited() {
    let desk = Desk::open().await;
    let app = desk.app();
    let keys = keys_of(desk.doctor);
    let made = app.post(&keys, desk.branch(), json!({ "name": "Phone" })).await;
    assert_status(&made, 201);
    let (id, url) = (id_of(&made.body["data"]), made.body["data"]["url"].as_str().unwrap().to_owned());
    let secret = made.body["data"]["key"].as_str().unwrap().to_owned();
    let r = app.post(&keys, desk.branch(), json!({ "include_patient_names": "yes" })).await;
    assert_invalid(&r, &["include_patient_names"]);

    let listed = app.get(&keys, desk.branch()).await;
    assert_status(&listed, 200);
    assert_eq!(crate::support::ids(&listed.body), vec![id]);
    assert!(!listed.text.contains(&secret[3..]) && !listed.text.contains("secret"), "{}", listed.text);
    assert!(listed.body["data"][0].get("key").is_none(), "{}", listed.text);
    // Another branch has none of them, and cannot revoke them.
    let east = app.create_branch("EAST").await;
    let theirs = app.get(&keys, Some(east)).await;
    assert_status(&theirs, 200);
    assert_eq!(crate::support::ids(&theirs.body), Vec::<i64>::new());
    assert_error(&app.delete(&format!("{keys}/{id}"), Some(east)).await, 404, "not_found");
    assert_error(&app.get(&keys_of(999_999), desk.branch()).await, 404, "not_found");

    let r = app.delete(&format!("{keys}/{id}"), desk.branch()).await;
    assert_status(&r, 200);
    assert!(r.body["data"]["revoked_at"].is_string(), "{}", r.text);
    assert_error(&feed(app, &url).await, 401, "unauthenticated");
    let listed = app.get(&keys, desk.branch()).await;
    assert!(listed.body["data"][0]["revoked_at"].is_string(), "still listed: {}", listed.text);

    let trail = app.audit_rows("/api/v1/system-audit-logs", None, "doctors/{id}/calendar-keys", id).await;
    let actions: Vec<&str> = trail.iter().map(|row| row["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "revoke"]);
    assert!(!serde_json::to_string(&trail).unwrap().contains(&secret[3..]), "no secret audited");

    // Administrators only.
    let (_, nurse) = app.create_user("nurse1", &["nurse"], &[desk.clinic.branch]).await;
    let req = app.request_as(&nurse, reqwest::Method::POST, &keys, desk.branch());
    assert_error(&reply(req.json(&json!({}))).await, 403, "forbidden");
}

#[tokio::test]
async fn a_wrong_revoked_or_other_doctors_key_is_401() {
    let desk = Desk::open().await;
    let app = desk.app();
    let other = json!({ "first_name": "Leo", "last_name": "Tan", "license_no": "PRC-0002" });
    let other = id_of(&app.created("/api/v1/doctors", None, other).await);
    let mine = app.post(&keys_of(desk.doctor), desk.branch(), json!({})).await;
    let theirs = app.post(&keys_of(other), desk.branch(), json!({})).await;
    let secret = mine.body["data"]["key"].as_str().unwrap();
    let their_secret = theirs.body["data"]["key"].as_str().unwrap();
    let doctor = desk.doctor;

    feed_of(app, &format!("/calendar/doctors/{doctor}.ics?key={secret}")).await;
    for wrong in [
        format!("/calendar/doctors/{doctor}.ics?key={their_secret}"),
        format!("/calendar/doctors/{doctor}.ics?key=ck_{}", "0".repeat(64)),
        format!("/calendar/doctors/{doctor}.ics?key=nonsense"),
        format!("/calendar/doctors/{doctor}.ics"),
        format!("/calendar/doctors/{other}.ics?key={secret}"),
    ] {
        assert_error(&feed(app, &wrong).await, 401, "unauthenticated");
    }
    // A user's token opens no feed.
    let req = app.http.get(app.url(&format!("/calendar/doctors/{doctor}.ics"))).bearer_auth(&app.admin_token);
    assert_error(&reply(req).await, 401, "unauthenticated");
}

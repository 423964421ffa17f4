//! The appointment slip: `GET /appointments/{id}` in PDF, read back with `pdftotext`. Every
//! field is on it, the time is the branch's local time, a reason at its longest wraps
//! without losing a word, and names in other scripts print whole.

use super::*;
use crate::support::printed::{self, get_accepting, get_pdf, pdf_of, squashed};

/// `text` holds `shown`, white space aside (a value may wrap).
#[track_caller]
fn shows(text: &str, shown: &str) {
    assert!(squashed(text).contains(&squashed(shown)), "{shown:?} is not in:\n{text}");
}

/// The branch of `desk` in `zone`, with an address and a phone on its letterhead; its name.
async fn letterhead(desk: &Desk, zone: &str) -> String {
    let path = format!("/api/v1/branches/{}", desk.clinic.branch);
    let change =
        json!({ "timezone": zone, "address": "12 Rizal Avenue, Cebu City", "phone": "+63 32 555 0100" });
    let r = desk.app().put(&path, None, change).await;
    assert_status(&r, 200);
    r.body["data"]["name"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_appointment_prints_as_a_slip_with_every_field_in_the_branchs_local_time() {
    let desk = Desk::open().await;
    // Auckland is UTC+13 in January: Monday 09:00 there is Sunday 20:00 in UTC.
    let branch_name = letterhead(&desk, "Pacific/Auckland").await;
    assert_status(&desk.hours(1, "08:00", "12:00", json!({})).await, 201);
    let booked = desk.book("2030-01-06T20:00:00+00:00", json!({ "duration_minutes": 20 })).await;
    assert_status(&booked, 201);
    let path = format!("{APPOINTMENTS}/{}", id_of(&booked));
    let app = desk.app();

    let pdf = pdf_of(app, &app.admin_token, &path, desk.clinic.branch).await;
    let text = printed::text(&pdf);
    for shown in [
        "Appointment slip",
        &format!("No. {}", id_of(&booked)),
        "Patient Ana Cruz",
        "PIN MAIN-000001",
        "Doctor Rosa Santos",
        "Service Consultation",
        "Date Monday 7 January 2030 (2030-01-07)",
        "Time 09:00 to 09:20 (Pacific/Auckland)",
        "Length 20 minutes",
        "Status Booked",
        "Reason Blurred vision",
        &branch_name,
        "12 Rizal Avenue, Cebu City",
        "+63 32 555 0100",
        "by Administrator",
    ] {
        shows(&text, shown);
    }
    // A slip is not a signed document: no DRAFT mark; its UTC date is nowhere.
    assert!(!text.contains("DRAFT") && !text.contains("2030-01-06"), "{text}");
    assert_eq!(printed::render_pages(&pdf, "appointment-slip"), 1);
    let r = get_pdf(app, &app.admin_token, &path, desk.clinic.branch).await;
    assert_eq!(
        r.header("content-disposition"),
        Some(format!("inline; filename=\"appointment-{}.pdf\"", id_of(&booked)).as_str())
    );

    // The slip follows the appointment's moves; JSON stays the default.
    assert_status(&desk.act(id_of(&booked), "arrive", json!({})).await, 200);
    shows(&printed::text(&pdf_of(app, &app.admin_token, &path, desk.clinic.branch).await), "Status Arrived");
    let other = desk.book("2030-01-06T21:00:00+00:00", json!({})).await;
    let cancel = json!({ "reason": "Patient travelling" });
    assert_status(&desk.act(id_of(&other), "cancel", cancel).await, 200);
    let other_path = format!("{APPOINTMENTS}/{}", id_of(&other));
    let text = printed::text(&pdf_of(app, &app.admin_token, &other_path, desk.clinic.branch).await);
    shows(&text, "Status Cancelled");
    shows(&text, "Cancelled because Patient travelling");
    let r = reply(get_accepting(app, &app.admin_token, &path, desk.clinic.branch, "application/json")).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "arrived");
}

#[tokio::test]
async fn a_slip_is_a_disclosure_read_with_appointments_read() {
    let desk = Desk::with_monday_hours().await;
    let booked = desk.book(&at(MONDAY, "09:00"), json!({})).await;
    let path = format!("{APPOINTMENTS}/{}", id_of(&booked));
    let app = desk.app();
    let b = desk.clinic.branch;
    let (_, pharmacist) = app.create_user("pharma", &["pharmacist"], &[b]).await;
    assert_error(&get_pdf(app, &pharmacist, &path, b).await, 403, "forbidden");
    let (_, receptionist) = app.create_user("front", &["receptionist"], &[b]).await;
    pdf_of(app, &receptionist, &path, b).await;
    assert_error(&get_pdf(app, &receptionist, &format!("{APPOINTMENTS}/999999"), b).await, 404, "not_found");

    // Each print is recorded against the appointment, naming its patient.
    app.state.read_audit.flush().await;
    let client = app.state.registry.get().await.unwrap();
    let sql = format!(
        "SELECT after, route FROM branch_{b}.audit_log
          WHERE resource = 'appointments' AND action = 'print' AND record_id = $1"
    );
    let prints: Vec<(Value, Option<String>)> =
        client.query(&sql, &[&id_of(&booked)]).await.unwrap().iter().map(|r| (r.get(0), r.get(1))).collect();
    let print = (
        json!({ "patient_id": desk.clinic.patient, "format": "pdf" }),
        Some("GET /api/v1/appointments/{id}".to_owned()),
    );
    assert_eq!(prints, vec![print]);
}

#[tokio::test]
async fn a_reason_at_its_longest_wraps_on_the_slip_without_losing_a_word() {
    let desk = Desk::with_monday_hours().await;
    // 55 words of 8 characters and one of 5: 500 characters, the reason's limit.
    let mut words: Vec<String> = (0..55).map(|i| format!("rs{i:04}ab")).collect();
    words.push("final".into());
    let reason = words.join(" ");
    assert_eq!(reason.chars().count(), 500);
    let booked = desk.book(&at(MONDAY, "10:00"), json!({ "reason": reason })).await;
    assert_status(&booked, 201);
    let app = desk.app();
    let path = format!("{APPOINTMENTS}/{}", id_of(&booked));
    let text = printed::text(&pdf_of(app, &app.admin_token, &path, desk.clinic.branch).await);
    let printed_words: Vec<&str> = text.split_whitespace().collect();
    let start = printed_words.iter().position(|w| *w == "rs0000ab").expect("the reason is printed");
    assert_eq!(
        printed_words[start..start + words.len()],
        words.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // It took several lines.
    let lines = text.lines().filter(|l| l.contains("rs0")).count();
    assert!(lines >= 3, "{lines} lines:\n{text}");
}

#[tokio::test]
async fn names_in_other_scripts_print_whole_on_the_slip() {
    let desk = Desk::with_monday_hours().await;
    let app = desk.app();
    let doctor = json!({ "first_name": "Иван", "last_name": "Сидоров", "license_no": "PRC-0002" });
    let doctor = id_of(&app.created("/api/v1/doctors", None, doctor).await);
    let hours = json!({ "doctor_id": doctor, "weekday": 1, "start_time": "08:00", "end_time": "12:00" });
    assert_status(&app.post(SCHEDULES, desk.branch(), hours).await, 201);
    let names = [
        ("Nguyễn Thị", "Peña"),
        ("Αλέξανδρος", "Παπαδόπουλος"),
        ("محمد", "عبد الله"),
        ("שרה", "כהן"),
        ("अर्जुन", "शर्मा"),
        ("สมชาย", "ใจดี"),
        ("小明", "王"),
        ("민준", "김"),
    ];
    for (i, (first, last)) in names.iter().enumerate() {
        let patient = id_of(&app.create_patient(desk.clinic.branch, first, last).await);
        let starts = at(MONDAY, &format!("{:02}:{:02}", 8 + i / 4, (i % 4) * 15));
        let extra =
            json!({ "patient_id": patient, "doctor_id": doctor, "reason": format!("Follow-up of {first}") });
        let booked = desk.book(&starts, extra).await;
        assert_status(&booked, 201);
        let path = format!("{APPOINTMENTS}/{}", id_of(&booked));
        let text = printed::text(&pdf_of(app, &app.admin_token, &path, desk.clinic.branch).await);
        shows(&text, &format!("Patient {first} {last}"));
        shows(&text, &format!("Reason Follow-up of {first}"));
        shows(&text, "Doctor Иван Сидоров");
        assert!(!text.contains('\u{FFFD}'), "{first} {last}: {text}");
    }
}

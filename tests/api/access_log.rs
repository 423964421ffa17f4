//! Who saw this patient: a patient's access log names every read and change of their
//! records (a view, a list, a search, the type-ahead, an export, a FHIR read, a printed
//! document, the writes) with the user and the route, and nothing of other patients; it needs
//! `audit.read`, is itself recorded, and exports as CSV and PDF with the same entries.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::printed::{self, squashed};
use crate::support::{TestApp, assert_error, assert_invalid, assert_status, id_of, reply};

/// (user name, action, resource, record id, route) of an entry.
type Entry = (String, String, String, Option<i64>, String);

fn entry(row: &Value) -> Entry {
    (
        row["user_name"].as_str().unwrap_or_default().to_owned(),
        row["action"].as_str().unwrap().to_owned(),
        row["resource"].as_str().unwrap().to_owned(),
        row["record_id"].as_i64(),
        row["route"].as_str().unwrap_or_default().to_owned(),
    )
}

fn of(user: &str, action: &str, resource: &str, record: Option<i64>, route: &str) -> Entry {
    (user.into(), action.into(), resource.into(), record, route.into())
}

/// Every entry of the patient's access log, newest first, read by the admin.
async fn log(app: &TestApp, branch: i64, patient: i64) -> Vec<Value> {
    let r = app.get(&format!("/api/v1/patients/{patient}/access-log?perPage=100"), Some(branch)).await;
    assert_status(&r, 200);
    assert!(r.body["meta"]["total"].as_i64().unwrap() <= 100, "{}", r.body["meta"]);
    r.body["data"].as_array().unwrap().clone()
}

async fn read_as(app: &TestApp, token: &str, path: &str, branch: i64) {
    let r = app.call_as(token, Method::GET, path, Some(branch), Value::Null).await;
    assert_status(&r, 200);
}

/// A branch where a doctor has read Ana's records every way there is, and Ben's too.
struct Scene {
    app: TestApp,
    branch: i64,
    ana: i64,
    ben: i64,
    certificate: i64,
    visit: i64,
    doctor: String,
}

async fn scene() -> Scene {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let ana = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let ben = id_of(&app.create_patient(branch, "Ben", "Reyes").await);
    let visit = json!({ "patient_id": ana, "visit_date": "2026-01-05" });
    let visit = id_of(&app.created("/api/v1/patient-visits", Some(branch), visit).await);
    let certificate = json!({ "patient_visit_id": visit, "diagnosis": "Dry eye" });
    let certificate = id_of(&app.created("/api/v1/medical-certificates", Some(branch), certificate).await);
    let (_, doctor) = app.create_user("dr.ocampo", &["doctor"], &[branch]).await;
    for path in [
        format!("/api/v1/patients/{ana}"),
        "/api/v1/patients".to_owned(),
        "/api/v1/patients?search=cruz".to_owned(),
        "/api/v1/patients/search?search=ana".to_owned(),
        "/api/v1/patients/export?format=csv".to_owned(),
        format!("/fhir/r4/Patient/{ana}"),
        // Ben's alone: not Ana's business.
        format!("/api/v1/patients/{ben}"),
        "/api/v1/patients?search=reyes".to_owned(),
        "/api/v1/patients/search?search=ben".to_owned(),
    ] {
        read_as(&app, &doctor, &path, branch).await;
    }
    let pdf =
        printed::pdf_of(&app, &doctor, &format!("/api/v1/medical-certificates/{certificate}"), branch).await;
    assert!(pdf.starts_with(b"%PDF"));
    Scene { app, branch, ana, ben, certificate, visit, doctor }
}

#[tokio::test]
async fn every_kind_of_read_and_write_of_a_patient_is_in_their_access_log_and_nothing_of_another() {
    let Scene { app, branch, ana, ben, certificate, visit, doctor } = scene().await;
    let entries = log(&app, branch, ana).await;
    let mut by_doctor: Vec<Entry> = entries.iter().map(entry).filter(|e| e.0 == "dr.ocampo").collect();
    by_doctor.sort();
    let mut expected = vec![
        of("dr.ocampo", "view", "patients", Some(ana), "GET /api/v1/patients/{id}"),
        of("dr.ocampo", "list", "patients", None, "GET /api/v1/patients"),
        of("dr.ocampo", "search", "patients", None, "GET /api/v1/patients"),
        of("dr.ocampo", "search", "patients", None, "GET /api/v1/patients/search"),
        of("dr.ocampo", "exported", "patients", None, "GET /api/v1/patients/export"),
        of("dr.ocampo", "view", "patients", Some(ana), "GET /fhir/r4/Patient/{id}"),
        of(
            "dr.ocampo",
            "print",
            "medical-certificates",
            Some(certificate),
            "GET /api/v1/medical-certificates/{id}",
        ),
    ];
    expected.sort();
    assert_eq!(by_doctor, expected);
    let writes: Vec<Entry> = entries.iter().map(entry).filter(|e| e.0 == "Administrator").collect();
    assert_eq!(
        writes,
        [
            of(
                "Administrator",
                "create",
                "medical-certificates",
                Some(certificate),
                "POST /api/v1/medical-certificates"
            ),
            of("Administrator", "create", "patient-visits", Some(visit), "POST /api/v1/patient-visits"),
            of("Administrator", "create", "patients", Some(ana), "POST /api/v1/patients"),
        ]
    );
    assert_eq!(entries.len(), expected.len() + writes.len(), "nothing else: {entries:#?}");
    let times: Vec<&str> = entries.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first: {times:?}");

    // Ben's log has his own reads, the list that showed both, and none of Ana's.
    let bens: Vec<Entry> = log(&app, branch, ben).await.iter().map(entry).collect();
    assert!(bens.contains(&of("dr.ocampo", "view", "patients", Some(ben), "GET /api/v1/patients/{id}")));
    assert!(bens.contains(&of("dr.ocampo", "list", "patients", None, "GET /api/v1/patients")));
    let anas = |e: &Entry| e.2 != "patients" || e.3 == Some(ana);
    assert!(!bens.iter().any(anas), "{bens:#?}");
    assert_eq!(bens.iter().filter(|e| e.1 == "search").count(), 2, "the searches for Ben: {bens:#?}");

    // Reading the log is a disclosure too; it needs audit.read.
    let again: Vec<Entry> = log(&app, branch, ana).await.iter().map(entry).collect();
    let reading =
        of("Administrator", "access_log", "patients", Some(ana), "GET /api/v1/patients/{id}/access-log");
    assert_eq!(again[0], reading);
    for path in
        [format!("/api/v1/patients/{ana}/access-log"), format!("/api/v1/patients/{ana}/access-log/export")]
    {
        let r = reply(printed::get_accepting(&app, &doctor, &path, branch, "*/*")).await;
        assert_error(&r, 403, "forbidden");
    }
    assert_error(&app.get("/api/v1/patients/999999/access-log", Some(branch)).await, 404, "not_found");
}

#[tokio::test]
async fn the_access_log_pages_by_cursor_and_is_narrowed_like_every_list() {
    let Scene { app, branch, ana, .. } = scene().await;
    let all = log(&app, branch, ana).await;
    let first = app.get(&format!("/api/v1/patients/{ana}/access-log?perPage=2"), Some(branch)).await;
    assert_status(&first, 200);
    // The read above adds one entry (the log read) before this page.
    assert_eq!(first.body["meta"]["total"].as_i64().unwrap(), all.len() as i64 + 1);
    assert_eq!(first.body["meta"]["per_page"], 2);
    assert_eq!(first.body["data"][1]["id"], all[0]["id"]);
    let cursor = first.body["meta"]["next_cursor"].as_str().unwrap();
    let next = first.body["links"]["next"].as_str().unwrap();
    assert!(next.contains(&format!("cursor={cursor}")) && next.contains("perPage=2"), "{next}");
    let second =
        app.get(&format!("/api/v1/patients/{ana}/access-log?perPage=2&cursor={cursor}"), Some(branch)).await;
    assert_status(&second, 200);
    assert_eq!(second.body["meta"]["total"], first.body["meta"]["total"], "the first page's snapshot");
    assert_eq!(
        (&second.body["data"][0]["id"], &second.body["data"][1]["id"]),
        (&all[1]["id"], &all[2]["id"])
    );

    // Page numbers are not taken, nor a cursor the log did not give.
    for query in ["page=2", "cursor=abc", "cursor=1.2", "cursor=5.1.9", "cursor=0.1.1", "cursor=1.2.3.4"] {
        let r = app.get(&format!("/api/v1/patients/{ana}/access-log?{query}"), Some(branch)).await;
        let parameter = query.split('=').next().unwrap();
        assert_invalid(&r, &[parameter]);
    }
    let narrowed = app
        .get(&format!("/api/v1/patients/{ana}/access-log?filters[action]=print&perPage=100"), Some(branch))
        .await;
    assert_eq!(narrowed.body["meta"]["total"], 1, "{}", narrowed.body);
    assert_eq!(narrowed.body["meta"]["next_cursor"], Value::Null);
    assert_eq!(narrowed.body["links"]["next"], Value::Null);
    let r = app.get(&format!("/api/v1/patients/{ana}/access-log?sortField=user_id"), Some(branch)).await;
    assert_status(&r, 422);
    let r = app.get(&format!("/api/v1/patients/{ana}/access-log?filters[user_id]=x"), Some(branch)).await;
    assert_status(&r, 422);
}

/// The ids of `patient`'s own audit records, newest first, read straight from the table.
async fn own_records(app: &TestApp, branch: i64, patient: i64) -> Vec<i64> {
    app.state.read_audit.flush().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let sql = format!(
        "SELECT id FROM branch_{branch}.audit_log WHERE resource = 'patients' AND record_id = $1 ORDER BY at DESC, id DESC"
    );
    client.query(&sql, &[&patient]).await.unwrap().iter().map(|row| row.get(0)).collect()
}

#[tokio::test]
async fn paging_through_the_log_shows_each_entry_once_in_order_while_reads_add_entries() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let patient = id_of(&app.create_patient(branch, "Cora", "Lim").await);
    for _ in 0..13 {
        assert_status(&app.get(&format!("/api/v1/patients/{patient}"), Some(branch)).await, 200);
    }
    assert_eq!(own_records(&app, branch, patient).await.len(), 14, "a create and 13 views");

    // Newest first, then oldest first from a new snapshot (holding the reads of the first pass).
    for direction in ["desc", "asc"] {
        let expected = own_records(&app, branch, patient).await;
        let mut shown = Vec::new();
        let mut next =
            Some(format!("/api/v1/patients/{patient}/access-log?perPage=2&sortDirection={direction}"));
        let mut pages = 0;
        while let Some(path) = next {
            let r = app.get(&path, Some(branch)).await;
            assert_status(&r, 200);
            assert_eq!(r.body["meta"]["total"], expected.len(), "{direction}: {}", r.body["meta"]);
            shown.extend(r.body["data"].as_array().unwrap().iter().map(|e| e["id"].as_i64().unwrap()));
            // More entries while paging: a view, and the log read itself.
            assert_status(&app.get(&format!("/api/v1/patients/{patient}"), Some(branch)).await, 200);
            next = r.body["links"]["next"]
                .as_str()
                .map(|link| link[link.find("/api/v1/").unwrap()..].to_owned());
            pages += 1;
            assert!(pages <= expected.len().div_ceil(2), "{direction}: too many pages: {shown:?}");
        }
        let mut in_order = expected.clone();
        if direction == "asc" {
            in_order.reverse();
        }
        assert_eq!(shown, in_order, "{direction}: each entry once, in order");
    }
    // A new first page is a new snapshot, with the reads made meanwhile.
    let again = app.get(&format!("/api/v1/patients/{patient}/access-log?perPage=2"), Some(branch)).await;
    // 14, then a view and a log read for each of the 7 pages newest first and the 14 oldest first.
    assert_eq!(again.body["meta"]["total"], 14 + 2 * 7 + 2 * 14, "{}", again.body["meta"]);
}

/// A spreadsheet would run a cell starting with = + - @ as a formula.
fn safe(cell: &str) -> String {
    if cell.starts_with(['=', '+', '-', '@']) { format!("'{cell}") } else { cell.to_owned() }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn the_access_log_exports_as_csv_and_pdf_with_every_field() {
    let Scene { app, branch, ana, .. } = scene().await;
    // A name a spreadsheet would take for a formula.
    let registry = app.state.registry.get().await.unwrap();
    registry
        .execute("UPDATE users SET name = '=SUM(A1)+Ocampo, Dr.' WHERE username = 'dr.ocampo'", &[])
        .await
        .unwrap();
    let entries = log(&app, branch, ana).await;

    let export = format!("/api/v1/patients/{ana}/access-log/export?format=csv");
    let r = reply(app.request(Method::GET, &export, Some(branch)).header("accept", "text/csv")).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("text/csv; charset=utf-8"));
    let mut csv = csv::Reader::from_reader(r.text.as_bytes());
    let header: Vec<String> = csv.headers().unwrap().iter().map(str::to_owned).collect();
    assert_eq!(header, ["at", "user_id", "user_name", "action", "resource", "record_id", "route", "id"]);
    let rows: Vec<Vec<String>> =
        csv.records().map(|r| r.unwrap().iter().map(str::to_owned).collect()).collect();
    // Newest first: the log read just made, then the entries the log showed.
    assert_eq!(rows.len(), entries.len() + 1);
    assert_eq!((rows[0][3].as_str(), rows[0][2].as_str()), ("access_log", "Administrator"));
    for (row, entry) in rows[1..].iter().zip(&entries) {
        for (cell, column) in row.iter().zip(&header) {
            assert_eq!(cell, &safe(&text_of(&entry[column])), "{column} of {entry}");
        }
    }
    assert!(rows.iter().any(|row| row[2] == "'=SUM(A1)+Ocampo, Dr."), "{rows:?}");

    let asked =
        |path: String, accept: &str| printed::get_accepting(&app, &app.admin_token, &path, branch, accept);
    let by_accept = asked(format!("/api/v1/patients/{ana}/access-log/export"), "application/pdf");
    assert_eq!(reply(by_accept).await.header("content-type"), Some("application/pdf"));
    let res = reply(asked(export.replace("csv", "pdf"), "*/*")).await;
    assert_status(&res, 200);
    assert_eq!(res.header("content-type"), Some("application/pdf"));
    let bytes = res.bytes;
    let text = printed::text(&bytes);
    let flat = squashed(&text);
    for needle in ["Access log", "Ana Cruz", "Main Branch", "When", "Who", "Action", "Record", "Route"] {
        assert!(flat.contains(&squashed(needle)), "{needle}: {text}");
    }
    // Each entry, one row: when (the branch's zone is UTC), who, what, which record, the route.
    for entry in &entries {
        let at = entry["at"].as_str().unwrap();
        let record = [text_of(&entry["resource"]), text_of(&entry["record_id"])].join(" ");
        let row = format!(
            "{} {} (UTC) {} {} {} {}",
            &at[..10],
            &at[11..16],
            text_of(&entry["user_name"]),
            text_of(&entry["action"]),
            record,
            text_of(&entry["route"])
        );
        assert!(flat.contains(&squashed(&row)), "{row} is not in the report:\n{text}");
    }
    assert!(!text.contains("DRAFT"), "a report is not a signed document");
    assert!(printed::render_pages(&bytes, "access-log") >= 1);
    let xls = reply(asked(export.replace("csv", "xls"), "*/*")).await;
    assert_error(&xls, 422, "validation_failed");
    let json = reply(asked(export, "application/json")).await;
    assert_error(&json, 406, "not_acceptable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_prints_and_views_are_each_in_the_access_log_once() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let branch = app.main_branch().await;
    let ana = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let visit = json!({ "patient_id": ana, "visit_date": "2026-01-05" });
    let visit = id_of(&app.created("/api/v1/patient-visits", Some(branch), visit).await);
    let certificate = json!({ "patient_visit_id": visit, "diagnosis": "Dry eye" });
    let certificate = id_of(&app.created("/api/v1/medical-certificates", Some(branch), certificate).await);
    let mut reads = Vec::new();
    for i in 0..40 {
        let (path, accept) = if i % 2 == 0 {
            (format!("/api/v1/medical-certificates/{certificate}"), "application/pdf")
        } else {
            (format!("/api/v1/patients/{ana}"), "application/json")
        };
        let req = printed::get_accepting(&app, &app.admin_token, &path, branch, accept);
        reads.push(tokio::spawn(reply(req)));
    }
    for read in reads {
        assert_status(&read.await.unwrap(), 200);
    }
    for (action, expected) in [("print", 20), ("view", 20)] {
        let path = format!("/api/v1/patients/{ana}/access-log?filters[action]={action}");
        let r = app.get(&path, Some(branch)).await;
        assert_eq!(r.body["meta"]["total"], expected, "{action}: {}", r.body);
    }
}

//! The export: CSV and JSON lines, filters, search and sort, formulas neutralised, one branch
//! only, streamed whole.

use super::*;

#[tokio::test]
async fn export_csv_has_a_header_row_and_one_line_per_patient() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient_with(
        &app,
        main,
        "Ana",
        "Cruz",
        json!({ "middle_name": "Luz", "city": "Cebu", "email": "ana@example.com", "civil_status": "single" }),
    )
    .await;
    let ben =
        patient_with(&app, main, "Ben", "Reyes", json!({ "sex": "male", "birth_date": "1990-03-04" })).await;
    let carl = patient(&app, main, "Carl", "Santos").await;

    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    let content_type = r.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/csv"), "content-type {content_type}");
    let (header, records) = csv_records(&r.text);
    for column in [
        "id",
        "pin",
        "first_name",
        "middle_name",
        "last_name",
        "birth_date",
        "age",
        "sex",
        "civil_status",
        "status",
        "phone",
        "email",
        "city",
    ] {
        assert!(header.iter().any(|h| h == column), "header lacks {column}: {header:?}");
    }
    assert_eq!(records.len(), 3, "one line per patient: {}", r.text);
    assert_eq!(csv_column(&records, "last_name"), vec!["Cruz", "Reyes", "Santos"], "default sort");
    let first = &records[0];
    assert_eq!(first["id"], id_of(&ana).to_string());
    assert_eq!(first["pin"], "MAIN-000001");
    assert_eq!(first["first_name"], "Ana");
    assert_eq!(first["middle_name"], "Luz");
    assert_eq!(first["birth_date"], "1985-06-15");
    assert_eq!(first["sex"], "female");
    assert_eq!(first["civil_status"], "single");
    assert_eq!(first["email"], "ana@example.com");
    assert_eq!(first["city"], "Cebu");
    assert_eq!(first["age"], ana["age"].to_string());
    assert_eq!(first["phone"], "", "null is an empty cell");
    assert_eq!(records[1]["pin"], ben["pin"].as_str().unwrap());
    assert_eq!(records[1]["sex"], "male");
    assert_eq!(records[1]["birth_date"], "1990-03-04");
    assert_eq!(records[2]["id"], id_of(&carl).to_string());

    // An empty selection is the header alone.
    let r = reply(export(&app, main, "search=nobody")).await;
    assert_status(&r, 200);
    let (empty_header, records) = csv_records(&r.text);
    assert_eq!(empty_header, header);
    assert!(records.is_empty(), "{}", r.text);
}

#[tokio::test]
async fn export_honours_filters_and_search() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, last, sex, status) in [
        ("José", "Peña", "male", "active"),
        ("Maria", "Peña", "female", "active"),
        ("Jose", "Rizal", "male", "inactive"),
        ("Ana", "Cruz", "female", "deceased"),
    ] {
        patient_with(&app, main, first, last, json!({ "sex": sex, "status": status })).await;
    }
    let names = |text: &str| {
        let (_, records) = csv_records(text);
        records.iter().map(|r| format!("{} {}", r["first_name"], r["last_name"])).collect::<Vec<_>>()
    };
    let r = reply(export(&app, main, "filters[sex]=male&sortField=last_name")).await;
    assert_status(&r, 200);
    assert_eq!(names(&r.text), vec!["José Peña", "Jose Rizal"]);
    let r = reply(export(&app, main, "search=pena")).await;
    assert_eq!(names(&r.text), vec!["José Peña", "Maria Peña"]);
    let r = reply(export(&app, main, "search=pena%20jose")).await;
    assert_eq!(names(&r.text), vec!["José Peña"]);
    let r = reply(export(&app, main, "search=jose&filters[status]=inactive")).await;
    assert_eq!(names(&r.text), vec!["Jose Rizal"]);
    let r = reply(export(&app, main, "filters[status]=deceased")).await;
    assert_eq!(names(&r.text), vec!["Ana Cruz"]);
    // A bad filter is refused as in the list.
    let r = reply(export(&app, main, "filters[sex]=robot")).await;
    assert_invalid(&r, &["filters[sex]"]);
    let r = reply(export(&app, main, "sortField=password")).await;
    assert_invalid(&r, &["sortField"]);
}

#[tokio::test]
async fn export_honours_the_sort() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, last, born) in
        [("Carl", "Bravo", "1990-05-01"), ("Ana", "Delta", "1970-01-01"), ("Dina", "Alpha", "2001-12-31")]
    {
        patient_with(&app, main, first, last, json!({ "birth_date": born })).await;
    }
    let firsts = |text: &str| csv_column(&csv_records(text).1, "first_name");
    let r = reply(export(&app, main, "sortField=birth_date&sortDirection=desc")).await;
    assert_status(&r, 200);
    assert_eq!(firsts(&r.text), vec!["Dina", "Carl", "Ana"]);
    let r = reply(export(&app, main, "sortField=first_name")).await;
    assert_eq!(firsts(&r.text), vec!["Ana", "Carl", "Dina"]);
    let r = reply(export(&app, main, "sortField=pin&sortDirection=desc")).await;
    assert_eq!(firsts(&r.text), vec!["Dina", "Ana", "Carl"]);
    let r = reply(export(&app, main, "")).await;
    assert_eq!(firsts(&r.text), vec!["Dina", "Carl", "Ana"], "last_name by default");
}

#[tokio::test]
async fn export_csv_neutralises_formulas_and_json_keeps_the_values() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient_with(
        &app,
        main,
        "=HYPERLINK(1)",
        "+SUM(A1)",
        json!({
            "middle_name": "-2+3",
            "suffix": "@cmd",
            "city": "Safe=City",
            "phone": "+63 912 345 6789",
        }),
    )
    .await;
    assert_eq!(p["first_name"], "=HYPERLINK(1)", "the record itself is stored as typed");

    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    let (_, records) = csv_records(&r.text);
    assert_eq!(records.len(), 1);
    let row = &records[0];
    assert_eq!(row["first_name"], "'=HYPERLINK(1)");
    assert_eq!(row["last_name"], "'+SUM(A1)");
    assert_eq!(row["middle_name"], "'-2+3");
    assert_eq!(row["suffix"], "'@cmd");
    assert_eq!(row["phone"], "'+63 912 345 6789");
    assert_eq!(row["city"], "Safe=City", "only a leading formula character is neutralised");
    assert!(!r.text.contains(",=HYPERLINK"), "raw formula in the CSV: {}", r.text);

    let r = reply(export(&app, main, "format=json")).await;
    assert_status(&r, 200);
    let lines = json_lines(&r.text);
    assert_eq!(lines[0]["first_name"], "=HYPERLINK(1)", "JSON is not a spreadsheet: values unchanged");
    assert_eq!(lines[0]["last_name"], "+SUM(A1)");
}

#[tokio::test]
async fn export_csv_quotes_commas_quotes_and_line_breaks() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let notes = "Line one, with a comma\nLine \"two\"";
    patient_with(
        &app,
        main,
        "Ana",
        "O\"Neil, Jr",
        json!({ "address_line": "12 Rizal St, Apt 4", "notes": notes, "occupation": "Plain" }),
    )
    .await;
    patient(&app, main, "Ben", "Zulu").await;
    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    assert!(r.text.contains("\"O\"\"Neil, Jr\""), "quote doubled and field quoted: {}", r.text);
    let (_, records) = csv_records(&r.text);
    assert_eq!(records.len(), 2, "a line break inside a value does not start a new record: {}", r.text);
    assert_eq!(records[0]["last_name"], "O\"Neil, Jr");
    assert_eq!(records[0]["address_line"], "12 Rizal St, Apt 4");
    assert_eq!(records[0]["notes"], notes);
    assert_eq!(records[0]["occupation"], "Plain");
    assert_eq!(records[1]["last_name"], "Zulu");
}

#[tokio::test]
async fn export_gives_json_lines_with_format_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient_with(&app, main, "Ana", "Cruz", json!({ "phone": "+63 912 345 6789" })).await;
    let ben = patient_with(&app, main, "Ben", "Reyes", json!({ "sex": "male" })).await;
    patient_with(&app, main, "Carl", "Santos", json!({ "sex": "male" })).await;
    let r = reply(export(&app, main, "format=json")).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let lines = json_lines(&r.text);
    assert_eq!(lines.len(), 3, "one object per patient, no header: {}", r.text);
    assert_eq!(lines[0]["id"], id_of(&ana));
    assert_eq!(lines[0]["pin"], "MAIN-000001");
    assert_eq!(lines[0]["phone"], "+63 912 345 6789");
    assert_eq!(lines[0]["birth_date"], "1985-06-15");
    assert_eq!(lines[0]["age"], ana["age"]);
    assert_eq!(lines[1]["id"], id_of(&ben));
    // With filters and sort like the list.
    let r =
        reply(export(&app, main, "format=json&filters[sex]=male&sortField=first_name&sortDirection=desc"))
            .await;
    let lines = json_lines(&r.text);
    let firsts: Vec<&str> = lines.iter().map(|l| l["first_name"].as_str().unwrap()).collect();
    assert_eq!(firsts, vec!["Carl", "Ben"]);
}

#[tokio::test]
async fn export_gives_json_lines_when_json_is_accepted() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    patient(&app, main, "Ben", "Reyes").await;
    // The harness sends Accept: application/json.
    let r = reply(app.request(Method::GET, EXPORT, Some(main))).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let lines = json_lines(&r.text);
    assert_eq!(
        lines.iter().map(|l| l["last_name"].as_str().unwrap()).collect::<Vec<_>>(),
        vec!["Cruz", "Reyes"]
    );
    // An explicit format wins over Accept, and Accept: text/csv gives CSV.
    let r = reply(app.request(Method::GET, &format!("{EXPORT}?format=csv"), Some(main))).await;
    assert_status(&r, 200);
    assert!(r.header("content-type").unwrap_or_default().starts_with("text/csv"), "{:?}", r.headers);
    assert_eq!(csv_records(&r.text).1.len(), 2);
    let r = reply(export(&app, main, "").header("accept", "text/csv")).await;
    assert!(r.header("content-type").unwrap_or_default().starts_with("text/csv"), "{:?}", r.headers);
}

#[tokio::test]
async fn export_format_other_than_csv_or_json_is_422_on_format() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    for bad in ["xml", "pdf", "xlsx"] {
        let r = reply(export(&app, main, &format!("format={bad}"))).await;
        assert_invalid(&r, &["format"]);
    }
}

#[tokio::test]
async fn export_is_a_download_named_after_the_branch() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    let disposition = r.header("content-disposition").expect("Content-Disposition").to_owned();
    assert!(disposition.starts_with("attachment"), "{disposition}");
    assert!(disposition.contains("filename="), "{disposition}");
    assert!(disposition.contains("MAIN"), "{disposition}");
    assert!(disposition.trim_end_matches('"').ends_with(".csv"), "{disposition}");
    let r = reply(export(&app, main, "format=json")).await;
    let disposition = r.header("content-disposition").expect("Content-Disposition");
    assert!(disposition.starts_with("attachment"), "{disposition}");
    assert!(
        !disposition.trim_end_matches('"').ends_with(".csv"),
        "JSON lines are not named .csv: {disposition}"
    );
}

#[tokio::test]
async fn export_and_lookup_need_patients_read() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    let (_, cashier) = app.create_user("cash1", &["cashier"], &[main]).await;
    let (_, nobody) = app.create_user("norole1", &[], &[main]).await;

    let r = reply(export_as(&app, &cashier, main, "")).await;
    assert_status(&r, 200);
    assert_eq!(csv_column(&csv_records(&r.text).1, "last_name"), vec!["Cruz"]);
    let r = reply(app.request_as(&cashier, Method::GET, &format!("{LOOKUP}?search=ana"), Some(main))).await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "last_name"), vec!["Cruz"]);

    let r = reply(export_as(&app, &nobody, main, "")).await;
    assert_status(&r, 403);
    assert!(!r.text.contains("Cruz"), "{}", r.text);
    let r = reply(export_as(&app, &nobody, main, "format=json")).await;
    assert_status(&r, 403);
    let r = reply(app.request_as(&nobody, Method::GET, &format!("{LOOKUP}?search=ana"), Some(main))).await;
    assert_status(&r, 403);
    let r = reply(app.request_as(&nobody, Method::GET, PATIENTS, Some(main))).await;
    assert_status(&r, 403);
}

#[tokio::test]
async fn export_of_one_branch_never_holds_another_branchs_patients() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    patient(&app, main, "Ana", "Cruz").await;
    patient(&app, north, "Ben", "Reyes").await;
    let r = reply(export(&app, north, "")).await;
    assert_status(&r, 200);
    let (_, records) = csv_records(&r.text);
    assert_eq!(csv_column(&records, "pin"), vec!["NORTH-000001"]);
    assert_eq!(csv_column(&records, "last_name"), vec!["Reyes"]);
    let disposition = r.header("content-disposition").unwrap_or_default();
    assert!(disposition.contains("NORTH"), "{disposition}");
}

#[tokio::test]
async fn a_large_export_streams_every_row_intact() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let rows = 3000;
    // Bulk setup straight into the branch schema; the export is what is under test.
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client
        .batch_execute(&format!(
            "SET search_path TO branch_{main}, public;
             INSERT INTO patients (first_name, last_name, birth_date, sex, notes)
             SELECT 'First' || g, 'Bulk' || lpad(g::text, 5, '0'), DATE '1980-01-02', 'male',
                    repeat('n', 200) || ', \"q\"' || chr(10) || 'end'
               FROM generate_series(1, {rows}) g"
        ))
        .await
        .unwrap();
    let notes = format!("{}, \"q\"\nend", "n".repeat(200));

    let r = reply(export(&app, main, "")).await;
    assert_status(&r, 200);
    assert!(r.text.len() > 500_000, "the export spans many chunks: {} bytes", r.text.len());
    let (_, records) = csv_records(&r.text);
    assert_eq!(records.len(), rows, "every row arrives");
    let expected: Vec<String> = (1..=rows).map(|g| format!("Bulk{g:05}")).collect();
    assert_eq!(csv_column(&records, "last_name"), expected, "in order, none lost or repeated");
    assert!(records.iter().all(|r| r["notes"] == notes), "every cell intact");
    let pins: BTreeSet<String> = csv_column(&records, "pin").into_iter().collect();
    assert_eq!(pins.len(), rows);

    let r = reply(export(&app, main, "format=json&sortDirection=desc")).await;
    assert_status(&r, 200);
    let lines = json_lines(&r.text);
    assert_eq!(lines.len(), rows);
    assert_eq!(lines[0]["last_name"], format!("Bulk{rows:05}"));
    assert_eq!(lines[rows - 1]["last_name"], "Bulk00001");
    assert!(lines.iter().all(|l| l["notes"] == notes.as_str()));
}

//! The dashboards: every figure against data the test made, in a
//! branch eight hours east of UTC so that local and UTC dates differ, plus the parameter
//! checks and permissions. Over HTTP against a real server and a fresh database.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{TestApp, assert_error, assert_invalid, assert_status, id_of, reply};

/// Branch MAIN moved to UTC+8 (no daylight saving).
async fn eastern_branch(app: &TestApp) -> i64 {
    let branch = app.main_branch().await;
    let r =
        app.put(&format!("/api/v1/branches/{branch}"), None, json!({ "timezone": "Asia/Singapore" })).await;
    assert_status(&r, 200);
    branch
}

/// Runs SQL in the branch's schema of the test database.
async fn in_branch(app: &TestApp, branch: i64, sql: &str) {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client.batch_execute(&format!("SET search_path TO branch_{branch}; {sql}")).await.unwrap();
}

async fn in_registry(app: &TestApp, sql: &str) {
    let client = app.state.registry.get().await.unwrap();
    client.batch_execute(sql).await.unwrap();
}

async fn dashboard(app: &TestApp, branch: i64, path: &str) -> Value {
    let r = app.get(&format!("/api/v1/dashboard/{path}"), Some(branch)).await;
    assert_status(&r, 200);
    assert!(r.body["message"].is_string());
    r.body["data"].clone()
}

/// A procedure and a doctor to book surgeries with.
async fn surgery_master_data(app: &TestApp) -> (i64, i64) {
    let procedure = app
        .created(
            "/api/v1/procedures",
            None,
            json!({ "code": "PHACO", "name": "Phaco", "category": "major_surgery" }),
        )
        .await;
    let doctor = app
        .created(
            "/api/v1/doctors",
            None,
            json!({ "first_name": "Rosa", "last_name": "Lim", "license_no": "PRC-1" }),
        )
        .await;
    (id_of(&procedure), id_of(&doctor))
}

async fn book(
    app: &TestApp,
    branch: i64,
    patient: i64,
    (procedure, doctor): (i64, i64),
    at: &str,
    theatre: &str,
) -> i64 {
    id_of(
        &app.created(
            "/api/v1/surgery-schedules",
            None,
            json!({ "branch_id": branch, "patient_id": patient, "procedure_id": procedure, "doctor_id": doctor,
                    "eye": "left", "scheduled_at": at, "duration_minutes": 30, "theatre": theatre }),
        )
        .await,
    )
}

async fn bill(app: &TestApp, branch: i64, patient: i64, body: Value) -> i64 {
    id_of(&app.created(&format!("/api/v1/patients/{patient}/billing-transactions"), Some(branch), body).await)
}

#[tokio::test]
async fn stats_and_calendar_count_on_the_branchs_local_dates() {
    let app = TestApp::spawn().await;
    let branch = eastern_branch(&app).await;
    let late = id_of(&app.create_patient(branch, "Lara", "Late").await);
    let early = id_of(&app.create_patient(branch, "Elmo", "Early").await);
    let _today = id_of(&app.create_patient(branch, "Tess", "Today").await);
    // 23:30 on 10 March local is 15:30 UTC the same day; 00:30 on 11 March local is still
    // 10 March in UTC.
    in_branch(
        &app,
        branch,
        &format!(
            "UPDATE patients SET created_at = '2026-03-10 23:30+08' WHERE id = {late};
             UPDATE patients SET created_at = '2026-03-11 00:30+08' WHERE id = {early};"
        ),
    )
    .await;

    for (date, status) in
        [("2026-03-10", "completed"), ("2026-03-10", "cancelled"), ("2026-03-11", "scheduled")]
    {
        let visit = app
            .created(
                "/api/v1/patient-visits",
                Some(branch),
                json!({ "patient_id": late, "visit_date": date }),
            )
            .await;
        in_branch(
            &app,
            branch,
            &format!("UPDATE patient_visits SET status = '{status}' WHERE id = {}", id_of(&visit)),
        )
        .await;
    }

    // Two tickets of 10 March local: one called 6 minutes after arriving at 23:30, one
    // called after 10 minutes and served for 8.
    let reception = id_of(
        &app.created(
            &format!("/api/v1/branches/{branch}/services"),
            Some(branch),
            json!({ "name": "Reception", "code": "R" }),
        )
        .await,
    );
    let mut tickets = Vec::new();
    for _ in 0..2 {
        let t = app
            .created(&format!("/api/v1/queue/branch-services/{reception}/queue"), Some(branch), json!({}))
            .await;
        tickets.push(id_of(&t));
    }
    in_branch(
        &app,
        branch,
        &format!(
            "UPDATE queue_tickets SET queue_date = '2026-03-10', status = 'called', created_at = '2026-03-10 23:30+08',
                    called_at = '2026-03-10 23:36+08' WHERE id = {};
             UPDATE queue_tickets SET queue_date = '2026-03-10', status = 'completed', created_at = '2026-03-10 08:00+08',
                    called_at = '2026-03-10 08:10+08', serving_at = '2026-03-10 08:12+08',
                    completed_at = '2026-03-10 08:20+08' WHERE id = {};",
            tickets[0], tickets[1]
        ),
    )
    .await;

    let master = surgery_master_data(&app).await;
    let at_2330 = book(&app, branch, late, master, "2026-03-10T15:30:00Z", "OR-1").await;
    let at_0030 = book(&app, branch, late, master, "2026-03-10T16:30:00Z", "OR-2").await;
    let cancelled = book(&app, branch, late, master, "2026-03-10T02:00:00Z", "OR-1").await;
    in_registry(
        &app,
        &format!(
            "UPDATE surgery_schedules SET status = 'completed' WHERE id = {at_0030};
             UPDATE surgery_schedules SET status = 'cancelled', cancel_reason = 'Fever' WHERE id = {cancelled};"
        ),
    )
    .await;

    // Money: on 10 March a posted charge of 100, payment of 30, refund of 5 and discount of
    // 10, and an open charge that counts nowhere; on 11 March a posted charge of 50.
    let posted = |mut body: Value, date: &str| {
        body["status"] = json!("posted");
        body["transaction_date"] = json!(date);
        body
    };
    bill(
        &app,
        branch,
        late,
        posted(json!({ "kind": "charge", "unit_price": "100.00", "description": "Consult" }), "2026-03-10"),
    )
    .await;
    bill(
        &app,
        branch,
        late,
        posted(json!({ "kind": "payment", "amount": "30.00", "payment_method_id": 1 }), "2026-03-10"),
    )
    .await;
    bill(
        &app,
        branch,
        late,
        posted(
            json!({ "kind": "refund", "amount": "5.00", "payment_method_id": 1, "description": "Change" }),
            "2026-03-10",
        ),
    )
    .await;
    bill(
        &app,
        branch,
        late,
        posted(json!({ "kind": "discount", "amount": "10.00", "description": "Senior" }), "2026-03-10"),
    )
    .await;
    bill(&app, branch, late, json!({ "kind": "charge", "unit_price": "999.00", "description": "Open", "transaction_date": "2026-03-10" })).await;
    let later_charge = bill(
        &app,
        branch,
        early,
        posted(json!({ "kind": "charge", "unit_price": "50.00", "description": "Drops" }), "2026-03-11"),
    )
    .await;

    // Pharmacy: an item at or below its reorder level, one lot expiring within 30 days.
    let item = id_of(
        &app.created(
            "/api/v1/pharmacy-items",
            None,
            json!({ "code": "TIM", "name": "Timolol", "unit": "bottle", "sale_price": "5.00", "reorder_level": "5" }),
        )
        .await,
    );
    // An item the branch keeps no lots of is not low stock there.
    app.created(
        "/api/v1/pharmacy-items",
        None,
        json!({ "code": "ATR", "name": "Atropine", "unit": "bottle", "sale_price": "5.00", "reorder_level": "3" }),
    )
    .await;
    let in_days = |n: i32| {
        let app = &app;
        async move {
            let client = app.state.registry.get().await.unwrap();
            let row = client
                .query_one("SELECT ((now() AT TIME ZONE 'Asia/Singapore')::date + $1::int)::text", &[&n])
                .await
                .unwrap();
            row.get::<_, String>(0)
        }
    };
    for (lot_no, expiry, on_hand) in [
        ("SOON", in_days(10).await, "3"),
        ("LATER", in_days(40).await, "1"),
        ("EMPTY", in_days(5).await, "0"),
    ] {
        let lot = app
            .created(
                "/api/v1/stock-availables",
                None,
                json!({ "branch_id": branch, "pharmacy_item_id": item, "lot_no": lot_no, "expiry_date": expiry }),
            )
            .await;
        if on_hand != "0" {
            let r = app
                .post(
                    "/api/v1/stock-movements",
                    None,
                    json!({ "branch_id": branch, "stock_available_id": id_of(&lot), "kind": "adjustment",
                            "quantity": on_hand, "reason": "Count" }),
                )
                .await;
            assert_status(&r, 201);
        }
    }

    let stats = dashboard(&app, branch, "stats?start_date=2026-03-10&end_date=2026-03-10").await;
    assert_eq!(
        stats,
        json!({
            "start_date": "2026-03-10",
            "end_date": "2026-03-10",
            "patients_total": 3,
            "new_patients": 1,
            "visits": { "total": 2, "scheduled": 0, "checked_in": 0, "in_progress": 0, "completed": 1, "cancelled": 1 },
            "queue": { "total": 2, "waiting": 0, "called": 1, "serving": 0, "completed": 1, "skipped": 0, "no_show": 0,
                       "transferred": 0, "average_wait_minutes": 8.0 },
            "surgeries": { "scheduled": 1, "completed": 0, "cancelled": 1 },
            "billing": { "charges": "100.00", "payments": "25.00", "outstanding": "115.00" },
            "pharmacy": { "low_stock": 1, "expiring_30_days": 1 },
        })
    );
    let next_day = dashboard(&app, branch, "stats?start_date=2026-03-11&end_date=2026-03-11").await;
    assert_eq!(next_day["new_patients"], 1);
    assert_eq!(next_day["visits"]["total"], 1);
    assert_eq!(next_day["queue"]["total"], 0);
    assert_eq!(next_day["queue"]["average_wait_minutes"], Value::Null, "no samples, no average");
    assert_eq!(next_day["surgeries"], json!({ "scheduled": 1, "completed": 1, "cancelled": 0 }));
    assert_eq!(next_day["billing"]["charges"], "50.00");

    // Voiding the later charge takes it out of what is owed.
    let r = reply(
        app.request(
            Method::DELETE,
            &format!("/api/v1/patients/{early}/billing-transactions/{later_charge}"),
            Some(branch),
        )
        .json(&json!({ "void_reason": "Not dispensed" })),
    )
    .await;
    assert_status(&r, 200);
    let after_void = dashboard(&app, branch, "stats?start_date=2026-03-11&end_date=2026-03-11").await;
    assert_eq!(
        after_void["billing"],
        json!({ "charges": "0.00", "payments": "0.00", "outstanding": "65.00" })
    );

    let calendar = dashboard(&app, branch, "calendar?start_date=2026-03-09&end_date=2026-03-11").await;
    let days = calendar["days"].as_array().unwrap();
    assert_eq!(
        days.iter().map(|d| d["date"].as_str().unwrap()).collect::<Vec<_>>(),
        ["2026-03-09", "2026-03-10", "2026-03-11"]
    );
    assert_eq!(days.iter().map(|d| d["visits"].as_i64().unwrap()).collect::<Vec<_>>(), [0, 2, 1]);
    assert_eq!(days.iter().map(|d| d["surgeries"].as_i64().unwrap()).collect::<Vec<_>>(), [0, 1, 1]);
    let event = &days[1]["events"][0];
    assert_eq!(event["id"], at_2330);
    assert_eq!(
        event["patient"],
        json!({ "id": late, "pin": event["patient"]["pin"], "first_name": "Lara", "last_name": "Late" })
    );
    assert!(event["patient"]["pin"].as_str().unwrap().starts_with("MAIN-"));
    assert_eq!(event["procedure"]["code"], "PHACO");
    assert_eq!(event["doctor"]["last_name"], "Lim");
    assert_eq!(event["duration_minutes"], 30);
    let keys: Vec<&str> = event.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "doctor",
            "duration_minutes",
            "eye",
            "id",
            "patient",
            "priority",
            "procedure",
            "scheduled_at",
            "status",
            "theatre"
        ]
    );
    assert!(event["scheduled_at"].as_str().unwrap().ends_with("+00:00"), "{event}");
    assert_eq!(days[2]["events"][0]["id"], at_0030);

    let flow = dashboard(&app, branch, "patient-flow?date=2026-03-10").await;
    let mut hours = vec![0; 24];
    hours[8] = 1;
    hours[23] = 1;
    assert_eq!(flow["arrivals_per_hour"], json!(hours));
    assert_eq!(flow["tickets"]["total"], 2);
    assert_eq!(flow["waiting_minutes"], json!({ "average": 8.0, "median": 8.0 }));
    assert_eq!(flow["service_minutes"], json!({ "average": 8.0, "median": 8.0 }));
    assert_eq!(
        flow["services"],
        json!([{ "branch_service_id": reception, "code": "R", "name": "Reception", "tickets": 2,
                 "waiting_minutes": { "average": 8.0, "median": 8.0 },
                 "service_minutes": { "average": 8.0, "median": 8.0 } }])
    );
}

#[tokio::test]
async fn upcoming_surgeries_run_from_now_to_the_end_of_the_last_local_day() {
    let app = TestApp::spawn().await;
    let branch = eastern_branch(&app).await;
    let patient = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let master = surgery_master_data(&app).await;
    let client = app.state.registry.get().await.unwrap();
    // The end of local day today + 6, as an instant, and instants around it.
    let row = client
        .query_one(
            "SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                    to_char(now() AT TIME ZONE 'UTC' + interval '2 hours', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                    to_char(now() AT TIME ZONE 'UTC' - interval '2 hours', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                    to_char((t - interval '30 minutes') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                    to_char((t + interval '30 minutes') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')
               FROM (SELECT (((now() AT TIME ZONE 'Asia/Singapore')::date + 7)::timestamp AT TIME ZONE 'Asia/Singapore') AS t) x",
            &[],
        )
        .await
        .unwrap();
    let (soon, past, last_evening, too_late): (String, String, String, String) =
        (row.get(1), row.get(2), row.get(3), row.get(4));
    let soon_id = book(&app, branch, patient, master, &soon, "OR-1").await;
    let _past = book(&app, branch, patient, master, &past, "OR-2").await;
    let last_id = book(&app, branch, patient, master, &last_evening, "OR-3").await;
    let _too_late = book(&app, branch, patient, master, &too_late, "OR-4").await;
    let later_today: String = client
        .query_one(
            "SELECT to_char(now() AT TIME ZONE 'UTC' + interval '4 hours', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let dropped = book(&app, branch, patient, master, &later_today, "OR-5").await;
    client
        .batch_execute(&format!(
            "UPDATE surgery_schedules SET status = 'cancelled', cancel_reason = 'x' WHERE id = {dropped};
             UPDATE surgery_schedules SET status = 'confirmed' WHERE id = {last_id};
             UPDATE surgery_schedules SET scheduled_at = scheduled_at + interval '0.1203 seconds' WHERE id = {soon_id};"
        ))
        .await
        .unwrap();
    drop(client);
    let data = dashboard(&app, branch, "upcoming-surgeries").await;
    assert_eq!(data["days"], 7);
    let ids: Vec<i64> =
        data["surgeries"].as_array().unwrap().iter().map(|s| s["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [soon_id, last_id]);
    assert_eq!(data["surgeries"][1]["status"], "confirmed");
    // Instants are written as every other answer writes them, fractions of a second included.
    for (event, id) in data["surgeries"].as_array().unwrap().iter().zip([soon_id, last_id]) {
        let schedule = app.get(&format!("/api/v1/surgery-schedules/{id}"), None).await;
        assert_eq!(event["scheduled_at"], schedule.body["data"]["scheduled_at"]);
    }
    assert!(data["surgeries"][0]["scheduled_at"].as_str().unwrap().ends_with(".1203+00:00"));
}

#[tokio::test]
async fn demographics_break_the_live_patients_down() {
    let app = TestApp::spawn().await;
    let branch = eastern_branch(&app).await;
    let client = app.state.registry.get().await.unwrap();
    let (eighty, almost_eighty, ten): (String, String, String) = {
        let row = client
            .query_one(
                "SELECT ((now() AT TIME ZONE 'Asia/Singapore')::date - interval '80 years')::date::text,
                        ((now() AT TIME ZONE 'Asia/Singapore')::date - interval '80 years' + interval '1 day')::date::text,
                        ((now() AT TIME ZONE 'Asia/Singapore')::date - interval '10 years')::date::text",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    drop(client);
    let people = [
        (&eighty, "male", Some("married"), " Manila "),
        (&almost_eighty, "female", None, "manila"),
        (&ten, "female", Some("single"), "Manila"),
        (&ten, "other", None, "Cebu"),
        (&ten, "unknown", None, "  "),
    ];
    let mut ids = Vec::new();
    for (n, (born, sex, civil, city)) in people.iter().enumerate() {
        let mut body = json!({ "first_name": format!("P{n}"), "last_name": "Demo", "birth_date": born, "sex": sex,
                               "city": city });
        if let Some(civil) = civil {
            body["civil_status"] = json!(civil);
        }
        ids.push(id_of(&app.created("/api/v1/patients", Some(branch), body).await));
    }
    // One deleted patient counts nowhere.
    let gone = id_of(&app.create_patient(branch, "Gone", "Away").await);
    assert_status(&app.delete(&format!("/api/v1/patients/{gone}"), Some(branch)).await, 200);

    let data = dashboard(&app, branch, "patient-demographics").await;
    assert_eq!(data["total"], 5);
    assert_eq!(data["by_sex"], json!({ "male": 1, "female": 2, "other": 1, "unknown": 1 }));
    assert_eq!(
        data["by_age_band"],
        json!({ "0-9": 0, "10-19": 3, "20-29": 0, "30-39": 0, "40-49": 0, "50-59": 0, "60-69": 0, "70-79": 1, "80+": 1 })
    );
    assert_eq!(
        data["by_civil_status"],
        json!({ "single": 1, "married": 1, "widowed": 0, "separated": 0, "divorced": 0, "unspecified": 3 })
    );
    assert_eq!(data["by_status"], json!({ "active": 5, "inactive": 0, "deceased": 0 }));
    assert_eq!(data["top_cities"], json!([{ "city": "Manila", "count": 3 }, { "city": "Cebu", "count": 1 }]));
    let months = data["new_per_month"].as_array().unwrap();
    assert_eq!(months.len(), 12);
    assert_eq!(
        months.last().unwrap()["count"],
        5,
        "this month's registrations, deleted ones excluded: {months:?}"
    );
    assert!(months[..11].iter().all(|m| m["count"] == 0));
    assert!(data.get("start_date").is_none());

    // With a range: only those registered in it.
    in_branch(
        &app,
        branch,
        &format!("UPDATE patients SET created_at = '2026-03-10 23:30+08' WHERE id = {}", ids[0]),
    )
    .await;
    let ranged =
        dashboard(&app, branch, "patient-demographics?start_date=2026-03-10&end_date=2026-03-10").await;
    assert_eq!(ranged["total"], 1);
    assert_eq!(ranged["by_sex"]["male"], 1);
    assert_eq!(ranged["start_date"], "2026-03-10");
}

#[tokio::test]
async fn bad_ranges_and_parameters_are_422() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let cases: [(&str, &str); 7] = [
        ("stats?start_date=2026-01-01&end_date=2027-01-02", "end_date"),
        ("calendar?start_date=2026-03-10&end_date=2026-03-09", "end_date"),
        ("stats?start_date=2026-02-30", "start_date"),
        ("patient-demographics?end_date=yesterday", "end_date"),
        ("patient-flow?date=10/03/2026", "date"),
        ("upcoming-surgeries?days=0", "days"),
        ("upcoming-surgeries?days=91", "days"),
    ];
    for (path, field) in cases {
        let r = app.get(&format!("/api/v1/dashboard/{path}"), Some(branch)).await;
        assert_invalid(&r, &[field]);
    }
    // 366 days, both ends included, is the most a range may cover.
    let r =
        app.get("/api/v1/dashboard/calendar?start_date=2026-01-01&end_date=2027-01-01", Some(branch)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["days"].as_array().unwrap().len(), 366);
}

#[tokio::test]
async fn dashboards_need_dashboard_read_and_a_branch() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let (_, nobody) = app.create_user("nobody", &[], &[branch]).await;
    let (_, cashier) = app.create_user("cashier", &["cashier"], &[branch]).await;
    for path in
        ["stats", "calendar", "appointments", "patient-flow", "upcoming-surgeries", "patient-demographics"]
    {
        let url = format!("/api/v1/dashboard/{path}");
        assert_error(
            &app.call_as(&nobody, Method::GET, &url, Some(branch), Value::Null).await,
            403,
            "forbidden",
        );
        assert_status(&app.call_as(&cashier, Method::GET, &url, Some(branch), Value::Null).await, 200);
        let r = app.get(&url, None).await;
        assert_status(&r, 400);
    }
}

#[tokio::test]
async fn what_is_owed_stays_the_sum_of_the_ledger_under_concurrent_postings() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 10_000).await;
    let branch = app.main_branch().await;
    let mut patients = Vec::new();
    for n in 0..4 {
        patients.push(id_of(&app.create_patient(branch, &format!("P{n}"), "Owes").await));
    }
    let charges = (0..24).map(|n| {
        let (app, patient) = (&app, patients[n % 4]);
        async move {
            app.post(
                &format!("/api/v1/patients/{patient}/billing-transactions"),
                Some(branch),
                json!({ "kind": "charge", "unit_price": format!("{}.25", 10 + n), "description": "Drops", "status": "posted" }),
            )
            .await
        }
    });
    for r in futures_util::future::join_all(charges).await {
        assert_status(&r, 201);
    }
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let ledger: String = client
        .query_one(
            &format!(
                "SELECT sum(CASE WHEN kind IN ('charge', 'refund') THEN amount ELSE -amount END)::text
                   FROM branch_{branch}.billing_transactions WHERE status = 'posted' AND deleted_at IS NULL"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // 24 charges of 10.25 .. 33.25.
    assert_eq!(ledger, "522.00");
    assert_eq!(dashboard(&app, branch, "stats").await["billing"]["outstanding"], "522.00");
}

//! The dashboards' rollups under many concurrent writers through the API: afterwards every
//! rollup equals a recount of its base rows, and the dashboards answer what counting the
//! base rows answers, in the branch's zone before and after it changes.

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::support::{TestApp, assert_handled, assert_status, id_of};

/// Every difference between the kept rollups and a recount; empty when they agree.
async fn differences(app: &TestApp, branch: i64) -> Vec<String> {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client
        .query(
            &format!("SELECT rollup, key::text, kept::text, recounted::text FROM branch_{branch}.dashboard_recount_differences()"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let (a, b, c, d): (String, String, Option<String>, Option<String>) = (r.get(0), r.get(1), r.get(2), r.get(3));
            format!("{a} {b}: kept {c:?}, recounted {d:?}")
        })
        .collect()
}

/// What the dashboards counted from the base rows before there were rollups.
async fn counted(app: &TestApp, branch: i64, zone: &str, start: &str, end: &str) -> Value {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let sql = format!(
        "SET search_path TO branch_{branch};
         SELECT jsonb_build_object(
           'new_patients', (SELECT count(*) FROM patients WHERE deleted_at IS NULL
                              AND created_at >= ($1::date::timestamp AT TIME ZONE $3)
                              AND created_at < (($2::date + 1)::timestamp AT TIME ZONE $3)),
           'visits', (SELECT coalesce(jsonb_object_agg(status, n), '{{}}') FROM (SELECT status, count(*) AS n FROM patient_visits
                        WHERE deleted_at IS NULL AND visit_date BETWEEN $1 AND $2 GROUP BY status) v),
           'queue', (SELECT coalesce(jsonb_object_agg(status, n), '{{}}') FROM (SELECT status, count(*) AS n FROM queue_tickets
                        WHERE deleted_at IS NULL AND queue_date BETWEEN $1 AND $2 GROUP BY status) q),
           'wait', (SELECT round((avg(extract(epoch FROM called_at - created_at)) / 60)::numeric, 1) FROM queue_tickets
                     WHERE deleted_at IS NULL AND queue_date BETWEEN $1 AND $2 AND called_at IS NOT NULL),
           'charges', (SELECT round(coalesce(sum(amount), 0), 2)::text FROM billing_transactions
                        WHERE status = 'posted' AND deleted_at IS NULL AND kind = 'charge' AND transaction_date BETWEEN $1 AND $2),
           'payments', (SELECT round(coalesce(sum(CASE kind WHEN 'payment' THEN amount ELSE -amount END), 0), 2)::text
                          FROM billing_transactions WHERE status = 'posted' AND deleted_at IS NULL
                           AND kind IN ('payment', 'refund') AND transaction_date BETWEEN $1 AND $2),
           'by_sex', (SELECT coalesce(jsonb_object_agg(sex, n), '{{}}') FROM (SELECT sex, count(*) AS n FROM patients
                        WHERE deleted_at IS NULL AND created_at >= ($1::date::timestamp AT TIME ZONE $3)
                          AND created_at < (($2::date + 1)::timestamp AT TIME ZONE $3) GROUP BY sex) s),
           'all_by_status', (SELECT coalesce(jsonb_object_agg(status, n), '{{}}') FROM (SELECT status, count(*) AS n
                        FROM patients WHERE deleted_at IS NULL GROUP BY status) s))::text"
    );
    client.batch_execute(sql.split_once(';').unwrap().0).await.unwrap();
    let row = client
        .query_one(sql.split_once(';').unwrap().1, &[&start.parse_date(), &end.parse_date(), &zone])
        .await
        .unwrap();
    serde_json::from_str(row.get::<_, &str>(0)).unwrap()
}

trait ParseDate {
    fn parse_date(&self) -> time::Date;
}

impl ParseDate for str {
    fn parse_date(&self) -> time::Date {
        time::Date::parse(self, time::macros::format_description!("[year]-[month]-[day]")).unwrap()
    }
}

/// `{status: n}` of a dashboard's breakdown, zeros and the total left out.
fn nonzero(breakdown: &Value) -> Value {
    Value::Object(
        breakdown
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, v)| *k != "total" && *k != "average_wait_minutes" && v.as_i64() != Some(0))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

async fn check(app: &TestApp, branch: i64, zone: &str, start: &str, end: &str) {
    let r =
        app.get(&format!("/api/v1/dashboard/stats?start_date={start}&end_date={end}"), Some(branch)).await;
    assert_status(&r, 200);
    let stats = &r.body["data"];
    let r = app
        .get(
            &format!("/api/v1/dashboard/patient-demographics?start_date={start}&end_date={end}"),
            Some(branch),
        )
        .await;
    assert_status(&r, 200);
    let ranged = &r.body["data"];
    let r = app.get("/api/v1/dashboard/patient-demographics", Some(branch)).await;
    assert_status(&r, 200);
    let all = &r.body["data"];
    assert_eq!(differences(app, branch).await, Vec::<String>::new(), "the rollups equal a recount");
    let expected = counted(app, branch, zone, start, end).await;
    assert_eq!(stats["new_patients"], expected["new_patients"]);
    assert_eq!(nonzero(&stats["visits"]), expected["visits"]);
    assert_eq!(nonzero(&stats["queue"]), expected["queue"]);
    let wait = &stats["queue"]["average_wait_minutes"];
    assert_eq!(wait.as_f64(), expected["wait"].as_f64(), "average wait {wait} against {}", expected["wait"]);
    assert_eq!(stats["billing"]["charges"], expected["charges"]);
    assert_eq!(stats["billing"]["payments"], expected["payments"]);
    assert_eq!(nonzero(&ranged["by_sex"]), expected["by_sex"]);
    assert_eq!(ranged["total"], expected["new_patients"]);
    assert_eq!(nonzero(&all["by_status"]), expected["all_by_status"]);
}

#[tokio::test]
async fn dashboard_rollups_equal_a_recount_after_concurrent_writes() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let branch = app.main_branch().await;
    let zone = |z: &'static str| {
        let app = &app;
        async move {
            let r = app.put(&format!("/api/v1/branches/{branch}"), None, json!({ "timezone": z })).await;
            assert_status(&r, 200);
        }
    };
    zone("Asia/Singapore").await;
    let service = id_of(
        &app.created(
            &format!("/api/v1/branches/{branch}/services"),
            Some(branch),
            json!({ "name": "Desk", "code": "D" }),
        )
        .await,
    );

    // Sixteen clients at once: patients, their visits over a few days, tickets and postings.
    let sexes = ["male", "female", "other", "unknown"];
    let cities = ["Manila", " manila", "Cebu", ""];
    let patients = join_all((0..32).map(|n| {
        let app = &app;
        async move {
            let body = json!({ "first_name": format!("P{n}"), "last_name": "Many", "birth_date": format!("{}-0{}-1{}", 1940 + n * 2, 1 + n % 9, n % 10),
                               "sex": sexes[n % 4], "city": cities[n % 4] });
            id_of(&app.created("/api/v1/patients", Some(branch), body).await)
        }
    }))
    .await;
    let visits = join_all((0..48).map(|n| {
        let (app, patient) = (&app, patients[n % patients.len()]);
        async move {
            let day = format!("2026-03-{:02}", 8 + n % 5);
            id_of(
                &app.created(
                    "/api/v1/patient-visits",
                    Some(branch),
                    json!({ "patient_id": patient, "visit_date": day }),
                )
                .await,
            )
        }
    }))
    .await;
    let tickets = join_all((0..16).map(|_| {
        let app = &app;
        async move {
            id_of(
                &app.created(
                    &format!("/api/v1/queue/branch-services/{service}/queue"),
                    Some(branch),
                    json!({}),
                )
                .await,
            )
        }
    }))
    .await;
    let postings = join_all((0..24).map(|n| {
        let (app, patient) = (&app, patients[n % patients.len()]);
        async move {
            let body = match n % 3 {
                0 => json!({ "kind": "charge", "unit_price": format!("{}.50", 10 + n), "description": "Drops" }),
                1 => json!({ "kind": "payment", "amount": format!("{}.25", n), "payment_method_id": 1 }),
                _ => json!({ "kind": "refund", "amount": "1.10", "payment_method_id": 1, "description": "Change" }),
            };
            let mut body = body;
            body["status"] = json!("posted");
            body["transaction_date"] = json!(format!("2026-03-{:02}", 8 + n % 5));
            let r = app.post(&format!("/api/v1/patients/{patient}/billing-transactions"), Some(branch), body).await;
            // A refund beyond what its patient paid so far is refused.
            if n % 3 != 2 || r.status != 422 {
                assert_status(&r, 201);
            }
            (r.status == 201).then(|| (patient, id_of(&r.body["data"])))
        }
    }))
    .await
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    check(&app, branch, "Asia/Singapore", "2026-03-08", "2026-03-12").await;

    // Then, at once: visits change status and date or go, tickets move, postings are voided,
    // patients change and go.
    let statuses = ["checked_in", "in_progress", "completed", "cancelled"];
    let mut writes = Vec::new();
    for (n, visit) in visits.iter().enumerate() {
        let (app, visit) = (&app, *visit);
        writes.push(Box::pin(async move {
            let r = if n % 4 == 3 {
                app.delete(&format!("/api/v1/patient-visits/{visit}"), Some(branch)).await
            } else {
                let body = json!({ "status": statuses[n % 4], "visit_date": format!("2026-03-{:02}", 8 + (n * 7) % 5) });
                app.put(&format!("/api/v1/patient-visits/{visit}"), Some(branch), body).await
            };
            assert_handled(&r, &format!("visit {visit}"));
        }) as std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>);
    }
    for (n, ticket) in tickets.iter().enumerate() {
        let (app, ticket) = (&app, *ticket);
        writes.push(Box::pin(async move {
            for step in ["call", "serve", "complete"].iter().take(n % 4) {
                let r = app
                    .put(
                        &format!("/api/v1/queue/queue-tickets/{ticket}/{step}"),
                        Some(branch),
                        json!({ "counter": "1" }),
                    )
                    .await;
                assert_handled(&r, &format!("ticket {ticket} {step}"));
            }
        }));
    }
    for (n, (patient, posting)) in postings.iter().enumerate().filter(|(n, _)| n % 4 == 0) {
        let (app, patient, posting) = (&app, *patient, *posting);
        writes.push(Box::pin(async move {
            let r = crate::support::reply(
                app.request(
                    reqwest::Method::DELETE,
                    &format!("/api/v1/patients/{patient}/billing-transactions/{posting}"),
                    Some(branch),
                )
                .json(&json!({ "void_reason": format!("Void {n}") })),
            )
            .await;
            assert_handled(&r, &format!("void {posting}"));
        }));
    }
    for (n, patient) in patients.iter().enumerate() {
        let (app, patient) = (&app, *patient);
        writes.push(Box::pin(async move {
            let r = match n % 3 {
                0 => {
                    app.put(
                        &format!("/api/v1/patients/{patient}"),
                        Some(branch),
                        json!({ "status": "inactive", "city": "Davao" }),
                    )
                    .await
                }
                1 => {
                    app.put(
                        &format!("/api/v1/patients/{patient}"),
                        Some(branch),
                        json!({ "sex": "female", "birth_date": "1966-07-01" }),
                    )
                    .await
                }
                _ => app.delete(&format!("/api/v1/patients/{patient}"), Some(branch)).await,
            };
            assert_handled(&r, &format!("patient {patient}"));
        }));
    }
    join_all(writes).await;
    // Registrations moved across local midnight, as an import would.
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client
        .batch_execute(&format!(
            "UPDATE branch_{branch}.patients SET created_at = '2026-03-10 23:30+08' WHERE id % 2 = 0;
             UPDATE branch_{branch}.patients SET created_at = '2026-03-11 00:30+08' WHERE id % 3 = 0;"
        ))
        .await
        .unwrap();
    check(&app, branch, "Asia/Singapore", "2026-03-08", "2026-03-12").await;
    check(&app, branch, "Asia/Singapore", "2026-03-11", "2026-03-11").await;

    // A new zone: registrations are recounted in it before they are read.
    zone("America/New_York").await;
    check(&app, branch, "America/New_York", "2026-03-10", "2026-03-10").await;
    check(&app, branch, "America/New_York", "2025-12-20", "2026-12-19").await;
}

//! Lists and the summary, reach across patients and branches, permissions, the audit
//! trail and the API document.

use super::*;

// ---------------------------------------------------------------------------------------
// Lists and summary
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn lists_search_numbers_and_filter_dates_status_and_kind() {
    let till = Till::open().await;
    let old = id_of(&till.created(with(payment("5"), json!({ "transaction_date": "2026-01-05" }))).await);
    let mid =
        id_of(&till.created(posted(with(charge("9"), json!({ "transaction_date": "2026-02-10" })))).await);
    let new = id_of(&till.created(posted(discount("1"))).await);
    let r = till.list("").await;
    assert_eq!(ids(&r.body), vec![new, mid, old], "newest transaction date first");
    assert_eq!(ids(&till.list(&format!("search={}", number(2))).await.body), vec![mid]);
    assert_eq!(ids(&till.list("start_date=2026-01-01&end_date=2026-02-10").await.body), vec![mid, old]);
    assert_eq!(ids(&till.list(&format!("start_date={}", today())).await.body), vec![new]);
    assert_eq!(ids(&till.list("status=posted").await.body), vec![new, mid]);
    assert_eq!(ids(&till.list("filters[status]=open").await.body), vec![old]);
    assert_eq!(ids(&till.list("status=posted&filters[status]=posted").await.body), vec![new, mid]);
    assert_invalid(&till.list("status=posted&filters[status]=open").await, &["status"]);
    assert_eq!(ids(&till.list("filters[kind]=payment").await.body), vec![old]);
    assert_invalid(&till.list("filters[kind]=gift").await, &["filters[kind]"]);
    assert_eq!(ids(&till.list("sortField=amount&sortDirection=asc").await.body), vec![new, old, mid]);
}

#[tokio::test]
async fn the_summary_sums_posted_rows() {
    let till = Till::open().await;
    let app = till.app();
    let insurance = app
        .created(
            "/api/v1/insurances",
            None,
            json!({ "code": "HMO", "payer_name": "Acme", "coverage_percent": 30, "valid_from": day(-1) }),
        )
        .await;
    let empty = till.summary().await;
    for key in ["charges", "discounts", "payments", "refunds", "covered", "balance"] {
        assert_eq!(empty[key], "0.00", "{key}");
    }
    let bodies = [
        posted(with(charge("1200.50"), json!({ "insurance_id": id_of(&insurance) }))),
        posted(with(charge("33.33"), json!({ "quantity": 1.5 }))),
        posted(discount("100.25")),
        posted(payment("500")),
        posted(with(payment("250.10"), json!({ "payment_method_id": CARD, "reference": "R1" }))),
        posted(refund("20.05")),
        charge("999"),
        payment("999"),
    ];
    let mut rows = Vec::new();
    for body in bodies {
        rows.push(till.created(body).await);
    }
    // A voided payment and a deleted open charge count for nothing.
    let voided = till.created(posted(payment("10"))).await;
    assert_status(&till.void(id_of(&voided), "Mistake").await, 200);
    let deleted = till.created(charge("5")).await;
    assert_status(&app.delete(&till.member(id_of(&deleted)), till.branch()).await, 200);

    let sum = |kind: &str, field: &str| -> Decimal {
        rows.iter()
            .filter(|r| r["status"] == "posted" && r["kind"] == kind)
            .filter_map(|r| r[field].as_str().map(money))
            .sum()
    };
    let (charges, discounts, payments, refunds) = (
        sum("charge", "amount"),
        sum("discount", "amount"),
        sum("payment", "amount"),
        sum("refund", "amount"),
    );
    let covered = sum("charge", "covered_amount");
    let summary = till.summary().await;
    assert_eq!(summary["charges"], cents(charges));
    assert_eq!(summary["charges"], "1250.50", "1200.50 + 50.00");
    assert_eq!(summary["discounts"], cents(discounts));
    assert_eq!(summary["payments"], cents(payments));
    assert_eq!(summary["refunds"], cents(refunds));
    assert_eq!(summary["covered"], cents(covered));
    assert_eq!(summary["covered"], "360.15", "30% of 1200.50");
    assert_eq!(summary["balance"], cents(charges - discounts - payments + refunds));
    assert_eq!(summary["balance"], "420.20");
    let r = app.get("/api/v1/patients/999999/billing-summary", till.branch()).await;
    assert_error(&r, 404, "not_found");
}

// ---------------------------------------------------------------------------------------
// Reach, permissions, audit
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn another_patients_or_branchs_transactions_are_404() {
    let till = Till::open().await;
    let app = till.app();
    let north = app.create_branch("NORTH").await;
    let mut north_patient = 0;
    for i in 0..3 {
        north_patient = id_of(&app.create_patient(north, &format!("North{i}"), "Patient").await);
    }
    // The patient exists in NORTH, not in MAIN.
    let there = app.get(&format!("/api/v1/patients/{north_patient}"), Some(north)).await;
    assert_status(&there, 200);
    let here = app.get(&format!("/api/v1/patients/{north_patient}"), till.branch()).await;
    assert_error(&here, 404, "not_found");
    let foreign = transactions(north_patient);
    assert_error(&app.get(&foreign, till.branch()).await, 404, "not_found");
    assert_error(&app.post(&foreign, till.branch(), payment("5")).await, 404, "not_found");
    let r = app.get(&format!("/api/v1/patients/{north_patient}/billing-summary"), till.branch()).await;
    assert_error(&r, 404, "not_found");
    assert_status(&app.post(&foreign, Some(north), payment("5")).await, 201);

    let mine = id_of(&till.created(payment("5")).await);
    let other = id_of(&app.create_patient(till.clinic.branch, "Ben", "Reyes").await);
    let wrong = format!("{}/{mine}", transactions(other));
    assert_error(&app.get(&wrong, till.branch()).await, 404, "not_found");
    assert_error(&app.put(&wrong, till.branch(), json!({ "amount": 6 })).await, 404, "not_found");
    assert_error(&app.post(&format!("{wrong}/post"), till.branch(), json!({})).await, 404, "not_found");
    assert_error(&app.delete(&wrong, till.branch()).await, 404, "not_found");
    assert_eq!(ids(&app.get(&transactions(other), till.branch()).await.body), Vec::<i64>::new());
    let r = app.get(&till.member(mine), till.branch()).await;
    assert_eq!(r.body["data"]["amount"], "5.00", "untouched");
}

#[tokio::test]
async fn billing_needs_billing_permissions() {
    let till = Till::open().await;
    let app = till.app();
    let branch = till.clinic.branch;
    let id = id_of(&till.created(charge("10")).await);
    let (cashier_id, cashier) = app.create_user("till", &["cashier"], &[branch]).await;
    let r = app.call_as(&cashier, Method::POST, &till.path, Some(branch), payment("5")).await;
    assert_status(&r, 201);
    let r = app
        .call_as(&cashier, Method::POST, &format!("{}/post", till.member(id)), Some(branch), Value::Null)
        .await;
    assert_status(&r, 200);
    let summary = format!("/api/v1/patients/{}/billing-summary", till.clinic.patient);
    assert_status(&app.call_as(&cashier, Method::GET, &summary, Some(branch), Value::Null).await, 200);
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    assert_status(&app.call_as(&desk, Method::GET, &till.path, Some(branch), Value::Null).await, 200);
    assert_status(&app.call_as(&desk, Method::GET, &summary, Some(branch), Value::Null).await, 200);
    for (method, path, body) in [
        (Method::POST, till.path.clone(), payment("5")),
        (Method::PUT, till.member(id), json!({ "description": "x" })),
        (Method::POST, format!("{}/post", till.member(id)), Value::Null),
        (Method::DELETE, till.member(id), json!({ "void_reason": "x" })),
    ] {
        assert_error(&app.call_as(&desk, method, &path, Some(branch), body).await, 403, "forbidden");
    }
    let (_, nurse) = app.create_user("nurse", &["nurse"], &[branch]).await;
    assert_error(
        &app.call_as(&nurse, Method::GET, &till.path, Some(branch), Value::Null).await,
        403,
        "forbidden",
    );
    assert_error(
        &app.call_as(&nurse, Method::GET, &summary, Some(branch), Value::Null).await,
        403,
        "forbidden",
    );
    let rows = app.audit_rows(AUDIT, till.branch(), AUDITED_AS, id).await;
    assert_eq!(rows.last().unwrap()["user_id"], cashier_id, "the post is the cashier's");
}

#[tokio::test]
async fn every_write_and_void_is_audited() {
    let till = Till::open().await;
    let app = till.app();
    let admin = app.admin_id().await;
    let kept = id_of(&till.created(charge("10")).await);
    assert_status(
        &app.put(&till.member(kept), till.branch(), json!({ "description": "Follow-up" })).await,
        200,
    );
    assert_status(&till.post_action(kept).await, 200);
    assert_status(&till.void(kept, "Wrong item").await, 200);
    let gone = id_of(&till.created(payment("3")).await);
    assert_status(&app.delete(&till.member(gone), till.branch()).await, 200);

    let rows = app.audit_rows(AUDIT, till.branch(), AUDITED_AS, kept).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "update", "post", "void"]);
    assert!(rows.iter().all(|r| r["user_id"] == admin));
    assert_eq!(rows[0]["after"]["number"], number(1));
    assert_eq!(rows[1]["before"]["description"], "Consultation");
    assert_eq!(rows[1]["after"]["description"], "Follow-up");
    assert_eq!(rows[2]["after"]["status"], "posted");
    assert_eq!(rows[3]["before"]["status"], "posted");
    assert_eq!(rows[3]["after"]["status"], "voided");
    assert_eq!(rows[3]["after"]["void_reason"], "Wrong item");
    let rows = app.audit_rows(AUDIT, till.branch(), AUDITED_AS, gone).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "delete"]);
    // Refused writes leave no trace.
    let before = app.audit_rows(AUDIT, till.branch(), AUDITED_AS, kept).await.len();
    assert_error(&till.void(kept, "Again").await, 409, "invalid_transition");
    assert_eq!(app.audit_rows(AUDIT, till.branch(), AUDITED_AS, kept).await.len(), before);
}

#[tokio::test]
async fn openapi_describes_billing_transactions_and_the_summary() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_status(&r, 200);
    let paths = &r.body["paths"];
    let collection = "/api/v1/patients/{patient_id}/billing-transactions";
    let member = format!("{collection}/{{id}}");
    for (path, verbs) in [
        (collection.to_owned(), &["get", "post"][..]),
        (member.clone(), &["get", "put", "delete"]),
        (format!("{member}/post"), &["post"]),
        ("/api/v1/patients/{id}/billing-summary".to_owned(), &["get"]),
    ] {
        for verb in verbs {
            assert!(paths[&path][*verb].is_object(), "{verb} {path} is not documented");
        }
    }
    let schemas = &r.body["components"]["schemas"];
    let amount = &schemas["BillingTransaction"]["properties"]["amount"];
    assert_eq!(amount["pattern"], "^-?[0-9]+\\.[0-9]{2}$", "money is a string with 2 decimals: {amount}");
    assert!(
        schemas["BillingTransactionInput"]["required"].as_array().is_some_and(|r| r.contains(&json!("kind")))
    );
}

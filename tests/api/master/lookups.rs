//! Lookups and enumerations: seeded, unique, in order.

use super::*;

// ---------------------------------------------------------------------------------------
// Lookups and enumerations
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn lookups_are_seeded_read_by_anyone_and_written_by_admins() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, doctor) = app.create_user("doc", &["doctor"], &[main]).await;
    let r = app
        .call_as(&doctor, Method::GET, &format!("{PAYMENT_METHODS}?sortField=code"), None, Value::Null)
        .await;
    assert_status(&r, 200);
    let methods: Vec<(String, bool)> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["code"].as_str().unwrap().to_owned(), m["requires_reference"].as_bool().unwrap()))
        .collect();
    let expected =
        [("BANK_TRANSFER", true), ("CARD", true), ("CASH", false), ("CHEQUE", true), ("E_WALLET", true)];
    assert_eq!(methods, expected.map(|(c, r)| (c.to_owned(), r)));
    let r = app.call_as(&doctor, Method::GET, CATEGORIES, None, Value::Null).await;
    assert_eq!(
        column(&r.body, "name"),
        ["Consultation", "Diagnostics", "Medicines", "Optical", "Other", "Procedures"]
    );
    for path in [CATEGORIES, PAYMENT_METHODS, SUPPLIERS] {
        let r = app.call_as(&doctor, Method::POST, path, None, json!({ "name": "X", "code": "X" })).await;
        assert_error(&r, 403, "forbidden");
        assert_status(&app.call_as(&doctor, Method::GET, path, None, Value::Null).await, 200);
    }
    let r = app.call_as(&doctor, Method::PUT, &format!("{CATEGORIES}/1"), None, json!({ "name": "Y" })).await;
    assert_error(&r, 403, "forbidden");
    let r = app.call_as(&doctor, Method::DELETE, &format!("{PAYMENT_METHODS}/1"), None, Value::Null).await;
    assert_error(&r, 403, "forbidden");
}

#[tokio::test]
async fn lookup_names_and_codes_are_unique() {
    let app = TestApp::spawn().await;
    assert_invalid(&app.post(CATEGORIES, None, json!({ "name": "consultation" })).await, &["name"]);
    let category =
        app.created(CATEGORIES, None, json!({ "name": "Laboratory", "description": "Blood work" })).await;
    assert_eq!(category["active"], true);
    let method = app
        .created(
            PAYMENT_METHODS,
            None,
            json!({ "code": "gcash", "name": "GCash", "requires_reference": true }),
        )
        .await;
    assert_eq!(method["code"], "GCASH");
    assert_invalid(
        &app.post(PAYMENT_METHODS, None, json!({ "code": "Cash", "name": "Cash again" })).await,
        &["code"],
    );
    let supplier = app
        .created(SUPPLIERS, None, json!({ "name": "Acme Optical", "email": "orders@acme.test", "phone": "02 8123 4567", "tax_id": "123-456" }))
        .await;
    assert_invalid(&app.post(SUPPLIERS, None, json!({ "name": "ACME optical" })).await, &["name"]);
    assert_invalid(&app.post(SUPPLIERS, None, json!({ "name": "Other", "email": "nope" })).await, &["email"]);
    assert_invalid(&app.post(SUPPLIERS, None, json!({})).await, &["name"]);
    let member = format!("{SUPPLIERS}/{}", id_of(&supplier));
    assert_status(&app.put(&member, None, json!({ "active": false })).await, 200);
    let r = app.get(&format!("{SUPPLIERS}?filters[active]=true"), None).await;
    assert_eq!(r.body["meta"]["total"], 0);
    assert_status(&app.delete(&member, None).await, 200);
    assert_error(&app.get(&member, None).await, 404, "not_found");
    app.created(SUPPLIERS, None, json!({ "name": "Acme Optical" })).await;
    let rows = app.audit_rows(SYSTEM_AUDIT, None, "suppliers", id_of(&supplier)).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "update", "delete"]);
}

#[tokio::test]
async fn purchase_order_statuses_are_a_fixed_list_in_lifecycle_order() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, doctor) = app.create_user("doc", &["doctor"], &[main]).await;
    let r = app.call_as(&doctor, Method::GET, PO_STATUSES, None, Value::Null).await;
    assert_status(&r, 200);
    assert_eq!(
        column(&r.body, "value"),
        ["draft", "ordered", "partially_received", "received", "closed", "cancelled"]
    );
    assert_eq!(column(&r.body, "label")[2], "Partially received");
    let r = app.post(PO_STATUSES, None, json!({ "value": "lost", "label": "Lost" })).await;
    assert_error(&r, 405, "method_not_allowed");
    let r = app.put(&format!("{PO_STATUSES}/1"), None, json!({ "label": "Start" })).await;
    assert_error(&r, 405, "method_not_allowed");
}

#[tokio::test]
async fn enums_answer_every_enumeration_in_order() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, desk) = app.create_user("desk", &["receptionist"], &[main]).await;
    let r = app.call_as(&desk, Method::GET, "/api/v1/enums", None, Value::Null).await;
    assert_status(&r, 200);
    let data = r.body["data"].as_object().unwrap();
    let names: BTreeSet<&str> = data.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = ENUMS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected, "exactly the enumerations ENUMS lists");
    for (name, values) in ENUMS {
        assert_eq!(data[*name], json!(values), "{name}");
    }
    let r = reply(app.http.get(app.url("/api/v1/enums"))).await;
    assert_error(&r, 401, "unauthenticated");
}

//! Charges and their prices, insurance shares, and what each kind of transaction carries
//! as exact money.

use super::*;

// ---------------------------------------------------------------------------------------
// Charges and prices
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_charge_is_quantity_times_price_rounded_half_away_from_zero() {
    let till = Till::open().await;
    let r = till.post(with(charge("33.33"), json!({ "quantity": 1.5 }))).await;
    assert_status(&r, 201);
    let data = &r.body["data"];
    assert_eq!(data["amount"], "50.00", "49.995 rounds up");
    assert_eq!(data["quantity"], "1.500");
    assert_eq!(data["unit_price"], "33.33");
    assert_eq!(data["kind"], "charge");
    assert_eq!(data["status"], "open");
    assert_eq!(data["patient_id"], till.clinic.patient);
    assert_eq!(data["number"], number(1));
    assert_eq!(data["transaction_date"], today().to_string());
    assert!(data["posted_at"].is_null() && data["voided_at"].is_null(), "{data}");
    for (quantity, price, amount) in [
        (json!("0.5"), "0.01", "0.01"),
        (json!("0.333"), "1.50", "0.50"),
        (json!(3), "0.10", "0.30"),
        (json!("2"), "1250", "2500.00"),
    ] {
        let r = till.post(with(charge(price), json!({ "quantity": quantity, "amount": "999.99" }))).await;
        assert_status(&r, 201);
        assert_eq!(r.body["data"]["amount"], amount, "{quantity} x {price}; a sent amount is ignored");
    }
    let r = till.post(charge("10")).await;
    assert_eq!(r.body["data"]["quantity"], "1.000", "quantity defaults to 1");
    assert_eq!(r.body["data"]["amount"], "10.00");
    // A zero quantity makes a zero amount too.
    for (extra, fields) in [
        (json!({ "quantity": 0 }), &["quantity", "amount"][..]),
        (json!({ "quantity": -1 }), &["quantity"]),
        (json!({ "quantity": "1.0005" }), &["quantity"]),
        (json!({ "unit_price": "0.001" }), &["unit_price"]),
        (json!({ "unit_price": 0 }), &["amount"]),
        (json!({ "unit_price": null }), &["unit_price"]),
        (json!({ "kind": "fee" }), &["kind"]),
    ] {
        let r = till.post(with(charge("10"), extra.clone())).await;
        assert_status(&r, 422);
        assert_invalid(&r, fields);
    }
    assert_invalid(&till.post(json!({})).await, &["kind"]);
}

#[tokio::test]
async fn a_charge_takes_its_price_from_the_one_thing_it_names() {
    let till = Till::open().await;
    let app = till.app();
    let item = app
        .created(
            "/api/v1/bill-items",
            None,
            json!({ "code": "CONS", "name": "Consultation", "bill_item_category_id": 1, "unit_price": 250 }),
        )
        .await;
    let procedure = app
        .created(
            "/api/v1/procedures",
            None,
            json!({ "code": "YAG", "name": "YAG laser", "category": "laser", "price": 4000 }),
        )
        .await;
    let free = app
        .created(
            "/api/v1/procedures",
            None,
            json!({ "code": "CHAT", "name": "Counselling", "category": "other", "price": 300, "billable": false }),
        )
        .await;
    let service = app
        .created("/api/v1/services", None, json!({ "code": "OCT", "name": "OCT scan", "price": "1800.50" }))
        .await;
    let kinds = [
        ("bill_item_id", id_of(&item), "250.00"),
        ("procedure_id", id_of(&procedure), "4000.00"),
        ("service_id", id_of(&service), "1800.50"),
    ];
    for (field, id, price) in kinds {
        let r = till.post(json!({ "kind": "charge", field: id, "quantity": 2 })).await;
        assert_status(&r, 201);
        assert_eq!(r.body["data"]["unit_price"], price, "{field}");
        assert_eq!(r.body["data"]["amount"], cents(money(price) * Decimal::TWO), "{field}");
        assert_eq!(r.body["data"][field], id);
    }
    let r =
        till.post(json!({ "kind": "charge", "bill_item_id": id_of(&item), "unit_price": "199.99" })).await;
    assert_eq!(r.body["data"]["unit_price"], "199.99", "a given price wins: {}", r.text);
    let r = till.post(json!({ "kind": "charge", "procedure_id": id_of(&free) })).await;
    assert_invalid(&r, &["procedure_id"]);
    let r = till
        .post(json!({ "kind": "charge", "bill_item_id": id_of(&item), "service_id": id_of(&service) }))
        .await;
    assert_invalid(&r, &["service_id"]);
    let r = till.post(json!({ "kind": "charge", "procedure_id": id_of(&procedure), "service_id": id_of(&service), "unit_price": 5 })).await;
    assert_invalid(&r, &["service_id"]);
    assert_invalid(&till.post(json!({ "kind": "charge" })).await, &["unit_price"]);
    // Names must be live and active rows.
    assert_status(
        &app.patch(&format!("/api/v1/services/{}/toggle-status", id_of(&service)), None).await,
        200,
    );
    assert_invalid(
        &till.post(json!({ "kind": "charge", "service_id": id_of(&service) })).await,
        &["service_id"],
    );
    assert_invalid(&till.post(json!({ "kind": "charge", "bill_item_id": 999 })).await, &["bill_item_id"]);
}

#[tokio::test]
async fn an_insurance_covers_a_share_of_a_charge() {
    let till = Till::open().await;
    let app = till.app();
    let insurance = app
        .created(
            "/api/v1/insurances",
            None,
            json!({ "code": "HMO", "payer_name": "Acme", "coverage_percent": "12.5", "valid_from": day(-1) }),
        )
        .await;
    let insurance = id_of(&insurance);
    let r = till.post(with(charge("333.33"), json!({ "insurance_id": insurance }))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["covered_amount"], "41.67", "333.33 x 12.5%, to the cent");
    let r =
        till.post(with(charge("100"), json!({ "insurance_id": insurance, "covered_amount": "100" }))).await;
    assert_eq!(r.body["data"]["covered_amount"], "100.00", "{}", r.text);
    let r = till
        .post(with(charge("100"), json!({ "insurance_id": insurance, "covered_amount": "100.01" })))
        .await;
    assert_invalid(&r, &["covered_amount"]);
    assert_invalid(
        &till.post(with(charge("100"), json!({ "covered_amount": 10 }))).await,
        &["covered_amount"],
    );
    let r = till.post(with(payment("10"), json!({ "insurance_id": insurance }))).await;
    assert_invalid(&r, &["insurance_id"]);
    let r = till.post(with(charge("100"), json!({ "insurance_id": 999 }))).await;
    assert_invalid(&r, &["insurance_id"]);
}

// ---------------------------------------------------------------------------------------
// What each kind carries
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn each_kind_carries_what_it_needs_and_nothing_else() {
    let till = Till::open().await;
    let missing_description = json!({ "kind": "discount", "amount": 5 });
    assert_invalid(&till.post(missing_description).await, &["description"]);
    let r = till
        .post(json!({ "kind": "refund", "amount": 5, "payment_method_id": CASH, "description": " " }))
        .await;
    assert_invalid(&r, &["description"]);
    assert_invalid(&till.post(json!({ "kind": "payment", "amount": 5 })).await, &["payment_method_id"]);
    assert_invalid(
        &till.post(json!({ "kind": "refund", "amount": 5, "description": "x" })).await,
        &["payment_method_id"],
    );
    assert_invalid(
        &till.post(with(charge("5"), json!({ "payment_method_id": CASH }))).await,
        &["payment_method_id"],
    );
    assert_invalid(
        &till.post(with(discount("5"), json!({ "payment_method_id": CASH }))).await,
        &["payment_method_id"],
    );
    for field in ["quantity", "unit_price"] {
        assert_invalid(&till.post(with(payment("5"), json!({ field: 1 }))).await, &[field]);
    }
    assert_invalid(&till.post(json!({ "kind": "payment", "payment_method_id": CASH })).await, &["amount"]);
    // A method that requires a reference gets one.
    let card = json!({ "kind": "payment", "amount": 5, "payment_method_id": CARD });
    assert_invalid(&till.post(card.clone()).await, &["reference"]);
    assert_invalid(&till.post(with(card.clone(), json!({ "reference": "  " }))).await, &["reference"]);
    let r = till.post(with(card, json!({ "reference": "AUTH-1234" }))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["reference"], "AUTH-1234");
    for method in 3..=5 {
        let r = till
            .post(json!({ "kind": "refund", "amount": 1, "payment_method_id": method, "description": "x" }))
            .await;
        assert_invalid(&r, &["reference"]);
    }
    let r = till.post(payment("5")).await;
    assert_status(&r, 201);
    assert!(r.body["data"]["quantity"].is_null() && r.body["data"]["unit_price"].is_null(), "{}", r.body);
    assert_status(&till.post(discount("5")).await, 201);
    assert_status(&till.post(refund("5")).await, 201);
    assert_invalid(
        &till.post(with(payment("5"), json!({ "payment_method_id": 999 }))).await,
        &["payment_method_id"],
    );
}

#[tokio::test]
async fn amounts_are_positive_exact_money_on_a_date_not_in_the_future() {
    let till = Till::open().await;
    for amount in
        [json!("abc"), json!("10.555"), json!(-5), json!(0), json!("0.00"), json!(true), json!("12345678901")]
    {
        let r = till.post(with(payment("1"), json!({ "amount": amount }))).await;
        assert_status(&r, 422);
        assert_invalid(&r, &["amount"]);
    }
    let r = till.post(with(payment("1"), json!({ "amount": "0.1" }))).await;
    assert_eq!(r.body["data"]["amount"], "0.10");
    assert_invalid(
        &till.post(with(payment("1"), json!({ "transaction_date": day(1) }))).await,
        &["transaction_date"],
    );
    assert_invalid(
        &till.post(with(payment("1"), json!({ "transaction_date": "2026-02-30" }))).await,
        &["transaction_date"],
    );
    let r = till.post(with(payment("1"), json!({ "transaction_date": "2026-01-05" }))).await;
    assert_eq!(r.body["data"]["transaction_date"], "2026-01-05");
    // The visit must be this patient's.
    let app = till.app();
    let other = id_of(&app.create_patient(till.clinic.branch, "Ben", "Reyes").await);
    let visit = app
        .created(
            "/api/v1/patient-visits",
            till.branch(),
            json!({ "patient_id": other, "visit_date": "2026-01-05" }),
        )
        .await;
    assert_invalid(
        &till.post(with(payment("1"), json!({ "patient_visit_id": id_of(&visit) }))).await,
        &["patient_visit_id"],
    );
    let r = till.post(with(payment("1"), json!({ "patient_visit_id": till.clinic.visit }))).await;
    assert_eq!(r.body["data"]["patient_visit_id"], till.clinic.visit);
    assert_invalid(&till.post(with(payment("1"), json!({ "status": "voided" }))).await, &["status"]);
}

//! Dispensing without overselling, FEFO lots, purchase orders received in parts, voids and
//! gapless order numbers.

use super::*;

#[tokio::test]
async fn fifty_concurrent_completions_never_oversell() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "L-1", None, 20).await;
    let mut drafts = Vec::new();
    for _ in 0..50 {
        drafts.push(p.transaction(one_unit(p.item)).await);
    }
    let answers = join_all(drafts.iter().map(|id| p.complete(*id))).await;
    let completed = answers.iter().filter(|r| r.status == 200).count();
    assert_eq!(completed, 20, "completions");
    for r in answers.iter().filter(|r| r.status != 200) {
        assert_error(r, 409, "insufficient_stock");
    }
    assert_eq!(p.on_hand(lot).await, Decimal::ZERO);
    let dispensed: Vec<Value> =
        p.movements(lot).await.into_iter().filter(|m| m["kind"] == "dispense").collect();
    assert_eq!(dispensed.len(), 20);
    // The refused ones are still drafts, with no allocation written.
    let r = p.app.get("/api/v1/transactions?perPage=100&filters[status]=draft", None).await;
    assert_eq!(r.body["meta"]["total"], 30, "{}", r.text);
    for row in r.body["data"].as_array().unwrap() {
        assert_eq!(row["lines"][0]["allocations"], json!([]), "{row}");
    }
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_line_without_a_lot_takes_the_earliest_expiring_unexpired_lots_first() {
    let p = Pharmacy::open().await;
    let item = p.expiring_item("ATROPINE").await;
    // Lots made in an order unlike their expiry, and one already expired: expired lots are
    // made through SQL, as the API refuses a past expiry on receipt.
    let late = p.lot(p.branch, item, "LATE", Some(&day(300)), 10).await;
    let early = p.lot(p.branch, item, "EARLY", Some(&day(30)), 4).await;
    let expired = p.lot(p.branch, item, "GONE", Some(&day(10)), 50).await;
    {
        let client = p.app.state.registry.get().await.unwrap();
        client
            .execute("UPDATE stock_availables SET expiry_date = current_date - 1 WHERE id = $1", &[&expired])
            .await
            .unwrap();
    }
    let tx = p.transaction(json!([{ "pharmacy_item_id": item, "quantity": "6" }])).await;
    let r = p.complete(tx).await;
    assert_status(&r, 200);
    assert_eq!(
        r.body["data"]["lines"][0]["allocations"],
        json!([{ "stock_available_id": early, "quantity": "4.000" }, { "stock_available_id": late, "quantity": "2.000" }]),
        "{}",
        r.text
    );
    assert_eq!(p.on_hand(early).await, Decimal::ZERO);
    assert_eq!(p.on_hand(late).await, Decimal::from(8));
    assert_eq!(p.on_hand(expired).await, Decimal::from(50), "an expired lot is never picked");
    // More than the unexpired lots hold: refused, and nothing moves although the expired
    // lot alone would have covered it.
    let tx = p.transaction(json!([{ "pharmacy_item_id": item, "quantity": "9" }])).await;
    assert_error(&p.complete(tx).await, 409, "insufficient_stock");
    assert_eq!(p.on_hand(late).await, Decimal::from(8));
    assert_eq!(p.movements(late).await.len(), 2);
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_purchase_order_is_received_in_parts_and_never_over_received() {
    let p = Pharmacy::open().await;
    let supplier = p.supplier().await;
    let order = p
        .app
        .created(
            "/api/v1/purchase-orders",
            None,
            json!({ "branch_id": p.branch, "supplier_id": supplier,
                    "lines": [{ "pharmacy_item_id": p.item, "quantity_ordered": "10", "unit_cost": "80.00" }] }),
        )
        .await;
    let order_id = id_of(&order);
    assert_eq!(order["status"], "draft");
    assert_eq!(order["total"], "800.00");
    let r = p.app.post(&format!("/api/v1/purchase-orders/{order_id}/order"), None, json!({})).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "ordered");

    let draft = |quantity: &'static str| {
        p.app.post(
            "/api/v1/deliveries",
            None,
            json!({ "branch_id": p.branch, "supplier_id": supplier, "purchase_order_id": order_id,
                    "lines": [{ "pharmacy_item_id": p.item, "lot_no": "B-7", "quantity": quantity }] }),
        )
    };
    let app = &p.app;
    let post = |delivery: i64| async move {
        app.post(&format!("/api/v1/deliveries/{delivery}/post"), None, json!({})).await
    };
    let order_now = || async {
        let r = p.app.get(&format!("/api/v1/purchase-orders/{order_id}"), None).await;
        r.body["data"].clone()
    };

    let first = id_of(&draft("4").await);
    assert_status(&post(first).await, 200);
    let after_first = order_now().await;
    assert_eq!(after_first["status"], "partially_received");
    assert_eq!(after_first["lines"][0]["quantity_received"], "4.000");

    // Seven more than the six still due: 422 on the line, and the delivery stays a draft.
    let too_many = id_of(&draft("7").await);
    assert_invalid(&post(too_many).await, &["lines.0.quantity"]);
    assert_eq!(
        p.app.get(&format!("/api/v1/deliveries/{too_many}"), None).await.body["data"]["status"],
        "draft"
    );
    assert_eq!(order_now().await["lines"][0]["quantity_received"], "4.000");

    let second = id_of(&draft("6").await);
    assert_status(&post(second).await, 200);
    let after_second = order_now().await;
    assert_eq!(after_second["status"], "received");
    assert_eq!(after_second["lines"][0]["quantity_received"], "10.000");

    // The lot holds both receipts, each a receipt movement of its delivery.
    let lots =
        p.app.get(&format!("/api/v1/stock-availables?filters[pharmacy_item_id]={}", p.item), None).await;
    let lot = ids(&lots.body)[0];
    assert_eq!(p.on_hand(lot).await, Decimal::from(10));
    let receipts = p.movements(lot).await;
    assert_eq!(
        receipts.iter().map(|m| m["delivery_id"].as_i64().unwrap()).collect::<Vec<_>>(),
        [first, second]
    );

    // A fully received order takes no further delivery: the third one is refused (422) and
    // the draft delivered earlier can no longer be posted either.
    assert_invalid(&draft("1").await, &["purchase_order_id"]);
    assert_invalid(&post(too_many).await, &["purchase_order_id"]);
    assert_eq!(p.on_hand(lot).await, Decimal::from(10));

    // A posted delivery is immutable.
    assert_error(
        &p.app.put(&format!("/api/v1/deliveries/{first}"), None, json!({ "notes": "x" })).await,
        409,
        "not_editable",
    );
    assert_error(&p.app.delete(&format!("/api/v1/deliveries/{first}"), None).await, 409, "not_editable");
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn voiding_a_completed_transaction_returns_its_stock() {
    let p = Pharmacy::open().await;
    let first = p.lot(p.branch, p.item, "A", None, 3).await;
    let second = p.lot(p.branch, p.item, "B", None, 5).await;
    let tx = p.transaction(json!([{ "pharmacy_item_id": p.item, "quantity": "6" }])).await;
    assert_status(&p.complete(tx).await, 200);
    assert_eq!(p.on_hand(first).await + p.on_hand(second).await, Decimal::from(2));

    let r = p.app.post(&format!("/api/v1/transactions/{tx}/void"), None, json!({})).await;
    assert_invalid(&r, &["void_reason"]);
    let r = p
        .app
        .post(&format!("/api/v1/transactions/{tx}/void"), None, json!({ "void_reason": "Wrong patient" }))
        .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "voided");
    assert_eq!(p.on_hand(first).await, Decimal::from(3));
    assert_eq!(p.on_hand(second).await, Decimal::from(5));
    let mut returns = 0;
    for lot in [first, second] {
        returns += p.movements(lot).await.iter().filter(|m| m["kind"] == "return").count();
    }
    assert_eq!(returns, 2);
    // Voided once: a second void is a refused move, and it returns nothing more.
    let again =
        p.app.post(&format!("/api/v1/transactions/{tx}/void"), None, json!({ "void_reason": "Again" })).await;
    assert_error(&again, 409, "invalid_transition");
    assert_eq!(p.on_hand(first).await, Decimal::from(3));
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn twenty_concurrent_purchase_orders_get_twenty_consecutive_numbers() {
    let p = Pharmacy::open().await;
    let supplier = p.supplier().await;
    let body = json!({ "branch_id": p.branch, "supplier_id": supplier,
                       "lines": [{ "pharmacy_item_id": p.item, "quantity_ordered": "1", "unit_cost": "1.00" }] });
    // A refused creation takes no number.
    let refused = p
        .app
        .post(
            "/api/v1/purchase-orders",
            None,
            json!({ "branch_id": p.branch, "supplier_id": supplier, "lines": [] }),
        )
        .await;
    assert_status(&refused, 422);
    let answers = join_all((0..20).map(|_| p.app.post("/api/v1/purchase-orders", None, body.clone()))).await;
    let year = time::OffsetDateTime::now_utc().year();
    let mut numbers: Vec<String> = answers
        .iter()
        .map(|r| {
            assert_status(r, 201);
            r.body["data"]["number"].as_str().unwrap().to_owned()
        })
        .collect();
    numbers.sort();
    let expected: Vec<String> = (1..=20).map(|n| format!("PO-MAIN-{year}-{n:06}")).collect();
    assert_eq!(numbers, expected);
}

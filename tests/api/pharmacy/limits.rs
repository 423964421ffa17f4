//! Limits, crossing transfers, drafts whose lots changed, kept lots, deadlock retries and
//! audited deliveries.

use super::*;

// ---------------------------------------------------------------------------------------
// Limits, crossing transfers, drafts that wait, and lots kept for the ledger
// ---------------------------------------------------------------------------------------

const LARGEST_MONEY: &str = "9999999999.99";
const LARGEST_QUANTITY: &str = "999999999.999";

#[tokio::test]
async fn line_totals_and_totals_past_the_largest_money_are_422_on_what_makes_them() {
    let p = Pharmacy::open().await;
    let supplier = p.supplier().await;
    let order = |lines: Value| json!({ "branch_id": p.branch, "supplier_id": supplier, "lines": lines });
    let line = |quantity: &str, cost: &str| json!({ "pharmacy_item_id": p.item, "quantity_ordered": quantity, "unit_cost": cost });
    let r = p
        .app
        .post("/api/v1/purchase-orders", None, order(json!([line(LARGEST_QUANTITY, LARGEST_MONEY)])))
        .await;
    assert_invalid(&r, &["lines.0.quantity_ordered"]);
    // At the limit exactly it fits.
    let at_limit =
        p.app.created("/api/v1/purchase-orders", None, order(json!([line("1", LARGEST_MONEY)]))).await;
    assert_eq!(at_limit["total"], LARGEST_MONEY);
    assert_eq!(at_limit["lines"][0]["line_total"], LARGEST_MONEY);
    // Lines that fit one by one but not together: 422 on the lines.
    let other = p.expiring_item("OTHER").await;
    let two = json!([line("1", "5000000000.00"),
                     { "pharmacy_item_id": other, "quantity_ordered": "1", "unit_cost": "5000000000.00" }]);
    assert_invalid(&p.app.post("/api/v1/purchase-orders", None, order(two)).await, &["lines"]);

    let delivery = json!({ "branch_id": p.branch, "supplier_id": supplier,
        "lines": [{ "pharmacy_item_id": p.item, "lot_no": "BIG", "quantity": LARGEST_QUANTITY, "unit_cost": LARGEST_MONEY }] });
    assert_invalid(&p.app.post("/api/v1/deliveries", None, delivery).await, &["lines.0.quantity"]);

    let dispensing =
        json!([{ "pharmacy_item_id": p.item, "quantity": LARGEST_QUANTITY, "unit_price": LARGEST_MONEY }]);
    let r =
        p.app.post("/api/v1/transactions", None, json!({ "branch_id": p.branch, "lines": dispensing })).await;
    assert_invalid(&r, &["lines.0.quantity"]);
    let client = p.app.state.registry.get().await.unwrap();
    let rows: i64 = client
        .query_one("SELECT (SELECT count(*) FROM deliveries) + (SELECT count(*) FROM transactions)", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "nothing refused was written");
}

#[tokio::test]
async fn a_level_past_the_largest_quantity_is_422_and_the_level_stays() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "FULL", None, 999_999_999).await;
    let add = |quantity: &str| {
        p.app.post(
            "/api/v1/stock-movements",
            None,
            json!({ "branch_id": p.branch, "stock_available_id": lot, "kind": "adjustment", "quantity": quantity,
                    "reason": "Count" }),
        )
    };
    assert_status(&add("0.999").await, 201);
    assert_eq!(p.on_hand(lot).await, Decimal::from_str(LARGEST_QUANTITY).unwrap());
    let r = add("0.001").await;
    assert_invalid(&r, &["quantity"]);
    assert_eq!(p.on_hand(lot).await, Decimal::from_str(LARGEST_QUANTITY).unwrap());
    // A delivery into the full lot is refused on its line when posted, and receives nothing.
    let supplier = p.supplier().await;
    let delivery = id_of(
        &p.app
            .created(
                "/api/v1/deliveries",
                None,
                json!({ "branch_id": p.branch, "supplier_id": supplier,
                        "lines": [{ "pharmacy_item_id": p.item, "lot_no": "FULL", "quantity": "1", "unit_cost": "1" }] }),
            )
            .await,
    );
    let r = p.app.post(&format!("/api/v1/deliveries/{delivery}/post"), None, json!({})).await;
    assert_invalid(&r, &["lines.0.quantity"]);
    assert_eq!(p.on_hand(lot).await, Decimal::from_str(LARGEST_QUANTITY).unwrap());
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn twenty_crossing_transfers_between_two_branches_all_go_through() {
    let p = Pharmacy::open().await;
    let north = p.app.create_branch("NORTH").await;
    let here = p.lot(p.branch, p.item, "X-1", None, 100).await;
    let there = p.lot(north, p.item, "X-1", None, 0).await;
    let stock = json!({ "branch_id": north, "stock_available_id": there, "kind": "adjustment", "quantity": "100",
                        "reason": "Count" });
    assert_status(&p.app.post("/api/v1/stock-movements", None, stock).await, 201);
    let transfer = |from: i64, lot: i64, to: i64| {
        p.app.post(
            "/api/v1/stock-movements",
            None,
            json!({ "branch_id": from, "stock_available_id": lot, "kind": "transfer_out", "quantity": "-1",
                    "reason": "Balance stock", "to_branch_id": to }),
        )
    };
    let sends = (0..20)
        .map(|i| if i % 2 == 0 { transfer(p.branch, here, north) } else { transfer(north, there, p.branch) });
    let answers = join_all(sends).await;
    for r in &answers {
        assert_status(r, 201);
    }
    assert_eq!(p.on_hand(here).await, Decimal::from(100));
    assert_eq!(p.on_hand(there).await, Decimal::from(100));
    for lot in [here, there] {
        let moves = p.movements(lot).await;
        assert_eq!(moves.iter().filter(|m| m["kind"] == "transfer_out").count(), 10);
        assert_eq!(moves.iter().filter(|m| m["kind"] == "transfer_in").count(), 10);
    }
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_draft_is_not_completed_from_a_lot_that_expired_or_went_inactive_since() {
    let p = Pharmacy::open().await;
    let item = p.expiring_item("DROPS").await;
    let lot = p.lot(p.branch, item, "E-1", Some(&day(30)), 10).await;
    let named = json!([{ "pharmacy_item_id": item, "stock_available_id": lot, "quantity": "2" }]);
    let draft = p.transaction(named.clone()).await;
    // The expiry is corrected to yesterday after the draft was made.
    assert_status(
        &p.app.put(&format!("/api/v1/stock-availables/{lot}"), None, json!({ "expiry_date": day(-1) })).await,
        200,
    );
    let r = p.complete(draft).await;
    assert_invalid(&r, &["lines.0.stock_available_id"]);
    let still = p.app.get(&format!("/api/v1/transactions/{draft}"), None).await;
    assert_eq!(still.body["data"]["status"], "draft");
    assert_eq!(p.on_hand(lot).await, Decimal::from(10));

    // A lot made inactive, and an item made inactive, are refused the same way.
    let fresh = p.lot(p.branch, item, "E-2", Some(&day(30)), 10).await;
    let draft = p
        .transaction(json!([{ "pharmacy_item_id": item, "stock_available_id": fresh, "quantity": "1" }]))
        .await;
    assert_status(
        &p.app.put(&format!("/api/v1/stock-availables/{fresh}"), None, json!({ "active": false })).await,
        200,
    );
    assert_invalid(&p.complete(draft).await, &["lines.0.stock_available_id"]);
    let unnamed = p.transaction(json!([{ "pharmacy_item_id": p.item, "quantity": "1" }])).await;
    p.lot(p.branch, p.item, "P-1", None, 5).await;
    assert_status(&p.app.patch(&format!("/api/v1/pharmacy-items/{}/toggle-status", p.item), None).await, 200);
    assert_invalid(&p.complete(unnamed).await, &["lines.0.pharmacy_item_id"]);
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_lot_in_the_ledger_is_never_deleted_so_a_void_always_finds_it() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "V-1", None, 2).await;
    let tx = p
        .transaction(json!([{ "pharmacy_item_id": p.item, "stock_available_id": lot, "quantity": "2" }]))
        .await;
    assert_status(&p.complete(tx).await, 200);
    assert_eq!(p.on_hand(lot).await, Decimal::ZERO);
    // Emptied, but in the ledger: kept.
    assert_error(&p.app.delete(&format!("/api/v1/stock-availables/{lot}"), None).await, 409, "in_use");
    let r = p.app.put(&format!("/api/v1/stock-availables/{lot}"), None, json!({ "active": false })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["active"], false);
    // An inactive lot is not picked for new dispensing.
    let next = p.transaction(one_unit(p.item)).await;
    assert_error(&p.complete(next).await, 409, "insufficient_stock");
    // The void finds the lot and puts the stock back.
    let r = p
        .app
        .post(&format!("/api/v1/transactions/{tx}/void"), None, json!({ "void_reason": "Returned" }))
        .await;
    assert_status(&r, 200);
    assert_eq!(p.on_hand(lot).await, Decimal::from(2));
    // A lot that never moved may still go.
    let unused = p.lot(p.branch, p.item, "V-2", None, 0).await;
    assert_status(&p.app.delete(&format!("/api/v1/stock-availables/{unused}"), None).await, 200);
    p.assert_ledger_holds().await;
}

/// A deadlock the server did not cause (here: a session of the test's own, locking the same
/// lots the other way round) aborts the request's transaction; the server runs the request
/// again and answers as if nothing had happened.
#[tokio::test]
async fn a_request_that_loses_a_deadlock_is_run_again() {
    let p = Pharmacy::open().await;
    let north = p.app.create_branch("NORTH").await;
    let here = p.lot(p.branch, p.item, "D-1", None, 10).await;
    let there = p.lot(north, p.item, "D-1", None, 0).await;
    assert!(here < there, "the request locks `here` first");
    let mut outside = clinic_server::db::connect(&p.app.db.url).await.unwrap();
    let tx = outside.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM stock_availables WHERE id = $1 FOR UPDATE", &[&there]).await.unwrap();
    let request = p.app.request(Method::POST, "/api/v1/stock-movements", None).json(
        &json!({ "branch_id": p.branch, "stock_available_id": here, "kind": "transfer_out", "quantity": "-3",
                 "reason": "Restock", "to_branch_id": north }),
    );
    let request = tokio::spawn(reply(request));
    // Once the request holds `here` and waits for `there`, take `here` the other way round.
    let watcher = clinic_server::db::connect(&p.app.db.url).await.unwrap();
    let mut waiting = false;
    for _ in 0..500 {
        let row = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'",
                &[],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            waiting = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(waiting, "the request never waited for the lot");
    // The request waited first, so its deadlock check runs first and it is the one aborted.
    tx.execute("SELECT 1 FROM stock_availables WHERE id = $1 FOR UPDATE", &[&here]).await.unwrap();
    tx.rollback().await.unwrap();
    let answer = request.await.unwrap();
    assert_status(&answer, 201);
    assert_eq!(p.on_hand(here).await, Decimal::from(7));
    assert_eq!(p.on_hand(there).await, Decimal::from(3));
    p.assert_ledger_holds().await;
}

/// A delivery's posting moves its order through the unit of work: the order's trail shows
/// each `receive`, its version moves, and its before and after are kept.
#[tokio::test]
async fn a_delivery_moves_its_order_as_an_audited_receive() {
    let p = Pharmacy::open().await;
    let supplier = p.supplier().await;
    let order = json!({ "branch_id": p.branch, "supplier_id": supplier,
                        "lines": [{ "pharmacy_item_id": p.item, "quantity_ordered": 10, "unit_cost": "2" }] });
    let order = id_of(&p.app.created("/api/v1/purchase-orders", None, order).await);
    assert_status(&p.app.post(&format!("/api/v1/purchase-orders/{order}/order"), None, json!({})).await, 200);
    for (lot, quantity) in [("R-1", 4), ("R-2", 6)] {
        let delivery = json!({ "branch_id": p.branch, "supplier_id": supplier, "purchase_order_id": order,
                               "lines": [{ "pharmacy_item_id": p.item, "lot_no": lot, "quantity": quantity }] });
        let delivery = id_of(&p.app.created("/api/v1/deliveries", None, delivery).await);
        assert_status(
            &p.app.post(&format!("/api/v1/deliveries/{delivery}/post"), None, json!({})).await,
            200,
        );
    }
    let trail = p.app.audit_rows("/api/v1/system-audit-logs", None, "purchase-orders", order).await;
    let actions: Vec<&str> = trail.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "order", "receive", "receive"]);
    assert_eq!(trail[2]["after"]["status"], "partially_received");
    assert_eq!(trail[3]["before"]["status"], "partially_received");
    assert_eq!(trail[3]["after"]["status"], "received");
    let now = p.app.get(&format!("/api/v1/purchase-orders/{order}"), None).await;
    assert_eq!(now.body["data"]["version"], trail[3]["after"]["version"]);
}

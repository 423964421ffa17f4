//! The append-only ledger and its levels, transfers, branch reach, stock lists and
//! `clinic-server stock check`.

use super::*;

#[tokio::test]
async fn the_ledger_is_append_only_and_runs_with_the_level() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "L", None, 0).await;
    assert_status(&p.adjust(lot, 7).await, 201);
    let r = p
        .app
        .post(
            "/api/v1/stock-movements",
            None,
            json!({ "branch_id": p.branch, "stock_available_id": lot, "kind": "damaged", "quantity": "-2", "reason": "Broken" }),
        )
        .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["quantity_after"], "5.000");
    // Going below zero: refused, nothing written.
    assert_error(&p.adjust(lot, -6).await, 409, "insufficient_stock");
    let movements = p.movements(lot).await;
    assert_eq!(movements.len(), 2);
    assert_eq!(
        movements.iter().map(|m| m["quantity_after"].as_str().unwrap()).collect::<Vec<_>>(),
        ["7.000", "5.000"]
    );
    assert_eq!(p.on_hand(lot).await, Decimal::from(5));
    // Kinds written only by deliveries and transactions, and wrong signs, are refused.
    for (kind, quantity) in [("receipt", "3"), ("dispense", "-1"), ("damaged", "2")] {
        let r = p
            .app
            .post(
                "/api/v1/stock-movements",
                None,
                json!({ "branch_id": p.branch, "stock_available_id": lot, "kind": kind, "quantity": quantity, "reason": "x" }),
            )
            .await;
        assert_status(&r, 422);
    }
    // Movements never change.
    let first = id_of(&movements[0]);
    assert_error(
        &p.app.put(&format!("/api/v1/stock-movements/{first}"), None, json!({ "reason": "Changed" })).await,
        409,
        "ledger_immutable",
    );
    assert_error(
        &p.app.delete(&format!("/api/v1/stock-movements/{first}"), None).await,
        409,
        "ledger_immutable",
    );
    // A lot with stock cannot be deleted.
    assert_error(
        &p.app.delete(&format!("/api/v1/stock-availables/{lot}"), None).await,
        409,
        "stock_not_empty",
    );
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_transfer_moves_stock_between_branches_in_one_transaction() {
    let p = Pharmacy::open().await;
    let north = p.app.create_branch("NORTH").await;
    let lot = p.lot(p.branch, p.item, "T-1", None, 10).await;
    let transfer = |quantity: &str| {
        p.app.post(
            "/api/v1/stock-movements",
            None,
            json!({ "branch_id": p.branch, "stock_available_id": lot, "kind": "transfer_out", "quantity": quantity,
                    "reason": "Restock North", "to_branch_id": north }),
        )
    };
    // More than the lot holds: refused, and no lot or movement appears at North.
    assert_error(&transfer("-11").await, 409, "insufficient_stock");
    let at_north = p.app.get(&format!("/api/v1/stock-availables?filters[branch_id]={north}"), None).await;
    assert_eq!(at_north.body["meta"]["total"], 0, "{}", at_north.text);

    let r = transfer("-4").await;
    assert_status(&r, 201);
    let out = r.body["data"].clone();
    assert_eq!(out["kind"], "transfer_out");
    let counterpart = out["counterpart_id"].as_i64().expect("linked to its transfer_in");
    let incoming =
        p.app.get(&format!("/api/v1/stock-movements/{counterpart}"), None).await.body["data"].clone();
    assert_eq!(incoming["kind"], "transfer_in");
    assert_eq!(incoming["branch_id"], north);
    assert_eq!(incoming["quantity"], "4.000");
    assert_eq!(incoming["counterpart_id"], id_of(&out));
    let north_lot = incoming["stock_available_id"].as_i64().unwrap();
    let north_lot_row =
        p.app.get(&format!("/api/v1/stock-availables/{north_lot}"), None).await.body["data"].clone();
    assert_eq!(north_lot_row["lot_no"], "T-1");
    assert_eq!(p.on_hand(north_lot).await, Decimal::from(4));
    assert_eq!(p.on_hand(lot).await, Decimal::from(6));
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn rows_of_a_branch_are_seen_and_written_only_by_its_users() {
    let p = Pharmacy::open().await;
    let north = p.app.create_branch("NORTH").await;
    let north_lot = p.lot(north, p.item, "N-1", None, 3).await;
    let main_lot = p.lot(p.branch, p.item, "M-1", None, 3).await;
    let (_, pharmacist) = p.app.create_user("pharmacist", &["admin"], &[p.branch]).await;
    let lots = p.app.call_as(&pharmacist, Method::GET, "/api/v1/stock-availables", None, Value::Null).await;
    assert_status(&lots, 200);
    assert_eq!(ids(&lots.body), vec![main_lot], "only MAIN's lots are listed");
    let r = p
        .app
        .call_as(
            &pharmacist,
            Method::GET,
            &format!("/api/v1/stock-availables/{north_lot}"),
            None,
            Value::Null,
        )
        .await;
    assert_status(&r, 404);
    let r = p
        .app
        .call_as(
            &pharmacist,
            Method::POST,
            "/api/v1/stock-availables",
            None,
            json!({ "branch_id": north, "pharmacy_item_id": p.item, "lot_no": "X" }),
        )
        .await;
    assert_status(&r, 403);

    // A patient named on a transaction is a patient of that transaction's branch: North has
    // patients 1 and 2, MAIN only 1.
    p.app.create_patient(north, "Nora", "Reyes").await;
    let north_only = id_of(&p.app.create_patient(north, "Nilo", "Reyes").await);
    let main_patient = id_of(&p.app.create_patient(p.branch, "Mara", "Santos").await);
    assert!(north_only > main_patient);
    let body =
        |patient: i64| json!({ "branch_id": p.branch, "patient_id": patient, "lines": one_unit(p.item) });
    assert_invalid(&p.app.post("/api/v1/transactions", None, body(north_only)).await, &["patient_id"]);
    assert_status(&p.app.post("/api/v1/transactions", None, body(main_patient)).await, 201);
}

#[tokio::test]
async fn stock_lists_filter_expiring_and_low_lots() {
    let p = Pharmacy::open().await;
    let item = p.expiring_item("CYCLO").await;
    let soon = p.lot(p.branch, item, "SOON", Some(&day(5)), 1).await;
    let _later = p.lot(p.branch, item, "LATER", Some(&day(200)), 1).await;
    let r = p.app.get("/api/v1/stock-availables?filters[expiring_within_days]=30", None).await;
    assert_status(&r, 200);
    assert_eq!(ids(&r.body), vec![soon]);
    let r = p.app.get("/api/v1/stock-availables?filters[expiring_within_days]=-1", None).await;
    assert_status(&r, 422);

    // Low stock: the item's level over the branch (2) at or below its reorder level.
    let r = p.app.get("/api/v1/stock-availables?filters[below_reorder]=true", None).await;
    assert_eq!(r.body["meta"]["total"], 0, "no reorder level, never low: {}", r.text);
    let item_row = p.app.get(&format!("/api/v1/pharmacy-items/{item}"), None).await;
    let version = item_row.body["data"]["version"].as_i64().unwrap();
    let r = reply(
        p.app
            .request(Method::PUT, &format!("/api/v1/pharmacy-items/{item}"), None)
            .header("if-match", format!("\"{version}\""))
            .json(&json!({ "reorder_level": "2" })),
    )
    .await;
    assert_status(&r, 200);
    let r = p.app.get("/api/v1/stock-availables?filters[below_reorder]=true", None).await;
    assert_eq!(r.body["meta"]["total"], 2, "both lots of the low item: {}", r.text);

    // The item toggles between active and inactive.
    let r = p.app.patch(&format!("/api/v1/pharmacy-items/{item}/toggle-status"), None).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "inactive");
}

#[tokio::test]
async fn stock_check_passes_on_a_true_ledger_and_names_a_lot_changed_behind_its_back() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "C-1", None, 9).await;
    let tx = p.transaction(json!([{ "pharmacy_item_id": p.item, "quantity": "2" }])).await;
    assert_status(&p.complete(tx).await, 200);
    let check = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_clinic-server"))
            .args(["stock", "check"])
            .env("DATABASE_URL", &p.app.db.url)
            .env("RUST_LOG", "warn")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .expect("the binary runs")
    };
    let good = check();
    assert!(good.status.success(), "{good:?}");
    {
        let client = p.app.state.registry.get().await.unwrap();
        client
            .execute("UPDATE stock_availables SET on_hand = on_hand + 1 WHERE id = $1", &[&lot])
            .await
            .unwrap();
    }
    let bad = check();
    assert!(!bad.status.success(), "{bad:?}");
    let out = String::from_utf8_lossy(&bad.stdout);
    assert!(out.contains(&format!("lot {lot}:")), "{out}");
}

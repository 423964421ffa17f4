//! Limits: computed amounts that must fit their column, and totals that stay exact.

use super::*;

// ---------------------------------------------------------------------------------------
// Limits: what the server computes fits its column, and sums never overflow
// ---------------------------------------------------------------------------------------

/// The largest money value a record holds (10 integer digits, 2 decimals).
const LARGEST: &str = "9999999999.99";

#[tokio::test]
async fn a_computed_amount_past_the_largest_money_is_422_on_the_quantity() {
    let till = Till::open().await;
    let r = till.post(with(charge(LARGEST), json!({ "quantity": "2" }))).await;
    assert_invalid(&r, &["quantity"]);
    assert!(r.body["errors"]["quantity"][0].as_str().unwrap().contains(LARGEST), "{}", r.text);
    assert_eq!(till.count().await, 0, "nothing is written");
    // At the limit exactly it fits, and so does an insurance share of all of it.
    let insurance = id_of(
        &till
            .app()
            .created(
                "/api/v1/insurances",
                None,
                json!({ "code": "FULL", "payer_name": "Payer", "coverage_percent": "100", "valid_from": "2020-01-01" }),
            )
            .await,
    );
    let at_limit = till.created(with(charge(LARGEST), json!({ "insurance_id": insurance }))).await;
    assert_eq!(at_limit["amount"], LARGEST);
    assert_eq!(at_limit["covered_amount"], LARGEST);
    // A change that makes it overflow is refused the same way, and the row keeps its amount.
    let r =
        till.app().put(&till.member(id_of(&at_limit)), till.branch(), json!({ "quantity": "1.001" })).await;
    assert_invalid(&r, &["quantity"]);
    let kept = till.app().get(&till.member(id_of(&at_limit)), till.branch()).await;
    assert_eq!(kept.body["data"]["amount"], LARGEST);
}

#[tokio::test]
async fn totals_past_ten_to_the_twelfth_stay_exact_in_the_summary_and_the_dashboard() {
    let till = Till::open().await;
    for _ in 0..101 {
        till.created(posted(charge(LARGEST))).await;
    }
    till.created(posted(with(payment("0.01"), json!({ "payment_method_id": CASH })))).await;
    let expected = money(LARGEST) * Decimal::from(101);
    assert!(expected > Decimal::from(1_000_000_000_000i64));
    let summary = till.summary().await;
    assert_eq!(summary["charges"], cents(expected));
    assert_eq!(summary["payments"], "0.01");
    assert_eq!(summary["balance"], cents(expected - money("0.01")));
    let stats = till.app().get("/api/v1/dashboard/stats", till.branch()).await;
    assert_status(&stats, 200);
    assert_eq!(stats.body["data"]["billing"]["charges"], cents(expected), "{}", stats.text);
    assert_eq!(
        stats.body["data"]["billing"]["outstanding"],
        cents(expected - money("0.01")),
        "{}",
        stats.text
    );
}

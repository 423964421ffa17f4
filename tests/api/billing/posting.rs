//! Posting, changing and voiding with the balance rules, gapless numbers under concurrency
//! and Idempotency-Key replays.

use super::*;

// ---------------------------------------------------------------------------------------
// Posting, changing, voiding
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn an_open_transaction_changes_until_it_is_posted() {
    let till = Till::open().await;
    let id = id_of(&till.created(charge("100")).await);
    let member = till.member(id);
    let r =
        till.app().put(&member, till.branch(), json!({ "quantity": 2, "description": "Two visits" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["amount"], "200.00", "the amount follows");
    assert_eq!(r.body["data"]["number"], number(1), "the number stays");
    assert_invalid(&till.app().put(&member, till.branch(), json!({ "kind": "payment" })).await, &["kind"]);
    let r = till.app().put(&member, till.branch(), json!({ "status": "posted" })).await;
    assert_eq!(r.body["data"]["status"], "open", "status changes only by the post action: {}", r.text);

    let r = till.post_action(id).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "posted");
    let posted_at =
        r.body["data"]["posted_at"].as_str().unwrap_or_else(|| panic!("posted_at: {}", r.body)).to_owned();
    assert!(!posted_at.is_empty());
    let version = r.body["data"]["version"].as_i64().unwrap();
    let again = till.post_action(id).await;
    assert_error(&again, 409, "invalid_transition");
    assert_eq!(again.body["status"], "posted");
    let r = till.app().put(&member, till.branch(), json!({ "description": "Changed" })).await;
    assert_error(&r, 409, "transaction_posted");
    assert_eq!(r.body["status"], "posted");
    let r = till.app().get(&member, till.branch()).await;
    assert_eq!(r.body["data"]["description"], "Two visits");
    assert_eq!(r.body["data"]["version"], version);
    // Created posted: stamped like one posted later.
    let r = till.post(posted(payment("50"))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["status"], "posted");
    assert!(r.body["data"]["posted_at"].is_string(), "{}", r.body);
    // A stale If-Match on post is 412.
    let open = id_of(&till.created(payment("1")).await);
    let stale = till
        .app()
        .request(Method::POST, &format!("{}/post", till.member(open)), till.branch())
        .header("if-match", "\"7\"");
    assert_error(&reply(stale).await, 412, "precondition_failed");
}

#[tokio::test]
async fn posting_keeps_refunds_within_payments_and_discounts_within_charges() {
    let till = Till::open().await;
    till.created(posted(charge("100"))).await;
    till.created(posted(payment("50"))).await;
    let too_much = id_of(&till.created(refund("60")).await);
    let r = till.post_action(too_much).await;
    assert_invalid(&r, &["amount"]);
    assert_eq!(
        till.app().get(&till.member(too_much), till.branch()).await.body["data"]["status"],
        "open",
        "nothing posted"
    );
    let before = till.count().await;
    assert_invalid(&till.post(posted(refund("50.01"))).await, &["amount"]);
    assert_eq!(till.count().await, before, "a refused posted create writes nothing");
    assert_status(&till.post(posted(refund("50"))).await, 201);
    let big = id_of(&till.created(discount("100.01")).await);
    assert_invalid(&till.post_action(big).await, &["amount"]);
    assert_status(&till.post(posted(discount("100"))).await, 201);
    // Open rows do not count.
    till.created(payment("1000")).await;
    assert_invalid(&till.post(posted(refund("1"))).await, &["amount"]);
}

#[tokio::test]
async fn concurrent_postings_of_one_patient_take_turns() {
    let till = Till::open().await;
    till.created(posted(payment("100"))).await;
    let mut refunds = Vec::new();
    for _ in 0..10 {
        refunds.push(id_of(&till.created(refund("30")).await));
    }
    let replies = join_all(refunds.iter().map(|id| till.post_action(*id))).await;
    let posted_count = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(posted_count, 3, "statuses: {:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    for r in replies.iter().filter(|r| r.status != 200) {
        assert_invalid(r, &["amount"]);
    }
    assert_eq!(till.summary().await["refunds"], "90.00");
    // Created posted at once: the same rule under the same lock.
    let replies = join_all((0..6).map(|_| till.post(posted(refund("5"))))).await;
    assert_eq!(replies.iter().filter(|r| r.status == 201).count(), 2);
    assert_eq!(till.summary().await["refunds"], "100.00");
}

#[tokio::test]
async fn deleting_removes_an_open_row_and_voids_a_posted_one() {
    let till = Till::open().await;
    let app = till.app();
    let open = id_of(&till.created(charge("10")).await);
    let r = app.delete(&till.member(open), till.branch()).await;
    assert_status(&r, 200);
    assert!(r.body["data"].is_null(), "a plain delete: {}", r.body);
    assert_error(&app.get(&till.member(open), till.branch()).await, 404, "not_found");
    assert_error(&till.post_action(open).await, 404, "not_found");

    let charged = id_of(&till.created(posted(charge("100"))).await);
    let paid = id_of(&till.created(posted(payment("40"))).await);
    assert_invalid(&app.delete(&till.member(paid), till.branch()).await, &["void_reason"]);
    assert_invalid(&till.void(paid, "  ").await, &["void_reason"]);
    assert_invalid(&till.void(paid, &"x".repeat(501)).await, &["void_reason"]);
    let r = till.void(paid, "Cheque bounced").await;
    assert_status(&r, 200);
    let data = &r.body["data"];
    assert_eq!(data["status"], "voided");
    assert_eq!(data["void_reason"], "Cheque bounced");
    assert!(data["voided_at"].is_string(), "{data}");
    let r = app.get(&till.member(paid), till.branch()).await;
    assert_eq!(r.body["data"]["status"], "voided", "the row is kept");
    let r = app.delete(&till.member(paid), till.branch()).await;
    assert_error(&r, 409, "invalid_transition");
    assert_eq!(r.body["status"], "voided");
    assert_error(&till.post_action(paid).await, 409, "invalid_transition");
    assert_error(
        &app.put(&till.member(paid), till.branch(), json!({ "description": "x" })).await,
        409,
        "transaction_posted",
    );
    // The reason may come in the query.
    let r = app.delete(&format!("{}?void_reason=Entered%20twice", till.member(charged)), till.branch()).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["void_reason"], "Entered twice");
    let summary = till.summary().await;
    assert_eq!((summary["charges"].as_str(), summary["payments"].as_str()), (Some("0.00"), Some("0.00")));
}

#[tokio::test]
async fn a_void_that_breaks_the_balance_is_refused() {
    let till = Till::open().await;
    let charged = id_of(&till.created(posted(charge("100"))).await);
    till.created(posted(discount("80"))).await;
    let r = till.void(charged, "Wrong patient").await;
    assert_error(&r, 409, "balance_conflict");
    assert_eq!(r.body["status"], "posted");
    let paid = id_of(&till.created(posted(payment("50"))).await);
    till.created(posted(refund("30"))).await;
    assert_error(&till.void(paid, "Reversed").await, 409, "balance_conflict");
    let r = till.app().get(&till.member(paid), till.branch()).await;
    assert_eq!(r.body["data"]["status"], "posted", "nothing changed");
    let more = id_of(&till.created(posted(payment("30"))).await);
    assert_status(&till.void(paid, "Reversed").await, 200);
    assert_error(&till.void(more, "Reversed").await, 409, "balance_conflict");
}

// ---------------------------------------------------------------------------------------
// Numbers and Idempotency-Key
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn numbers_are_consecutive_under_concurrency_and_failures_use_none() {
    let till = Till::open().await;
    assert_invalid(&till.post(json!({ "kind": "payment", "amount": 5 })).await, &["payment_method_id"]);
    assert_invalid(&till.post(posted(refund("5"))).await, &["amount"]);
    assert_eq!(till.created(charge("1")).await["number"], number(1), "refused creates used no number");
    let replies = join_all((0..20).map(|i| till.post(charge(&format!("{}.00", i + 1))))).await;
    for r in &replies {
        assert_status(r, 201);
    }
    let mut numbers: Vec<String> =
        replies.iter().map(|r| r.body["data"]["number"].as_str().unwrap().to_owned()).collect();
    numbers.sort();
    let expected: Vec<String> = (2..=21).map(number).collect();
    assert_eq!(numbers, expected, "gapless and unique");
    assert_eq!(till.count().await, 21);
    let r = till.list(&format!("search={}", number(7))).await;
    assert_eq!(column(&r.body, "number"), [number(7)]);
}

#[tokio::test]
async fn the_same_idempotency_key_sent_twice_at_once_creates_one_row() {
    let till = Till::open().await;
    let body = posted(payment("75"));
    let send = |key: &'static str, body: Value| {
        let req = till
            .app()
            .request(Method::POST, &till.path, till.branch())
            .header("idempotency-key", key)
            .json(&body);
        reply(req)
    };
    let both = join_all([send("pay-1", body.clone()), send("pay-1", body.clone())]).await;
    for r in &both {
        assert_status(r, 201);
    }
    assert_eq!(both[0].body, both[1].body, "the replay is the first answer");
    let replayed: Vec<Option<&str>> = both.iter().map(|r| r.header("idempotent-replayed")).collect();
    assert!(replayed.contains(&Some("true")) && replayed.contains(&None), "one replay: {replayed:?}");
    assert_eq!(till.count().await, 1);
    // A burst of the same request: one write, every other answer a replay of it.
    let burst = join_all((0..8).map(|_| send("pay-burst", payment("12")))).await;
    for r in &burst {
        assert_status(r, 201);
        assert_eq!(r.body, burst[0].body, "one answer for all");
    }
    let fresh = burst.iter().filter(|r| r.header("idempotent-replayed").is_none()).count();
    assert_eq!(fresh, 1);
    assert_eq!(till.count().await, 2);
    // Later too, and the summary counts it once.
    let r = send("pay-1", body.clone()).await;
    assert_status(&r, 201);
    assert_eq!(r.header("idempotent-replayed"), Some("true"));
    assert_eq!(r.body, both[0].body);
    assert_eq!(till.summary().await["payments"], "75.00", "the open burst payment is not posted");
    // The same key with another body.
    let r = send("pay-1", posted(payment("76"))).await;
    assert_error(&r, 409, "idempotency_key_reused");
    assert_eq!(till.count().await, 2);
    // Errors are not kept: a key whose request failed may be used again.
    let r = send("pay-2", json!({ "kind": "payment", "amount": 5 })).await;
    assert_invalid(&r, &["payment_method_id"]);
    assert_status(&send("pay-2", payment("5")).await, 201);
    assert_eq!(till.count().await, 3);
    let r = send("pay-3", payment("5")).await;
    assert_eq!(r.header("idempotent-replayed"), None, "another key is another request");
    let bad = till
        .app()
        .request(Method::POST, &till.path, till.branch())
        .header("idempotency-key", "has space")
        .json(&payment("5"));
    assert_error(&reply(bad).await, 400, "invalid_idempotency_key");
}

#[tokio::test]
async fn an_idempotency_key_replays_a_post_action() {
    let till = Till::open().await;
    let id = id_of(&till.created(charge("40")).await);
    let send = || {
        let path = format!("{}/post", till.member(id));
        let req = till.app().request(Method::POST, &path, till.branch()).header("idempotency-key", "post-1");
        reply(req.json(&json!({})))
    };
    let first = send().await;
    assert_status(&first, 200);
    assert_eq!(first.header("idempotent-replayed"), None);
    let again = send().await;
    assert_status(&again, 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, first.body, "the first answer, not a 409");
    let rows = till.app().audit_rows(AUDIT, till.branch(), AUDITED_AS, id).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "post"], "posted once");
    // Without a key a second post is refused.
    assert_error(&till.post_action(id).await, 409, "invalid_transition");
}

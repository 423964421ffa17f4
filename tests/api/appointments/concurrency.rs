//! Concurrent bookings and reschedules of one doctor's slots: the exclusion constraint lets
//! exactly one through per slot, and the others are 409 `slot_taken`.

use super::*;
use futures_util::future::join_all;

/// The `n`th 15-minute slot of Monday from 08:00.
fn slot(n: usize) -> String {
    let minutes = 8 * 60 + 15 * n;
    at(MONDAY, &format!("{:02}:{:02}", minutes / 60, minutes % 60))
}

fn statuses(replies: &[Reply]) -> Vec<u16> {
    replies.iter().map(|r| r.status).collect()
}

#[tokio::test]
async fn a_hundred_concurrent_bookings_for_twenty_slots_book_twenty() {
    let desk = &Desk::open().await;
    assert_status(&desk.hours(1, "08:00", "16:00", json!({})).await, 201);
    let replies = join_all((0..100).map(|i| async move { desk.book(&slot(i % 20), json!({})).await })).await;
    let created: Vec<&Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(created.len(), 20, "statuses: {:?}", statuses(&replies));
    for r in replies.iter().filter(|r| r.status != 201) {
        let named = slot_taken(r);
        assert!(named.len() <= 1, "one appointment in the way at most: {}", r.text);
    }
    let mut starts: Vec<&str> =
        created.iter().map(|r| r.body["data"]["starts_at"].as_str().unwrap()).collect();
    starts.sort_unstable();
    starts.dedup();
    assert_eq!(starts.len(), 20, "one per slot");
    assert_eq!(desk.overlapping_pairs().await, 0);
    let listed = desk.app().get(&format!("{APPOINTMENTS}?perPage=100"), desk.branch()).await;
    assert_eq!(listed.body["meta"]["total"], 20, "{}", listed.text);
}

#[tokio::test]
async fn fifty_concurrent_reschedules_onto_ten_slots_move_ten() {
    let desk = &Desk::open().await;
    assert_status(&desk.hours(1, "08:00", "23:00", json!({})).await, 201);
    let mut booked = Vec::new();
    for n in 0..50 {
        booked.push(id_of(&desk.book(&slot(n), json!({})).await));
    }
    // Every one of them asks for one of ten slots nobody holds yet.
    let targets = |i: usize| slot(50 + i % 10);
    let replies = join_all(
        booked
            .iter()
            .enumerate()
            .map(|(i, id)| async move { desk.reschedule(*id, 1, json!({ "starts_at": targets(i) })).await }),
    )
    .await;
    let moved = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(moved, 10, "statuses: {:?}", statuses(&replies));
    for r in replies.iter().filter(|r| r.status != 200) {
        slot_taken(r);
    }
    assert_eq!(desk.overlapping_pairs().await, 0);
    // The ones refused kept their place; the ones moved freed theirs.
    let r = desk.app().get(&format!("{APPOINTMENTS}?perPage=100&start_date={MONDAY}"), desk.branch()).await;
    assert_eq!(r.body["meta"]["total"], 50, "{}", r.text);
    let freed = booked.iter().zip(&replies).find(|(_, r)| r.status == 200).map(|(id, _)| *id).unwrap();
    let old = booked.iter().position(|id| *id == freed).unwrap();
    assert_status(&desk.book(&slot(old), json!({})).await, 201);
}

//! The list of likely duplicates at its edges: names as long as patients may have, folded past
//! what fuzzy matching compares, and a patient whose pairing fails, which never keeps the
//! list from answering and is paired once it can be.

use std::collections::BTreeSet;

use super::merge::{born, pairs};
use super::*;

fn expected(pairs: &[(i64, i64, &str)]) -> BTreeSet<(i64, i64, String)> {
    pairs.iter().map(|(a, b, reason)| (*a, *b, (*reason).to_owned())).collect()
}

#[tokio::test]
async fn names_of_the_longest_length_are_paired_on_their_first_folded_characters() {
    let app = TestApp::spawn().await;
    let b = app.main_branch().await;
    // 100 characters each, the most a first and a last name take; unaccent spells each of
    // these out in three letters, so the folded name has 601.
    let (first, last) = ("ﬃ".repeat(100), "㎈".repeat(100));
    let one_edit = format!("ﬄ{}", "ﬃ".repeat(99));
    let long = born(&app, b, &first, &last, "1966-05-05", json!({})).await;
    let same = born(&app, b, &first, &last, "1966-05-05", json!({})).await;
    let similar = born(&app, b, &one_edit, &last, "1966-05-05", json!({})).await;
    let maria = born(&app, b, "Maria", "Santos", "1975-07-08", json!({})).await;
    let marie = born(&app, b, "Marie", "Santos", "1975-07-08", json!({})).await;
    let client = app.state.registry.get().await.unwrap();
    let folded: i32 = client
        .query_one(&format!("SELECT length(duplicate_name) FROM branch_{b}.patients WHERE id = $1"), &[&long])
        .await
        .unwrap()
        .get(0);
    assert_eq!(folded, 601);

    let want = expected(&[
        (long, same, "same_name_and_birth_date"),
        (long, similar, "similar_name_and_birth_date"),
        (same, similar, "similar_name_and_birth_date"),
        (maria, marie, "similar_name_and_birth_date"),
    ]);
    assert_eq!(pairs(&app, b).await, want);
    assert_eq!(pairs(&app, b).await, want, "read again");
    // A change of the long name is paired again too.
    let r = app.put(&format!("{PATIENTS}/{similar}"), Some(b), json!({ "birth_date": "1966-05-06" })).await;
    assert_status(&r, 200);
    assert_eq!(
        pairs(&app, b).await,
        expected(&[(long, same, "same_name_and_birth_date"), (maria, marie, "similar_name_and_birth_date")])
    );
}

#[tokio::test]
async fn a_patient_whose_pairing_fails_stays_queued_and_the_others_are_listed() {
    let app = TestApp::spawn().await;
    let b = app.main_branch().await;
    let maria = born(&app, b, "Maria", "Santos", "1975-07-08", json!({})).await;
    let marie = born(&app, b, "Marie", "Santos", "1975-07-08", json!({})).await;
    let pedro = born(&app, b, "Pedro", "Ramos", "1960-01-01", json!({})).await;
    let piedro = born(&app, b, "Piedro", "Ramos", "1960-01-01", json!({})).await;
    let client = app.state.registry.get().await.unwrap();
    // Any error of one patient's pairing: here the pairs table refuses Maria's.
    client
        .batch_execute(&format!(
            "CREATE FUNCTION branch_{b}.refuse_pair() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'refused'; END $$;
             CREATE TRIGGER refuse_pair BEFORE INSERT ON branch_{b}.patient_duplicate_pairs
                 FOR EACH ROW WHEN (NEW.older_id = {maria}) EXECUTE FUNCTION branch_{b}.refuse_pair();"
        ))
        .await
        .unwrap();
    let queued = format!(
        "SELECT array_agg(DISTINCT subject_id ORDER BY subject_id) FROM branch_{b}.patient_duplicate_checks"
    );

    assert_eq!(pairs(&app, b).await, expected(&[(pedro, piedro, "similar_name_and_birth_date")]));
    let left: Vec<i64> = client.query_one(&queued, &[]).await.unwrap().get(0);
    assert_eq!(left, [maria, marie], "both sides of the failing pair stay queued");
    assert_eq!(
        pairs(&app, b).await,
        expected(&[(pedro, piedro, "similar_name_and_birth_date")]),
        "read again"
    );

    client
        .batch_execute(&format!("DROP TRIGGER refuse_pair ON branch_{b}.patient_duplicate_pairs"))
        .await
        .unwrap();
    assert_eq!(
        pairs(&app, b).await,
        expected(&[
            (maria, marie, "similar_name_and_birth_date"),
            (pedro, piedro, "similar_name_and_birth_date")
        ])
    );
    let left: Option<Vec<i64>> = client.query_one(&queued, &[]).await.unwrap().get(0);
    assert_eq!(left, None, "the queue is empty");
}

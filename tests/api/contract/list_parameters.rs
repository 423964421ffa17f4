//! List parameters: paging, sorting, search and filters, each refused with a 422 on the
//! parameter when bad.

use super::*;
use crate::support::assert_status;

// ---------------------------------------------------------------------------------------
// List parameters
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn list_defaults_to_page_1_of_15_sorted_by_last_name_ascending() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // Created in a scrambled order: 7 is coprime with 17, so this visits every number once.
    for i in 0..17 {
        let k = (i * 7) % 17;
        new_patient(&app, main, &format!("First{k:02}"), &format!("Last{k:02}"), "female").await;
    }
    let r = list_patients(&app, main, "").await;
    assert_status(&r, 200);
    let meta = &r.body["meta"];
    assert_eq!(meta["per_page"], 15);
    assert_eq!(meta["current_page"], 1);
    assert_eq!(meta["total"], 17);
    assert_eq!(meta["last_page"], 2);
    let expected: Vec<String> = (0..15).map(|k| format!("Last{k:02}")).collect();
    assert_eq!(column(&r.body, "last_name"), expected);

    let r = list_patients(&app, main, "page=2").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Last15", "Last16"]);
}

#[tokio::test]
async fn per_page_outside_1_to_100_or_not_a_number_is_422_on_per_page() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["0", "101", "abc", "-5", "1.5"] {
        let r = list_patients(&app, main, &format!("perPage={bad}")).await;
        assert_invalid(&r, &["perPage"]);
    }
    for good in ["1", "100"] {
        let r = list_patients(&app, main, &format!("perPage={good}")).await;
        assert_status(&r, 200);
        assert_eq!(r.body["meta"]["per_page"].to_string(), good);
    }
}

#[tokio::test]
async fn page_below_1_or_not_a_number_is_422_on_page() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["0", "-1", "x"] {
        let r = list_patients(&app, main, &format!("page={bad}")).await;
        assert_invalid(&r, &["page"]);
    }
}

#[tokio::test]
async fn sort_direction_other_than_asc_or_desc_is_422_on_sort_direction() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = list_patients(&app, main, "sortDirection=up").await;
    assert_invalid(&r, &["sortDirection"]);
}

#[tokio::test]
async fn sort_field_not_allowed_is_422_listing_the_allowed_fields() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["password_hash", "id;DROP TABLE patients", "notes"] {
        let r = list_patients(&app, main, &format!("sortField={}", bad.replace(' ', "%20"))).await;
        assert_invalid(&r, &["sortField"]);
        let message = r.body["errors"]["sortField"][0].as_str().unwrap();
        for allowed in ["last_name", "first_name", "pin", "birth_date", "created_at"] {
            assert!(message.contains(allowed), "errors.sortField does not list {allowed}: {message}");
        }
    }
}

#[tokio::test]
async fn sort_field_and_direction_order_the_rows() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, last) in
        [("Eve", "Clark"), ("Dan", "Adams"), ("Bob", "Evans"), ("Cat", "Baker"), ("Al", "Davis")]
    {
        new_patient(&app, main, first, last, "female").await;
    }
    let r = list_patients(&app, main, "sortField=last_name&sortDirection=asc").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Adams", "Baker", "Clark", "Davis", "Evans"]);
    let r = list_patients(&app, main, "sortField=last_name&sortDirection=desc").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Evans", "Davis", "Clark", "Baker", "Adams"]);
    let r = list_patients(&app, main, "sortField=first_name").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Al", "Bob", "Cat", "Dan", "Eve"], "asc is the default");
    let r = list_patients(&app, main, "sortField=first_name&sortDirection=desc").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Eve", "Dan", "Cat", "Bob", "Al"]);
    let r = list_patients(&app, main, "sortField=pin&sortDirection=desc").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Davis", "Baker", "Evans", "Adams", "Clark"]);
}

#[tokio::test]
async fn search_matches_names_case_insensitively_and_pins() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    new_patient(&app, main, "Maria", "Santos", "female").await;
    let smith = new_patient(&app, main, "John", "Smith", "male").await;
    new_patient(&app, main, "Ana", "Cruz", "female").await;
    new_patient(&app, main, "Mariana", "Lopez", "female").await;

    let r = list_patients(&app, main, "search=sAnToS").await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "last_name"), vec!["Santos"]);
    assert_eq!(r.body["meta"]["total"], 1);

    let r = list_patients(&app, main, "search=MARIA").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Lopez", "Santos"], "first names match too");

    let pin = smith["pin"].as_str().unwrap();
    let r = list_patients(&app, main, &format!("search={pin}")).await;
    assert_eq!(column(&r.body, "last_name"), vec!["Smith"]);

    new_patient(&app, main, "José", "Peña", "male").await;
    let r = list_patients(&app, main, "search=PE%C3%91A").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Peña"], "case folding beyond ASCII");

    let r = list_patients(&app, main, "search=nobody-like-this").await;
    assert_eq!(r.body["data"], json!([]));
    assert_eq!(r.body["meta"]["total"], 0);

    // LIKE wildcards are matched literally.
    let r = list_patients(&app, main, "search=%25").await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 0, "a % in the search is not a wildcard");
}

#[tokio::test]
async fn filter_by_sex_returns_only_that_sex() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (last, sex) in [("A", "female"), ("B", "male"), ("C", "female"), ("D", "other")] {
        new_patient(&app, main, "X", last, sex).await;
    }
    let r = list_patients(&app, main, "filters[sex]=female").await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "last_name"), vec!["A", "C"]);
    assert!(column(&r.body, "sex").iter().all(|s| s == "female"));
    assert_eq!(r.body["meta"]["total"], 2);
    let r = list_patients(&app, main, "filters[sex]=male").await;
    assert_eq!(column(&r.body, "last_name"), vec!["B"]);
    // Combined with search.
    let r = list_patients(&app, main, "filters[sex]=female&search=c").await;
    assert_eq!(column(&r.body, "last_name"), vec!["C"]);
}

#[tokio::test]
async fn bad_value_of_a_known_filter_is_422_on_that_filter() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = list_patients(&app, main, "filters[sex]=bogus").await;
    assert_invalid(&r, &["filters[sex]"]);
    let r = list_patients(&app, main, "filters[status]=asleep").await;
    assert_invalid(&r, &["filters[status]"]);
}

#[tokio::test]
async fn unknown_filter_is_422_on_that_filter() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = list_patients(&app, main, "filters[password_hash]=x").await;
    assert_invalid(&r, &["filters[password_hash]"]);
}

#[tokio::test]
async fn empty_filter_value_is_ignored() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    new_patient(&app, main, "A", "One", "female").await;
    new_patient(&app, main, "B", "Two", "male").await;
    let r = list_patients(&app, main, "filters[sex]=&filters[status]=").await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 2);
}

#[tokio::test]
async fn pages_are_disjoint_and_together_hold_every_row() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let mut created = BTreeSet::new();
    for i in 0..7 {
        // Equal last names: the order must still be total for pages to be disjoint.
        created.insert(id_of(&new_patient(&app, main, &format!("P{i}"), "Same", "female").await));
    }
    let mut seen = Vec::new();
    for (page, expected_len) in [(1, 3), (2, 3), (3, 1)] {
        let r = list_patients(&app, main, &format!("perPage=3&page={page}")).await;
        assert_status(&r, 200);
        let page_ids = ids(&r.body);
        assert_eq!(page_ids.len(), expected_len, "page {page}: {}", r.body);
        assert_eq!(r.body["meta"]["last_page"], 3);
        seen.extend(page_ids);
    }
    let distinct: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(distinct.len(), seen.len(), "a row appeared on two pages: {seen:?}");
    assert_eq!(distinct, created);
}

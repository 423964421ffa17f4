//! The list (word search, filters, sort, paging) and the type-ahead lookup.

use super::*;

#[tokio::test]
async fn search_ignores_accents_and_case() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "José", "Peña").await;
    patient(&app, main, "Jose", "Santos").await;
    patient(&app, main, "Ana", "Zapena").await;
    patient(&app, main, "Zoë", "Müller").await;

    let r = list(&app, main, "search=pena").await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "last_name"), vec!["Peña", "Zapena"]);
    let r = list(&app, main, "search=PE%C3%91A").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Peña", "Zapena"], "ñ in the term matches n too");
    let r = list(&app, main, "search=jos%C3%A9").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Peña", "Santos"], "é in the term matches e too");
    let r = list(&app, main, "search=muller").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Zoë"]);
    let r = list(&app, main, "search=ZOE").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Müller"]);
    assert_eq!(r.body["meta"]["total"], 1);
}

#[tokio::test]
async fn search_matches_the_full_name_in_either_order() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let jose = patient(&app, main, "José", "Peña").await;
    patient(&app, main, "Jose", "Santos").await;
    patient(&app, main, "Maria", "Peña").await;
    patient(&app, main, "Pedro", "Josefino").await;
    for term in ["JOSE%20PENA", "pena%20jose", "Jos%C3%A9%20Pe%C3%B1a", "%20pe%C3%B1a%20%20JOS%C3%89%20"] {
        let r = list(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id_of(&jose)], "search={term}: {}", r.body);
        assert_eq!(r.body["meta"]["total"], 1);
    }
    // Every word must match.
    let r = list(&app, main, "search=jose%20cruz").await;
    assert_eq!(r.body["meta"]["total"], 0, "{}", r.body);
}

#[tokio::test]
async fn search_matches_the_middle_name_and_suffix() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let maria = patient_with(&app, main, "Maria", "Santos", json!({ "middle_name": "Clarita" })).await;
    patient_with(&app, main, "Clara", "Reyes", json!({})).await;
    let junior = patient_with(&app, main, "Juan", "Luna", json!({ "suffix": "III" })).await;
    let r = list(&app, main, "search=clarita").await;
    assert_eq!(ids(&r.body), vec![id_of(&maria)], "{}", r.body);
    let r = list(&app, main, "search=maria%20clarita%20santos").await;
    assert_eq!(ids(&r.body), vec![id_of(&maria)], "first, middle and last together");
    let r = list(&app, main, "search=clar").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Reyes", "Santos"]);
    let r = list(&app, main, "search=luna%20iii").await;
    assert_eq!(ids(&r.body), vec![id_of(&junior)]);
}

#[tokio::test]
async fn search_finds_a_patient_by_pin() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for i in 1..=11 {
        patient(&app, main, &format!("P{i}"), &format!("Last{i:02}")).await;
    }
    let r = list(&app, main, "search=MAIN-000011").await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "pin"), vec!["MAIN-000011"]);
    let r = list(&app, main, "search=main-000003").await;
    assert_eq!(column(&r.body, "pin"), vec!["MAIN-000003"], "case-insensitive");
    assert_eq!(r.body["meta"]["total"], 1);
    // A part of the PIN matches every PIN holding it.
    let r = list(&app, main, "search=00001&sortField=pin").await;
    assert_eq!(column(&r.body, "pin"), vec!["MAIN-000001", "MAIN-000010", "MAIN-000011"]);
}

#[tokio::test]
async fn search_combines_with_each_filter() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, sex, civil, status) in [
        ("Ana", "female", "single", "active"),
        ("Ben", "male", "married", "active"),
        ("Carl", "male", "single", "inactive"),
        ("Dina", "female", "married", "deceased"),
    ] {
        patient_with(
            &app,
            main,
            first,
            "Cruz",
            json!({ "sex": sex, "civil_status": civil, "status": status }),
        )
        .await;
        patient_with(
            &app,
            main,
            first,
            "Reyes",
            json!({ "sex": sex, "civil_status": civil, "status": status }),
        )
        .await;
    }
    let names = |r: &Reply| {
        let first = column(&r.body, "first_name");
        let last = column(&r.body, "last_name");
        first.into_iter().zip(last).map(|(f, l)| format!("{f} {l}")).collect::<Vec<_>>()
    };
    let r = list(&app, main, "search=cruz&filters[sex]=male&sortField=first_name").await;
    assert_status(&r, 200);
    assert_eq!(names(&r), vec!["Ben Cruz", "Carl Cruz"]);
    assert_eq!(r.body["meta"]["total"], 2);
    let r = list(&app, main, "search=cruz&filters[civil_status]=married&sortField=first_name").await;
    assert_eq!(names(&r), vec!["Ben Cruz", "Dina Cruz"]);
    let r = list(&app, main, "search=reyes&filters[status]=inactive").await;
    assert_eq!(names(&r), vec!["Carl Reyes"]);
    let r = list(&app, main, "search=reyes&filters[sex]=female&filters[status]=active").await;
    assert_eq!(names(&r), vec!["Ana Reyes"]);
    let r = list(
        &app,
        main,
        "search=cruz&filters[sex]=female&filters[civil_status]=single&filters[status]=deceased",
    )
    .await;
    assert_eq!(r.body["meta"]["total"], 0);
    assert_eq!(r.body["data"], json!([]));
}

#[tokio::test]
async fn filters_by_civil_status_and_status_each_narrow_the_list() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (last, civil, status) in [
        ("A", "single", "active"),
        ("B", "married", "inactive"),
        ("C", "married", "active"),
        ("D", "divorced", "deceased"),
    ] {
        patient_with(&app, main, "X", last, json!({ "civil_status": civil, "status": status })).await;
    }
    let r = list(&app, main, "filters[civil_status]=married").await;
    assert_eq!(column(&r.body, "last_name"), vec!["B", "C"]);
    let r = list(&app, main, "filters[status]=active").await;
    assert_eq!(column(&r.body, "last_name"), vec!["A", "C"]);
    let r = list(&app, main, "filters[status]=deceased").await;
    assert_eq!(column(&r.body, "last_name"), vec!["D"]);
    let r = list(&app, main, "filters[civil_status]=married&filters[status]=inactive").await;
    assert_eq!(column(&r.body, "last_name"), vec!["B"]);
    assert_eq!(r.body["meta"]["total"], 1);
}

#[tokio::test]
async fn list_sorts_by_each_allowed_field_both_ways() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // Creation order (= PIN and created_at order) differs from every other order.
    for (first, last, born) in [
        ("Carl", "Bravo", "1990-05-01"),
        ("Ana", "Delta", "1980-01-01"),
        ("Dina", "Alpha", "1970-12-31"),
        ("Ben", "Charlie", "1960-07-15"),
    ] {
        patient_with(&app, main, first, last, json!({ "birth_date": born })).await;
    }
    let order = |field: &str, direction: &str| {
        let query = format!("sortField={field}&sortDirection={direction}");
        let app = &app;
        async move {
            let r = list(app, main, &query).await;
            assert_status(&r, 200);
            column(&r.body, "first_name")
        }
    };
    let cases: [(&str, [&str; 4]); 5] = [
        ("last_name", ["Dina", "Carl", "Ben", "Ana"]),
        ("first_name", ["Ana", "Ben", "Carl", "Dina"]),
        ("pin", ["Carl", "Ana", "Dina", "Ben"]),
        ("birth_date", ["Ben", "Dina", "Ana", "Carl"]),
        ("created_at", ["Carl", "Ana", "Dina", "Ben"]),
    ];
    for (field, ascending) in cases {
        assert_eq!(order(field, "asc").await, ascending, "{field} asc");
        let mut descending = ascending.to_vec();
        descending.reverse();
        assert_eq!(order(field, "desc").await, descending, "{field} desc");
    }
}

#[tokio::test]
async fn search_results_page_without_overlap_and_count_only_the_matches() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let mut matching = BTreeSet::new();
    for i in 0..7 {
        // Equal names: the order must still be total for pages to be disjoint.
        matching.insert(id_of(&patient(&app, main, "Ana", "Peña").await));
        if i % 2 == 0 {
            patient(&app, main, "Ben", "Reyes").await;
        }
    }
    let mut seen = Vec::new();
    for (page, expected) in [(1, 3), (2, 3), (3, 1), (4, 0)] {
        let r = list(&app, main, &format!("search=pena&perPage=3&page={page}&sortDirection=desc")).await;
        assert_status(&r, 200);
        assert_eq!(r.body["meta"]["total"], 7, "{}", r.body["meta"]);
        assert_eq!(r.body["meta"]["last_page"], 3);
        let page_ids = ids(&r.body);
        assert_eq!(page_ids.len(), expected, "page {page}: {}", r.body);
        seen.extend(page_ids);
    }
    let distinct: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(distinct.len(), seen.len(), "a row appeared on two pages: {seen:?}");
    assert_eq!(distinct, matching);
    let mut descending = seen.clone();
    descending.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(seen, descending, "equal names fall back to id, in the requested direction");
}

// ---------------------------------------------------------------------------------------
// Lookup (type-ahead)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn lookup_finds_by_name_words_and_answers_message_and_data_only() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let jose = patient(&app, main, "José", "Peña").await;
    patient(&app, main, "Maria", "Santos").await;
    patient(&app, main, "Jose", "Rizal").await;
    let r = lookup(&app, main, "search=pena%20JOSE").await;
    assert_status(&r, 200);
    let body = r.body.as_object().expect("JSON object");
    assert!(body.get("message").and_then(Value::as_str).is_some_and(|m| !m.is_empty()), "{}", r.body);
    let keys: BTreeSet<&str> = body.keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["data", "message"]), "no pagination: {}", r.body);
    assert_eq!(ids(&r.body), vec![id_of(&jose)]);
    assert_eq!(r.body["data"][0]["pin"], jose["pin"]);
    assert_eq!(r.body["data"][0]["first_name"], "José");
    // Best matches ordered by name.
    let r = lookup(&app, main, "search=jose").await;
    assert_eq!(column(&r.body, "last_name"), vec!["Peña", "Rizal"]);
    let r = lookup(&app, main, "search=nobody").await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"], json!([]));
}

#[tokio::test]
async fn lookup_matches_the_start_of_each_typed_word_in_any_order() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Peña").await;
    let juana = patient(&app, main, "Juana", "Pérez").await;
    let dela = patient(&app, main, "Ramon", "Dela Cruz").await;
    for term in ["ana%20pe", "PE%20an", "an%20pen", "ana%20pe%C3%B1"] {
        let r = lookup(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id_of(&ana)], "search={term}: {}", r.body);
    }
    // Both begin a word with "pe"; "uana" begins none, while the list's search finds it inside.
    let r = lookup(&app, main, "search=pe").await;
    assert_eq!(ids(&r.body), vec![id_of(&ana), id_of(&juana)]);
    let r = lookup(&app, main, "search=uana").await;
    assert_eq!(r.body["data"], json!([]));
    assert_eq!(ids(&list(&app, main, "search=uana").await.body), vec![id_of(&juana)]);
    // Each word of a name counts; punctuation alone is no word and matches nothing.
    let r = lookup(&app, main, "search=cruz%20ram").await;
    assert_eq!(ids(&r.body), vec![id_of(&dela)]);
    // A PIN counts by its number, with or without its zeros, not by the branch code all share.
    assert_eq!(dela["pin"], "MAIN-000003");
    for term in ["000003", "3", "ram%203"] {
        let r = lookup(&app, main, &format!("search={term}")).await;
        assert_eq!(ids(&r.body), vec![id_of(&dela)], "search={term}: {}", r.body);
    }
    let r = lookup(&app, main, "search=ma").await;
    assert_eq!(r.body["data"], json!([]), "{}", r.body);
    let r = lookup(&app, main, "search=%25%20_").await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"], json!([]));
}

#[tokio::test]
async fn lookup_matches_the_middle_name_and_suffix_as_they_are_now() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let maria = patient_with(&app, main, "Maria", "Santos", json!({ "middle_name": "Clarita" })).await;
    let junior = patient_with(&app, main, "Juan", "Luna", json!({ "suffix": "III" })).await;
    let found = |term: &'static str| {
        let app = &app;
        async move { ids(&lookup(app, main, &format!("search={term}")).await.body) }
    };
    assert_eq!(found("clar").await, vec![id_of(&maria)]);
    assert_eq!(found("luna%20iii").await, vec![id_of(&junior)]);
    let path = format!("{PATIENTS}/{}", id_of(&maria));
    assert_status(&app.put(&path, Some(main), json!({ "middle_name": "Bituin" })).await, 200);
    assert_eq!(found("clar").await, Vec::<i64>::new(), "the old middle name no longer matches");
    assert_eq!(found("bit%20mar").await, vec![id_of(&maria)]);
    // Changes the words do not see are kept all the same: the rows read are the patient's.
    assert_status(&app.put(&path, Some(main), json!({ "middle_name": "BITUIN" })).await, 200);
    let path = format!("{PATIENTS}/{}", id_of(&junior));
    assert_status(&app.put(&path, Some(main), json!({ "suffix": null })).await, 200);
    assert_eq!(found("luna%20iii").await, Vec::<i64>::new());
    assert_eq!(search_rows_drift(&app, main).await, Vec::<String>::new());
}

/// Every GIN index on the tables patient searches read bounds the pending list each search
/// through it reads (64 kB, not PostgreSQL's 4 MB).
#[tokio::test]
async fn the_indexes_patient_searches_read_keep_their_pending_entries_few() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let client = app.state.registry.get().await.unwrap();
    let rows = client
        .query(
            "SELECT c.relname::text, coalesce(array_to_string(c.reloptions, ','), '')
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
               JOIN pg_am a ON a.oid = c.relam
              WHERE a.amname = 'gin' AND t.relnamespace = $1::text::regnamespace
                AND t.relname IN ('patients', 'patient_search')
              ORDER BY 1",
            &[&format!("branch_{main}")],
        )
        .await
        .unwrap();
    let found: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let names: Vec<&str> = found.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "patient_search_prefixes_idx",
            "patient_search_text_idx",
            "patients_phone_idx",
            "patients_search_idx"
        ]
    );
    for (name, options) in &found {
        assert!(options.split(',').any(|o| o == "gin_pending_list_limit=64"), "{name}: {options:?}");
    }
}

#[tokio::test]
async fn lookup_by_pin_puts_the_exact_pin_first() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // A name that reads like the next patient's PIN, and sorts first by name.
    let decoy = patient(&app, main, "Main-000002", "Abad").await;
    let holder = patient(&app, main, "Zed", "Zamora").await;
    assert_eq!(holder["pin"], "MAIN-000002");
    for term in ["MAIN-000002", "main-000002"] {
        let r = lookup(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id_of(&holder), id_of(&decoy)], "search={term}: {}", r.body);
    }
    let r = lookup(&app, main, &format!("search={}", decoy["pin"].as_str().unwrap())).await;
    assert_eq!(ids(&r.body), vec![id_of(&decoy)]);
}

#[tokio::test]
async fn lookup_by_phone_digits_typed_without_the_country_code() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient_with(&app, main, "Ana", "Cruz", json!({ "phone": "+63 912 345 6789" })).await;
    patient_with(&app, main, "Ben", "Reyes", json!({ "phone": "+63 917 000 1111" })).await;
    patient(&app, main, "Carl", "Nophone").await;
    for term in ["9123456", "912%20345%206789", "912-345-6789", "(912)%20345", "%2B63%20912%20345%206789"] {
        let r = lookup(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert_eq!(ids(&r.body), vec![id_of(&ana)], "search={term}: {}", r.body);
        assert_eq!(r.body["data"][0]["phone"], "+63 912 345 6789");
    }
    let r = lookup(&app, main, "search=555%204444").await;
    assert_eq!(r.body["data"], json!([]));
}

#[tokio::test]
async fn lookup_honours_the_limit_and_defaults_to_10() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for i in 0..12 {
        patient(&app, main, &format!("Name{i:02}"), "Santos").await;
    }
    patient(&app, main, "Other", "Person").await;
    let r = lookup(&app, main, "search=santos").await;
    assert_status(&r, 200);
    assert_eq!(column(&r.body, "first_name"), (0..10).map(|i| format!("Name{i:02}")).collect::<Vec<_>>());
    let r = lookup(&app, main, "search=santos&limit=3").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Name00", "Name01", "Name02"]);
    let r = lookup(&app, main, "search=santos&limit=1").await;
    assert_eq!(column(&r.body, "first_name"), vec!["Name00"]);
    let r = lookup(&app, main, "search=santos&limit=50").await;
    assert_eq!(ids(&r.body).len(), 12);
}

#[tokio::test]
async fn lookup_limit_outside_1_to_50_or_not_a_number_is_422_on_limit() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    for bad in ["0", "51", "x", "-1", "1.5", "1000000000000000000000"] {
        let r = lookup(&app, main, &format!("search=cruz&limit={bad}")).await;
        assert_invalid(&r, &["limit"]);
    }
}

#[tokio::test]
async fn lookup_without_a_search_term_is_422_on_search() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "Ana", "Cruz").await;
    for query in ["", "search=", "search=%20%20", "limit=5"] {
        let r = lookup(&app, main, query).await;
        assert_invalid(&r, &["search"]);
    }
}

/// Every difference between the rows a search reads (`patient_search`) and the live
/// patients they are kept from; empty when they agree.
async fn search_rows_drift(app: &TestApp, branch: i64) -> Vec<String> {
    let client = app.state.registry.get().await.unwrap();
    let columns = "id, search_text, last_name, first_name, middle_name, suffix, pin, birth_date, created_at";
    let live = format!("SELECT {columns} FROM branch_{branch}.patients WHERE deleted_at IS NULL");
    let kept = format!("SELECT {columns} FROM branch_{branch}.patient_search");
    let rows = client
        .query(
            &format!(
                "(SELECT 'missing', id, search_text FROM ({live} EXCEPT ALL {kept}) m)
                 UNION ALL (SELECT 'stale', id, search_text FROM ({kept} EXCEPT ALL {live}) s) ORDER BY 2"
            ),
            &[],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| format!("{} {} {}", r.get::<_, &str>(0), r.get::<_, i64>(1), r.get::<_, &str>(2)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_rows_searches_read_follow_their_patients_through_concurrent_writes() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let main = app.main_branch().await;
    let created = futures_util::future::join_all((0..30).map(|n| {
        let app = &app;
        async move { id_of(&patient(app, main, &format!("Kept{n}"), "Follow").await) }
    }))
    .await;
    assert_eq!(search_rows_drift(&app, main).await, Vec::<String>::new(), "after the creates");

    // At once, each but the first: renamed, deleted, born another day, or given a phone
    // (which the kept rows do not hold); the rest are then merged into the first (a patient's
    // merges go one at a time).
    let answers = futures_util::future::join_all(created.iter().enumerate().skip(1).map(|(n, &id)| {
        let app = &app;
        async move {
            let path = format!("{PATIENTS}/{id}");
            match n % 5 {
                0 => Some(app.put(&path, Some(main), json!({ "last_name": "Renamed" })).await),
                1 => Some(app.delete(&path, Some(main)).await),
                2 => Some(app.put(&path, Some(main), json!({ "birth_date": "1970-01-01" })).await),
                3 => Some(app.put(&path, Some(main), json!({ "phone": "+63 917 555 0100" })).await),
                _ => None,
            }
        }
    }))
    .await;
    for r in answers.iter().flatten() {
        assert_status(r, 200);
    }
    let mut merges = Vec::new();
    for (_, &id) in created.iter().enumerate().filter(|(n, _)| n % 5 == 4) {
        let body = json!({ "duplicate_id": id, "reason": "registered twice" });
        let r = app.post(&format!("{PATIENTS}/{}/merge", created[0]), Some(main), body).await;
        assert_status(&r, 201);
        merges.push(id_of(&r));
    }
    // The last merge undone: its patient is back, and found again.
    let undo = json!({ "merge_id": merges.pop().unwrap() });
    assert_status(&app.post(&format!("{PATIENTS}/{}/unmerge", created[0]), Some(main), undo).await, 200);
    assert_eq!(search_rows_drift(&app, main).await, Vec::<String>::new(), "after the writes");

    // Searches answer the patients as they now are.
    let of = |keep: &dyn Fn(usize) -> bool| {
        let mut ids: Vec<i64> =
            created.iter().enumerate().filter(|(n, _)| keep(*n)).map(|(_, id)| *id).collect();
        ids.sort_unstable();
        ids
    };
    let sorted = |r: &Reply| {
        let mut found = ids(&r.body);
        found.sort_unstable();
        found
    };
    let renamed = list(&app, main, "search=renamed&perPage=100").await;
    assert_eq!(sorted(&renamed), of(&|n| n > 0 && n % 5 == 0));
    let follow = list(&app, main, "search=follow&perPage=100").await;
    let staying = of(&|n| n == 0 || n % 5 == 2 || n % 5 == 3 || n == 29);
    assert_eq!(sorted(&follow), staying, "neither the renamed, the deleted nor the merged");
    assert_eq!(follow.body["meta"]["total"], staying.len());
    let born = list(&app, main, "search=follow&sortField=birth_date&perPage=100").await;
    let first: Vec<i64> = ids(&born.body).into_iter().take(6).collect();
    let mut first_sorted = first.clone();
    first_sorted.sort_unstable();
    assert_eq!(first_sorted, of(&|n| n % 5 == 2), "the earlier birth dates sort first");
    // The same page as the full rows give when a filter is beside the search.
    let by_pin = list(&app, main, "search=follow&sortField=pin&sortDirection=desc&perPage=100").await;
    let filtered =
        list(&app, main, "search=follow&sortField=pin&sortDirection=desc&perPage=100&filters[sex]=female")
            .await;
    assert_status(&filtered, 200);
    assert_eq!(ids(&by_pin.body), ids(&filtered.body), "every patient here is female");
    let mut pins = column(&by_pin.body, "pin");
    assert_eq!(pins.len(), staying.len());
    pins.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(column(&by_pin.body, "pin"), pins);
}

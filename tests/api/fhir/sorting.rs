//! `_sort` (ascending and descending, several keys, paging that keeps it, a sort not taken is
//! a 400) and the total alone (`_count=0`, `_summary=count`) on every search.

use super::*;

/// The ids `query` finds of `kind`, in the order answered.
async fn order(app: &TestApp, branch: i64, kind: &str, query: &str) -> Vec<i64> {
    let bundle = fhir(app, branch, &format!("/fhir/r4/{kind}?{query}&_count=100"), 200).await;
    ids(&bundle).iter().map(|id| id.parse().unwrap()).collect()
}

#[tokio::test]
async fn sorts_order_either_way_before_the_types_own_order_and_pages_keep_them() {
    let clinic = Clinic::open().await;
    let (app, branch, ana) = (&clinic.app, clinic.branch, clinic.patient);
    let born = |first: &str, last: &str, day: &str| {
        let body = json!({ "first_name": first, "last_name": last, "birth_date": day, "sex": "male" });
        async move { id_of(&app.created("/api/v1/patients", Some(branch), body).await) }
    };
    // Ana Cruz was born on 1980-01-02.
    let reyes = born("Rui", "Reyes", "1990-03-01").await;
    let cruz = born("Cai", "Cruz", "1975-06-01").await;
    let abad = born("Abe", "Abad", "1990-03-01").await;
    let zamora = born("Zed", "Zamora", "1960-01-01").await;
    let young = born("Cy", "Cruz", "2001-01-01").await;

    // Equal keys keep the type's own order (a patient's id) either way.
    assert_eq!(
        order(app, branch, "Patient", "_sort=birthdate").await,
        [zamora, cruz, ana, reyes, abad, young]
    );
    assert_eq!(
        order(app, branch, "Patient", "_sort=-birthdate").await,
        [young, reyes, abad, ana, cruz, zamora]
    );
    assert_eq!(
        order(app, branch, "Patient", "_sort=family,-birthdate").await,
        [abad, young, ana, cruz, reyes, zamora]
    );
    assert_eq!(order(app, branch, "Patient", "_sort=-family").await, [zamora, reyes, ana, cruz, young, abad]);
    assert_eq!(
        order(app, branch, "Patient", "_sort=-birthdate&_sort=family").await,
        [young, abad, reyes, ana, cruz, zamora],
        "a repeated _sort adds its keys after"
    );
    assert_eq!(order(app, branch, "Patient", "family=cruz&_sort=-birthdate").await, [young, ana, cruz]);
    // The last one changed is the last updated.
    let r = app.put(&format!("/api/v1/patients/{cruz}"), Some(branch), json!({ "city": "Cebu" })).await;
    assert_status(&r, 200);
    assert_eq!(order(app, branch, "Patient", "_sort=-_lastUpdated").await[0], cruz);
    assert_eq!(order(app, branch, "Patient", "_sort=_lastUpdated").await.last(), Some(&cruz));

    // Pages keep the sort: following `next` walks the whole order once.
    let all = order(app, branch, "Patient", "_sort=family,-birthdate").await;
    let mut page = fhir(app, branch, "/fhir/r4/Patient?_sort=family,-birthdate&_count=2", 200).await;
    let mut walked = ids(&page);
    while let Some(next) = link(&page, "next") {
        assert!(next.contains("_sort=family%2C-birthdate"), "{next}");
        page = fhir(app, branch, next.strip_prefix(&app.base).unwrap(), 200).await;
        let previous = link(&page, "previous").expect("a later page links back");
        assert!(previous.contains("_sort=family%2C-birthdate"), "{previous}");
        walked.extend(ids(&page));
    }
    let walked: Vec<i64> = walked.iter().map(|id| id.parse().unwrap()).collect();
    assert_eq!(walked, all);

    // A type's date, either way; the default is the newest first.
    let (ben, v) = visits_on(&clinic, &["2025-03-10", "2025-01-10", "2025-02-10"]).await;
    let query = |sort: &str| format!("patient={ben}{sort}");
    assert_eq!(order(app, branch, "Encounter", &query("")).await, [v[0], v[2], v[1]]);
    assert_eq!(order(app, branch, "Encounter", &query("&_sort=date")).await, [v[1], v[2], v[0]]);
    assert_eq!(order(app, branch, "Encounter", &query("&_sort=-date")).await, [v[0], v[2], v[1]]);
    assert_eq!(order(app, branch, "Encounter", &query("&_sort=_lastUpdated")).await, v);
    let mut page =
        fhir(app, branch, &format!("/fhir/r4/Encounter?{}&_count=1", query("&_sort=date")), 200).await;
    let mut walked = ids(&page);
    while let Some(next) = link(&page, "next") {
        page = fhir(app, branch, next.strip_prefix(&app.base).unwrap(), 200).await;
        walked.extend(ids(&page));
    }
    assert_eq!(walked, [v[1].to_string(), v[2].to_string(), v[0].to_string()]);

    // Every type stored sorts by when it was last updated.
    for kind in clinic_server::fhir::Type::ALL.iter().map(|kind| kind.name()).filter(|k| *k != "Slot") {
        let bundle = fhir(app, branch, &format!("/fhir/r4/{kind}?_sort=-_lastUpdated"), 200).await;
        assert_eq!(bundle["type"], "searchset", "{kind}");
    }
}

#[tokio::test]
async fn a_sort_a_search_does_not_take_is_a_400_naming_what_it_takes() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let mut outcomes = Vec::new();
    for (path, said) in [
        (
            "Patient?_sort=name",
            "_sort takes birthdate, family, _lastUpdated, each after - to sort descending; not name.",
        ),
        (
            "Patient?_sort=given",
            "_sort takes birthdate, family, _lastUpdated, each after - to sort descending; not given.",
        ),
        (
            "Patient?_sort=-",
            "_sort takes birthdate, family, _lastUpdated, each after - to sort descending; not -.",
        ),
        (
            "Patient?_sort=birthdate:asc",
            "_sort takes birthdate, family, _lastUpdated, each after - to sort descending; not birthdate:asc.",
        ),
        ("Patient?_sort:desc=birthdate", "The modifier :desc is not supported on _sort."),
        (
            "Encounter?_sort=birthdate",
            "_sort takes date, _lastUpdated, each after - to sort descending; not birthdate.",
        ),
        ("Condition?_sort=date", "_sort takes _lastUpdated, each after - to sort descending; not date."),
        ("Slot?_sort=_lastUpdated", "_sort takes start, each after - to sort descending; not _lastUpdated."),
    ] {
        let r = get_as(app, Some(&app.admin_token), &format!("/fhir/r4/{path}"), Some(branch)).await;
        assert_outcome(&r, 400, "invalid", "invalid_search");
        assert_eq!(r.body["issue"][0]["diagnostics"], said, "{path}");
        outcomes.push(r.body);
    }
    let everything = format!("/fhir/r4/Patient/{}/$everything?_sort=_lastUpdated", clinic.patient);
    let r = get_as(app, Some(&app.admin_token), &everything, Some(branch)).await;
    assert_outcome(&r, 400, "invalid", "invalid_search");
    assert_eq!(r.body["issue"][0]["diagnostics"], "This search takes no _sort.");
    validate_with_fhir_resources(&outcomes);
}

#[tokio::test]
async fn the_total_alone_is_answered_on_every_search_without_entries_or_other_pages() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    seed(&clinic).await;
    visits_on(&clinic, &["2025-01-10", "2025-02-10"]).await;
    let mut answers = Vec::new();
    let mut paths: Vec<String> =
        clinic_server::fhir::Type::ALL.iter().map(|kind| format!("/fhir/r4/{}?", kind.name())).collect();
    paths.extend([
        "/fhir/r4/Patient?family=cruz&".to_owned(),
        format!("/fhir/r4/Encounter?patient={}&", clinic.patient),
        format!("/fhir/r4/Patient/{}/$everything?", clinic.patient),
    ]);
    for path in &paths {
        let all = fhir(app, branch, &format!("{path}_count=100"), 200).await;
        let total = all["total"].as_i64().unwrap();
        assert_eq!(resources(&all).len() as i64, total, "{path}");
        assert_eq!(fhir(app, branch, &format!("{path}_summary=false"), 200).await["total"], total);
        for query in
            ["_count=0", "_summary=count", "_summary=count&_count=5", "_count=0&_offset=1&_totalMethod=count"]
        {
            let counted = fhir(app, branch, &format!("{path}{query}"), 200).await;
            assert_eq!(counted["total"], total, "{path}{query}");
            assert!(counted.get("entry").is_none(), "{path}{query}: {counted}");
            assert_eq!(
                counted["link"],
                json!([{ "relation": "self", "url": format!("{}{path}{query}", app.base) }]),
                "{path}{query}"
            );
            answers.push(counted);
        }
    }
    for query in [
        "_summary=true",
        "_summary=text",
        "_summary=data",
        "_totalMethod=estimate",
        "_count=-1",
        "_count=101",
    ] {
        let r = get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Patient?{query}"), Some(branch)).await;
        assert_outcome(&r, 400, "invalid", "invalid_search");
        answers.push(r.body);
    }
    validate_with_fhir_resources(&answers);
}

//! FHIR search: dates with their prefixes, `patient` and `_id`, paging that keeps the query.

use super::*;

#[tokio::test]
async fn dates_with_prefixes_patient_and_id_select_and_pages_keep_the_query() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let (ben, v) =
        visits_on(&clinic, &["2025-01-10", "2025-02-10", "2025-03-10", "2025-03-20", "2026-02-01"]).await;
    let visits = |query: &str| {
        let path = format!("/fhir/r4/Encounter?patient={ben}&_count=100&{query}");
        async move {
            let mut found: Vec<i64> =
                ids(&fhir(app, branch, &path, 200).await).iter().map(|id| id.parse().unwrap()).collect();
            found.sort();
            found
        }
    };
    // Dates against whole days (the branch's zone is UTC here).
    assert_eq!(visits("date=ge2025-02-10&date=le2025-03-10").await, [v[1], v[2]]);
    assert_eq!(visits("date=gt2025-02-10").await, [v[2], v[3], v[4]]);
    assert_eq!(visits("date=lt2025-02-10").await, [v[0]]);
    assert_eq!(visits("date=eq2025-03").await, [v[2], v[3]]);
    assert_eq!(visits("date=2025").await, [v[0], v[1], v[2], v[3]]);
    assert_eq!(visits("date=ge2025-03-10T12:00:00Z").await, [v[2], v[3], v[4]], "a day reaches past noon");
    assert_eq!(visits("date=lt2025-03-10T12:00Z").await, [v[0], v[1], v[2]]);
    assert_eq!(visits(&format!("_id={},{}", v[0], v[4])).await, [v[0], v[4]]);
    assert_eq!(visits("_id=abc").await, Vec::<i64>::new(), "an id that cannot exist matches nothing");
    assert_eq!(
        visits(&format!("patient={}", clinic.patient)).await,
        Vec::<i64>::new(),
        "both patients must match"
    );
    let theirs =
        fhir(app, branch, &format!("/fhir/r4/Encounter?patient={},{ben}&_count=100", clinic.patient), 200)
            .await;
    assert_eq!(theirs["total"], 6, "a list matches any of its values");

    // Dates against moments.
    let tonometry = |at: &str| {
        let body = json!({ "patient_visit_id": clinic.visit, "examined_at": at, "right_eye": { "readings": [{ "iop_mmhg": 12, "method": "goldmann" }] } });
        async move { id_of(&app.created("/api/v1/tonometries", Some(branch), body).await) }
    };
    let (early, late) = (tonometry("2025-03-10T08:00:00Z").await, tonometry("2025-03-10T15:00:00Z").await);
    let observed = |query: &str| {
        let path = format!("/fhir/r4/Observation?patient={}&{query}", clinic.patient);
        async move { ids(&fhir(app, branch, &path, 200).await) }
    };
    let (early, late) = (format!("iop-{early}-right-1"), format!("iop-{late}-right-1"));
    assert_eq!(observed("date=2025-03-10").await, [late.clone(), early.clone()], "newest first");
    assert_eq!(observed("date=lt2025-03-10T12:00Z").await, vec![early.clone()]);
    assert_eq!(observed("date=ge2025-03-10T12:00Z").await, vec![late.clone()]);
    assert_eq!(observed("date=eq2025-03-10T08:00Z").await, vec![early.clone()], "a minute is a span");
    assert_eq!(observed("date=gt2025-03-10").await, Vec::<String>::new());
    assert_eq!(observed(&format!("_id={late}")).await, vec![late.clone()]);

    // Pages: `next` and `previous` keep the query; following `next` reaches every entry once.
    let all = ids(&fhir(app, branch, &format!("/fhir/r4/Encounter?patient={ben}&_count=100"), 200).await);
    let mut page = fhir(app, branch, &format!("/fhir/r4/Encounter?patient={ben}&_count=2"), 200).await;
    assert_eq!((page["total"].as_i64(), link(&page, "previous")), (Some(5), None));
    let mut walked = ids(&page);
    let mut pages = 1;
    while let Some(next) = link(&page, "next") {
        assert!(
            next.starts_with(&app.base)
                && next.contains(&format!("patient={ben}"))
                && next.contains("_count=2"),
            "{next}"
        );
        page = fhir(app, branch, next.strip_prefix(&app.base).unwrap(), 200).await;
        let previous = link(&page, "previous").expect("a later page links back");
        assert!(previous.contains(&format!("patient={ben}")), "{previous}");
        walked.extend(ids(&page));
        pages += 1;
    }
    assert_eq!((pages, walked), (3, all));
    let second = link(&page, "self").unwrap();
    assert!(second.ends_with("_offset=4"), "{second}");

    for query in [
        "_count=101",
        "_offset=-1",
        "date=ne2025",
        "date=2025-02-30",
        "date=lastweek",
        "patient=Practitioner/1",
        "colour=red",
        "_sort=birthdate",
        "date:missing=true",
        "identifier=x",
    ] {
        let r =
            get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Encounter?{query}"), Some(branch)).await;
        assert_outcome(&r, 400, "invalid", "invalid_search");
    }
}

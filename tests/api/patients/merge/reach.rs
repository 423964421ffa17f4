//! Who may merge, branches never merged across, and the list of duplicates.

use super::*;

#[tokio::test]
async fn a_merge_needs_patients_merge_which_the_administrator_holds() {
    let app = TestApp::spawn().await;
    let b = app.main_branch().await;
    let survivor = born(&app, b, "Rosa", "Lim", "1990-02-03", json!({})).await;
    let duplicate = born(&app, b, "Rosa", "Lim", "1990-02-03", json!({})).await;
    let (_, doctor) = app.create_user("dr-merge", &["doctor"], &[b]).await;
    let body = json!({ "duplicate_id": duplicate, "reason": "twice" });
    let r = app.call_as(&doctor, Method::POST, &merge_path(survivor), Some(b), body.clone()).await;
    assert_error(&r, 403, "forbidden");
    let undo = app
        .call_as(
            &doctor,
            Method::POST,
            &format!("{PATIENTS}/{survivor}/unmerge"),
            Some(b),
            json!({ "merge_id": 1 }),
        )
        .await;
    assert_error(&undo, 403, "forbidden");
    assert_status(&app.get(&format!("{PATIENTS}/{duplicate}"), Some(b)).await, 200);
    let roles = app.get("/api/v1/roles?perPage=100", None).await;
    let admin = roles.body["data"].as_array().unwrap().iter().find(|r| r["name"] == "admin").unwrap().clone();
    assert!(admin["permissions"].as_array().unwrap().contains(&json!("patients.merge")), "{admin}");
    assert_status(&app.post(&merge_path(survivor), Some(b), body).await, 201);
}

#[tokio::test]
async fn a_duplicate_of_another_branch_is_never_merged() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let survivor = born(&app, main, "Elena", "Diaz", "1966-01-01", json!({})).await;
    let mut theirs = 0;
    for n in 0..3 {
        theirs = born(&app, north, "Elena", "Diaz", "1966-01-01", json!({ "city": format!("N{n}") })).await;
    }
    assert!(theirs > survivor, "the other branch's patient must not have an id of this branch");
    let r = merge(&app, main, survivor, theirs).await;
    assert_invalid(&r, &["duplicate_id"]);
    assert_status(&app.get(&format!("{PATIENTS}/{theirs}"), Some(north)).await, 200);
    let listed = app.get(DUPLICATES, Some(main)).await;
    assert_eq!(listed.body["meta"]["total"], 0, "{}", listed.text);
    let listed = app.get(DUPLICATES, Some(north)).await;
    assert_eq!(listed.body["meta"]["total"], 3, "{}", listed.text);
}

#[tokio::test]
async fn duplicates_are_listed_with_each_reason_and_a_merged_pair_leaves_the_list() {
    let app = TestApp::spawn().await;
    let b = app.main_branch().await;
    let branch = Some(b);
    let insurance = id_of(
        &app.created(
            "/api/v1/insurances",
            None,
            json!({ "code": "hmo-1", "payer_name": "Payer", "coverage_percent": "80", "valid_from": "2026-01-01" }),
        )
        .await,
    );
    let same_a = born(&app, b, "José  María", "de la Cruz", "1980-05-06", json!({})).await;
    let same_b = born(&app, b, "JOSE MARIA", "Dela Cruz", "1980-05-06", json!({})).await;
    let similar_a = born(&app, b, "Maria", "Santos", "1975-07-08", json!({})).await;
    let similar_b = born(&app, b, "Marie", "Santos", "1975-07-08", json!({})).await;
    let phone_a = born(&app, b, "Pedro", "Ramos", "1960-01-01", json!({ "phone": "+63 917 555 1234" })).await;
    let phone_b = born(&app, b, "Paulo", "Ocampo", "1999-09-09", json!({ "phone": "0917-555-1234" })).await;
    let member = |no: &str| json!({ "insurance_id": insurance, "insurance_member_no": no });
    let member_a = born(&app, b, "Carmen", "Flores", "1950-03-03", member("ab-123 45")).await;
    let member_b = born(&app, b, "Carmela", "Torres", "1951-04-04", member("AB12345")).await;
    // Not duplicates: a twin (other first name), another birth date, a deleted record.
    born(&app, b, "Marco", "Santos", "1975-07-08", json!({})).await;
    born(&app, b, "Maria", "Santos", "1976-07-08", json!({})).await;
    let deleted = born(&app, b, "Carmen", "Flores", "1950-03-03", json!({})).await;
    let carmen = born(&app, b, "Carmen", "Flores", "1950-03-03", json!({ "phone": "0917-555-1234" })).await;
    assert_status(&app.delete(&format!("{PATIENTS}/{deleted}"), branch).await, 200);

    let r = app.get(&format!("{DUPLICATES}?perPage=100"), branch).await;
    assert_status(&r, 200);
    let listed = pairs_of(&r.body);
    let expected: BTreeSet<(i64, i64, String)> = [
        (same_a, same_b, "same_name_and_birth_date"),
        (similar_a, similar_b, "similar_name_and_birth_date"),
        (phone_a, phone_b, "same_phone"),
        (member_a, member_b, "same_insurance_member_no"),
        (member_a, carmen, "same_name_and_birth_date"),
        (phone_a, carmen, "same_phone"),
        (phone_b, carmen, "same_phone"),
    ]
    .into_iter()
    .map(|(a, b, reason)| (a, b, reason.to_owned()))
    .collect();
    assert_eq!(listed, expected, "{}", r.text);
    assert_eq!(r.body["meta"]["total"], 7);
    // Paginated, newest duplicate first, filterable.
    let page = app.get(&format!("{DUPLICATES}?perPage=2&page=2"), branch).await;
    assert_eq!(
        (page.body["meta"]["last_page"].as_i64(), page.body["data"].as_array().map(Vec::len)),
        (Some(4), Some(2))
    );
    let phones = app.get(&format!("{DUPLICATES}?filters[reason]=same_phone"), branch).await;
    assert_eq!(phones.body["meta"]["total"], 3, "{}", phones.text);
    let of = app.get(&format!("{DUPLICATES}?filters[patient_id]={member_a}"), branch).await;
    assert_eq!(of.body["meta"]["total"], 2, "{}", of.text);
    assert_invalid(
        &app.get(&format!("{DUPLICATES}?filters[reason]=same_shoes"), branch).await,
        &["filters[reason]"],
    );
    assert_invalid(&app.get(&format!("{DUPLICATES}?sortField=pin"), branch).await, &["sortField"]);
    // Who saw which patients is recorded, as for every list of them.
    app.state.read_audit.flush().await;
    assert_eq!(patient_reads(&app.db.url, b, "list").await, 4, "one record per list answered");

    assert_status(&merge(&app, b, same_a, same_b).await, 201);
    let r = app.get(&format!("{DUPLICATES}?perPage=100"), branch).await;
    assert_eq!(r.body["meta"]["total"], 6, "{}", r.text);
    assert!(r.body["data"].as_array().unwrap().iter().all(|p| id_of(&p["duplicate"]) != same_b));
}

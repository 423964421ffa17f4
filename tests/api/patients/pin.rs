//! PINs: assigned by the server, numbered per branch, never given again.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_in_two_branches_get_distinct_pins_numbered_per_branch() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let mut tasks = Vec::new();
    for i in 0..30 {
        for (branch, code) in [(main, "MAIN"), (north, "NORTH")] {
            let req = app.request(Method::POST, PATIENTS, Some(branch)).json(&patient_body(
                &format!("P{i}"),
                &format!("Rush{code}"),
                json!({}),
            ));
            tasks.push((code, tokio::spawn(reply(req))));
        }
    }
    let mut pins = BTreeSet::new();
    let mut numbers: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for (code, task) in tasks {
        let r = task.await.unwrap();
        assert_status(&r, 201);
        assert_eq!(r.body["data"]["last_name"], format!("Rush{code}"));
        let pin = r.body["data"]["pin"].as_str().expect("pin").to_owned();
        let digits = pin
            .strip_prefix(&format!("{code}-"))
            .unwrap_or_else(|| panic!("PIN {pin} of branch {code} lacks its code"));
        assert!(digits.len() == 6 && digits.bytes().all(|b| b.is_ascii_digit()), "PIN {pin}");
        numbers.entry(code).or_default().insert(digits.parse().unwrap());
        assert!(pins.insert(pin.clone()), "PIN {pin} given twice");
    }
    assert_eq!(pins.len(), 60);
    let expected: BTreeSet<u32> = (1..=30).collect();
    assert_eq!(numbers["MAIN"], expected, "MAIN numbers");
    assert_eq!(numbers["NORTH"], expected, "NORTH numbers");
    // Each branch lists its own 30.
    for branch in [main, north] {
        let r = list(&app, branch, "perPage=100").await;
        assert_eq!(r.body["meta"]["total"], 30, "{}", r.body["meta"]);
    }
}

#[tokio::test]
async fn a_deleted_patients_pin_is_never_given_again() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    patient(&app, main, "A", "One").await;
    let second = patient(&app, main, "B", "Two").await;
    let third = patient(&app, main, "C", "Three").await;
    assert_eq!(third["pin"], "MAIN-000003");
    for gone in [&third, &second] {
        assert_status(&app.delete(&format!("{PATIENTS}/{}", id_of(gone)), Some(main)).await, 200);
    }
    let next = patient(&app, main, "D", "Four").await;
    assert_eq!(next["pin"], "MAIN-000004", "the highest PIN was deleted, yet not reused: {next}");
    let next = patient(&app, main, "E", "Five").await;
    assert_eq!(next["pin"], "MAIN-000005");
}

#[tokio::test]
async fn the_pin_is_assigned_by_the_server_and_cannot_be_changed() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient_with(&app, main, "Ana", "Cruz", json!({ "pin": "MAIN-999999" })).await;
    assert_eq!(p["pin"], "MAIN-000001", "a client-sent PIN is ignored");
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .json(&json!({ "pin": "MAIN-000777", "first_name": "Ann" })),
    )
    .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["pin"], "MAIN-000001");
    assert_eq!(r.body["data"]["first_name"], "Ann");
}

//! Concurrent edits: one winner per ETag, and updates of different fields without If-Match
//! all kept.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_updates_with_the_same_etag_let_exactly_one_win_every_time() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Start", "Race").await;
    let id = id_of(&p);
    let path = format!("{PATIENTS}/{id}");
    let rounds = 10;
    let mut wins = 0;
    for round in 0..rounds {
        let r = reply(app.request(Method::GET, &path, Some(main))).await;
        assert_status(&r, 200);
        let etag = r.header("etag").expect("ETag").to_owned();
        let names = [format!("Left{round}"), format!("Right{round}")];
        let tasks: Vec<_> = names
            .iter()
            .map(|name| {
                let req = app
                    .request(Method::PUT, &path, Some(main))
                    .header("if-match", &etag)
                    .json(&json!({ "first_name": name }));
                tokio::spawn(reply(req))
            })
            .collect();
        let mut statuses = Vec::new();
        let mut winner = None;
        for (task, name) in tasks.into_iter().zip(&names) {
            let r = task.await.unwrap();
            if r.status == 200 {
                assert_eq!(r.body["data"]["first_name"], name.as_str());
                winner = Some(name.clone());
            } else {
                assert_eq!(r.body["code"], "precondition_failed", "{}", r.text);
            }
            statuses.push(r.status);
        }
        statuses.sort_unstable();
        assert_eq!(statuses, vec![200, 412], "round {round}: exactly one wins");
        wins += 1;
        let r = reply(app.request(Method::GET, &path, Some(main))).await;
        assert_eq!(
            r.body["data"]["first_name"],
            winner.unwrap().as_str(),
            "round {round}: the winner's edit stands"
        );
    }
    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    assert_eq!(r.body["data"]["version"], wins + 1, "one version per successful update");
    assert_eq!(r.header("etag"), Some(format!("\"{}\"", wins + 1).as_str()));
    // Each win was audited once; no loser left a trace.
    let client = app.state.registry.get().await.unwrap();
    let updates: i64 = client
        .query_one(
            &format!(
                "SELECT count(*) FROM branch_{main}.audit_log WHERE resource = 'patients' AND action = 'update' AND record_id = $1"
            ),
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(updates, wins);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_update_and_a_delete_with_the_same_etag_let_exactly_one_win() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for round in 0..5 {
        let p = patient(&app, main, &format!("P{round}"), "Race").await;
        let path = format!("{PATIENTS}/{}", id_of(&p));
        let etag =
            reply(app.request(Method::GET, &path, Some(main))).await.header("etag").unwrap().to_owned();
        let update = tokio::spawn(reply(
            app.request(Method::PUT, &path, Some(main))
                .header("if-match", &etag)
                .json(&json!({ "first_name": "X" })),
        ));
        let delete =
            tokio::spawn(reply(app.request(Method::DELETE, &path, Some(main)).header("if-match", &etag)));
        let (update, delete) = (update.await.unwrap(), delete.await.unwrap());
        let now = reply(app.request(Method::GET, &path, Some(main))).await;
        match (update.status, delete.status) {
            (200, 412) => {
                assert_status(&now, 200);
                assert_eq!(now.body["data"]["first_name"], "X");
            }
            // The update's record is gone: 412 or 404 both refuse it.
            (412 | 404, 200) => assert_status(&now, 404),
            other => {
                panic!("round {round}: expected one winner, got {other:?}: {} / {}", update.text, delete.text)
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_updates_of_different_fields_without_if_match_all_stick() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let changes = [
        ("middle_name", "Luz"),
        ("suffix", "III"),
        ("city", "Cebu"),
        ("province", "Cebu"),
        ("occupation", "Nurse"),
        ("country", "Philippines"),
        ("postal_code", "6000"),
        ("notes", "Concurrent"),
        ("insurance_member_no", "M-1"),
        ("emergency_contact_name", "Ben Cruz"),
    ];
    let tasks: Vec<_> = changes
        .iter()
        .map(|(field, value)| {
            tokio::spawn(reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ *field: value }))))
        })
        .collect();
    for task in tasks {
        assert_status(&task.await.unwrap(), 200);
    }
    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    for (field, value) in changes {
        assert_eq!(r.body["data"][field], value, "{field} kept: {}", r.body);
    }
    assert_eq!(r.body["data"]["version"], changes.len() + 1);
}

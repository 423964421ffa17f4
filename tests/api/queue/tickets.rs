//! Tickets: numbering, moves, transfers racing calls, the waiting room, visits with their
//! ticket, the end-of-day closer and the queue's reach.

use super::*;

#[tokio::test]
async fn fifty_concurrent_tickets_are_numbered_one_to_fifty_and_the_next_day_starts_again() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    // West of UTC by 12 hours now, east by 14 later: the local date moves forward by a day
    // (or two) whatever the hour, without waiting for midnight.
    set_timezone(&app, branch, "Etc/GMT+12").await;
    let refraction = service(&app, branch, "RF").await;
    let path = format!("/api/v1/queue/branch-services/{refraction}/queue");
    let answers = join_all((0..50).map(|_| app.post(&path, Some(branch), json!({})))).await;
    let mut numbers: Vec<String> = answers
        .iter()
        .map(|r| {
            assert_status(r, 201);
            r.body["data"]["number"].as_str().unwrap().to_owned()
        })
        .collect();
    numbers.sort();
    assert_eq!(numbers, (1..=50).map(|n| format!("RF-{n:03}")).collect::<Vec<_>>());
    let first_day = answers[0].body["data"]["queue_date"].as_str().unwrap().to_owned();

    set_timezone(&app, branch, "Etc/GMT-14").await;
    let next = ticket(&app, branch, refraction, json!({})).await;
    assert_eq!(next["number"], "RF-001");
    assert!(next["queue_date"].as_str().unwrap() > first_day.as_str(), "{next}");
}

/// The tickets' state machine: from each state, each move.
/// A ticket's visit must be its patient's; the 422 names `patient_visit_id`, the field at fault.
#[tokio::test]
async fn a_ticket_for_another_patients_visit_is_422_on_the_visit() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let reception = service(app, branch, "R").await;
    let other = id_of(&app.create_patient(branch, "Ben", "Reyes").await);
    let r = app
        .post(
            &format!("/api/v1/queue/branch-services/{reception}/queue"),
            Some(branch),
            json!({ "patient_id": other, "patient_visit_id": clinic.visit }),
        )
        .await;
    assert_invalid(&r, &["patient_visit_id"]);
}

#[tokio::test]
async fn every_move_is_allowed_only_from_its_states() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let cashier = service(&app, branch, "C").await;
    // How to reach each state from waiting.
    let paths: [(&str, &[&str]); 7] = [
        ("waiting", &[]),
        ("called", &["call"]),
        ("serving", &["call", "serve"]),
        ("completed", &["call", "serve", "complete"]),
        ("skipped", &["call", "skip"]),
        ("no_show", &["no-show"]),
        ("transferred", &["transfer"]),
    ];
    let allowed = |from: &str, verb: &str| -> Option<&'static str> {
        match (verb, from) {
            ("call", "waiting" | "called" | "skipped") => Some("called"),
            ("serve", "called") => Some("serving"),
            ("complete", "serving") => Some("completed"),
            ("skip", "called") => Some("skipped"),
            ("no-show", "waiting" | "called" | "skipped") => Some("no_show"),
            ("transfer", "waiting" | "called" | "serving" | "skipped") => Some("transferred"),
            _ => None,
        }
    };
    for (state, path) in paths {
        for verb in ["call", "serve", "complete", "skip", "no-show", "transfer"] {
            let id = id_of(&ticket(&app, branch, reception, json!({})).await);
            for step in path {
                assert_status(&move_ticket(&app, branch, id, step, cashier).await, 200);
            }
            let r = move_ticket(&app, branch, id, verb, cashier).await;
            match allowed(state, verb) {
                Some(to) => {
                    assert_status(&r, 200);
                    let moved = if verb == "transfer" { &r.body["data"]["ticket"] } else { &r.body["data"] };
                    assert_eq!(moved["status"], to, "{verb} from {state}");
                }
                None => {
                    assert_error(&r, 409, "invalid_transition");
                    assert_eq!(r.body["status"], state, "{verb} from {state}: {}", r.text);
                    let now = app.get(&format!("/api/v1/queue/queue-tickets/{id}"), Some(branch)).await;
                    assert_eq!(now.body["data"]["status"], state, "a refused move changes nothing");
                }
            }
        }
    }
}

#[tokio::test]
async fn moves_keep_their_times_and_counts_and_are_audited() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let cashier = service(&app, branch, "C").await;
    let id = id_of(&ticket(&app, branch, reception, json!({ "priority": "urgent" })).await);
    let called = move_ticket(&app, branch, id, "call", 0).await.body["data"].clone();
    assert_eq!(called["call_count"], 1);
    assert_eq!(called["counter"], "Window 2");
    let first_call = called["called_at"].clone();
    assert!(first_call.is_string());
    let recalled = move_ticket(&app, branch, id, "call", 0).await.body["data"].clone();
    assert_eq!(recalled["call_count"], 2);
    assert_eq!(recalled["called_at"], first_call, "called_at is the first call");
    let serving = move_ticket(&app, branch, id, "serve", 0).await.body["data"].clone();
    assert!(serving["serving_at"].is_string());

    let r = move_ticket(&app, branch, id, "transfer", cashier).await;
    assert_status(&r, 200);
    let (old, new) = (&r.body["data"]["ticket"], &r.body["data"]["new_ticket"]);
    assert_eq!(old["transferred_to_id"], new["id"]);
    assert_eq!(new["transferred_from_id"], id);
    assert_eq!(new["status"], "waiting");
    assert_eq!(new["number"], "C-001");
    assert_eq!(new["priority"], "urgent", "the old priority unless another is given");
    // A transfer to the ticket's own service, or to an unknown one, is refused.
    let again = id_of(&ticket(&app, branch, reception, json!({})).await);
    assert_invalid(&move_ticket(&app, branch, again, "transfer", reception).await, &["branch_service_id"]);
    assert_invalid(&move_ticket(&app, branch, again, "transfer", 999_999).await, &["branch_service_id"]);

    let actions: Vec<String> = app
        .audit_rows("/api/v1/audit-logs", Some(branch), "queue/queue-tickets", id)
        .await
        .iter()
        .map(|row| {
            assert!(row["user_id"].is_i64(), "{row}");
            assert!(row["at"].is_string(), "{row}");
            row["action"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(actions, ["create", "call", "call", "serve", "transfer"]);
}

#[tokio::test]
async fn a_transfer_racing_a_call_of_the_same_version_lets_exactly_one_win() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let cashier = service(&app, branch, "C").await;
    for _ in 0..10 {
        let t = ticket(&app, branch, reception, json!({})).await;
        let (id, version) = (id_of(&t), t["version"].as_i64().unwrap());
        let etag = format!("\"{version}\"");
        let call = reply(
            app.request(Method::PUT, &format!("/api/v1/queue/queue-tickets/{id}/call"), Some(branch))
                .header("if-match", &etag)
                .json(&json!({})),
        );
        let transfer = reply(
            app.request(Method::POST, &format!("/api/v1/queue/queue-tickets/{id}/transfer"), Some(branch))
                .header("if-match", &etag)
                .json(&json!({ "branch_service_id": cashier })),
        );
        let (call, transfer) = tokio::join!(call, transfer);
        let winners = [call.status, transfer.status].iter().filter(|s| **s == 200).count();
        assert_eq!(winners, 1, "call {} / transfer {}", call.text, transfer.text);
        let loser = if call.status == 200 { &transfer } else { &call };
        assert_error(loser, 412, "precondition_failed");
        let now =
            app.get(&format!("/api/v1/queue/queue-tickets/{id}"), Some(branch)).await.body["data"].clone();
        if call.status == 200 {
            assert_eq!(now["status"], "called");
            assert!(now["transferred_to_id"].is_null());
        } else {
            assert_eq!(now["status"], "transferred");
            assert_eq!(now["call_count"], 0);
        }
    }
    // One new ticket per won transfer, and no other.
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let row = client
        .query_one(
            &format!(
                "SELECT count(*) FILTER (WHERE branch_service_id = $1),
                        count(*) FILTER (WHERE status = 'transferred')
                   FROM branch_{branch}.queue_tickets"
            ),
            &[&cashier],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), row.get::<_, i64>(1));
}

#[tokio::test]
async fn the_waiting_room_sees_urgent_then_priority_then_normal_by_number() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let mut numbers = Vec::new();
    for priority in ["normal", "urgent", "normal", "priority", "urgent", "normal"] {
        numbers.push(ticket(&app, branch, reception, json!({ "priority": priority })).await);
    }
    let id = |n: usize| id_of(&numbers[n]);
    assert_status(&move_ticket(&app, branch, id(2), "call", 0).await, 200);
    assert_status(&move_ticket(&app, branch, id(5), "no-show", 0).await, 200);
    let r = app.get(&format!("/api/v1/queue/branch-services/{reception}/queue"), Some(branch)).await;
    assert_status(&r, 200);
    let view = &r.body["data"];
    let numbers_of = |list: &Value| -> Vec<String> {
        list.as_array().unwrap().iter().map(|t| t["number"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(view["service"]["code"], "R");
    assert_eq!(numbers_of(&view["now_serving"]), ["R-003"]);
    assert_eq!(numbers_of(&view["waiting"]), ["R-002", "R-005", "R-004", "R-001"]);
    assert_eq!(numbers_of(&view["done"]), ["R-006"]);
    assert_eq!(view["counts"]["total"], 6);
    assert_eq!(view["counts"]["waiting"], 4);
    assert_eq!(view["counts"]["called"], 1);
    assert_eq!(view["counts"]["no_show"], 1);
    assert_eq!(view["counts"]["completed"], 0);
    // status narrows the lists, never the counts.
    let r = app
        .get(&format!("/api/v1/queue/branch-services/{reception}/queue?status=no_show"), Some(branch))
        .await;
    assert_eq!(numbers_of(&r.body["data"]["waiting"]), Vec::<String>::new());
    assert_eq!(numbers_of(&r.body["data"]["done"]), ["R-006"]);
    assert_eq!(r.body["data"]["counts"]["total"], 6);
}

#[tokio::test]
async fn a_visit_and_its_ticket_are_created_together_or_not_at_all() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let reception = service(app, branch, "R").await;
    let r = app
        .post(
            "/api/v1/queue/visits",
            Some(branch),
            json!({ "patient_id": clinic.patient, "branch_service_id": reception, "priority": "priority",
                    "reason": "Blurred vision" }),
        )
        .await;
    assert_status(&r, 201);
    let (visit, ticket) = (&r.body["data"]["visit"], &r.body["data"]["ticket"]);
    assert_eq!(visit["status"], "checked_in");
    assert_eq!(visit["patient_id"], clinic.patient);
    assert_eq!(ticket["patient_visit_id"], visit["id"]);
    assert_eq!(ticket["patient_id"], clinic.patient);
    assert_eq!(ticket["priority"], "priority");

    let count = |table: &'static str| async move {
        let client = clinic_server::db::connect(&app.db.url).await.unwrap();
        client
            .query_one(&format!("SELECT count(*) FROM branch_{branch}.{table}"), &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    let (visits, tickets) = (count("patient_visits").await, count("queue_tickets").await);
    // An unknown patient, or an unknown service: nothing written.
    let r = app
        .post(
            "/api/v1/queue/visits",
            Some(branch),
            json!({ "patient_id": 999_999, "branch_service_id": reception }),
        )
        .await;
    assert_invalid(&r, &["patient_id"]);
    let r = app
        .post(
            "/api/v1/queue/visits",
            Some(branch),
            json!({ "patient_id": clinic.patient, "branch_service_id": 999_999 }),
        )
        .await;
    assert_invalid(&r, &["branch_service_id"]);
    assert_eq!((count("patient_visits").await, count("queue_tickets").await), (visits, tickets));
}

#[tokio::test]
async fn tickets_left_open_after_their_day_become_no_shows() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let mut made = Vec::new();
    for _ in 0..4 {
        made.push(id_of(&ticket(&app, branch, reception, json!({})).await));
    }
    let [waiting, called, completed, today] = made[..] else { unreachable!() };
    assert_status(&move_ticket(&app, branch, called, "call", 0).await, 200);
    for verb in ["call", "serve", "complete"] {
        assert_status(&move_ticket(&app, branch, completed, verb, 0).await, 200);
    }
    in_branch(
        &app,
        branch,
        &format!("UPDATE queue_tickets SET queue_date = queue_date - 1 WHERE id IN ({waiting}, {called}, {completed})"),
    )
    .await;
    let closed = clinic_server::queue::close_past_days(&app.state).await.unwrap();
    assert_eq!(closed, 2);
    let status = |id: i64| {
        let app = &app;
        async move {
            app.get(&format!("/api/v1/queue/queue-tickets/{id}"), Some(branch)).await.body["data"]["status"]
                .clone()
        }
    };
    assert_eq!(status(waiting).await, "no_show");
    assert_eq!(status(called).await, "no_show");
    assert_eq!(status(completed).await, "completed");
    assert_eq!(status(today).await, "waiting");
    let audit = app.audit_rows("/api/v1/audit-logs", Some(branch), "queue/queue-tickets", waiting).await;
    let last = audit.last().unwrap();
    assert_eq!(last["action"], "auto_no_show");
    assert!(last["user_id"].is_null(), "{last}");
    // Run again: nothing left to close.
    assert_eq!(clinic_server::queue::close_past_days(&app.state).await.unwrap(), 0);
}

#[tokio::test]
async fn the_queue_is_its_branch_and_its_permissions_only() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let reception = service(&app, branch, "R").await;
    let id = id_of(&ticket(&app, branch, reception, json!({})).await);
    // Another branch neither sees the ticket nor queues at the service.
    let r = app.get(&format!("/api/v1/queue/queue-tickets/{id}"), Some(north)).await;
    assert_error(&r, 404, "not_found");
    let r =
        app.post(&format!("/api/v1/queue/branch-services/{reception}/queue"), Some(north), json!({})).await;
    assert_error(&r, 404, "not_found");
    // A cashier reads the queue but does not move it; a pharmacist does neither.
    let (_, cashier) = app.create_user("cashier", &["cashier"], &[branch]).await;
    let (_, pharmacist) = app.create_user("pharmacist", &["pharmacist"], &[branch]).await;
    let view = format!("/api/v1/queue/branch-services/{reception}/queue");
    assert_status(&app.call_as(&cashier, Method::GET, &view, Some(branch), Value::Null).await, 200);
    let r = app
        .call_as(
            &cashier,
            Method::PUT,
            &format!("/api/v1/queue/queue-tickets/{id}/call"),
            Some(branch),
            json!({}),
        )
        .await;
    assert_error(&r, 403, "forbidden");
    assert_error(
        &app.call_as(&pharmacist, Method::GET, &view, Some(branch), Value::Null).await,
        403,
        "forbidden",
    );
}

//! `Idempotency-Key` on every POST of the route table: a replay returns the first answer and
//! writes nothing, whoever wrote the route's handler. The route list is read off the server's
//! own route tree, so a new POST route without a case here fails the test.

use clinic_server::app::{resources, served_routes};
use clinic_server::resource::Scope;
use reqwest::Method;
use serde_json::{Value, json};

use crate::conformance::{World, collection, sample, world};
use crate::support::{Reply, TestApp, assert_status, id_of, reply};

/// POST routes that take no key, and why.
const UNKEYED: &[(&str, &str)] = &[
    ("/api/v1/auth/login", "public: no caller to key on, and its answer holds a token never stored"),
    ("/api/v1/auth/reset-code", "public: no caller to key on; answers the same whatever happens"),
    ("/api/v1/auth/verify-code", "public: no caller to key on; writes nothing but a try count"),
    ("/api/v1/auth/reset-password", "public: no caller to key on; a used code cannot be used again"),
    ("/api/v1/auth/logout", "its token is revoked: a repeat is 401, which says the same"),
    (
        "/api/v1/branch-services/{branch_service_id}/display-keys",
        "its answer holds a key's secret, never stored: a repeat makes another key, which can be revoked",
    ),
    (
        "/api/v1/doctors/{id}/calendar-keys",
        "its answer holds a key's secret, never stored: a repeat makes another key, which can be revoked",
    ),
];

async fn post(app: &TestApp, path: &str, branch: Option<i64>, key: &str, body: &Value) -> Reply {
    reply(app.request(Method::POST, path, branch).header("idempotency-key", key).json(body)).await
}

/// Creates a record of the resource at `collection` from its conformance sample.
async fn fresh(app: &TestApp, w: &World, resource_path: &str) -> i64 {
    let r = resources().into_iter().find(|r| r.path == resource_path).unwrap();
    let body = sample(resource_path, w).unwrap().body;
    let branch = (r.scope == Scope::Branch).then_some(w.branch);
    id_of(&app.created(&collection(r, w), branch, body).await)
}

/// A branch service of the world's branch (queue routes need one).
async fn service(app: &TestApp, w: &World, code: &str) -> i64 {
    let body = json!({ "name": format!("Service {code}"), "code": code });
    id_of(&app.created(&format!("/api/v1/branches/{}/services", w.branch), None, body).await)
}

/// A concrete request for a POST route: its path, branch and body, and the status of its
/// first answer.
struct Case {
    path: String,
    branch: Option<i64>,
    body: Value,
    status: u16,
    /// A file sent as the body instead of `body` (an upload): its Content-Type and bytes.
    file: Option<(&'static str, Vec<u8>)>,
}

/// The POST of `case` with `key`.
async fn post_case(app: &TestApp, case: &Case, key: &str) -> Reply {
    match &case.file {
        None => post(app, &case.path, case.branch, key, &case.body).await,
        Some((sent_as, bytes)) => {
            let req = app.request(Method::POST, &case.path, case.branch).header("idempotency-key", key);
            reply(req.header("content-type", *sent_as).body(bytes.clone())).await
        }
    }
}

async fn case_for(app: &TestApp, w: &World, template: &str) -> Option<Case> {
    let branch = Some(w.branch);
    // An attachment's upload takes the file as its body.
    if template == "/api/v1/patients/{patient_id}/attachments" {
        let path = format!("/api/v1/patients/{}/attachments", w.patient);
        let file = Some(("image/png", crate::attachments::png(7, 7)));
        return Some(Case { path, branch, body: Value::Null, status: 201, file });
    }
    // Creates of declared resources.
    for r in resources() {
        if format!("/api/v1/{}", r.path) == template {
            let body = sample(r.path, w)?.body;
            let branch = (r.scope == Scope::Branch).then_some(w.branch);
            return Some(Case { path: collection(r, w), branch, body, status: 201, file: None });
        }
    }
    // Declared actions: a fresh record in the state the action moves from.
    if let Some(rest) = template.strip_prefix("/api/v1/")
        && let Some((resource_path, segment)) = rest.rsplit_once("/{id}/")
        && let Some(r) = resources().into_iter().find(|r| r.path == resource_path)
        && r.actions.iter().any(|a| a.segment == segment)
    {
        let id = fresh(app, w, resource_path).await;
        let branch = (r.scope == Scope::Branch).then_some(w.branch);
        let member = format!("{}/{id}", collection(r, w));
        let body = match (resource_path, segment) {
            ("purchase-orders", "close") => {
                assert_status(&app.post(&format!("{member}/order"), None, json!({})).await, 200);
                let delivery = json!({ "branch_id": w.branch, "supplier_id": w.supplier, "purchase_order_id": id,
                    "lines": [{ "pharmacy_item_id": w.item, "lot_no": "PO-CLOSE", "expiry_date": "2030-05-31",
                                "quantity": 10 }] });
                let delivery = id_of(&app.created("/api/v1/deliveries", None, delivery).await);
                let posted = app.post(&format!("/api/v1/deliveries/{delivery}/post"), None, json!({})).await;
                assert_status(&posted, 200);
                json!({})
            }
            ("purchase-orders", "cancel") => json!({ "reason": "not needed" }),
            ("appointments", "cancel") => json!({ "reason": "travelling" }),
            ("recalls", "cancel") => json!({ "reason": "moved away" }),
            ("appointments", "start" | "complete") => {
                let before: &[&str] = if segment == "start" { &["arrive"] } else { &["arrive", "start"] };
                for step in before {
                    assert_status(&app.post(&format!("{member}/{step}"), branch, json!({})).await, 200);
                }
                json!({})
            }
            ("transactions", "void") => {
                let done = app.post(&format!("{member}/complete"), None, json!({})).await;
                assert_status(&done, 200);
                json!({ "void_reason": "returned" })
            }
            _ => json!({}),
        };
        return Some(Case { path: format!("{member}/{segment}"), branch, body, status: 200, file: None });
    }
    let case = |path: String, body: Value, status: u16| Some(Case { path, branch, body, status, file: None });
    match template {
        "/api/v1/queue/visits" => {
            let svc = service(app, w, "QV").await;
            let body = json!({ "patient_id": w.patient, "branch_service_id": svc });
            case("/api/v1/queue/visits".into(), body, 201)
        }
        "/api/v1/queue/branch-services/{id}/queue" => {
            let svc = service(app, w, "QT").await;
            case(
                format!("/api/v1/queue/branch-services/{svc}/queue"),
                json!({ "patient_id": w.patient }),
                201,
            )
        }
        "/api/v1/queue/queue-tickets/{id}/transfer" => {
            let (from, to) = (service(app, w, "TA").await, service(app, w, "TB").await);
            let ticket =
                app.post(&format!("/api/v1/queue/branch-services/{from}/queue"), branch, json!({})).await;
            assert_status(&ticket, 201);
            let path = format!("/api/v1/queue/queue-tickets/{}/transfer", id_of(&ticket));
            case(path, json!({ "branch_service_id": to }), 200)
        }
        "/api/v1/branches/{branch_id}/services/{id}/staff" => {
            let svc = service(app, w, "ST").await;
            let path = format!("/api/v1/branches/{}/services/{svc}/staff", w.branch);
            Some(Case {
                path,
                branch: None,
                body: json!({ "user_id": app.admin_id().await }),
                status: 200,
                file: None,
            })
        }
        "/api/v1/patients/{id}/merge" => {
            let survivor = id_of(&app.create_patient(w.branch, "Ida", "Twice").await);
            let duplicate = id_of(&app.create_patient(w.branch, "Ida", "Twice").await);
            let body = json!({ "duplicate_id": duplicate, "reason": "registered twice" });
            case(format!("/api/v1/patients/{survivor}/merge"), body, 201)
        }
        "/api/v1/patients/{id}/unmerge" => {
            let survivor = id_of(&app.create_patient(w.branch, "Ugo", "Twice").await);
            let duplicate = id_of(&app.create_patient(w.branch, "Ugo", "Twice").await);
            let body = json!({ "duplicate_id": duplicate, "reason": "registered twice" });
            let merge = app.post(&format!("/api/v1/patients/{survivor}/merge"), branch, body).await;
            assert_status(&merge, 201);
            case(format!("/api/v1/patients/{survivor}/unmerge"), json!({ "merge_id": id_of(&merge) }), 200)
        }
        "/api/v1/auth/switch-branch" => Some(Case {
            path: template.into(),
            branch: None,
            body: json!({ "branch_id": w.branch }),
            status: 200,
            file: None,
        }),
        // The admin's other sessions end; the one walking goes on.
        "/api/v1/auth/logout-all" => {
            Some(Case { path: template.into(), branch: None, body: json!({}), status: 200, file: None })
        }
        "/api/v1/auth/mfa/totp" => {
            Some(Case { path: template.into(), branch: None, body: json!({}), status: 200, file: None })
        }
        "/api/v1/auth/mfa/totp/confirm" => {
            let (secret, _) = crate::mfa::start(app, &app.admin_token).await;
            let code = crate::mfa::code_of(&secret, crate::mfa::step_now(), 6);
            Some(Case {
                path: template.into(),
                branch: None,
                body: json!({ "code": code }),
                status: 200,
                file: None,
            })
        }
        "/api/v1/users/{id}/mfa/reset" => {
            let (id, ..) = crate::mfa::enrolled(app, "reset-walk").await;
            Some(Case {
                path: format!("/api/v1/users/{id}/mfa/reset"),
                branch: None,
                body: json!({}),
                status: 200,
                file: None,
            })
        }
        "/api/v1/patients/{id}/recalls" => Some(Case {
            path: format!("/api/v1/patients/{}/recalls", w.patient),
            branch: Some(w.branch),
            body: json!({ "due_on": "2031-01-07", "reason": "Glaucoma check" }),
            status: 201,
            file: None,
        }),
        "/api/v1/profile/change-password" => Some(Case {
            path: template.into(),
            branch: None,
            body: json!({ "current_password": crate::support::ADMIN_PASSWORD, "password": "quiet-meadow-lantern-5",
                          "password_confirmation": "quiet-meadow-lantern-5" }),
            status: 200,
            file: None,
        }),
        _ => None,
    }
}

#[tokio::test]
async fn every_post_route_replays_its_first_answer_and_writes_nothing_more() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let w = world(&app).await;
    // Dispensing needs stock in the world's lot.
    let stock = json!({ "branch_id": w.branch, "stock_available_id": w.lot, "kind": "adjustment",
                        "quantity": 1000, "reason": "opening stock" });
    app.created("/api/v1/stock-movements", None, stock).await;
    let posts: Vec<String> =
        served_routes().into_iter().filter(|(method, _)| method == "POST").map(|(_, path)| path).collect();
    assert!(posts.len() > 40, "only {} POST routes found", posts.len());
    let mut missing = Vec::new();
    for (n, template) in posts.iter().enumerate() {
        if UNKEYED.iter().any(|(path, _)| path == template) {
            continue;
        }
        let Some(case) = case_for(&app, &w, template).await else {
            missing.push(template.clone());
            continue;
        };
        let key = format!("walk-{n}");
        let first = post_case(&app, &case, &key).await;
        assert_status(&first, case.status);
        assert_eq!(first.header("idempotent-replayed"), None, "{template}");
        // Every audit row in the registry and in the branch: a replay must add none.
        let audited =
            async || app.audit_count(None, None).await + app.audit_count(Some(w.branch), None).await;
        let written = audited().await;
        let again = post_case(&app, &case, &key).await;
        assert_status(&again, first.status);
        assert_eq!(again.body, first.body, "{template}: the replay differs from the first answer");
        assert_eq!(again.header("idempotent-replayed"), Some("true"), "{template}");
        assert_eq!(audited().await, written, "{template}: the replay wrote something");
    }
    assert!(missing.is_empty(), "POST routes without a case in this test: {missing:#?}");
}

/// The stored answer is keyed by the route and its parsed parameters, not the raw path.
#[tokio::test]
async fn one_key_on_spellings_of_one_path_makes_one_row() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let patient = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let body = json!({ "kind": "charge", "unit_price": "25.00", "description": "Consult" });
    let spellings = [
        format!("/api/v1/patients/{patient}/billing-transactions"),
        format!("/api/v1/patients/0{patient}/billing-transactions"),
        format!("/api/v1/patients/{patient}/billing-transactions/"),
    ];
    let mut answers = Vec::new();
    for path in &spellings {
        let r = post(&app, path, Some(branch), "same-key", &body).await;
        assert_status(&r, 201);
        answers.push(r);
    }
    assert_eq!(answers[1].body, answers[0].body);
    assert_eq!(answers[2].body, answers[0].body);
    assert_eq!(answers[1].header("idempotent-replayed"), Some("true"));
    let list = app.get(&format!("/api/v1/patients/{patient}/billing-transactions"), Some(branch)).await;
    assert_eq!(list.body["meta"]["total"], 1, "{}", list.text);
}

/// The queue's POSTs replay too, transfers included (a retried transfer is not a 409).
#[tokio::test]
async fn queue_posts_replay_under_one_key() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let branch = Some(w.branch);
    let (from, to) = (service(&app, &w, "QA").await, service(&app, &w, "QB").await);
    let issue = format!("/api/v1/queue/branch-services/{from}/queue");
    let first = post(&app, &issue, branch, "ticket-1", &json!({})).await;
    let again = post(&app, &issue, branch, "ticket-1", &json!({})).await;
    assert_status(&first, 201);
    assert_status(&again, 201);
    assert_eq!(id_of(&first), id_of(&again));
    let queue = app.get(&issue, branch).await;
    assert_eq!(queue.body["data"]["counts"]["total"], 1, "{}", queue.text);

    let transfer = format!("/api/v1/queue/queue-tickets/{}/transfer", id_of(&first));
    let moved = post(&app, &transfer, branch, "move-1", &json!({ "branch_service_id": to })).await;
    let retried = post(&app, &transfer, branch, "move-1", &json!({ "branch_service_id": to })).await;
    assert_status(&moved, 200);
    assert_status(&retried, 200);
    assert_eq!(retried.body, moved.body);

    let visit = json!({ "patient_id": w.patient, "branch_service_id": to });
    let checked_in = post(&app, "/api/v1/queue/visits", branch, "visit-1", &visit).await;
    let repeated = post(&app, "/api/v1/queue/visits", branch, "visit-1", &visit).await;
    assert_status(&checked_in, 201);
    assert_status(&repeated, 201);
    assert_eq!(repeated.body, checked_in.body);
    let visits = app.get(&format!("/api/v1/patient-visits?filters[patient_id]={}", w.patient), branch).await;
    assert_eq!(visits.body["meta"]["total"], 2, "the world's visit and one check-in: {}", visits.text);
}

//! Reads of patients are recorded, every one, even when many come at once: the records are
//! queued and written in batches, never skipped, and a stopping server writes what it holds.

use reqwest::Method;

use crate::support::{TestApp, send};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_concurrent_list_search_lookup_and_view_is_recorded_once() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let branch = app.main_branch().await;
    let ana = app.create_patient(branch, "Ana", "Peña").await["id"].as_i64().unwrap();
    app.create_patient(branch, "Ben", "Cruz").await;
    let paths = [
        "/api/v1/patients?perPage=5".to_owned(),
        "/api/v1/patients?search=pena".to_owned(),
        "/api/v1/patients/search?search=ana".to_owned(),
        format!("/api/v1/patients/{ana}"),
    ];
    let mut reads = Vec::new();
    for round in 0..25 {
        for path in &paths {
            let req = app.request(Method::GET, path, Some(branch));
            reads.push(tokio::spawn(async move { (round, send(req).await.0) }));
        }
    }
    for read in reads {
        assert_eq!(read.await.unwrap().1, 200);
    }
    // Every answered read is queued; the writer has them all once the queue is flushed.
    app.state.read_audit.flush().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let recorded: Vec<(String, i64)> = client
        .query(
            &format!(
                "SELECT action, count(*) FROM branch_{branch}.audit_log
                  WHERE resource = 'patients' AND action IN ('list', 'search', 'view') GROUP BY 1 ORDER BY 1"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    // The list and the type-ahead's search are `list` and `search`; a search on the list too.
    assert_eq!(recorded, [("list".to_owned(), 25), ("search".to_owned(), 50), ("view".to_owned(), 25)]);
    let shown: i64 = client
        .query_one(
            &format!(
                "SELECT count(*) FROM branch_{branch}.audit_log
                  WHERE action = 'search' AND after->'ids' @> to_jsonb({ana}::bigint)"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown, 50, "every search that showed Ana names her");
}

//! Reads of patients are recorded, every one, even when many come at once: the records are
//! queued and written in batches, never skipped, and a stopping server writes what it holds.

use reqwest::Method;

use crate::support::{SOON, TestApp, assert_error, assert_status, eventually, patient_reads, reply};

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
            reads.push(tokio::spawn(async move { (round, reply(req).await) }));
        }
    }
    for read in reads {
        assert_status(&read.await.unwrap().1, 200);
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

/// Reads of each branch's patients recorded in that branch's audit log.
async fn reads_in(app: &TestApp, branch: i64) -> i64 {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let sql = format!(
        "SELECT count(*) FROM branch_{branch}.audit_log WHERE resource = 'patients' AND action = 'list'"
    );
    client.query_one(&sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_spread_over_branches_are_each_recorded_in_their_own_branch_once() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let mut branches = vec![app.main_branch().await];
    for code in ["B2", "B3", "B4", "B5"] {
        branches.push(app.create_branch(code).await);
    }
    let mut reads = Vec::new();
    for round in 0..60 {
        // Unequal shares: branch i is read 60 / (i + 1) times.
        for (i, &branch) in branches.iter().enumerate() {
            if round % (i + 1) == 0 {
                let req = app.request(Method::GET, "/api/v1/patients", Some(branch));
                reads.push(tokio::spawn(reply(req)));
            }
        }
    }
    for read in reads {
        assert_status(&read.await.unwrap(), 200);
    }
    app.state.read_audit.flush().await;
    for (i, &branch) in branches.iter().enumerate() {
        assert_eq!(reads_in(&app, branch).await, (60 / (i + 1)) as i64, "branch {branch}");
    }
}

/// Marks `branch` frozen (as a move does while it makes its last copy) or thaws it.
async fn set_frozen(app: &TestApp, branch: i64, frozen: bool) {
    let client = app.state.registry.get().await.unwrap();
    client.execute("UPDATE branches SET frozen = $2 WHERE id = $1", &[&branch, &frozen]).await.unwrap();
    app.state.directory.invalidate(branch).await;
}

#[tokio::test]
async fn records_that_cannot_be_written_yet_are_held_within_the_bound_and_a_read_past_it_is_503() {
    // Three records queued and three held by the writer, at most; a read waits 300 ms for room.
    let app = TestApp::spawn_with(|s| {
        s.read_audit_queue = 3;
        s.pool_wait = std::time::Duration::from_millis(300);
    })
    .await;
    let branch = app.main_branch().await;
    // Reads go on while a branch is frozen; its audit log takes nothing until it thaws.
    set_frozen(&app, branch, true).await;
    let read = || reply(app.request(Method::GET, "/api/v1/patients", Some(branch)));
    for _ in 0..3 {
        assert_status(&read().await, 200);
    }
    // The writer holds those three to retry them; the queue is empty again.
    eventually(SOON, "the writer takes the records", async || app.state.read_audit.queued() == 0).await;
    for _ in 0..3 {
        assert_status(&read().await, 200); // the queue has room for three more
    }
    assert_error(&read().await, 503, "audit_busy");

    set_frozen(&app, branch, false).await;
    app.state.read_audit.flush().await;
    let recorded = patient_reads(&app.db.url, branch, "list").await;
    assert_eq!(recorded, 6, "every answered read is recorded once the branch thaws, the refused one is not");
}

#[tokio::test]
async fn a_quiet_branch_s_reads_are_held_to_be_written_together_and_a_busy_branch_s_batch_at_once() {
    // Held for an hour: only a full batch of a branch, or a flush, writes them.
    let app = TestApp::spawn_with(|s| {
        s.rate_limit_api = 100_000;
        s.read_audit_hold = std::time::Duration::from_secs(3600);
    })
    .await;
    let busy = app.main_branch().await;
    let quiet = app.create_branch("B2").await;
    let read = |branch| reply(app.request(Method::GET, "/api/v1/patients", Some(branch)));
    for _ in 0..3 {
        assert_status(&read(quiet).await, 200);
    }
    let batch = clinic_server::db::read_audit::BRANCH_BATCH;
    for _ in 0..batch {
        assert_status(&read(busy).await, 200);
    }
    eventually(SOON, "a full batch is written without a flush", async || {
        reads_in(&app, busy).await == batch as i64
    })
    .await;
    assert_eq!(reads_in(&app, quiet).await, 0, "the quiet branch's three reads are still held");
    app.state.read_audit.flush().await;
    assert_eq!(reads_in(&app, quiet).await, 3, "a flush writes what is held");
    assert_eq!(reads_in(&app, busy).await, batch as i64);
}

#[tokio::test]
async fn a_flush_writes_the_branches_of_a_server_a_bounded_number_to_a_transaction() {
    // Held for an hour, so that only the flush writes them; two branches to a transaction.
    let app = TestApp::spawn_with(|s| {
        s.rate_limit_api = 100_000;
        s.read_audit_hold = std::time::Duration::from_secs(3600);
        s.read_audit_branches_per_transaction = 2;
    })
    .await;
    let mut branches = vec![app.main_branch().await];
    for code in ["B2", "B3", "B4", "B5"] {
        branches.push(app.create_branch(code).await);
    }
    for (i, &branch) in branches.iter().enumerate() {
        for _ in 0..=i {
            assert_status(&app.get("/api/v1/patients", Some(branch)).await, 200);
        }
    }
    app.state.read_audit.flush().await;
    for (i, &branch) in branches.iter().enumerate() {
        assert_eq!(reads_in(&app, branch).await, i as i64 + 1, "branch {branch}");
    }
    // The transaction that wrote each row is its xmin: five branches, two to a transaction.
    let rows = branches
        .iter()
        .map(|b| {
            format!(
                "SELECT {b} AS branch, xmin::text AS tx FROM branch_{b}.audit_log
                  WHERE resource = 'patients' AND action = 'list'"
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let row = client
        .query_one(
            &format!(
                "WITH r AS ({rows})
                 SELECT (SELECT count(DISTINCT tx) FROM r),
                        (SELECT max(n) FROM (SELECT count(DISTINCT tx) AS n FROM r GROUP BY branch) b)"
            ),
            &[],
        )
        .await
        .unwrap();
    let (transactions, most_per_branch): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!((transactions, most_per_branch), (3, 1), "each branch in one transaction, two to each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backlog_of_one_branch_is_written_a_bounded_number_of_records_to_a_transaction() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 100_000).await;
    let branch = app.main_branch().await;
    // Frozen, the branch's records wait in the writer; thawed, they are one backlog.
    set_frozen(&app, branch, true).await;
    let most = clinic_server::db::read_audit::RECORDS_PER_TRANSACTION;
    let reads = 2 * most + 76;
    // Sixteen at a time: within what the branch's pool serves without a wait.
    for wave in (0..reads).collect::<Vec<_>>().chunks(16) {
        let answers: Vec<_> = wave
            .iter()
            .map(|_| tokio::spawn(reply(app.request(Method::GET, "/api/v1/patients", Some(branch)))))
            .collect();
        for answer in answers {
            assert_status(&answer.await.unwrap(), 200);
        }
    }
    eventually(SOON, "the writer holds every record", async || app.state.read_audit.queued() == 0).await;
    set_frozen(&app, branch, false).await;
    app.state.read_audit.flush().await;
    assert_eq!(reads_in(&app, branch).await, reads as i64);
    // The transaction that wrote each row is its xmin.
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let per_transaction: Vec<i64> = client
        .query(
            &format!(
                "SELECT count(*) FROM branch_{branch}.audit_log WHERE resource = 'patients' AND action = 'list'
                  GROUP BY xmin::text ORDER BY 1 DESC"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(per_transaction, [most as i64, most as i64, 76]);
}

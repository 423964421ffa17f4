//! How the errors PostgreSQL and the pools really give are answered: an outage is a 503 with
//! `Retry-After` (code `database_unavailable`), a conflict is run again, a mistake of ours
//! stays a 500.

use std::time::Duration;

use clinic_server::http::error::ApiError;
use salvo::prelude::*;
use salvo::test::ResponseExt;

use crate::support::TestDb;

/// The status, `Retry-After` and `code` a client gets for `error`.
async fn answer(error: impl Into<ApiError>) -> (u16, bool, String) {
    let mut res = Response::new();
    error.into().render(&mut res);
    let retry_after = res.headers().contains_key("retry-after");
    let body: serde_json::Value = res.take_json().await.unwrap();
    (res.status_code.unwrap().as_u16(), retry_after, body["code"].as_str().unwrap_or_default().to_owned())
}

fn unavailable() -> (u16, bool, String) {
    (503, true, "database_unavailable".into())
}

#[tokio::test]
async fn outages_are_503_conflicts_are_retried_and_mistakes_are_500() {
    let db = TestDb::create().await;
    let connect = || clinic_server::db::connect(&db.url);

    // The server ends the session (what a restart or an administrator does): 57P01.
    let client = connect().await.unwrap();
    let ended = client.batch_execute("SELECT pg_terminate_backend(pg_backend_pid())").await.unwrap_err();
    assert_eq!(answer(ended).await, unavailable());
    // The connection it leaves behind is closed.
    let closed = client.batch_execute("SELECT 1").await.unwrap_err();
    assert!(closed.is_closed(), "{closed:?}");
    assert_eq!(answer(closed).await, unavailable());

    // Nothing listens there: no connection at all.
    let refused = tokio_postgres::connect(
        "host=127.0.0.1 port=1 user=postgres connect_timeout=2",
        tokio_postgres::NoTls,
    )
    .await
    .map(|_| ())
    .unwrap_err();
    assert_eq!(answer(refused).await, unavailable());

    // A server that does not take connections (starting up, shutting down, or a database
    // closed to them), seen through a pool.
    let server = std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| db.url.clone());
    let admin = clinic_server::db::connect(&crate::support::database_url(&server, "postgres")).await.unwrap();
    admin.batch_execute(&format!("ALTER DATABASE {} ALLOW_CONNECTIONS false", db.name)).await.unwrap();
    let settings = crate::support::test_settings(&db.url);
    let pool =
        clinic_server::db::registry_pool(&db.url, &settings, &opentelemetry::global::meter("tests")).unwrap();
    let refused = pool.get().await.map(|_| ()).unwrap_err();
    admin.batch_execute(&format!("ALTER DATABASE {} ALLOW_CONNECTIONS true", db.name)).await.unwrap();
    assert_eq!(answer(refused).await, unavailable());

    // A read-only server (a standby after a failover): 25006.
    let client = connect().await.unwrap();
    client.batch_execute("SET default_transaction_read_only = on").await.unwrap();
    let read_only = client.batch_execute("CREATE TABLE read_only_probe ()").await.unwrap_err();
    assert_eq!(answer(read_only).await, unavailable());

    // A pool closed by the shutdown, and one whose every connection is taken.
    let pool =
        clinic_server::db::registry_pool(&db.url, &settings, &opentelemetry::global::meter("tests")).unwrap();
    pool.close();
    assert_eq!(answer(pool.get().await.map(|_| ()).unwrap_err()).await, unavailable());
    let mut small = crate::support::test_settings(&db.url);
    (small.registry_pool_size, small.pool_wait) = (1, Duration::from_millis(50));
    let pool =
        clinic_server::db::registry_pool(&db.url, &small, &opentelemetry::global::meter("tests")).unwrap();
    let _held = pool.get().await.unwrap();
    assert_eq!(answer(pool.get().await.map(|_| ()).unwrap_err()).await, (503, true, "database_busy".into()));

    // A statement past its time limit: 57014. The limit is its transaction's alone (`SET
    // LOCAL`), and the transaction ends with the step: nothing after it runs under 10 ms.
    {
        let mut client = connect().await.unwrap();
        let tx = client.transaction().await.unwrap();
        tx.batch_execute("SET LOCAL statement_timeout = 10").await.unwrap();
        let slow = tx.batch_execute("SELECT pg_sleep(1)").await.unwrap_err();
        assert_eq!(answer(slow).await, (503, true, "database_timeout".into()));
    }

    // A serialization failure is run again by the route's guard (and a 503 past it).
    let client = connect().await.unwrap();
    let conflict = client
        .batch_execute("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END $$")
        .await
        .unwrap_err();
    assert_eq!(answer(conflict).await, (503, true, "write_conflict".into()));

    // Our own mistakes are not outages: a syntax error, a column read as the wrong type.
    let client = connect().await.unwrap();
    let syntax = client.batch_execute("SELEC 1").await.unwrap_err();
    assert_eq!(answer(syntax).await.0, 500);
    let row = client.query_one("SELECT 1::int4", &[]).await.unwrap();
    let wrong_type = row.try_get::<_, String>(0).unwrap_err();
    assert_eq!(answer(wrong_type).await.0, 500);

    // Wrapped on its way up (`anyhow` context), an outage is still a 503.
    let client = connect().await.unwrap();
    let _ = client.batch_execute("SELECT pg_terminate_backend(pg_backend_pid())").await;
    let wrapped = anyhow::Error::new(client.batch_execute("SELECT 1").await.unwrap_err()).context("reading");
    assert_eq!(answer(ApiError::Internal(wrapped)).await, unavailable());
}

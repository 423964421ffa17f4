//! A move compares the content of every table, not only how many rows each holds
//! (`copy::checksums`, read at the freeze on both sides).

use clinic_server::tenancy::copy;
use tokio_postgres::IsolationLevel;

use crate::support::TestApp;

/// Copies the patients of branch `from` into the empty schema of branch `to` and answers the
/// checksums of both after `meddle` ran on the copy.
async fn after_copying(app: &TestApp, from: i64, to: i64, meddle: &str) -> Vec<(String, String, String)> {
    let (from_schema, to_schema) = (format!("branch_{from}"), format!("branch_{to}"));
    let (mut source, mut target) = (
        clinic_server::db::connect(&app.db.url).await.unwrap(),
        clinic_server::db::connect(&app.db.url).await.unwrap(),
    );
    let read =
        source.build_transaction().isolation_level(IsolationLevel::RepeatableRead).start().await.unwrap();
    let tables: Vec<copy::Table> = copy::tables(&read, &from_schema)
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.name == "patients")
        .collect();
    let write = target.transaction().await.unwrap();
    copy::set_triggers(&write, &to_schema, &tables, false).await.unwrap();
    copy::copy_table(&read, &from_schema, &write, &to_schema, &tables[0]).await.unwrap();
    write.batch_execute(&format!("SET LOCAL search_path TO {to_schema}; {meddle}")).await.unwrap();
    let ours = copy::checksums(&read, &from_schema, &tables).await.unwrap();
    let theirs = copy::checksums(&write, &to_schema, &tables).await.unwrap();
    ours.into_iter().zip(theirs).map(|((name, a), (_, b))| (name, a, b)).collect()
}

#[tokio::test]
async fn the_same_rows_sum_alike_and_one_changed_value_as_many_rows_does_not() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, last) in [("Ana", "Peña"), ("Ben", "Nguyễn"), ("Chidi", "Okafor")] {
        app.create_patient(main, first, last).await;
    }
    let copy = app.create_branch("COPY").await;
    let same = after_copying(&app, main, copy, "SELECT 1").await;
    let (name, ours, theirs) = &same[0];
    assert_eq!((name.as_str(), ours.len()), ("patients", 32));
    assert_eq!(ours, theirs, "a faithful copy sums differently");

    let other = app.create_branch("OTHER").await;
    let meddled = "UPDATE patients SET first_name = 'Bem' WHERE first_name = 'Ben'";
    let (_, ours, theirs) = &after_copying(&app, main, other, meddled).await[0];
    assert_ne!(ours, theirs, "a changed name went unseen: the counts alone agree");
}

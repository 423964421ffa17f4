//! A move compares the content of every table, not only how many rows each holds
//! (`copy::checksums`, read at the freeze on both sides).

use clinic_server::tenancy::copy;
use tokio_postgres::IsolationLevel;

use crate::support::TestApp;

/// Two connections to the test database, the patients table of `from_schema` read in a
/// repeatable-read transaction (with its snapshot), and that table copied into the empty
/// `to_schema` in an open transaction.
struct Copied {
    source: tokio_postgres::Client,
    target: tokio_postgres::Client,
}

impl Copied {
    /// Runs `work` with the reading and the writing transaction after the copy, and the
    /// snapshot of the read and the copied table.
    async fn copy<T>(
        app: &TestApp,
        from_schema: &str,
        to_schema: &str,
        work: impl AsyncFnOnce(
            &tokio_postgres::Transaction<'_>,
            &tokio_postgres::Transaction<'_>,
            &str,
            &[copy::Table],
        ) -> T,
    ) -> (Self, T) {
        let mut copied = Self {
            source: clinic_server::db::connect(&app.db.url).await.unwrap(),
            target: clinic_server::db::connect(&app.db.url).await.unwrap(),
        };
        let read = copied
            .source
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .start()
            .await
            .unwrap();
        let snapshot: String =
            read.query_one("SELECT pg_current_snapshot()::text", &[]).await.unwrap().get(0);
        let tables: Vec<copy::Table> = copy::tables(&read, from_schema)
            .await
            .unwrap()
            .into_iter()
            .filter(|t| t.name == "patients")
            .collect();
        let write = copied.target.transaction().await.unwrap();
        copy::set_triggers(&write, to_schema, &tables, false).await.unwrap();
        copy::copy_table(&read, from_schema, &write, to_schema, &tables[0]).await.unwrap();
        let answer = work(&read, &write, &snapshot, &tables).await;
        write.commit().await.unwrap();
        read.commit().await.unwrap();
        (copied, answer)
    }
}

/// Copies the patients of branch `from` into the empty schema of branch `to` and answers the
/// checksums of both after `meddle` ran on the copy.
async fn after_copying(app: &TestApp, from: i64, to: i64, meddle: &str) -> Vec<(String, String, String)> {
    let (from_schema, to_schema) = (format!("branch_{from}"), format!("branch_{to}"));
    let (_, sums) = Copied::copy(app, &from_schema, &to_schema, async |read, write, _, tables| {
        write.batch_execute(&format!("SET LOCAL search_path TO {to_schema}; {meddle}")).await.unwrap();
        let ours = copy::checksums(read, &from_schema, tables, copy::Covering::All).await.unwrap();
        let theirs = copy::checksums(write, &to_schema, tables, copy::Covering::All).await.unwrap();
        ours.into_iter().zip(theirs).map(|((name, a), (_, b))| (name, a, b)).collect()
    })
    .await;
    sums
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

/// At the freeze only the rows written since the second snapshot are summed: the sender's
/// changed rows against the receiver's rows of the same keys, staged by the catch-up.
#[tokio::test]
async fn the_freeze_sums_the_rows_written_since_the_snapshot_on_both_sides() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for (first, last) in [("Ana", "Peña"), ("Ben", "Nguyễn")] {
        app.create_patient(main, first, last).await;
    }
    let to = app.create_branch("FREEZE").await;
    let (from_schema, to_schema) = (format!("branch_{main}"), format!("branch_{to}"));
    let (Copied { mut source, mut target }, (snapshot, tables)) =
        Copied::copy(&app, &from_schema, &to_schema, async |_, _, snapshot, tables| {
            (snapshot.to_owned(), tables.to_vec())
        })
        .await;

    // One patient is written after the snapshot, one changed.
    app.create_patient(main, "Chidi", "Okafor").await;
    source
        .batch_execute(&format!(
            "UPDATE {from_schema}.patients SET first_name = 'Anna' WHERE first_name = 'Ana'"
        ))
        .await
        .unwrap();

    let mut sums = async |meddle: &str| {
        let (read, write) = (source.transaction().await.unwrap(), target.transaction().await.unwrap());
        let caught =
            copy::catch_up(&read, &from_schema, &write, &to_schema, &tables[0], &snapshot).await.unwrap();
        write.batch_execute(&format!("SET LOCAL search_path TO {to_schema}; {meddle}")).await.unwrap();
        let ours = copy::checksums(&read, &from_schema, &tables, copy::Covering::ChangedSince(&snapshot))
            .await
            .unwrap();
        let theirs = copy::checksums(&write, &to_schema, &tables, copy::Covering::Staged).await.unwrap();
        (caught, ours[0].1.clone(), theirs[0].1.clone())
    };
    let (caught, ours, theirs) = sums("SELECT 1").await;
    assert_eq!(caught, 2, "the new and the changed patient are copied again");
    assert_eq!(ours, theirs, "the caught-up rows sum differently");
    let (_, ours, theirs) = sums("UPDATE patients SET last_name = 'Okafur' WHERE first_name = 'Chidi'").await;
    assert_ne!(ours, theirs, "a changed value among the caught-up rows went unseen");
}

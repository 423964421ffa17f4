//! `patient_search` put in name order in a branch's quiet hours: only a table big enough and
//! out of order, only in the hours asked, with the type-ahead answering as before.

use clinic_server::tenancy::search_order::put_in_name_order;
use serde_json::Value;

use crate::support::{TestApp, assert_status};

const PATIENTS: i64 = 300;

#[tokio::test]
async fn the_search_table_is_put_in_name_order_in_the_quiet_hours_and_answers_the_same() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let schema = format!("branch_{main}");
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    // Registered in the reverse of name order: the last name first.
    client
        .batch_execute(&format!(
            "INSERT INTO {schema}.patients (first_name, last_name, birth_date, sex)
             SELECT (ARRAY['Ana', 'Jose', 'Maria'])[1 + i % 3], chr(65 + i % 26) || lpad(i::text, 3, '0'),
                    date '1980-01-01' + i, 'female'
               FROM generate_series({PATIENTS}, 1, -1) i;
             ANALYZE {schema}.patient_search"
        ))
        .await
        .unwrap();
    let places = async || -> Vec<i64> {
        let sql = format!("SELECT id FROM {schema}.patient_search ORDER BY ctid");
        client.query(&sql, &[]).await.unwrap().iter().map(|r| r.get(0)).collect()
    };
    let sql = format!("SELECT id FROM {schema}.patient_search ORDER BY last_name, first_name, id");
    let by_name: Vec<i64> = client.query(&sql, &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(by_name.len(), PATIENTS as usize);
    assert_ne!(places().await, by_name);
    let answers = async || -> Vec<Value> {
        let mut answers = Vec::new();
        for term in ["ana", "maria b", "c01", "jose"] {
            let r = app
                .get(
                    &format!("/api/v1/patients/search?search={}&limit=50", term.replace(' ', "%20")),
                    Some(main),
                )
                .await;
            assert_status(&r, 200);
            answers.push(r.body["data"].clone());
        }
        answers
    };
    let before = answers().await;
    assert_eq!(before[0].as_array().unwrap().len(), 50);

    let directory = &app.state.directory;
    // Too small for the bound asked: left as it is.
    assert!(put_in_name_order(directory, 0..24, PATIENTS + 1, 0.9).await.unwrap().is_empty());
    // No branch is in hours that hold none.
    assert!(put_in_name_order(directory, 0..0, 1, 0.9).await.unwrap().is_empty());
    assert_ne!(places().await, by_name);

    assert_eq!(put_in_name_order(directory, 0..24, 1, 0.9).await.unwrap(), ["MAIN"]);
    assert_eq!(places().await, by_name, "the rows lie in name order");
    assert_eq!(answers().await, before);
    let leftover: i64 = client
        .query_one("SELECT count(*) FROM pg_class WHERE relname = 'patient_search_name_order'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(leftover, 0, "the index the rewrite sorted by is gone");

    // In order now: the next look leaves it.
    assert!(put_in_name_order(directory, 0..24, 1, 0.9).await.unwrap().is_empty());
}

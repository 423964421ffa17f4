//! A merge moves every record to the survivor, audited on both sides, and every table
//! naming a patient; the merged patient is read at the survivor.

use super::*;

#[tokio::test]
async fn a_merge_moves_every_record_keeping_signatures_totals_and_the_survivors_fields() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor =
        born(&app, b, "Lucia", "Reyes", "1971-04-09", json!({ "phone": "0917 555 0101", "city": "Cebu" }))
            .await;
    let duplicate =
        born(&app, b, "Lucía", "Reyes", "1971-04-09", json!({ "phone": "0917 555 0101", "city": "Davao" }))
            .await;
    let svc = service(&app, b, "EYE").await;
    let kept = chart(&app, &w, survivor, svc, 8).await;
    let moved = chart(&app, &w, duplicate, svc, 11).await;
    let (before_s, before_d) = (summary(&app, b, survivor).await, summary(&app, b, duplicate).await);

    let r = merge(&app, b, survivor, duplicate).await;
    assert_status(&r, 201);
    let id = id_of(&r);
    assert_eq!(r.header("location"), Some(format!("{PATIENTS}/{survivor}/merges/{id}").as_str()));
    let data = &r.body["data"];
    assert_eq!(data["state"], "completed", "{data}");
    assert_eq!(data["survivor_id"], survivor);
    assert_eq!(data["duplicate_id"], duplicate);
    assert_eq!(data["reason"], "registered twice");
    // The survivor kept its own fields; the ones that differed are reported.
    assert_eq!(
        data["differences"],
        json!([{ "field": "first_name", "survivor": "Lucia", "duplicate": "Lucía" },
               { "field": "city", "survivor": "Cebu", "duplicate": "Davao" }]),
    );
    let s = app.get(&format!("{PATIENTS}/{survivor}"), branch).await;
    assert_eq!(
        (s.body["data"]["first_name"].as_str(), s.body["data"]["city"].as_str()),
        (Some("Lucia"), Some("Cebu"))
    );
    // What moved, by table, in each database.
    assert_eq!(data["moved"]["patient_visits"], json!([moved.visit]));
    assert_eq!(data["moved"]["complaints"], json!([moved.complaint]));
    assert_eq!(data["moved"]["refractions"], json!([id_of(&moved.refraction)]));
    assert_eq!(data["moved"]["billing_transactions"], json!([moved.charge, moved.payment]));
    assert_eq!(data["moved"]["queue_tickets"], json!([moved.ticket]));
    assert_eq!(
        data["registry_moved"],
        json!({ "surgery_schedules": [moved.surgery], "transactions": [moved.dispensing] })
    );

    for (table, id) in [
        ("patient_visits", moved.visit),
        ("complaints", moved.complaint),
        ("refractions", id_of(&moved.refraction)),
        ("billing_transactions", moved.charge),
        ("billing_transactions", moved.payment),
        ("queue_tickets", moved.ticket),
    ] {
        assert_eq!(owner(&app, branch, table, id).await, survivor, "{table} {id}");
    }
    for (table, id) in [("surgery_schedules", moved.surgery), ("transactions", moved.dispensing)] {
        assert_eq!(owner(&app, None, table, id).await, survivor, "{table} {id}");
    }
    for (table, id) in [("patient_visits", kept.visit), ("billing_transactions", kept.charge)] {
        assert_eq!(owner(&app, branch, table, id).await, survivor, "{table} {id}");
    }
    // Signatures and amounts stay as they were; the totals add up.
    let refraction = app.get(&format!("/api/v1/refractions/{}", id_of(&moved.refraction)), branch).await.body
        ["data"]
        .clone();
    for field in ["status", "signed_by", "signed_at", "right_eye", "examined_at", "examiner_id"] {
        assert_eq!(refraction[field], moved.refraction[field], "{field}");
    }
    assert_eq!(refraction["patient_id"], survivor);
    let after = summary(&app, b, survivor).await;
    for field in ["charges", "discounts", "payments", "refunds", "covered", "balance"] {
        assert_eq!(
            cents(&after[field]),
            cents(&before_s[field]) + cents(&before_d[field]),
            "{field}: {after}"
        );
    }
    assert_eq!(after["charges"], "2401.00");
    assert_eq!(after["balance"], "1400.50");
    let charge =
        app.get(&format!("{PATIENTS}/{survivor}/billing-transactions/{}", moved.charge), branch).await;
    assert_eq!(
        (charge.body["data"]["amount"].as_str(), charge.body["data"]["status"].as_str()),
        (Some("1200.50"), Some("posted"))
    );
    // The merge log lists it.
    let log = app.get(&format!("{PATIENTS}/{survivor}/merges"), branch).await;
    assert_eq!(ids(&log.body), vec![id]);
}

#[tokio::test]
async fn both_sides_are_audited_in_both_databases() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let b = w.branch;
    let survivor = w.patient;
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let svc = service(&app, b, "AUD").await;
    let moved = chart(&app, &w, duplicate, svc, 9).await;
    assert_status(&merge(&app, b, survivor, duplicate).await, 201);
    let actions =
        |rows: Vec<Value>| rows.iter().map(|r| r["action"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    let dup = app.audit_rows("/api/v1/audit-logs", Some(b), "patients", duplicate).await;
    assert_eq!(actions(dup.clone()).last().map(String::as_str), Some("merged"));
    assert_eq!(dup.last().unwrap()["after"]["merged_into_id"], survivor);
    let kept = app.audit_rows("/api/v1/audit-logs", Some(b), "patients", survivor).await;
    assert!(actions(kept).contains(&"merge".to_owned()));
    let visit = app.audit_rows("/api/v1/audit-logs", Some(b), "patient-visits", moved.visit).await;
    let last = visit.last().unwrap();
    assert_eq!(
        (last["action"].as_str(), &last["before"]["patient_id"], &last["after"]["patient_id"]),
        (Some("merge"), &json!(duplicate), &json!(survivor))
    );
    let surgery = app.audit_rows("/api/v1/system-audit-logs", None, "surgery-schedules", moved.surgery).await;
    assert_eq!(actions(surgery), ["create", "merge"]);
}

#[tokio::test]
async fn a_merged_patient_is_read_at_the_survivor_and_never_written() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor = w.patient;
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    assert_status(&merge(&app, b, survivor, duplicate).await, 201);

    for (path, to) in [
        (format!("{PATIENTS}/{duplicate}"), format!("{PATIENTS}/{survivor}")),
        (format!("{PATIENTS}/{duplicate}/billing-summary"), format!("{PATIENTS}/{survivor}/billing-summary")),
        (
            format!("{PATIENTS}/{duplicate}/billing-transactions?perPage=5"),
            format!("{PATIENTS}/{survivor}/billing-transactions?perPage=5"),
        ),
    ] {
        let r = app.get(&path, branch).await;
        assert_error(&r, 301, "merged");
        assert_eq!(r.header("location"), Some(to.as_str()), "{path}");
        assert_eq!(r.body["merged_into_id"], survivor);
    }
    let member = format!("{PATIENTS}/{duplicate}");
    assert_error(&app.put(&member, branch, json!({ "city": "Iloilo" })).await, 410, "merged");
    assert_error(&app.delete(&member, branch).await, 410, "merged");
    let charge = json!({ "kind": "charge", "unit_price": "10", "description": "x" });
    assert_error(&app.post(&format!("{member}/billing-transactions"), branch, charge).await, 410, "merged");
    let visit = json!({ "patient_id": duplicate, "visit_date": "2026-03-03" });
    let r = app.post("/api/v1/patient-visits", branch, visit).await;
    assert_error(&r, 410, "merged");
    assert_eq!(r.body["location"], format!("{PATIENTS}/{survivor}"));
    let svc = service(&app, b, "GONE").await;
    let queue = format!("/api/v1/queue/branch-services/{svc}/queue");
    let check_in = json!({ "patient_id": duplicate, "branch_service_id": svc });
    let surgery = json!({ "branch_id": b, "patient_id": duplicate, "procedure_id": w.procedure, "doctor_id": w.doctor,
                          "eye": "left", "scheduled_at": "2027-06-02T09:00:00+00:00" });
    // Refused by the checks of the handlers or by the schemas' triggers, each names the survivor.
    for r in [
        app.post(&queue, branch, json!({ "patient_id": duplicate })).await,
        app.post("/api/v1/queue/visits", branch, check_in).await,
        app.post("/api/v1/surgery-schedules", None, surgery).await,
    ] {
        assert_error(&r, 410, "merged");
        assert_eq!(r.body["location"], format!("{PATIENTS}/{survivor}"), "{}", r.text);
    }
    assert_error(&merge(&app, b, duplicate, survivor).await, 410, "merged");
    assert_error(&merge(&app, b, survivor, duplicate).await, 410, "merged");
    // Gone from lists, searches and counts; a patient that never existed is still a 404.
    let list = app.get(&format!("{PATIENTS}?perPage=100"), branch).await;
    assert_eq!(ids(&list.body), vec![survivor]);
    assert_status(&app.get(&format!("{PATIENTS}/999999"), branch).await, 404);
}

/// Every table of a branch or of the registry that names a patient is one a merge moves,
/// guarded against rows written for a merged patient, and indexed by patient. A new table
/// naming a patient fails here until the declarations (and a migration) cover it.
#[tokio::test]
async fn every_table_naming_a_patient_is_moved_by_a_merge() {
    let app = TestApp::spawn().await;
    let b = app.main_branch().await;
    let client = app.state.registry.get().await.unwrap();
    let schema = format!("branch_{b}");
    let catalogue = |schema: &str| {
        let schema = schema.to_owned();
        let client = &client;
        async move {
            let rows = client
                .query(
                    "SELECT c.table_name::text FROM information_schema.columns c
                       JOIN information_schema.tables t USING (table_schema, table_name)
                      WHERE c.table_schema::text = $1::text AND c.column_name::text = 'patient_id'
                        AND t.table_type::text = 'BASE TABLE'
                        AND ($1::text <> 'public' OR EXISTS (SELECT 1 FROM information_schema.columns x
                             WHERE x.table_schema = 'public' AND x.table_name = c.table_name AND x.column_name = 'branch_id'))",
                    &[&schema],
                )
                .await
                .unwrap();
            rows.iter().map(|r| r.get::<_, String>(0)).collect::<BTreeSet<String>>()
        }
    };
    // The examinations' declarations keep their rows in one shared table.
    let declared = |rows: Vec<tables::PatientRows>| {
        rows.iter().map(|r| r.resource.stored_in().to_owned()).collect::<BTreeSet<String>>()
    };
    let in_branch = declared(tables::in_branch());
    let in_registry = declared(tables::in_registry());
    assert!(in_branch.contains("examinations"), "{in_branch:?}");
    let named = catalogue(&schema).await;
    assert!(named.len() >= 14, "{named:?}");
    // The billing rows name their patient through their path; every other table by patient_id.
    assert_eq!(named, in_branch, "branch tables naming a patient vs what a merge moves");
    assert_eq!(
        catalogue("public").await,
        in_registry,
        "registry tables naming a patient vs what a merge moves"
    );
    assert!(registered().iter().any(|r| r.merged_into.is_some()));
    // Every foreign key to the patients is from a moved table's patient column, or the
    // bookkeeping of merges.
    let keys = client
        .query(
            "SELECT c.conrelid::regclass::text, a.attname::text FROM pg_constraint c
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
              WHERE c.contype = 'f' AND c.confrelid = $1::text::regclass",
            &[&format!("{schema}.patients")],
        )
        .await
        .unwrap();
    for key in keys {
        let (table, column): (String, String) = (key.get(0), key.get(1));
        let table = table.rsplit('.').next().unwrap().to_owned();
        let bookkeeping = matches!(
            (table.as_str(), column.as_str()),
            ("patients", "merged_into_id") | ("patient_merges", "survivor_id" | "duplicate_id")
        );
        assert!(
            bookkeeping || (in_branch.contains(&table) && column == "patient_id"),
            "{table}.{column} names a patient"
        );
    }
    // Each is guarded by the trigger refusing merged patients, and indexed by patient.
    for (schema, tables) in [(schema.as_str(), &in_branch), ("public", &in_registry)] {
        for table in tables {
            let guarded: bool = client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = $1::text::regclass AND tgname = $2::text)",
                    &[&format!("{schema}.{table}"), &format!("{table}_patient_not_merged")],
                )
                .await
                .unwrap()
                .get(0);
            assert!(guarded, "{schema}.{table} lets rows be written for a merged patient");
        }
    }
}

//! FHIR permissions per type, `$everything`, tenant isolation and the read audit.

use super::*;

#[tokio::test]
async fn each_type_needs_its_permission_and_everything_leaves_out_what_cannot_be_read() {
    let clinic = Clinic::open().await;
    let s = seed(&clinic).await;
    let (app, branch, p) = (&clinic.app, clinic.branch, clinic.patient);
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    let (_, nurse) = app.create_user("nurse", &["nurse"], &[branch]).await;
    let read = |token: &str, path: String| {
        let token = token.to_owned();
        async move { get_as(app, Some(&token), &path, Some(branch)).await }
    };
    // The front desk reads patients and billing, not examinations.
    assert_outcome(
        &read(&desk, format!("/fhir/r4/Observation?patient={p}")).await,
        403,
        "forbidden",
        "forbidden",
    );
    assert_outcome(
        &read(&desk, format!("/fhir/r4/VisionPrescription/{}", s.final_rx)).await,
        403,
        "forbidden",
        "forbidden",
    );
    assert_fhir(&read(&desk, format!("/fhir/r4/ChargeItem?patient={p}")).await, 200);
    let r = read(&desk, format!("/fhir/r4/Patient/{p}/$everything")).await;
    assert_fhir(&r, 200);
    let kinds: Vec<&str> = r.body["entry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["resource"]["resourceType"].as_str().unwrap())
        .collect();
    assert_eq!((r.body["total"].as_i64(), kinds), (Some(3), vec!["Patient", "Encounter", "ChargeItem"]));
    // A nurse reads examinations, not billing.
    assert_outcome(
        &read(&nurse, format!("/fhir/r4/ChargeItem/{}", s.charge)).await,
        403,
        "forbidden",
        "forbidden",
    );
    let r = read(&nurse, format!("/fhir/r4/Patient/{p}/$everything?_count=100")).await;
    let kinds: Vec<&str> = r.body["entry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["resource"]["resourceType"].as_str().unwrap())
        .collect();
    assert_eq!(r.body["total"], 13);
    assert!(!kinds.contains(&"ChargeItem") && kinds.contains(&"VisionPrescription"), "{kinds:?}");

    // The rest of the server's refusals, as OperationOutcomes.
    assert_outcome(
        &get_as(app, None, "/fhir/r4/Patient", Some(branch)).await,
        401,
        "login",
        "unauthenticated",
    );
    assert_outcome(
        &get_as(app, Some("made-up"), "/fhir/r4/Patient", Some(branch)).await,
        401,
        "login",
        "unauthenticated",
    );
    assert_outcome(
        &get_as(app, Some(&app.admin_token), "/fhir/r4/Patient", None).await,
        400,
        "invalid",
        "branch_required",
    );
    let elsewhere = app.create_branch("NORTH").await;
    assert_outcome(
        &get_as(app, Some(&desk), "/fhir/r4/Patient", Some(elsewhere)).await,
        403,
        "forbidden",
        "branch_forbidden",
    );
    assert_fhir(&get_as(app, None, "/fhir/r4/metadata", None).await, 200);

    // Accept: FHIR JSON or JSON, nothing else.
    let accept = |media: &str| {
        let req = app
            .http
            .get(app.url("/fhir/r4/Patient"))
            .bearer_auth(&app.admin_token)
            .header("x-branch-id", branch.to_string())
            .header("accept", media.to_owned());
        reply(req)
    };
    let r = accept("application/json").await;
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/json; charset=utf-8")),
        "{}",
        r.text
    );
    assert_eq!(r.body["resourceType"], "Bundle");
    assert_fhir(&accept("application/fhir+json;fhirVersion=4.0").await, 200);
    let r = accept("text/html").await;
    assert_outcome(&r, 406, "not-supported", "not_acceptable");
}

#[tokio::test]
async fn a_branch_never_answers_with_another_branchs_patients() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let ana = id_of(&app.create_patient(main, "Ana", "Cruz").await);
    for name in ["Ben", "Carla"] {
        app.create_patient(north, name, "Norte").await;
    }
    let dina = id_of(&app.create_patient(north, "Dina", "Norte").await);
    let visit = app
        .created(
            "/api/v1/patient-visits",
            Some(north),
            json!({ "patient_id": dina, "visit_date": "2025-05-01" }),
        )
        .await;
    let body = json!({ "patient_visit_id": id_of(&visit), "right_eye": { "readings": [{ "iop_mmhg": 21, "method": "icare" }] } });
    let tonometry = id_of(&app.created("/api/v1/tonometries", Some(north), body).await);

    let pins = |bundle: &Value| -> Vec<String> {
        resources(bundle).iter().map(|p| p["identifier"][0]["value"].as_str().unwrap().to_owned()).collect()
    };
    let here = fhir(&app, main, "/fhir/r4/Patient?_count=100", 200).await;
    assert_eq!(ids(&here), vec![ana.to_string()]);
    assert!(pins(&here).iter().all(|pin| pin.starts_with("MAIN-")), "{here}");
    let there = fhir(&app, north, "/fhir/r4/Patient?_count=100", 200).await;
    assert_eq!(there["total"], 3);
    assert!(pins(&there).iter().all(|pin| pin.starts_with("NORTH-")), "{there}");
    // NORTH's patient, records and observation are not found through MAIN.
    for path in [
        format!("/fhir/r4/Patient/{dina}"),
        format!("/fhir/r4/Patient/{dina}/$everything"),
        format!("/fhir/r4/Observation/iop-{tonometry}-right-1"),
    ] {
        let r = get_as(&app, Some(&app.admin_token), &path, Some(main)).await;
        assert_outcome(&r, 404, "not-found", "not_found");
    }
    for path in [
        format!("/fhir/r4/Encounter?patient={dina}"),
        format!("/fhir/r4/Observation?patient={dina}"),
        format!("/fhir/r4/Patient?_id={dina}"),
    ] {
        assert_eq!(fhir(&app, main, &path, 200).await["total"], 0, "{path}");
    }
    assert_eq!(fhir(&app, north, &format!("/fhir/r4/Observation?patient={dina}"), 200).await["total"], 1);
    // A user of MAIN only cannot name NORTH.
    let (_, main_only) = app.create_user("main-doctor", &["doctor"], &[main]).await;
    let r = get_as(&app, Some(&main_only), "/fhir/r4/Patient", Some(north)).await;
    assert_outcome(&r, 403, "forbidden", "branch_forbidden");
}

/// The audit rows of FHIR reads of patients in `branch`: (action, record_id, ids, route).
async fn fhir_reads(app: &TestApp, branch: i64) -> Vec<(String, Option<i64>, Value, String)> {
    app.state.read_audit.flush().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client
        .query(
            &format!(
                "SELECT action, record_id, coalesce(after->'ids', 'null'), after->>'route' FROM branch_{branch}.audit_log
                  WHERE resource = 'patients' AND after->>'route' LIKE '/fhir/%' ORDER BY id"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

#[tokio::test]
async fn fhir_reads_are_recorded_as_reads_of_the_patients_they_show() {
    let clinic = Clinic::open().await;
    let s = seed(&clinic).await;
    let (app, branch, p) = (&clinic.app, clinic.branch, clinic.patient);
    let ben = id_of(&app.create_patient(branch, "Ben", "Reyes").await);
    fhir(app, branch, &format!("/fhir/r4/Patient/{p}"), 200).await;
    fhir(app, branch, "/fhir/r4/Patient?_count=100", 200).await;
    fhir(app, branch, &format!("/fhir/r4/Observation?patient={p}&_count=1"), 200).await;
    fhir(app, branch, &format!("/fhir/r4/Observation/va-{}-left", s.acuity), 200).await;
    fhir(app, branch, &format!("/fhir/r4/Patient/{p}/$everything"), 200).await;
    fhir(app, branch, &format!("/fhir/r4/Encounter?patient={ben}"), 200).await;
    get_as(app, None, "/fhir/r4/metadata", None).await;
    let r = get_as(app, Some(&app.admin_token), "/fhir/r4/Patient/999999", Some(branch)).await;
    assert_outcome(&r, 404, "not-found", "not_found");

    let none = Value::Null;
    assert_eq!(
        fhir_reads(app, branch).await,
        [
            ("view".into(), Some(p), none.clone(), "/fhir/r4/Patient".into()),
            ("search".into(), None, json!([p, ben]), "/fhir/r4/Patient".into()),
            ("search".into(), None, json!([p]), "/fhir/r4/Observation".into()),
            ("view".into(), Some(p), none.clone(), "/fhir/r4/Observation".into()),
            ("view".into(), Some(p), none, "/fhir/r4/Patient/{id}/$everything".into()),
            ("search".into(), None, json!([]), "/fhir/r4/Encounter".into()),
        ],
        "one record per answer that showed patient data, naming the patients"
    );
    let by = app.admin_id().await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let users: Vec<Option<i64>> = client
        .query(
            &format!(
                "SELECT DISTINCT user_id FROM branch_{branch}.audit_log WHERE after->>'route' LIKE '/fhir/%'"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(users, [Some(by)]);
}

//! The facade searched by fhirpy (PyPI), a FHIR client library, as a client written with it
//! would (`tests/api/data/fhirpy_search.py`): names with their modifiers, `sort`, `limit`
//! with `fetch_all` following the pages, `count` (which sends `_count=0&_totalMethod=count`),
//! `first`, and a refused search raised as the OperationOutcome it is.

use serde_json::{Value, json};

use super::fhir_python;
use crate::support::{Clinic, id_of};

/// What the script found, or `None` where fhirpy is not installed in [`fhir_python`]'s Python
/// and not required (CI installs it and sets `FHIRPY=required`).
async fn searched_with_fhirpy(clinic: &Clinic) -> Option<Value> {
    let required = std::env::var("FHIRPY").is_ok_and(|v| v == "required");
    let python = fhir_python();
    let present = tokio::process::Command::new(&python)
        .args(["-c", "import fhirpy"])
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if !present {
        assert!(!required, "fhirpy is required but not installed in {python} (pip install 'fhirpy==2.3.1')");
        eprintln!("{python} has no fhirpy; the facade was not searched with it");
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/data/fhirpy_search.py");
    // Run beside the server, which answers on this test's runtime: never blocking it.
    let out = tokio::process::Command::new(&python)
        .arg(script)
        .arg(clinic.app.url("/fhir/r4"))
        .arg(&clinic.app.admin_token)
        .arg(clinic.branch.to_string())
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "fhirpy failed: {}", &said[..said.len().min(4000)]);
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {said}")))
}

#[tokio::test]
async fn fhirpy_searches_by_name_sorts_pages_and_counts() {
    let clinic = Clinic::open().await;
    let (app, branch, cruz) = (&clinic.app, clinic.branch, clinic.patient);
    let patient = |first: &str, last: &str, born: &str| {
        let body = json!({ "first_name": first, "last_name": last, "birth_date": born, "sex": "male" });
        async move { id_of(&app.created("/api/v1/patients", Some(branch), body).await) }
    };
    // Ana Cruz was born on 1980-01-02.
    let jose = patient("José", "Peña", "1970-05-01").await;
    let santos = patient("Jose", "Santos", "1971-05-01").await;
    let zapena = patient("Ana", "Zapena", "1972-05-01").await;
    let maria = patient("María", "Peñaflor", "1973-05-01").await;
    let zoe = patient("Zoë", "Müller", "1974-05-01").await;
    let penelope = patient("Penelope", "Reyes", "1976-05-01").await;
    let visit = |date: &str| {
        let body = json!({ "patient_id": cruz, "visit_date": date });
        async move { id_of(&app.created("/api/v1/patient-visits", Some(branch), body).await) }
    };
    let (early, late) = (visit("2025-06-01").await, visit("2026-03-01").await);

    let Some(found) = searched_with_fhirpy(&clinic).await else { return };
    let ids = |name: &str| -> Vec<i64> {
        found[name]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {found}"))
            .iter()
            .map(|id| id.as_str().unwrap().parse().unwrap())
            .collect()
    };
    assert_eq!(ids("name"), [cruz, zapena]);
    assert_eq!(ids("family_exact"), [jose]);
    assert_eq!(ids("family_contains"), [jose, zapena, maria]);
    assert_eq!(ids("given_any"), [jose, santos, zoe]);
    assert_eq!(ids("name_and_family"), [jose]);
    assert_eq!(ids("born_after"), [zapena, maria, zoe, penelope, cruz]);
    assert_eq!(ids("newest_born"), [cruz, penelope, zoe, maria, zapena, santos, jose]);
    assert_eq!(ids("by_family_pages"), [cruz, zoe, jose, maria, penelope, santos, zapena]);
    assert_eq!((found["count_pena"].as_i64(), found["count_all"].as_i64()), (Some(2), Some(7)));
    assert_eq!(found["first_pen"], penelope.to_string());
    assert_eq!(ids("encounters_by_date"), [early, clinic.visit, late]);
    assert_eq!(
        (found["bad_modifier"].as_str(), found["bad_sort"].as_str()),
        (Some("invalid_search"), Some("invalid_search"))
    );
}

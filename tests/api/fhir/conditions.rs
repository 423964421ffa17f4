//! `Condition`: a visit's coded diagnoses and the patient's problems, in ICD-10-CM, read,
//! searched by `patient` and `code`, and in `$everything`.

use super::*;

const ICD_10_CM: &str = "http://hl7.org/fhir/sid/icd-10-cm";

#[tokio::test]
async fn diagnoses_and_problems_are_conditions_coded_in_icd_10_cm() {
    let clinic = Clinic::open().await;
    let (app, branch, p, visit) = (&clinic.app, clinic.branch, clinic.patient, clinic.visit);
    let diagnoses = format!("/api/v1/patient-visits/{visit}/diagnoses");
    let glaucoma = id_of(
        &app.created(
            &diagnoses,
            Some(branch),
            json!({ "code": "H40.1111", "laterality": "right", "primary": true }),
        )
        .await,
    );
    let cataract = id_of(
        &app.created(&diagnoses, Some(branch), json!({ "code": "H25.13", "laterality": "both" })).await,
    );
    let problems = app
        .get(&format!("/api/v1/patients/{p}/problems?sortField=code&sortDirection=asc"), Some(branch))
        .await;
    let problem = id_of(&problems.body["data"][1]);
    assert_eq!(problems.body["data"][1]["code"], "H40.1111");
    let mut answers = Vec::new();

    let condition = fhir(app, branch, &format!("/fhir/r4/Condition/diagnosis-{glaucoma}"), 200).await;
    assert_eq!(condition["resourceType"], "Condition");
    assert_eq!(code_in(&condition["code"], ICD_10_CM), "H40.1111");
    assert_eq!(condition["category"][0]["coding"][0]["code"], "encounter-diagnosis");
    assert_eq!(condition["subject"]["reference"], format!("Patient/{p}"));
    assert_eq!(condition["encounter"]["reference"], format!("Encounter/{visit}"));
    assert_eq!(condition["onsetDateTime"], "2026-01-05");
    assert_eq!(condition["bodySite"][0]["text"], "Right eye");
    answers.push(condition);
    let listed = fhir(app, branch, &format!("/fhir/r4/Condition/problem-{problem}"), 200).await;
    assert_eq!(listed["category"][0]["coding"][0]["code"], "problem-list-item");
    assert_eq!(listed["clinicalStatus"]["coding"][0]["code"], "active");
    answers.push(listed);

    let all = fhir(app, branch, &format!("/fhir/r4/Condition?patient={p}"), 200).await;
    assert_eq!(all["total"], 4, "two diagnoses and the two problems they added: {all}");
    answers.push(all);
    let by_code =
        fhir(app, branch, &format!("/fhir/r4/Condition?patient=Patient/{p}&code={ICD_10_CM}|H25.13"), 200)
            .await;
    let mut found = ids(&by_code);
    found.sort();
    assert_eq!(
        found,
        [format!("diagnosis-{cataract}"), format!("problem-{}", id_of(&problems.body["data"][0]))]
    );
    let other_system = fhir(app, branch, "/fhir/r4/Condition?code=http://snomed.info/sct|H25.13", 200).await;
    assert_eq!(other_system["total"], 0);

    // Resolved, then removed: a deleted condition is 410, an unknown one 404.
    let path = format!("/api/v1/patients/{p}/problems/{problem}");
    assert_status(
        &app.put(&path, Some(branch), json!({ "status": "resolved", "resolved_on": "2026-02-01" })).await,
        200,
    );
    let resolved = fhir(app, branch, &format!("/fhir/r4/Condition/problem-{problem}"), 200).await;
    assert_eq!(resolved["clinicalStatus"]["coding"][0]["code"], "resolved");
    assert_eq!(resolved["abatementDateTime"], "2026-02-01");
    answers.push(resolved);
    assert_status(&app.delete(&path, Some(branch)).await, 200);
    let r =
        get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Condition/problem-{problem}"), Some(branch))
            .await;
    assert_outcome(&r, 410, "not-found", "deleted");
    let r = get_as(app, Some(&app.admin_token), "/fhir/r4/Condition/problem-999999", Some(branch)).await;
    assert_outcome(&r, 404, "not-found", "not_found");

    let everything = fhir(app, branch, &format!("/fhir/r4/Patient/{p}/$everything?_count=100"), 200).await;
    let conditions = resources(&everything).iter().filter(|r| r["resourceType"] == "Condition").count();
    assert_eq!(conditions, 3);
    answers.push(everything);
    validate_with_fhir_resources(&answers);
}

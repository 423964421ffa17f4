//! Every FHIR type answered and validated with each eye coded, the API document's FHIR
//! routes, and merged patients.

use super::*;
use crate::support::assert_status;

#[tokio::test]
async fn every_type_answers_fhir_that_validates_with_each_eye_coded() {
    let clinic = Clinic::open().await;
    let s = seed(&clinic).await;
    let (app, branch, p) = (&clinic.app, clinic.branch, clinic.patient);
    let mut answers = Vec::new();

    let r = get_as(app, None, "/fhir/r4/metadata", None).await;
    assert_fhir(&r, 200);
    assert_eq!(
        (r.body["resourceType"].as_str(), r.body["fhirVersion"].as_str()),
        (Some("CapabilityStatement"), Some(FHIR_VERSION))
    );
    let served: Vec<&str> = r.body["rest"][0]["resource"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        served,
        [
            "Patient",
            "Encounter",
            "Observation",
            "VisionPrescription",
            "ChargeItem",
            "Appointment",
            "Schedule",
            "Slot",
            "AllergyIntolerance",
            "Condition",
            "DocumentReference",
            "Binary"
        ]
    );
    answers.push(r.body);

    let patient = fhir(app, branch, &format!("/fhir/r4/Patient/{p}"), 200).await;
    assert_eq!(
        patient["identifier"][0],
        json!({ "use": "usual", "system": "urn:clinic-server:pin", "value": s.pin })
    );
    assert_eq!(patient["name"][0]["family"], "Cruz");
    assert_eq!(patient["name"][0]["given"], json!(["Ana", "Luz"]));
    assert_eq!(
        (patient["gender"].as_str(), patient["birthDate"].as_str()),
        (Some("female"), Some("1980-01-02"))
    );
    assert_eq!(
        (patient["active"].as_bool(), patient["deceasedBoolean"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(
        patient["telecom"],
        json!([{ "system": "phone", "value": "+63 912 345 6789" }, { "system": "email", "value": "ana@example.test" }])
    );
    assert_eq!(patient["address"][0]["city"], "Cebu");
    assert_eq!(
        code_in(&patient["maritalStatus"], "http://terminology.hl7.org/CodeSystem/v3-MaritalStatus"),
        "M"
    );
    answers.push(patient);
    let by_pin =
        fhir(app, branch, &format!("/fhir/r4/Patient?identifier=urn:clinic-server:pin|{}", s.pin), 200).await;
    assert_eq!((by_pin["total"].as_i64(), ids(&by_pin)), (Some(1), vec![p.to_string()]));
    answers.push(by_pin);

    let encounters = fhir(app, branch, &format!("/fhir/r4/Encounter?patient=Patient/{p}"), 200).await;
    assert_eq!(ids(&encounters), vec![clinic.visit.to_string()]);
    let encounter = with_id(&encounters, &clinic.visit.to_string());
    assert_eq!(
        (encounter["status"].as_str(), encounter["class"]["code"].as_str()),
        (Some("planned"), Some("AMB"))
    );
    assert_eq!(encounter["subject"]["reference"], format!("Patient/{p}"));
    assert_eq!(encounter["period"]["start"], "2026-01-05");
    let entry = &encounters["entry"][0];
    assert_eq!(entry["fullUrl"], format!("{}/fhir/r4/Encounter/{}", app.base, clinic.visit));
    answers.push(encounters);
    answers.push(fhir(app, branch, &format!("/fhir/r4/Encounter/{}", clinic.visit), 200).await);

    // Three readings, two distance acuities and one near (the other eye unassessed), two
    // refractions of two eyes each.
    let observations = fhir(app, branch, &format!("/fhir/r4/Observation?patient={p}&_count=100"), 200).await;
    let (t, a, n, m, f) = (s.tonometry, s.acuity, s.near, s.manifest, s.final_rx);
    let mut expected = vec![
        format!("iop-{t}-right-1"),
        format!("iop-{t}-right-2"),
        format!("iop-{t}-left-1"),
        format!("va-{a}-right"),
        format!("va-{a}-left"),
        format!("va-{n}-right"),
        format!("refraction-{m}-right"),
        format!("refraction-{m}-left"),
        format!("refraction-{f}-right"),
        format!("refraction-{f}-left"),
    ];
    let mut found = ids(&observations);
    assert_eq!(observations["total"], 10);
    found.sort();
    expected.sort();
    assert_eq!(found, expected);
    // The eye is the body site, a SNOMED CT structure of its side, and nothing more.
    for (id, system, code, site) in [
        (format!("iop-{t}-right-2"), "http://loinc.org", "79892-6", "1290043002"),
        (format!("iop-{t}-left-1"), "http://loinc.org", "79893-4", "1290041000"),
        (format!("va-{n}-right"), "http://loinc.org", "98499-7", "1290043002"),
        (format!("refraction-{m}-right"), "urn:clinic-server:observation", "refraction", "1290043002"),
        (format!("refraction-{m}-left"), "urn:clinic-server:observation", "refraction", "1290041000"),
    ] {
        let o = with_id(&observations, &id);
        assert_eq!(code_in(&o["code"], system), code, "{o}");
        assert_eq!(code_in(&o["bodySite"], "http://snomed.info/sct"), site, "{o}");
        assert_eq!(o["bodySite"].get("extension"), None, "{o}");
        assert_eq!(o["subject"]["reference"], format!("Patient/{p}"));
        assert_eq!(o["encounter"]["reference"], format!("Encounter/{}", clinic.visit));
        assert_eq!(o["category"][0]["coding"][0]["code"], "exam");
    }
    let iop = with_id(&observations, &format!("iop-{t}-right-2"));
    assert_eq!(
        iop["valueQuantity"],
        json!({ "value": 16.5, "unit": "mmHg", "system": "http://unitsofmeasure.org", "code": "mm[Hg]" })
    );
    assert_eq!(
        (iop["status"].as_str(), iop["effectiveDateTime"].as_str().map(|t| &t[..19])),
        (Some("final"), Some("2025-03-10T08:00:00"))
    );
    assert_eq!(iop["performer"][0]["display"], "Administrator", "{iop}");
    // Acuity through the patient's glasses has no eye-level LOINC code: the server's own.
    for (eye, display) in
        [("right", "Visual acuity, glasses, right eye"), ("left", "Visual acuity, glasses, left eye")]
    {
        let o = with_id(&observations, &format!("va-{a}-{eye}"));
        assert_eq!(
            o["code"]["coding"],
            json!([{ "system": "urn:clinic-server:observation", "code": "visual-acuity", "display": display }]),
            "{o}"
        );
        assert_eq!(code_in(&o["method"], "urn:clinic-server:va-correction"), "glasses", "{o}");
    }
    // A Snellen value is the ratio as written; its logMAR a component.
    let acuity = with_id(&observations, &format!("va-{a}-right"));
    assert_eq!(
        acuity["valueRatio"],
        json!({ "numerator": { "value": 6.0 }, "denominator": { "value": 12.0 } })
    );
    assert_eq!(acuity.get("valueQuantity"), None, "{acuity}");
    assert_eq!(acuity["status"], "preliminary");
    assert_eq!(acuity["component"][1]["valueString"], "6/12");
    assert_eq!(code_in(&acuity["component"][2]["code"], "urn:clinic-server:visual-acuity"), "logmar");
    assert_eq!(
        (
            acuity["component"][2]["valueQuantity"]["value"].as_f64(),
            acuity["component"][2]["valueQuantity"]["code"].as_str()
        ),
        (Some(0.3), Some("{logMAR}"))
    );
    assert_eq!(with_id(&observations, &format!("va-{n}-right"))["valueString"], "N8");
    // Sphere, cylinder and axis under LOINC's method-free code of each eye, and the server's own.
    let components = |id: String| -> Vec<(String, String, f64, String)> {
        with_id(&observations, &id)["component"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    code_in(&c["code"], "http://loinc.org"),
                    code_in(&c["code"], "urn:clinic-server:refraction"),
                    c["valueQuantity"]["value"].as_f64().unwrap(),
                    c["valueQuantity"]["code"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let component = |loinc: &str, own: &str, value: f64, unit: &str| {
        (loinc.to_owned(), own.to_owned(), value, unit.to_owned())
    };
    assert_eq!(
        components(format!("refraction-{m}-right")),
        [
            component("65890-6", "sphere", -2.25, "[diop]"),
            component("65892-2", "cylinder", -0.75, "[diop]"),
            component("65891-4", "axis", 90.0, "deg"),
        ]
    );
    assert_eq!(components(format!("refraction-{m}-left")), [component("65894-8", "sphere", -1.5, "[diop]")]);
    let refraction = with_id(&observations, &format!("refraction-{m}-right"));
    assert_eq!(code_in(&refraction["method"], "urn:clinic-server:refraction-kind"), "manifest");
    answers.push(observations);
    let one = fhir(app, branch, &format!("/fhir/r4/Observation/iop-{t}-left-1"), 200).await;
    assert_eq!(
        (one["id"].as_str(), one["valueQuantity"]["value"].as_f64()),
        (Some(format!("iop-{t}-left-1").as_str()), Some(14.0))
    );
    answers.push(one);

    let prescriptions = fhir(app, branch, &format!("/fhir/r4/VisionPrescription?patient={p}"), 200).await;
    assert_eq!(ids(&prescriptions), vec![f.to_string()], "only the final refraction is a prescription");
    let rx = with_id(&prescriptions, &f.to_string());
    assert_eq!(
        (rx["status"].as_str(), rx["dateWritten"].as_str().map(|t| &t[..19])),
        (Some("active"), Some("2025-03-10T08:20:00"))
    );
    assert_eq!(rx["prescriber"]["identifier"]["system"], "urn:clinic-server:user");
    let right = &rx["lensSpecification"][0];
    assert_eq!(
        (right["eye"].as_str(), right["sphere"].as_f64(), right["cylinder"].as_f64(), right["axis"].as_i64()),
        (Some("right"), Some(-2.25), Some(-0.75), Some(90))
    );
    assert_eq!(right["prism"], json!([{ "amount": 1.0, "base": "in" }]));
    assert_eq!(right["add"].as_f64(), Some(1.5));
    let left = &rx["lensSpecification"][1];
    assert_eq!((left["eye"].as_str(), left["sphere"].as_f64()), (Some("left"), Some(-1.5)));
    answers.push(prescriptions);
    answers.push(fhir(app, branch, &format!("/fhir/r4/VisionPrescription/{f}"), 200).await);
    let r =
        get_as(app, Some(&app.admin_token), &format!("/fhir/r4/VisionPrescription/{m}"), Some(branch)).await;
    assert_outcome(&r, 404, "not-found", "not_found");
    answers.push(r.body);

    let charges = fhir(app, branch, &format!("/fhir/r4/ChargeItem?patient={p}"), 200).await;
    assert_eq!(ids(&charges), vec![s.charge.to_string()], "only the posted charge is a charge item");
    let charge = with_id(&charges, &s.charge.to_string());
    assert_eq!(
        (charge["status"].as_str(), charge["code"]["text"].as_str()),
        (Some("billed"), Some("Consultation"))
    );
    assert_eq!(charge["priceOverride"]["value"].to_string(), "150.00");
    assert_eq!(charge["priceOverride"]["currency"], "PHP", "the default CURRENCY");
    assert_eq!(charge["context"]["reference"], format!("Encounter/{}", clinic.visit));
    assert_eq!(charge["identifier"][0]["system"], "urn:clinic-server:billing-number");
    answers.push(charges);
    let r =
        get_as(app, Some(&app.admin_token), &format!("/fhir/r4/ChargeItem/{}", s.open_charge), Some(branch))
            .await;
    assert_outcome(&r, 404, "not-found", "not_found");

    let everything = fhir(app, branch, &format!("/fhir/r4/Patient/{p}/$everything?_count=100"), 200).await;
    let kinds: Vec<String> =
        resources(&everything).iter().map(|r| r["resourceType"].as_str().unwrap().to_owned()).collect();
    let mut expected = vec!["Patient", "Encounter"];
    expected.extend(["Observation"; 10]);
    expected.extend(["VisionPrescription", "ChargeItem"]);
    assert_eq!(
        (everything["total"].as_i64(), kinds),
        (Some(14), expected.iter().map(|k| k.to_string()).collect())
    );
    answers.push(everything);

    for (path, status, issue, code) in [
        ("/fhir/r4/Patient/999999".to_owned(), 404, "not-found", "not_found"),
        ("/fhir/r4/Observation/iop-1-middle-1".to_owned(), 404, "not-found", "not_found"),
        ("/fhir/r4/Patient/999999/$everything".to_owned(), 404, "not-found", "not_found"),
        (format!("/fhir/r4/Encounter?patient={p}&colour=red"), 400, "invalid", "invalid_search"),
    ] {
        let r = get_as(app, Some(&app.admin_token), &path, Some(branch)).await;
        assert_outcome(&r, status, issue, code);
        answers.push(r.body);
    }
    validate_with_fhir_resources(&answers);
}

#[tokio::test]
async fn the_api_document_describes_every_fhir_route_in_fhir_json() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_status(&r, 200);
    let paths = r.body["paths"].as_object().unwrap();
    let mut described: Vec<String> = paths.keys().filter(|p| p.starts_with("/fhir/r4")).cloned().collect();
    described.sort();
    let mut expected = vec!["/fhir/r4/metadata".to_owned(), "/fhir/r4/Patient/{id}/$everything".to_owned()];
    for kind in [
        "Patient",
        "Encounter",
        "Observation",
        "VisionPrescription",
        "ChargeItem",
        "Appointment",
        "Schedule",
        "Slot",
        "AllergyIntolerance",
        "Condition",
        "DocumentReference",
    ] {
        expected.extend([format!("/fhir/r4/{kind}"), format!("/fhir/r4/{kind}/{{id}}")]);
    }
    // A Binary is only read.
    expected.push("/fhir/r4/Binary/{id}".to_owned());
    expected.sort();
    assert_eq!(described, expected);
    for path in &described {
        let operation = &paths[path.as_str()]["get"];
        for (status, response) in operation["responses"].as_object().unwrap() {
            // A Binary's range is of its bytes only.
            if path == "/fhir/r4/Binary/{id}" && status == "206" {
                continue;
            }
            let media = response["content"].as_object().unwrap();
            assert!(
                media.contains_key(FHIR_JSON) && media.contains_key("application/json"),
                "{path} {status}: {response}"
            );
        }
        let has = |status: &str| operation["responses"].get(status).is_some();
        assert!(has("200") && has("406") && has("503"), "{path}");
        if path != "/fhir/r4/metadata" {
            assert!(has("400") && has("401") && has("403") && has("429"), "{path}");
            assert!(operation["description"].as_str().unwrap().starts_with("Needs `"), "{path}");
        }
    }
}

#[tokio::test]
async fn a_merged_patient_is_inactive_and_linked_to_the_patient_that_replaced_it() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let survivor = id_of(&app.create_patient(main, "Ana", "Merged").await);
    let duplicate = id_of(&app.create_patient(main, "Ana", "Merged").await);
    let r = app
        .post(
            &format!("/api/v1/patients/{survivor}/merge"),
            Some(main),
            json!({ "duplicate_id": duplicate, "reason": "registered twice" }),
        )
        .await;
    assert_status(&r, 201);
    let merge_id = id_of(&r.body["data"]);

    let gone = fhir(&app, main, &format!("/fhir/r4/Patient/{duplicate}"), 200).await;
    assert_eq!(gone["active"], false, "{gone}");
    assert_eq!(
        gone["link"],
        json!([{ "other": { "reference": format!("Patient/{survivor}") }, "type": "replaced-by" }])
    );
    let kept = fhir(&app, main, &format!("/fhir/r4/Patient/{survivor}"), 200).await;
    assert_eq!(kept["active"], true, "{kept}");
    assert_eq!(
        kept["link"],
        json!([{ "other": { "reference": format!("Patient/{duplicate}") }, "type": "replaces" }])
    );
    // A search finds both, each with its link.
    let both = fhir(&app, main, "/fhir/r4/Patient?_count=10", 200).await;
    assert_eq!(both["total"], 2, "{both}");
    assert_eq!(with_id(&both, &duplicate.to_string())["link"][0]["type"], "replaced-by");
    assert_eq!(with_id(&both, &survivor.to_string())["link"][0]["type"], "replaces");
    validate_with_fhir_resources(&[gone, kept, both]);

    // Undone, neither carries a link.
    let r = app
        .post(&format!("/api/v1/patients/{survivor}/unmerge"), Some(main), json!({ "merge_id": merge_id }))
        .await;
    assert_status(&r, 200);
    let back = fhir(&app, main, &format!("/fhir/r4/Patient/{duplicate}"), 200).await;
    assert_eq!((back["active"].as_bool(), back.get("link")), (Some(true), None), "{back}");
    let kept = fhir(&app, main, &format!("/fhir/r4/Patient/{survivor}"), 200).await;
    assert_eq!(kept.get("link"), None, "{kept}");
}

#[tokio::test]
async fn an_acuity_under_a_loinc_code_is_the_ratio_the_code_means() {
    let clinic = Clinic::open().await;
    let (app, branch, p) = (&clinic.app, clinic.branch, clinic.patient);
    let unaided = exam(
        &clinic,
        "visual-acuities",
        json!({
            "examined_at": "2025-03-11T08:00:00Z", "distance": "distance", "correction": "unaided",
            "notation": "snellen_ft", "right_eye": { "value": "20/40" }, "left_eye": { "value": "CF" },
        }),
    )
    .await;
    let best = exam(
        &clinic,
        "visual-acuities",
        json!({
            "examined_at": "2025-03-11T08:05:00Z", "distance": "distance", "correction": "formal_refraction",
            "notation": "logmar", "right_eye": { "value": "0.2" }, "left_eye": { "value": "0.0" },
        }),
    )
    .await;
    let observations = fhir(app, branch, &format!("/fhir/r4/Observation?patient={p}&_count=100"), 200).await;
    let ratio = |numerator: f64, denominator: f64| json!({ "numerator": { "value": numerator }, "denominator": { "value": denominator } });
    for (id, loinc, value) in [
        (format!("va-{unaided}-right"), "98499-7", json!({ "valueRatio": ratio(20.0, 40.0) })),
        (format!("va-{unaided}-left"), "98498-9", json!({ "valueString": "CF" })),
        (format!("va-{best}-right"), "65893-0", json!({ "valueRatio": ratio(0.63, 1.0) })),
        (format!("va-{best}-left"), "65897-1", json!({ "valueRatio": ratio(1.0, 1.0) })),
    ] {
        let o = with_id(&observations, &id);
        assert_eq!(code_in(&o["code"], "http://loinc.org"), loinc, "{o}");
        let (key, expected) = value.as_object().unwrap().iter().next().unwrap();
        assert_eq!(&o[key], expected, "{o}");
        assert_eq!(o.get("valueQuantity"), None, "{o}");
    }
    // Counting fingers keeps its logMAR by convention, as a component.
    let cf = with_id(&observations, &format!("va-{unaided}-left"));
    assert_eq!(cf["component"][2]["valueQuantity"]["value"].as_f64(), Some(1.9), "{cf}");
    validate_with_fhir_resources(&[observations]);
}

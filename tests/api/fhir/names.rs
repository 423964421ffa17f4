//! A patient's names as FHIR matches strings: `name`, `family` and `given` start the part,
//! case and accents aside; `:contains` anywhere in it; `:exact` the whole part, case and
//! accents included; comma lists and repeats; merged patients found too; a modifier not
//! known is a 400; what the CapabilityStatement and the API document say of them, and of
//! `_sort` and `_summary`.

use super::*;

/// A patient with these names (`middle` and `suffix` when given) born on `born`.
async fn named(clinic: &Clinic, first: &str, middle: &str, last: &str, suffix: &str, born: &str) -> i64 {
    let mut body = json!({ "first_name": first, "last_name": last, "birth_date": born, "sex": "female" });
    for (column, value) in [("middle_name", middle), ("suffix", suffix)] {
        if !value.is_empty() {
            body[column] = json!(value);
        }
    }
    id_of(&clinic.app.created("/api/v1/patients", Some(clinic.branch), body).await)
}

#[tokio::test]
async fn names_match_the_start_of_a_part_without_case_or_accents_and_modifiers_narrow_or_widen() {
    let clinic = Clinic::open().await;
    let (app, branch, cruz) = (&clinic.app, clinic.branch, clinic.patient);
    let jose = named(&clinic, "José", "", "Peña", "", "1970-05-01").await;
    let santos = named(&clinic, "Jose", "", "Santos", "", "1971-05-01").await;
    let zapena = named(&clinic, "Ana", "", "Zapena", "", "1972-05-01").await;
    let maria = named(&clinic, "María", "Luz", "Peñaflor", "", "1973-05-01").await;
    let zoe = named(&clinic, "Zoë", "", "Müller", "Jr", "1974-05-01").await;
    let ben = named(&clinic, "Ben", "", "de la Cruz", "", "1975-05-01").await;
    let penelope = named(&clinic, "Penelope", "", "Reyes", "", "1976-05-01").await;
    let mut answers = Vec::new();
    let mut found = async |query: &str| {
        let bundle = fhir(app, branch, &format!("/fhir/r4/Patient?{query}&_count=100"), 200).await;
        let mut found: Vec<i64> = ids(&bundle).iter().map(|id| id.parse().unwrap()).collect();
        found.sort();
        assert_eq!(bundle["total"], found.len(), "{query}: {bundle}");
        answers.push(bundle);
        found
    };

    // The start of the part, case and accents aside, in the value as in the name.
    assert_eq!(found("family=pena").await, [jose, maria], "not Zapena, not Penelope's given name");
    assert_eq!(found("family=PE%C3%91A").await, [jose, maria]);
    assert_eq!(found("family=pe%C3%B1af").await, [maria]);
    assert_eq!(found("family=cruz").await, [cruz], "de la Cruz starts with de");
    assert_eq!(found("family=de%20la").await, [ben]);
    assert_eq!(found("given=pen").await, [penelope]);
    assert_eq!(found("given=JOSE").await, [jose, santos]);
    assert_eq!(found("given=luz").await, [maria], "the middle name is given too");
    assert_eq!(found("family=luz").await, Vec::<i64>::new());
    assert_eq!(found("given=zoe").await, [zoe]);
    // `name` is any part: first, middle, last, suffix.
    assert_eq!(found("name=pen").await, [jose, maria, penelope]);
    assert_eq!(found("name=luz").await, [maria]);
    assert_eq!(found("name=m%C3%BCl").await, [zoe]);
    assert_eq!(found("name=jr").await, [zoe], "the suffix");
    assert_eq!(found("name=ana").await, [cruz, zapena]);
    assert_eq!(found("name=ena").await, Vec::<i64>::new(), "inside a part is no start");

    // :contains, anywhere in the part, case and accents aside.
    assert_eq!(found("family:contains=PENA").await, [jose, zapena, maria]);
    assert_eq!(found("family:contains=cruz").await, [cruz, ben]);
    assert_eq!(found("given:contains=ELO").await, [penelope]);
    assert_eq!(found("name:contains=ena").await, [jose, zapena, maria]);
    assert_eq!(found("name:contains=elo").await, [penelope]);

    // :exact, the whole part, case and accents included.
    assert_eq!(found("family:exact=Pe%C3%B1a").await, [jose]);
    assert_eq!(found("family:exact=pe%C3%B1a").await, Vec::<i64>::new(), "case counts");
    assert_eq!(found("family:exact=Pena").await, Vec::<i64>::new(), "accents count");
    assert_eq!(found("family:exact=Pe%C3%B1").await, Vec::<i64>::new(), "the whole part");
    assert_eq!(found("given:exact=Jos%C3%A9").await, [jose]);
    assert_eq!(found("given:exact=Jose").await, [santos]);
    assert_eq!(found("given:exact=Luz").await, [maria]);
    assert_eq!(found("name:exact=Jr").await, [zoe]);
    assert_eq!(found("name:exact=de%20la%20Cruz").await, [ben]);

    // A comma list matches any of its values; a repeat must hold too; other parameters as well.
    assert_eq!(found("family=pena,santos").await, [jose, santos, maria]);
    assert_eq!(found("family:exact=Reyes,M%C3%BCller").await, [zoe, penelope]);
    assert_eq!(found("name=jose&family=pena").await, [jose]);
    assert_eq!(found("name=pen&given=pen").await, [penelope]);
    assert_eq!(found("family=pena&birthdate=ge1972").await, [maria]);
    // LIKE's wildcards are letters like any other.
    assert_eq!(found("name=%25").await, Vec::<i64>::new());
    assert_eq!(found("name:contains=_").await, Vec::<i64>::new());
    assert_eq!(found("family=").await.len(), 8, "a blank value is left out");

    // A patient merged into another is found by its names too, as by any search.
    let r = app
        .post(
            &format!("/api/v1/patients/{jose}/merge"),
            Some(branch),
            json!({ "duplicate_id": santos, "reason": "registered twice" }),
        )
        .await;
    assert_status(&r, 201);
    assert_eq!(found("given=jose").await, [jose, santos]);
    validate_with_fhir_resources(&answers);
}

#[tokio::test]
async fn a_modifier_not_known_or_on_a_parameter_that_takes_none_is_a_400() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let mut outcomes = Vec::new();
    for (kind, query, said) in [
        (
            "Patient",
            "family:missing=true",
            "The modifier :missing is not supported on family; it takes :exact and :contains.",
        ),
        (
            "Patient",
            "name:text=ana",
            "The modifier :text is not supported on name; it takes :exact and :contains.",
        ),
        (
            "Patient",
            "given:EXACT=Ana",
            "The modifier :EXACT is not supported on given; it takes :exact and :contains.",
        ),
        (
            "Patient",
            "given:exact:contains=Ana",
            "The modifier :exact:contains is not supported on given; it takes :exact and :contains.",
        ),
        ("Patient", "name:=ana", "The modifier : is not supported on name; it takes :exact and :contains."),
        ("Patient", "birthdate:missing=true", "The modifier :missing is not supported on birthdate."),
        ("Patient", "identifier:text=P-1", "The modifier :text is not supported on identifier."),
        ("Encounter", "patient:Patient=1", "The modifier :Patient is not supported on patient."),
        (
            "Patient",
            "phonetic=ana",
            "This search does not take the parameter phonetic; it takes _id, _count, _offset, \
          _format, _sort, _summary, _totalMethod, identifier, birthdate, name, family, given.",
        ),
    ] {
        let r = get_as(app, Some(&app.admin_token), &format!("/fhir/r4/{kind}?{query}"), Some(branch)).await;
        assert_outcome(&r, 400, "invalid", "invalid_search");
        assert_eq!(r.body["issue"][0]["diagnostics"], said, "{query}");
        outcomes.push(r.body);
    }
    for (kind, query) in [("Encounter", "name=ana"), ("Appointment", "family=Cruz")] {
        let r = get_as(app, Some(&app.admin_token), &format!("/fhir/r4/{kind}?{query}"), Some(branch)).await;
        assert_outcome(&r, 400, "invalid", "invalid_search");
    }
    let long = "a".repeat(201);
    let r = get_as(app, Some(&app.admin_token), &format!("/fhir/r4/Patient?name={long}"), Some(branch)).await;
    assert_outcome(&r, 400, "invalid", "invalid_search");
    validate_with_fhir_resources(&outcomes);
}

#[tokio::test]
async fn the_capability_statement_and_the_api_document_describe_names_sorts_and_counts() {
    let app = TestApp::spawn().await;
    let r = get_as(&app, None, "/fhir/r4/metadata", None).await;
    assert_fhir(&r, 200);
    let types = r.body["rest"][0]["resource"].as_array().unwrap();
    let of = |kind: &str| types.iter().find(|t| t["type"] == kind).unwrap_or_else(|| panic!("no {kind}"));
    let patient = of("Patient");
    let strings: Vec<&str> = patient["searchParam"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "string")
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(strings, ["name", "family", "given"]);
    assert_eq!(
        patient["documentation"],
        "_sort by birthdate, family, _lastUpdated, comma-separated, each after - to sort descending"
    );
    assert_eq!(
        of("Encounter")["documentation"],
        "_sort by date, _lastUpdated, comma-separated, each after - to sort descending"
    );
    assert!(of("Encounter")["searchParam"].as_array().unwrap().iter().all(|p| p["type"] != "string"));
    let rest = r.body["rest"][0]["documentation"].as_str().unwrap();
    assert!(rest.contains("_count=0 or _summary=count answers the total alone"), "{rest}");
    validate_with_fhir_resources(std::slice::from_ref(&r.body));

    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_status(&r, 200);
    let named = |path: &str| -> Vec<String> {
        r.body["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let patient = named("/fhir/r4/Patient");
    for parameter in
        ["name", "name:exact", "name:contains", "family", "family:exact", "given:contains", "_sort"]
    {
        assert!(patient.contains(&parameter.to_owned()), "{parameter}: {patient:?}");
    }
    assert!(!named("/fhir/r4/Encounter").contains(&"family".to_owned()));
    assert!(!named("/fhir/r4/Slot").iter().any(|p| p == "name"));
    for path in ["/fhir/r4/Condition", "/fhir/r4/Patient/{id}/$everything"] {
        assert!(named(path).contains(&"_summary".to_owned()), "{path}");
    }
    let sort = r.body["paths"]["/fhir/r4/Patient"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "_sort")
        .unwrap()["schema"]["pattern"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        sort,
        "^ *(-?(birthdate|family|_lastUpdated))? *(, *(-?(birthdate|family|_lastUpdated))? *)*$"
    );
}

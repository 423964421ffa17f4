//! The OpenAPI description of the examinations.

use super::*;

#[tokio::test]
async fn openapi_describes_each_examination_its_structures_and_sign_route() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_status(&r, 200);
    let doc = &r.body;
    let schemas = &doc["components"]["schemas"];
    let labels = [
        ("visual-acuities", "VisualAcuity", "VisualAcuityEye"),
        ("refractions", "Refraction", "RefractionEye"),
        ("tonometries", "Tonometry", "TonometryEye"),
        ("slit-lamps", "SlitLampExamination", "SlitLampEye"),
        ("funduscopies", "Funduscopy", "FunduscopyEye"),
        ("gonioscopies", "Gonioscopy", "GonioscopyEye"),
        ("corneal-topographies", "CornealTopography", "CornealTopographyEye"),
        ("amsler-grids", "AmslerGrid", "AmslerGridEye"),
        ("eoms", "ExtraocularMuscleExamination", "EomEye"),
        ("exophthalmometries", "Exophthalmometry", "ExophthalmometryEye"),
        ("lacrimal-irrigations", "LacrimalIrrigation", "LacrimalIrrigationEye"),
        ("radiologies", "Radiology", "RadiologyStudy"),
        ("gross-examinations", "GrossExamination", "GrossExaminationEye"),
        ("indirect-ophthalmoscopies", "IndirectOphthalmoscopy", "IndirectOphthalmoscopyEye"),
    ];
    for (exam, label, structure) in labels {
        for name in [label.to_owned(), format!("{label}Input"), structure.to_owned()] {
            assert!(schemas[&name].is_object(), "{exam}: schema {name} missing");
        }
        for field in [
            "patient_visit_id",
            "patient_id",
            "examined_at",
            "examiner_id",
            "status",
            "signed_by",
            "right_eye",
        ] {
            assert!(!schemas[label]["properties"][field].is_null(), "{label}.{field}");
        }
        let sign = &doc["paths"][format!("/api/v1/{exam}/{{id}}/sign")]["post"];
        assert!(sign.is_object(), "{exam}: sign route documented");
        assert!(!sign["responses"]["409"].is_null(), "{exam}: sign answers 409: {sign}");
    }
    for name in ["TonometryReading", "SlitLampStructure", "Gaze", "PeripheryFinding"] {
        assert!(schemas[name].is_object(), "schema {name} missing");
    }
    // Sent as a number on its range and step, or as a string of digits.
    let bounds = |schema: &str, field: &str| {
        let p = &schemas[schema]["properties"][field]["anyOf"][0];
        (p["minimum"].as_f64(), p["maximum"].as_f64(), p["multipleOf"].as_f64())
    };
    assert_eq!(bounds("RefractionEye", "sphere"), (Some(-30.0), Some(30.0), Some(0.25)));
    assert_eq!(bounds("RefractionEye", "prism_pd"), (Some(0.5), Some(20.0), Some(0.5)));
    assert_eq!(bounds("TonometryReading", "iop_mmhg"), (Some(0.0), Some(80.0), Some(0.1)));
    assert_eq!(bounds("FunduscopyEye", "cd_ratio"), (Some(0.0), Some(1.0), Some(0.05)));
    assert_eq!(bounds("CornealTopographyEye", "kmax"), (Some(30.0), Some(70.0), Some(0.01)));
    assert_eq!(bounds("Gaze", "primary"), (Some(-4.0), Some(4.0), Some(0.5)));
    assert_eq!(bounds("VisualAcuityEye", "logmar"), (Some(-0.3), Some(3.0), Some(0.01)));
    let axis = &schemas["RefractionEye"]["properties"]["axis"];
    assert_eq!((axis["minimum"].as_i64(), axis["maximum"].as_i64()), (Some(1), Some(180)));
    let required: BTreeSet<&str> = schemas["RefractionEye"]["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, BTreeSet::from(["sphere"]));
    assert!(!doc["paths"]["/api/v1/patients/{id}/measurements"]["get"].is_null());
    assert!(!doc["paths"]["/api/v1/patient-visits/{id}/summary"]["get"].is_null());
}

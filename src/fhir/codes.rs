//! The code systems and codes the FHIR answers use, in one place (README.md lists them).

use serde_json::{Value, json};

pub const LOINC: &str = "http://loinc.org";
pub const SNOMED: &str = "http://snomed.info/sct";
pub const UCUM: &str = "http://unitsofmeasure.org";
pub const OBSERVATION_CATEGORY: &str = "http://terminology.hl7.org/CodeSystem/observation-category";
pub const ACT_CODE: &str = "http://terminology.hl7.org/CodeSystem/v3-ActCode";
pub const MARITAL_STATUS: &str = "http://terminology.hl7.org/CodeSystem/v3-MaritalStatus";
pub const LENS_PRODUCT: &str = "http://terminology.hl7.org/CodeSystem/ex-visionprescriptionproduct";

/// The server's own identifiers and codes: values of its enumerations, named by the
/// enumeration (`urn:clinic-server:va-correction` holds `glasses`, ...).
pub const PIN: &str = "urn:clinic-server:pin";
pub const USER: &str = "urn:clinic-server:user";
pub const BILLING_NUMBER: &str = "urn:clinic-server:billing-number";
pub const ERROR_CODE: &str = "urn:clinic-server:error";
/// The extension that repeats an eye's laterality as a SNOMED CT qualifier on a body site.
pub const LATERALITY: &str = "urn:clinic-server:fhir:laterality";

pub fn own(enumeration: &str) -> String {
    format!("urn:clinic-server:{enumeration}")
}

/// One coding as a CodeableConcept.
pub fn concept(system: &str, code: &str, display: &str) -> Value {
    json!({ "coding": [{ "system": system, "code": code, "display": display }], "text": display })
}

/// A value of one of the server's enumerations.
pub fn own_concept(enumeration: &str, code: &str) -> Value {
    let text = code.replace('_', " ");
    json!({ "coding": [{ "system": own(enumeration), "code": code }], "text": text })
}

/// The eye as a SNOMED CT body structure, with its laterality.
pub fn eye_site(eye: &str) -> Value {
    let (site, site_name, side, side_name) = if eye == "right" {
        ("1290043002", "Entire right eye proper", "24028007", "Right")
    } else {
        ("1290041000", "Entire left eye proper", "7771000", "Left")
    };
    json!({
        "extension": [{ "url": LATERALITY, "valueCodeableConcept": concept(SNOMED, side, side_name) }],
        "coding": [{ "system": SNOMED, "code": site, "display": site_name }],
        "text": format!("{side_name} eye"),
    })
}

/// A measured value in a UCUM unit.
pub fn quantity(value: &Value, unit: &str, code: &str) -> Value {
    json!({ "value": value, "unit": unit, "system": UCUM, "code": code })
}

/// Intraocular pressure of an eye (LOINC).
pub fn intraocular_pressure(eye: &str) -> Value {
    if eye == "right" {
        concept(LOINC, "79892-6", "Right eye Intraocular pressure")
    } else {
        concept(LOINC, "79893-4", "Left eye Intraocular pressure")
    }
}

/// Visual acuity of an eye measured with `correction`: LOINC's uncorrected (unaided) and best
/// corrected (formal refraction) acuity of each eye. LOINC has no eye-level code for an acuity
/// through the patient's own glasses or contact lenses, a pinhole or an autorefraction, so
/// those are the server's own `visual-acuity` code, the correction in the observation's method.
pub fn visual_acuity(eye: &str, correction: &str) -> Value {
    let right = eye == "right";
    match correction {
        "unaided" if right => concept(LOINC, "98499-7", "Visual acuity uncorrected Right eye"),
        "unaided" => concept(LOINC, "98498-9", "Visual acuity uncorrected Left eye"),
        "formal_refraction" if right => concept(LOINC, "65893-0", "Visual acuity best corrected Right eye"),
        "formal_refraction" => concept(LOINC, "65897-1", "Visual acuity best corrected Left eye"),
        other => {
            let display = format!(
                "Visual acuity, {}, {} eye",
                other.replace('_', " "),
                if right { "right" } else { "left" }
            );
            concept(&own("observation"), "visual-acuity", &display)
        }
    }
}

/// A refraction of one eye: LOINC's subjective refraction panel for the subjective kinds
/// (manifest, cycloplegic, the final prescription), its values as components. An
/// autorefraction, a retinoscopy or a reading of the patient's own glasses is no subjective
/// refraction: the server's own `refraction` code, the kind in the observation's method.
pub fn refraction(kind: &str) -> Value {
    match kind {
        "manifest" | "cycloplegic" | "final_rx" => concept(LOINC, "79895-9", "Subjective refraction panel"),
        other => {
            concept(&own("observation"), "refraction", &format!("Refraction, {}", other.replace('_', " ")))
        }
    }
}

/// The SNOMED CT observable a visual acuity's test distance is given as.
pub fn test_distance() -> Value {
    concept(SNOMED, "252124009", "Test distance")
}

/// The category of every observation: a finding of an examination.
pub fn exam_category() -> Value {
    json!([concept(OBSERVATION_CATEGORY, "exam", "Exam")])
}

/// FHIR's administrative gender of a patient's `sex` (the same four values).
pub fn gender(sex: &str) -> &'static str {
    match sex {
        "male" => "male",
        "female" => "female",
        "other" => "other",
        _ => "unknown",
    }
}

/// HL7 v3 marital status of a `civil_status`.
pub fn marital_status(civil_status: &str) -> Option<Value> {
    let (code, display) = match civil_status {
        "single" => ("S", "Never Married"),
        "married" => ("M", "Married"),
        "widowed" => ("W", "Widowed"),
        "separated" => ("L", "Legally Separated"),
        "divorced" => ("D", "Divorced"),
        _ => return None,
    };
    Some(concept(MARITAL_STATUS, code, display))
}

/// An encounter's status of a visit's.
pub fn encounter_status(visit_status: &str) -> &'static str {
    match visit_status {
        "scheduled" => "planned",
        "checked_in" => "arrived",
        "in_progress" => "in-progress",
        "completed" => "finished",
        "cancelled" => "cancelled",
        _ => "unknown",
    }
}

/// An observation's status of an examination's: a draft is preliminary, a signed one final,
/// amended once changed after signing.
pub fn observation_status(status: &str, amended: bool) -> &'static str {
    match (status, amended) {
        ("signed", true) => "amended",
        ("signed", false) => "final",
        _ => "preliminary",
    }
}

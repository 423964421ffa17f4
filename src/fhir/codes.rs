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

/// The eye as a SNOMED CT body structure (the concept holds its laterality).
pub fn eye_site(eye: &str) -> Value {
    let (site, site_name, text) = if eye == "right" {
        ("1290043002", "Entire right eye proper", "Right eye")
    } else {
        ("1290041000", "Entire left eye proper", "Left eye")
    };
    json!({ "coding": [{ "system": SNOMED, "code": site, "display": site_name }], "text": text })
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
/// corrected (formal refraction) acuity of each eye, whose property is a length ratio (the
/// value is a Snellen-style ratio, see [`acuity_ratio`]). LOINC has no eye-level code for an
/// acuity through the patient's own glasses or contact lenses, a pinhole or an autorefraction,
/// so those are the server's own `visual-acuity` code, the correction in the observation's method.
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

/// A refraction of one eye: the server's own `refraction` code, the kind (manifest,
/// cycloplegic, final prescription, autorefraction, ...) in the observation's method; its
/// sphere, cylinder and axis are components under LOINC's per-eye codes ([`refraction_value`]).
pub fn refraction(kind: &str, eye: &str) -> Value {
    let display = format!("Refraction, {}, {eye} eye", kind.replace('_', " "));
    concept(&own("observation"), "refraction", &display)
}

/// LOINC's method-free code of an eye's sphere, cylinder or axis (the `refraction` field), if
/// it has one: those of a refraction of any kind.
pub fn refraction_value(field: &str, eye: &str) -> Option<(&'static str, &'static str)> {
    let right = eye == "right";
    Some(match field {
        "sphere" if right => ("65890-6", "Spherical power [Inverse Length] Right eye"),
        "sphere" => ("65894-8", "Spherical power [Inverse Length] Left eye"),
        "cylinder" if right => ("65892-2", "Cylindrical power [Inverse Length] Right eye"),
        "cylinder" => ("65896-3", "Cylindrical power [Inverse Length] Left eye"),
        "axis" if right => ("65891-4", "Cylinder axis Right eye"),
        "axis" => ("65895-5", "Cylinder axis Left eye"),
        _ => return None,
    })
}

/// The value of a visual acuity as the ratio LOINC's acuity codes mean: a Snellen fraction as
/// written (`6/12`, `20/40`), a decimal acuity over 1, and a logMAR or ETDRS score as its
/// decimal equivalent (10^-logMAR, two significant digits) over 1. `None` for a value that is
/// no ratio (N-point, counting fingers, hand motion, light perception).
pub fn acuity_ratio(notation: &str, value: &str, logmar: Option<f64>) -> Option<Value> {
    let ratio = |numerator: f64, denominator: f64| json!({ "numerator": { "value": numerator }, "denominator": { "value": denominator } });
    let positive = |text: &str| text.trim().parse::<f64>().ok().filter(|n| n.is_finite() && *n > 0.0);
    match notation {
        "snellen_m" | "snellen_ft" => {
            let (numerator, denominator) = value.split_once('/')?;
            Some(ratio(positive(numerator)?, positive(denominator)?))
        }
        "decimal" => Some(ratio(positive(value)?, 1.0)),
        // A low-vision level (`CF`, ...) has a logMAR by convention, no ratio.
        "logmar" | "etdrs_letters" if value.trim().parse::<f64>().is_ok() => {
            let decimal = 10f64.powf(-logmar?);
            let scale = 10f64.powi(1 - decimal.log10().floor() as i32);
            Some(ratio((decimal * scale).round() / scale, 1.0))
        }
        _ => None,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::acuity_ratio;

    #[test]
    fn an_acuity_is_the_ratio_of_its_notation() {
        let ratio =
            |n: f64, d: f64| Some(json!({ "numerator": { "value": n }, "denominator": { "value": d } }));
        assert_eq!(acuity_ratio("snellen_m", "6/12", Some(0.3)), ratio(6.0, 12.0));
        assert_eq!(acuity_ratio("snellen_ft", "20/40", Some(0.3)), ratio(20.0, 40.0));
        assert_eq!(acuity_ratio("decimal", "0.5", Some(0.3)), ratio(0.5, 1.0));
        assert_eq!(acuity_ratio("logmar", "0.3", Some(0.3)), ratio(0.5, 1.0));
        assert_eq!(acuity_ratio("logmar", "-0.1", Some(-0.1)), ratio(1.3, 1.0));
        assert_eq!(acuity_ratio("etdrs_letters", "35", Some(1.0)), ratio(0.1, 1.0));
        assert_eq!(acuity_ratio("logmar", "3.0", Some(3.0)), ratio(0.001, 1.0));
        for (notation, value, logmar) in
            [("n_point", "N8", None), ("snellen_m", "CF", Some(1.9)), ("logmar", "HM", Some(2.3))]
        {
            assert_eq!(acuity_ratio(notation, value, logmar), None, "{notation} {value}");
        }
    }
}

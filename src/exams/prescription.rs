//! A final refraction printed as a spectacle prescription; other refractions (auto,
//! retinoscopy, manifest, ...) are working measurements and have no printed form.

use salvo::async_trait;
use serde_json::Value;

use crate::http::error::ApiResult;
use crate::pdf::{Block, Sheet, SignHere};
use crate::resource::printable::{Printable, Printing, text};

pub struct Prescription;

pub static PRESCRIPTION: Prescription = Prescription;

/// A power in dioptres as prescriptions write it: signed, two decimals.
fn power(value: &Value) -> String {
    match value.as_number().map(|n| n.to_string()) {
        None => String::new(),
        Some(n) if n.starts_with('-') => n,
        Some(n) if n.trim_start_matches(['0', '.']).is_empty() => "0.00".into(),
        Some(n) => format!("+{n}"),
    }
}

/// One eye's row (`side` the eye's field): sphere, cylinder, axis, near addition, prism and
/// its base, acuity.
fn eye_row(printing: &Printing<'_>, name: &str, record: &Value, side: &str) -> Vec<String> {
    let eye = &record[side];
    if eye.is_null() {
        return vec![name.to_owned(), "not prescribed".into()];
    }
    if eye["unable_to_assess"] == Value::Bool(true) {
        return vec![name.to_owned(), "not assessed".into()];
    }
    let axis = eye["axis"].as_i64().map(|a| format!("{a}°")).unwrap_or_default();
    let prism = eye["prism_pd"].as_number().map(|p| format!("{p} Δ")).unwrap_or_default();
    vec![
        name.to_owned(),
        power(&eye["sphere"]),
        power(&eye["cylinder"]),
        axis,
        power(&eye["add"]),
        prism,
        printing.value(record, &format!("{side}.prism_base")),
        printing.value(record, &format!("{side}.va")),
    ]
}

#[async_trait]
impl Printable for Prescription {
    fn describes(&self) -> &'static str {
        "A final refraction (kind final_rx) as a spectacle prescription"
    }

    fn refuses(&self, record: &Value) -> Option<&'static str> {
        (record["kind"] != "final_rx")
            .then_some("Only a final refraction (kind final_rx) prints, as a spectacle prescription.")
    }

    fn file_name(&self, record: &Value) -> String {
        format!("prescription-{}", text(record, "id"))
    }

    async fn sheet(&self, printing: &mut Printing<'_>, record: &Value) -> ApiResult<Sheet> {
        let patient_id = record["patient_id"].as_i64().unwrap_or_default();
        let mut patient = printing.patient_fields(patient_id).await?;
        patient.push(("Allergies".into(), printing.allergies(patient_id).await?));
        let examiner = match record["examiner_id"].as_i64() {
            Some(id) => printing.user_name(id).await?,
            None => String::new(),
        };
        // The examiner prescribes, and signs the printed copy; the clinic stamps it.
        let prescriber = SignHere { name: examiner.clone(), details: vec!["Examiner".into()], stamp: true };
        let examined = printing.local_time(&text(record, "examined_at")).await?;
        let columns = ["Eye", "Sphere", "Cylinder", "Axis", "Add", "Prism", "Base", "VA"];
        let shares = [1.6, 1.0, 1.0, 0.8, 0.9, 0.9, 0.8, 1.0];
        Ok(Sheet {
            title: "Spectacle prescription".into(),
            reference: Some(format!("Rx {}", text(record, "id"))),
            blocks: vec![
                Block::Fields(patient),
                Block::Fields(vec![("Examined at".into(), examined), ("Examiner".into(), examiner)]),
                Block::Table {
                    columns: columns.iter().zip(shares).map(|(c, s)| ((*c).to_owned(), s)).collect(),
                    rows: vec![
                        eye_row(printing, "Right (OD)", record, "right_eye"),
                        eye_row(printing, "Left (OS)", record, "left_eye"),
                    ],
                },
                Block::Fields(vec![("Notes".into(), printing.value(record, "notes"))]),
            ],
            signing: printing.signing(record).await?,
            sign_here: Some(prescriber),
            footer: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn powers_are_signed() {
        assert_eq!(super::power(&json!(-1.25)), "-1.25");
        assert_eq!(super::power(&serde_json::from_str("1.50").unwrap()), "+1.50");
        assert_eq!(super::power(&serde_json::from_str("0.00").unwrap()), "0.00");
        assert_eq!(super::power(&json!(null)), "");
    }
}

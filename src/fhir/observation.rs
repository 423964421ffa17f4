//! `Observation`: one measurement of one eye from an examination: each intraocular pressure
//! reading of a tonometry, the visual acuity of each eye, each eye of a refraction. Eyes that
//! could not be assessed give none.
//!
//! An observation's id names its source: `iop-<tonometry>-<eye>-<reading>`,
//! `va-<visual acuity>-<eye>`, `refraction-<refraction>-<eye>`. Each names its eye in `bodySite`
//! (a SNOMED CT body structure of that side).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::codes::{self, quantity};
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{merge, meta, practitioner, reference};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ACCEPTS: Accepts = Accepts {
    patient: true,
    dates: &["date"],
    sorts: &[("date", "examined_at"), LAST_UPDATED],
    ..Accepts::NOTHING_MORE
};

/// One row per observation, from the three examinations that give them (rows of
/// `examinations`, told apart by `exam`).
const OBSERVATIONS: &str = "
    SELECT 'iop' AS kind, t.id AS record_id, e.eye, r.n AS reading,
           'iop-' || t.id || '-' || e.eye || '-' || r.n AS fhir_id,
           t.patient_id, t.patient_visit_id, t.examined_at, t.status, t.amended_at IS NOT NULL AS amended,
           t.examiner_id, t.version, t.updated_at,
           jsonb_build_object('iop_mmhg', r.reading->'iop_mmhg', 'method', r.reading->'method') AS finding
      FROM examinations t
     CROSS JOIN LATERAL (VALUES ('right', t.right_eye), ('left', t.left_eye)) e(eye, data)
     CROSS JOIN LATERAL jsonb_array_elements(e.data->'readings') WITH ORDINALITY r(reading, n)
     WHERE t.deleted_at IS NULL AND t.exam = 'tonometry'
    UNION ALL
    SELECT 'va', t.id, e.eye, 0, 'va-' || t.id || '-' || e.eye,
           t.patient_id, t.patient_visit_id, t.examined_at, t.status, t.amended_at IS NOT NULL,
           t.examiner_id, t.version, t.updated_at,
           e.data || jsonb_build_object('distance', t.distance, 'correction', t.correction, 'notation', t.notation)
      FROM examinations t
     CROSS JOIN LATERAL (VALUES ('right', t.right_eye), ('left', t.left_eye)) e(eye, data)
     WHERE t.deleted_at IS NULL AND t.exam = 'visual_acuity' AND e.data ? 'value'
    UNION ALL
    SELECT 'refraction', t.id, e.eye, 0, 'refraction-' || t.id || '-' || e.eye,
           t.patient_id, t.patient_visit_id, t.examined_at, t.status, t.amended_at IS NOT NULL,
           t.examiner_id, t.version, t.updated_at,
           e.data || jsonb_build_object('kind', t.kind)
      FROM examinations t
     CROSS JOIN LATERAL (VALUES ('right', t.right_eye), ('left', t.left_eye)) e(eye, data)
     WHERE t.deleted_at IS NULL AND t.exam = 'refraction' AND e.data ? 'sphere'";

/// The record an observation id names, when it names one that can exist.
fn record_of(id: &str) -> Option<i64> {
    let parts: Vec<&str> = id.split('-').collect();
    let (record, eye, reading) = match parts.as_slice() {
        ["iop", record, eye, reading] => (record, eye, Some(reading)),
        ["va" | "refraction", record, eye] => (record, eye, None),
        _ => return None,
    };
    let positive = |n: &str| n.parse::<i64>().ok().filter(|n| *n > 0);
    let valid = ["right", "left"].contains(eye) && reading.is_none_or(|r| positive(r).is_some());
    positive(record).filter(|_| valid)
}

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    // The record's id first: it reaches each examination's primary key.
    sql.composite_ids("o", search, record_of);
    sql.patients("o.patient_id", search);
    sql.dates("o.examined_at", false, search, timezone);
    let observations = if search.gone {
        OBSERVATIONS.replace("t.deleted_at IS NULL", "t.deleted_at IS NOT NULL")
    } else {
        OBSERVATIONS.to_owned()
    };
    let matching = format!("SELECT * FROM ({observations}) o {}", sql.filter());
    let order = "examined_at DESC, kind, record_id, eye DESC, reading";
    page(conn, &matching, order, sql, search).await
}

pub fn resource(row: &Value, names: &HashMap<i64, String>) -> Value {
    let eye = row["eye"].as_str().unwrap_or_default();
    let finding = &row["finding"];
    let examiner = row["examiner_id"].as_i64().and_then(|id| names.get(&id));
    let mut observation = json!({
        "resourceType": "Observation",
        "id": row["fhir_id"],
        "meta": meta(row),
        "status": codes::observation_status(row["status"].as_str().unwrap_or_default(), row["amended"] == true),
        "category": codes::exam_category(),
        "subject": reference("Patient", &row["patient_id"]),
        "encounter": reference("Encounter", &row["patient_visit_id"]),
        "effectiveDateTime": row["examined_at"],
        "performer": [practitioner(&row["examiner_id"], examiner)],
        "bodySite": codes::eye_site(eye),
    });
    let own =
        |enumeration: &str, field: &str| finding[field].as_str().map(|v| codes::own_concept(enumeration, v));
    let fields = match row["kind"].as_str().unwrap_or_default() {
        "iop" => json!({
            "code": codes::intraocular_pressure(eye),
            "valueQuantity": quantity(&finding["iop_mmhg"], "mmHg", "mm[Hg]"),
            "method": own("tonometry-method", "method"),
        }),
        "va" => {
            let notation = finding["notation"].as_str().unwrap_or_default();
            let recorded = json!({
                "code": {
                    "coding": [{ "system": codes::own("va-notation"), "code": notation }],
                    "text": format!("Visual acuity as recorded ({})", notation.replace('_', " ")),
                },
                "valueString": finding["value"],
            });
            let distance = json!({ "code": codes::test_distance(), "valueCodeableConcept": own("va-distance", "distance") });
            let mut components = vec![distance, recorded];
            if finding["logmar"].is_number() {
                components.push(json!({
                    "code": codes::own_concept("visual-acuity", "logmar"),
                    "valueQuantity": quantity(&finding["logmar"], "logMAR", "{logMAR}"),
                }));
            }
            // The ratio LOINC's acuity codes mean, when the value is one; else as recorded.
            let text = finding["value"].as_str().unwrap_or_default();
            let value = match codes::acuity_ratio(notation, text, finding["logmar"].as_f64()) {
                Some(ratio) => json!({ "valueRatio": ratio }),
                None => json!({ "valueString": finding["value"] }),
            };
            let mut fields = json!({
                "code": codes::visual_acuity(eye, finding["correction"].as_str().unwrap_or_default()),
                "method": own("va-correction", "correction"),
                "component": components,
            });
            merge(&mut fields, value);
            fields
        }
        _ => json!({
            "code": codes::refraction(finding["kind"].as_str().unwrap_or_default(), eye),
            "method": own("refraction-kind", "kind"),
            "component": refraction_components(finding, eye),
        }),
    };
    merge(&mut observation, fields);
    observation
}

/// Sphere, cylinder, axis, addition and prism of one eye, each in its UCUM unit; sphere,
/// cylinder and axis coded with LOINC's code for the eye beside the server's own.
fn refraction_components(eye: &Value, side: &str) -> Vec<Value> {
    let measured = [
        ("sphere", "diopter", "[diop]"),
        ("cylinder", "diopter", "[diop]"),
        ("axis", "degree", "deg"),
        ("add", "diopter", "[diop]"),
        ("prism_pd", "prism diopter", "[p'diop]"),
    ];
    let mut components: Vec<Value> = measured
        .iter()
        .filter(|(field, _, _)| eye[field].is_number())
        .map(|(field, unit, code)| {
            let concept = match codes::refraction_value(field, side) {
                Some((loinc, display)) => json!({
                    "coding": [
                        { "system": codes::LOINC, "code": loinc, "display": display },
                        { "system": codes::own("refraction"), "code": field },
                    ],
                    "text": display,
                }),
                None => codes::own_concept("refraction", field),
            };
            json!({ "code": concept, "valueQuantity": quantity(&eye[field], unit, code) })
        })
        .collect();
    if let Some(base) = eye["prism_base"].as_str() {
        components.push(json!({
            "code": codes::own_concept("refraction", "prism_base"),
            "valueCodeableConcept": codes::own_concept("prism-base", base),
        }));
    }
    if let Some(va) = eye["va"].as_str() {
        components.push(json!({ "code": codes::own_concept("refraction", "va"), "valueString": va }));
    }
    components
}

#[cfg(test)]
mod tests {
    use super::record_of;

    #[test]
    fn ids_name_their_record() {
        assert_eq!(record_of("iop-12-right-2"), Some(12));
        assert_eq!(record_of("va-7-left"), Some(7));
        assert_eq!(record_of("refraction-3-right"), Some(3));
        for bad in
            ["iop-12-right", "va-7-both", "refraction-0-left", "x-1-left", "va-7-left-1", "iop-1-left-0"]
        {
            assert_eq!(record_of(bad), None, "{bad}");
        }
    }
}

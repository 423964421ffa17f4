//! The fourteen examinations, each one declaration: its own record fields, the structure of
//! one eye's findings, and the rules between them.

use crate::resource::row::Fields;
use rust_decimal::Decimal;
use serde_json::{Map, Value};

use super::declaration::{Exam, NOT_PER_EYE, exam, eyes, no_eyes, one_eye_at_least};
use crate::enums::{
    CORTICAL_CATARACT, EOM_DEVIATION, EYE, IMAGING_MODALITY, IRIS_CONFIGURATION, LACRIMAL_PASSAGE,
    NUCLEAR_CATARACT, PERIPHERY_FINDING, PRISM_BASE, PUNCTUM_STATE, REFRACTION_KIND, REGURGITATION,
    STRUCTURE_STATUS, TONOMETRY_METHOD, VA_CORRECTION, VA_DISTANCE, VA_NOTATION, VITREOUS_STATE,
};
use crate::resource::decimal::exact;
use crate::resource::field::{
    Kind, Structure, boolean, distinct_list, integer, list, long_text, num, object, one_of, past_date, text,
    time,
};
use crate::resource::{Resource, Shape};

/// A decimal field of an object, when it holds one.
fn decimal_of(object: &Map<String, Value>, field: &str) -> Option<Decimal> {
    object.decimal(field)
}

fn problem(field: &str, message: &str) -> Vec<(String, String)> {
    vec![(field.to_owned(), message.to_owned())]
}

// ---------------------------------------------------------------------------------------
// Visual acuity
// ---------------------------------------------------------------------------------------

static VISUAL_ACUITY_EYE: Structure = Structure {
    name: "VisualAcuityEye",
    fields: &[text("value", 20).required(), num("logmar", "-0.3", "3.0", "0.01")],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

/// The logMAR of a value written in `notation`, unrounded; `Err` says what is wrong.
fn logmar_of(notation: &str, value: &str) -> Result<f64, &'static str> {
    let fraction = |numerator: &str| -> Result<f64, &'static str> {
        let denominator = value.strip_prefix(numerator).and_then(|d| d.parse::<f64>().ok());
        match denominator {
            Some(d) if d > 0.0 && d.is_finite() => {
                Ok((d / numerator.trim_end_matches('/').parse::<f64>().unwrap_or(1.0)).log10())
            }
            _ => Err("The value must be written as a Snellen fraction of this notation."),
        }
    };
    let number = || value.parse::<f64>().map_err(|_| "The value must be a number in this notation.");
    match notation {
        "snellen_m" => fraction("6/"),
        "snellen_ft" => fraction("20/"),
        "decimal" => match number()? {
            v if (0.001..=2.0).contains(&v) => Ok(-v.log10()),
            _ => Err("A decimal acuity must be between 0.001 and 2.0."),
        },
        "logmar" => match number()? {
            v if (-0.3..=3.0).contains(&v) => Ok(v),
            _ => Err("A logMAR acuity must be between -0.3 and 3.0."),
        },
        "etdrs_letters" => match value.parse::<u32>() {
            Ok(letters) if letters <= 100 => Ok(1.7 - 0.02 * f64::from(letters)),
            _ => Err("ETDRS letters must be a whole number from 0 to 100."),
        },
        _ => Err("The value does not fit the notation."),
    }
}

/// The logMAR of the low-vision levels, in any notation (decision).
fn low_vision(value: &str) -> Option<&'static str> {
    match value {
        "CF" => Some("1.90"),
        "HM" => Some("2.30"),
        "LP" => Some("2.70"),
        "NLP" => Some("3.00"),
        _ => None,
    }
}

/// Checks each eye's value against the record's notation and fills in its logMAR, rounded
/// to 0.01 (for N-point it is given, not computed).
fn acuity_in_notation(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    let notation = record.text("notation").unwrap_or_default().to_owned();
    let mut problems = Vec::new();
    for eye in ["right_eye", "left_eye"] {
        let Some(Value::Object(findings)) = record.get_mut(eye) else { continue };
        if findings.is_true("unable_to_assess") {
            continue;
        }
        let Some(value) = findings.text("value").map(str::to_uppercase) else {
            continue;
        };
        findings.insert("value".into(), Value::String(value.clone()));
        let logmar = match (low_vision(&value), notation.as_str()) {
            (Some(fixed), _) => Ok(exact(fixed)),
            (None, "n_point") => {
                let size = value.strip_prefix('N').and_then(|n| n.parse::<u32>().ok());
                if !size.is_some_and(|n| (5..=80).contains(&n)) {
                    problems.push((format!("{eye}.value"), "An N-point value runs from N5 to N80.".into()));
                }
                continue;
            }
            (None, _) => logmar_of(&notation, &value).map(|l| {
                Decimal::from_f64_retain(l)
                    .unwrap_or_default()
                    .round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
            }),
        };
        match logmar {
            Ok(l) if l >= exact("-0.3") && l <= exact("3.0") => {
                findings
                    .insert("logmar".into(), serde_json::from_str(&format!("{l:.2}")).unwrap_or(Value::Null));
            }
            Ok(_) => {
                problems.push((format!("{eye}.value"), "The acuity is outside logMAR -0.3 to 3.0.".into()))
            }
            Err(message) => problems.push((format!("{eye}.value"), message.into())),
        }
    }
    problems
}

pub static VISUAL_ACUITIES: Resource = exam(Exam {
    path: "visual-acuities",
    table: "visual_acuities",
    kind: "visual_acuity",
    label: "Visual acuity",
    plural: "visual acuities",
    fields: &[
        one_of("distance", &VA_DISTANCE).required(),
        one_of("correction", &VA_CORRECTION).required(),
        one_of("notation", &VA_NOTATION).required(),
        eyes(&VISUAL_ACUITY_EYE)[0],
        eyes(&VISUAL_ACUITY_EYE)[1],
    ],
    rules: &[one_eye_at_least, acuity_in_notation],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Refraction
// ---------------------------------------------------------------------------------------

/// An axis goes with a non-zero cylinder, a prism base with a prism.
fn axis_and_prism(eye: &mut Map<String, Value>) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    let cylinder = decimal_of(eye, "cylinder").is_some_and(|c| !c.is_zero());
    match (cylinder, eye.contains_key("axis")) {
        (true, false) => problems.push(("axis".into(), "The axis is required with a cylinder.".into())),
        (false, true) => {
            problems.push(("axis".into(), "The axis is given only with a non-zero cylinder.".into()))
        }
        _ => {}
    }
    match (eye.contains_key("prism_pd"), eye.contains_key("prism_base")) {
        (true, false) => {
            problems.push(("prism_base".into(), "The prism base is required with a prism.".into()))
        }
        (false, true) => {
            problems.push(("prism_base".into(), "The prism base is given only with a prism.".into()))
        }
        _ => {}
    }
    problems
}

static REFRACTION_EYE: Structure = Structure {
    name: "RefractionEye",
    fields: &[
        num("sphere", "-30", "30", "0.25").required(),
        num("cylinder", "-10", "10", "0.25"),
        integer("axis", 1, 180),
        num("add", "0.25", "4", "0.25"),
        num("prism_pd", "0.5", "20", "0.5"),
        one_of("prism_base", &PRISM_BASE),
        text("va", 20),
    ],
    rules: &[axis_and_prism],
    calculated: &[],
    per_eye: true,
};

/// A final refraction prints as a spectacle prescription.
pub static REFRACTIONS: Resource = Resource {
    printable: Some(&super::prescription::PRESCRIPTION),
    ..exam(Exam {
        path: "refractions",
        table: "refractions",
        kind: "refraction",
        label: "Refraction",
        plural: "refractions",
        fields: &[
            one_of("kind", &REFRACTION_KIND).required(),
            eyes(&REFRACTION_EYE)[0],
            eyes(&REFRACTION_EYE)[1],
        ],
        rules: &[one_eye_at_least],
        computed: &[],
    })
};

// ---------------------------------------------------------------------------------------
// Tonometry
// ---------------------------------------------------------------------------------------

static TONOMETRY_READING: Structure = Structure {
    name: "TonometryReading",
    fields: &[
        num("iop_mmhg", "0", "80", "0.1").required(),
        one_of("method", &TONOMETRY_METHOD).required(),
        time("measured_at"),
    ],
    rules: &[],
    calculated: &[],
    per_eye: false,
};

static TONOMETRY_EYE: Structure = Structure {
    name: "TonometryEye",
    fields: &[
        list("readings", &Kind::Object(&TONOMETRY_READING), 1, 10).required(),
        integer("cct_um", 300, 800),
    ],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static TONOMETRIES: Resource = exam(Exam {
    path: "tonometries",
    table: "tonometries",
    kind: "tonometry",
    label: "Tonometry",
    plural: "tonometries",
    fields: &[eyes(&TONOMETRY_EYE)[0], eyes(&TONOMETRY_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Slit lamp
// ---------------------------------------------------------------------------------------

/// Abnormal findings are described.
fn findings_when_abnormal(part: &mut Map<String, Value>) -> Vec<(String, String)> {
    let abnormal = part.text("status") == Some("abnormal");
    if abnormal && !part.contains_key("findings") {
        return problem("findings", "The findings are required when the structure is abnormal.");
    }
    Vec::new()
}

static SLIT_LAMP_STRUCTURE: Structure = Structure {
    name: "SlitLampStructure",
    fields: &[one_of("status", &STRUCTURE_STATUS).required(), text("findings", 1000)],
    rules: &[findings_when_abnormal],
    calculated: &[],
    per_eye: false,
};

static SLIT_LAMP_EYE: Structure = Structure {
    name: "SlitLampEye",
    fields: &[
        object("lids", &SLIT_LAMP_STRUCTURE),
        object("lashes", &SLIT_LAMP_STRUCTURE),
        object("conjunctiva", &SLIT_LAMP_STRUCTURE),
        object("cornea", &SLIT_LAMP_STRUCTURE),
        object("anterior_chamber", &SLIT_LAMP_STRUCTURE),
        object("iris", &SLIT_LAMP_STRUCTURE),
        object("pupil", &SLIT_LAMP_STRUCTURE),
        object("lens", &SLIT_LAMP_STRUCTURE),
        object("anterior_vitreous", &SLIT_LAMP_STRUCTURE),
        num("ac_cells", "0", "4", "0.5"),
        integer("ac_flare", 0, 4),
        one_of("nuclear_cataract", &NUCLEAR_CATARACT),
        one_of("cortical_cataract", &CORTICAL_CATARACT),
        num("pupil_mm", "1", "10", "0.5"),
    ],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static SLIT_LAMPS: Resource = exam(Exam {
    path: "slit-lamps",
    table: "slit_lamps",
    kind: "slit_lamp",
    label: "Slit lamp examination",
    plural: "slit lamp examinations",
    fields: &[eyes(&SLIT_LAMP_EYE)[0], eyes(&SLIT_LAMP_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Funduscopy
// ---------------------------------------------------------------------------------------

static FUNDUSCOPY_EYE: Structure = Structure {
    name: "FunduscopyEye",
    fields: &[
        num("cd_ratio", "0", "1", "0.05"),
        text("disc", 1000),
        text("macula", 1000),
        text("vessels", 1000),
        text("background", 1000),
        text("periphery", 1000),
    ],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static FUNDUSCOPIES: Resource = exam(Exam {
    path: "funduscopies",
    table: "funduscopies",
    kind: "funduscopy",
    label: "Funduscopy",
    plural: "funduscopies",
    fields: &[boolean("dilated").defaulted(), eyes(&FUNDUSCOPY_EYE)[0], eyes(&FUNDUSCOPY_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Gonioscopy
// ---------------------------------------------------------------------------------------

static GONIOSCOPY_EYE: Structure = Structure {
    name: "GonioscopyEye",
    fields: &[
        integer("superior", 0, 4),
        integer("inferior", 0, 4),
        integer("nasal", 0, 4),
        integer("temporal", 0, 4),
        one_of("iris_configuration", &IRIS_CONFIGURATION),
        distinct_list("pas_clock_hours", &Kind::Integer { min: 1, max: 12 }, 0, 12),
        text("findings", 1000),
    ],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static GONIOSCOPIES: Resource = exam(Exam {
    path: "gonioscopies",
    table: "gonioscopies",
    kind: "gonioscopy",
    label: "Gonioscopy",
    plural: "gonioscopies",
    fields: &[eyes(&GONIOSCOPY_EYE)[0], eyes(&GONIOSCOPY_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Corneal topography
// ---------------------------------------------------------------------------------------

/// K1 <= K2 <= Kmax; each error on the later reading.
fn keratometry_in_order(eye: &mut Map<String, Value>) -> Vec<(String, String)> {
    let (k1, k2, kmax) = (decimal_of(eye, "k1"), decimal_of(eye, "k2"), decimal_of(eye, "kmax"));
    let mut problems = Vec::new();
    if let (Some(k1), Some(k2)) = (k1, k2)
        && k2 < k1
    {
        problems.push(("k2".into(), "K2 may not be below K1.".into()));
    }
    if let (Some(k2), Some(kmax)) = (k2, kmax)
        && kmax < k2
    {
        problems.push(("kmax".into(), "Kmax may not be below K2.".into()));
    }
    problems
}

static CORNEAL_TOPOGRAPHY_EYE: Structure = Structure {
    name: "CornealTopographyEye",
    fields: &[
        num("k1", "30", "70", "0.01").required(),
        num("k2", "30", "70", "0.01").required(),
        num("kmax", "30", "70", "0.01"),
        integer("k1_axis", 0, 180),
        integer("k2_axis", 0, 180),
        integer("thinnest_pachymetry_um", 100, 1000),
    ],
    rules: &[keratometry_in_order],
    calculated: &[],
    per_eye: true,
};

pub static CORNEAL_TOPOGRAPHIES: Resource = exam(Exam {
    path: "corneal-topographies",
    table: "corneal_topographies",
    kind: "corneal_topography",
    label: "Corneal topography",
    plural: "corneal topographies",
    fields: &[text("device", 100), eyes(&CORNEAL_TOPOGRAPHY_EYE)[0], eyes(&CORNEAL_TOPOGRAPHY_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Amsler grid
// ---------------------------------------------------------------------------------------

static AMSLER_GRID_EYE: Structure = Structure {
    name: "AmslerGridEye",
    fields: &[
        integer("grade", 0, 5).required(),
        boolean("distortion"),
        boolean("scotoma"),
        text("findings", 1000),
    ],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static AMSLER_GRIDS: Resource = exam(Exam {
    path: "amsler-grids",
    table: "amsler_grids",
    kind: "amsler_grid",
    label: "Amsler grid",
    plural: "Amsler grids",
    fields: &[eyes(&AMSLER_GRID_EYE)[0], eyes(&AMSLER_GRID_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Extraocular muscles
// ---------------------------------------------------------------------------------------

/// Orthophoria has no deviation to measure.
fn no_measure_of_orthophoria(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    let ortho = record.text("deviation") == Some("orthophoria");
    if ortho && record.is_set("deviation_pd") {
        return problem("deviation_pd", "Orthophoria has no deviation in prism dioptres.");
    }
    Vec::new()
}

static GAZE: Structure = Structure {
    name: "Gaze",
    fields: &[
        num("primary", "-4", "4", "0.5"),
        num("up", "-4", "4", "0.5"),
        num("down", "-4", "4", "0.5"),
        num("right", "-4", "4", "0.5"),
        num("left", "-4", "4", "0.5"),
        num("up_right", "-4", "4", "0.5"),
        num("up_left", "-4", "4", "0.5"),
        num("down_right", "-4", "4", "0.5"),
        num("down_left", "-4", "4", "0.5"),
    ],
    rules: &[],
    calculated: &[],
    per_eye: false,
};

static EOM_EYE: Structure = Structure {
    name: "EomEye",
    fields: &[object("gaze", &GAZE)],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static EOMS: Resource = exam(Exam {
    path: "eoms",
    table: "eoms",
    kind: "eom",
    label: "Extraocular muscle examination",
    plural: "extraocular muscle examinations",
    fields: &[
        one_of("deviation", &EOM_DEVIATION),
        integer("deviation_pd", 0, 100),
        boolean("diplopia"),
        boolean("nystagmus"),
        eyes(&EOM_EYE)[0],
        eyes(&EOM_EYE)[1],
    ],
    rules: &[one_eye_at_least, no_measure_of_orthophoria],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Exophthalmometry
// ---------------------------------------------------------------------------------------

static EXOPHTHALMOMETRY_EYE: Structure = Structure {
    name: "ExophthalmometryEye",
    fields: &[num("reading_mm", "0", "40", "0.5").required()],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static EXOPHTHALMOMETRIES: Resource = exam(Exam {
    path: "exophthalmometries",
    table: "exophthalmometries",
    kind: "exophthalmometry",
    label: "Exophthalmometry",
    plural: "exophthalmometries",
    fields: &[
        integer("base_mm", 80, 130).required(),
        text("instrument", 100),
        eyes(&EXOPHTHALMOMETRY_EYE)[0],
        eyes(&EXOPHTHALMOMETRY_EYE)[1],
    ],
    rules: &[one_eye_at_least],
    // Null unless both eyes were read.
    computed: &[(
        "asymmetry_mm",
        "abs((t.right_eye->>'reading_mm')::numeric - (t.left_eye->>'reading_mm')::numeric)",
        Shape::Number,
    )],
});

// ---------------------------------------------------------------------------------------
// Lacrimal irrigation
// ---------------------------------------------------------------------------------------

static LACRIMAL_IRRIGATION_EYE: Structure = Structure {
    name: "LacrimalIrrigationEye",
    fields: &[
        one_of("upper_punctum", &PUNCTUM_STATE),
        one_of("lower_punctum", &PUNCTUM_STATE),
        one_of("passage", &LACRIMAL_PASSAGE),
        one_of("regurgitation", &REGURGITATION),
        integer("schirmer_mm", 0, 35),
        integer("tbut_s", 0, 60),
        text("findings", 1000),
    ],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static LACRIMAL_IRRIGATIONS: Resource = exam(Exam {
    path: "lacrimal-irrigations",
    table: "lacrimal_irrigations",
    kind: "lacrimal_irrigation",
    label: "Lacrimal irrigation",
    plural: "lacrimal irrigations",
    fields: &[eyes(&LACRIMAL_IRRIGATION_EYE)[0], eyes(&LACRIMAL_IRRIGATION_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Radiology (not per eye)
// ---------------------------------------------------------------------------------------

static RADIOLOGY_STUDY: Structure = Structure {
    name: "RadiologyStudy",
    fields: &[
        one_of("modality", &IMAGING_MODALITY).required(),
        text("region", 100).required(),
        one_of("laterality", &EYE),
        past_date("performed_on"),
        long_text("findings"),
        long_text("impression"),
    ],
    rules: &[],
    calculated: &[],
    per_eye: false,
};

pub static RADIOLOGIES: Resource = exam(Exam {
    path: "radiologies",
    table: "radiologies",
    kind: "radiology",
    label: "Radiology",
    plural: "radiology records",
    fields: &[
        list("studies", &Kind::Object(&RADIOLOGY_STUDY), 1, 20).required(),
        eyes(&NOT_PER_EYE)[0],
        eyes(&NOT_PER_EYE)[1],
    ],
    rules: &[no_eyes],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Gross examination
// ---------------------------------------------------------------------------------------

static GROSS_EXAMINATION_EYE: Structure = Structure {
    name: "GrossExaminationEye",
    fields: &[
        text("brow", 500),
        text("upper_lid", 500),
        text("lower_lid", 500),
        text("lashes", 500),
        text("medial_canthus", 500),
        text("adnexa", 500),
        num("mrd1_mm", "-5", "8", "0.5"),
        integer("levator_function_mm", 0, 25),
        num("fissure_height_mm", "0", "15", "0.5"),
    ],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static GROSS_EXAMINATIONS: Resource = exam(Exam {
    path: "gross-examinations",
    table: "gross_examinations",
    kind: "gross_examination",
    label: "Gross examination",
    plural: "gross examinations",
    fields: &[eyes(&GROSS_EXAMINATION_EYE)[0], eyes(&GROSS_EXAMINATION_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

// ---------------------------------------------------------------------------------------
// Indirect ophthalmoscopy
// ---------------------------------------------------------------------------------------

static PERIPHERY: Structure = Structure {
    name: "PeripheryFinding",
    fields: &[
        one_of("finding", &PERIPHERY_FINDING).required(),
        distinct_list("clock_hours", &Kind::Integer { min: 1, max: 12 }, 1, 12).required(),
        text("notes", 500),
    ],
    rules: &[],
    calculated: &[],
    per_eye: false,
};

static INDIRECT_OPHTHALMOSCOPY_EYE: Structure = Structure {
    name: "IndirectOphthalmoscopyEye",
    fields: &[
        boolean("scleral_depression"),
        one_of("vitreous", &VITREOUS_STATE),
        list("periphery", &Kind::Object(&PERIPHERY), 0, 24),
        text("findings", 1000),
    ],
    rules: &[],
    calculated: &[],
    per_eye: true,
};

pub static INDIRECT_OPHTHALMOSCOPIES: Resource = exam(Exam {
    path: "indirect-ophthalmoscopies",
    table: "indirect_ophthalmoscopies",
    kind: "indirect_ophthalmoscopy",
    label: "Indirect ophthalmoscopy",
    plural: "indirect ophthalmoscopies",
    fields: &[eyes(&INDIRECT_OPHTHALMOSCOPY_EYE)[0], eyes(&INDIRECT_OPHTHALMOSCOPY_EYE)[1]],
    rules: &[one_eye_at_least],
    computed: &[],
});

/// Every examination, in the order the API has always listed them; `exam_kind` is each path made singular.
pub static RESOURCES: &[&Resource] = &[
    &VISUAL_ACUITIES,
    &REFRACTIONS,
    &TONOMETRIES,
    &SLIT_LAMPS,
    &FUNDUSCOPIES,
    &GONIOSCOPIES,
    &CORNEAL_TOPOGRAPHIES,
    &AMSLER_GRIDS,
    &EOMS,
    &EXOPHTHALMOMETRIES,
    &LACRIMAL_IRRIGATIONS,
    &RADIOLOGIES,
    &GROSS_EXAMINATIONS,
    &INDIRECT_OPHTHALMOSCOPIES,
];

/// The `exam_kind` of each examination, in the order of [`RESOURCES`].
pub fn kind_of(resource: &Resource) -> &'static str {
    resource.shared.map(|shared| shared.value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logmar_from_each_notation() {
        let round = |x: f64| (x * 100.0).round() / 100.0;
        assert_eq!(round(logmar_of("snellen_m", "6/60").unwrap()), 1.0);
        assert_eq!(round(logmar_of("snellen_ft", "20/40").unwrap()), 0.3);
        assert_eq!(round(logmar_of("decimal", "0.5").unwrap()), 0.3);
        assert_eq!(round(logmar_of("etdrs_letters", "85").unwrap()), 0.0);
        assert!(logmar_of("snellen_m", "20/20").is_err());
        assert!(logmar_of("decimal", "3").is_err());
    }

    #[test]
    fn an_acuity_gets_its_logmar_and_low_vision_words_are_fixed() {
        let mut record: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "notation": "snellen_m",
            "right_eye": { "unable_to_assess": false, "value": "6/12" },
            "left_eye": { "unable_to_assess": false, "value": "cf" },
        }))
        .unwrap();
        assert!(acuity_in_notation(&mut record).is_empty());
        assert_eq!(record["right_eye"]["logmar"].to_string(), "0.30");
        assert_eq!(record["left_eye"]["value"], "CF");
        assert_eq!(record["left_eye"]["logmar"].to_string(), "1.90");
    }

    #[test]
    fn exam_kinds_follow_the_paths() {
        let kinds: Vec<_> = RESOURCES.iter().map(|r| kind_of(r)).collect();
        assert_eq!(kinds, crate::enums::EXAM_KIND.values);
        for r in RESOURCES {
            assert_eq!(kind_of(r), r.table.trim_end_matches('s').replace("ie", "y"), "{}", r.path);
        }
    }
}

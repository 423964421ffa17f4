//! Every enumeration the API uses, by the name `GET /enums` lists it under, in the order the
//! API has always listed them. Declarations name these statics; a test checks that every enumeration a
//! declaration reaches is listed here.

/// A named set of lowercase snake_case values, listed by `GET /enums` under its name.
#[derive(Debug)]
pub struct Enumeration {
    pub name: &'static str,
    pub values: &'static [&'static str],
}

impl Enumeration {
    /// How `value` reads on a printed page: its own label where words from the value would
    /// read wrong (`LABELS`: abbreviations, hyphens, names), else the value as a sentence
    /// (`no_show` is "No show", `female` "Female").
    pub fn label(&self, value: &str) -> String {
        let own = LABELS.iter().find(|(enumeration, _)| std::ptr::eq(*enumeration, self));
        if let Some((_, label)) = own.and_then(|(_, labels)| labels.iter().find(|(v, _)| *v == value)) {
            return (*label).to_owned();
        }
        let words = value.replace('_', " ");
        let mut chars = words.chars();
        chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
    }
}

/// The values whose printed label is not their words: the usage of the clinic, where it
/// writes an abbreviation or a name.
static LABELS: &[(&Enumeration, &[(&str, &str)])] = &[
    (&VISIT_TYPE, &[("follow_up", "Follow-up"), ("post_op", "Post-operative")]),
    (&EYE, &[("n_a", "Not applicable")]),
    (&EXAM_KIND, &[("eom", "Extraocular motility")]),
    (&MEASUREMENT_KIND, &[("iop", "IOP"), ("va_logmar", "VA (logMAR)"), ("cd_ratio", "C/D ratio")]),
    (
        &VA_NOTATION,
        &[
            ("snellen_m", "Snellen (metres)"),
            ("snellen_ft", "Snellen (feet)"),
            ("logmar", "logMAR"),
            ("etdrs_letters", "ETDRS letters"),
            ("n_point", "N point"),
        ],
    ),
    (&REFRACTION_KIND, &[("final_rx", "Final prescription")]),
    (
        &TONOMETRY_METHOD,
        &[
            ("tonopen", "Tono-Pen"),
            ("icare", "iCare"),
            ("non_contact", "Non-contact"),
            ("schiotz", "Schiøtz"),
        ],
    ),
    (&IRIS_CONFIGURATION, &[("bombe", "Bombé")]),
    (&VITREOUS_STATE, &[("pvd", "Posterior vitreous detachment")]),
    (
        &IMAGING_MODALITY,
        &[
            ("xray", "X-ray"),
            ("ct", "CT"),
            ("mri", "MRI"),
            ("b_scan", "B-scan"),
            ("oct", "OCT"),
            ("ffa", "FFA"),
        ],
    ),
    (&ANAESTHESIA, &[("sub_tenon", "Sub-Tenon's")]),
];

pub static SEX: Enumeration = Enumeration { name: "sex", values: &["male", "female", "other", "unknown"] };
pub static CIVIL_STATUS: Enumeration =
    Enumeration { name: "civil_status", values: &["single", "married", "widowed", "separated", "divorced"] };
pub static PATIENT_STATUS: Enumeration =
    Enumeration { name: "patient_status", values: &["active", "inactive", "deceased"] };
pub static VISIT_TYPE: Enumeration =
    Enumeration { name: "visit_type", values: &["new", "follow_up", "emergency", "post_op"] };
pub static VISIT_STATUS: Enumeration = Enumeration {
    name: "visit_status",
    values: &["scheduled", "checked_in", "in_progress", "completed", "cancelled"],
};
pub static EYE: Enumeration = Enumeration { name: "eye", values: &["right", "left", "both", "n_a"] };
pub static SEVERITY: Enumeration = Enumeration { name: "severity", values: &["mild", "moderate", "severe"] };
pub static ALLERGY_STATUS: Enumeration =
    Enumeration { name: "allergy_status", values: &["active", "inactive", "resolved"] };
pub static BRANCH_STATUS: Enumeration =
    Enumeration { name: "branch_status", values: &["provisioning", "active", "archived"] };
pub static MIGRATION_STATE: Enumeration =
    Enumeration { name: "migration_state", values: &["pending", "current", "failed"] };
pub static RECORD_STATUS: Enumeration =
    Enumeration { name: "record_status", values: &["active", "inactive"] };
pub static EXAM_KIND: Enumeration = Enumeration {
    name: "exam_kind",
    values: &[
        "visual_acuity",
        "refraction",
        "tonometry",
        "slit_lamp",
        "funduscopy",
        "gonioscopy",
        "corneal_topography",
        "amsler_grid",
        "eom",
        "exophthalmometry",
        "lacrimal_irrigation",
        "radiology",
        "gross_examination",
        "indirect_ophthalmoscopy",
    ],
};
pub static EXAM_STATUS: Enumeration = Enumeration { name: "exam_status", values: &["draft", "signed"] };
pub static MEASUREMENT_KIND: Enumeration =
    Enumeration { name: "measurement_kind", values: &["iop", "va_logmar", "sphere", "cylinder", "cd_ratio"] };
pub static VA_DISTANCE: Enumeration = Enumeration { name: "va_distance", values: &["distance", "near"] };
pub static VA_CORRECTION: Enumeration = Enumeration {
    name: "va_correction",
    values: &["unaided", "glasses", "contact_lens", "pinhole", "auto_refraction", "formal_refraction"],
};
pub static VA_NOTATION: Enumeration = Enumeration {
    name: "va_notation",
    values: &["snellen_m", "snellen_ft", "decimal", "logmar", "etdrs_letters", "n_point"],
};
pub static REFRACTION_KIND: Enumeration = Enumeration {
    name: "refraction_kind",
    values: &["auto", "retinoscopy", "manifest", "cycloplegic", "own_glasses", "final_rx"],
};
pub static PRISM_BASE: Enumeration = Enumeration { name: "prism_base", values: &["up", "down", "in", "out"] };
pub static TONOMETRY_METHOD: Enumeration = Enumeration {
    name: "tonometry_method",
    values: &[
        "goldmann",
        "perkins",
        "tonopen",
        "icare",
        "non_contact",
        "dynamic_contour",
        "schiotz",
        "digital",
        "other",
    ],
};
pub static STRUCTURE_STATUS: Enumeration =
    Enumeration { name: "structure_status", values: &["normal", "abnormal", "not_examined"] };
pub static NUCLEAR_CATARACT: Enumeration =
    Enumeration { name: "nuclear_cataract", values: &["none", "mild", "moderate", "brunescent"] };
pub static CORTICAL_CATARACT: Enumeration =
    Enumeration { name: "cortical_cataract", values: &["none", "mild", "moderate", "white"] };
pub static IRIS_CONFIGURATION: Enumeration =
    Enumeration { name: "iris_configuration", values: &["flat", "plateau", "concave", "bombe"] };
pub static EOM_DEVIATION: Enumeration = Enumeration {
    name: "eom_deviation",
    values: &[
        "orthophoria",
        "esophoria",
        "esotropia",
        "exophoria",
        "exotropia",
        "right_hypertropia",
        "left_hypertropia",
    ],
};
pub static PUNCTUM_STATE: Enumeration =
    Enumeration { name: "punctum_state", values: &["patent", "stenosed", "absent"] };
pub static LACRIMAL_PASSAGE: Enumeration =
    Enumeration { name: "lacrimal_passage", values: &["free", "partial", "none"] };
pub static REGURGITATION: Enumeration =
    Enumeration { name: "regurgitation", values: &["none", "same_punctum", "opposite_punctum"] };
pub static VITREOUS_STATE: Enumeration =
    Enumeration { name: "vitreous_state", values: &["clear", "pvd", "haemorrhage", "cells", "other"] };
pub static PERIPHERY_FINDING: Enumeration = Enumeration {
    name: "periphery_finding",
    values: &["tear", "hole", "detachment", "lattice", "schisis", "neovascularisation", "other"],
};
pub static IMAGING_MODALITY: Enumeration = Enumeration {
    name: "imaging_modality",
    values: &["xray", "ct", "mri", "b_scan", "oct", "ffa", "ultrasound", "other"],
};
pub static MEDICINE_FORM: Enumeration = Enumeration {
    name: "medicine_form",
    values: &[
        "tablet",
        "capsule",
        "syrup",
        "suspension",
        "drops",
        "ointment",
        "gel",
        "cream",
        "injection",
        "spray",
        "other",
    ],
};
pub static MEDICINE_ROUTE: Enumeration = Enumeration {
    name: "medicine_route",
    values: &[
        "oral",
        "ophthalmic",
        "topical",
        "intravenous",
        "intramuscular",
        "subcutaneous",
        "intravitreal",
        "subconjunctival",
        "other",
    ],
};
pub static PROCEDURE_CATEGORY: Enumeration = Enumeration {
    name: "procedure_category",
    values: &["consultation", "diagnostic", "laser", "injection", "minor_surgery", "major_surgery", "other"],
};
pub static SURGERY_EYE: Enumeration = Enumeration { name: "surgery_eye", values: &["right", "left", "both"] };
pub static ANAESTHESIA: Enumeration = Enumeration {
    name: "anaesthesia",
    values: &["topical", "sub_tenon", "peribulbar", "retrobulbar", "local", "sedation", "general"],
};
pub static SURGERY_PRIORITY: Enumeration =
    Enumeration { name: "surgery_priority", values: &["routine", "urgent", "emergency"] };
pub static SURGERY_STATUS: Enumeration = Enumeration {
    name: "surgery_status",
    values: &["scheduled", "confirmed", "completed", "cancelled", "postponed"],
};
pub static STOCK_MOVEMENT_KIND: Enumeration = Enumeration {
    name: "stock_movement_kind",
    values: &[
        "receipt",
        "dispense",
        "return",
        "adjustment",
        "transfer_out",
        "transfer_in",
        "expired",
        "damaged",
    ],
};
pub static PURCHASE_ORDER_STATUS: Enumeration = Enumeration {
    name: "purchase_order_status",
    values: &["draft", "ordered", "partially_received", "received", "closed", "cancelled"],
};
pub static DELIVERY_STATUS: Enumeration =
    Enumeration { name: "delivery_status", values: &["draft", "posted", "cancelled"] };
pub static PHARMACY_TRANSACTION_STATUS: Enumeration =
    Enumeration { name: "pharmacy_transaction_status", values: &["draft", "completed", "voided"] };
pub static BILLING_KIND: Enumeration =
    Enumeration { name: "billing_kind", values: &["charge", "discount", "payment", "refund"] };
pub static BILLING_STATUS: Enumeration =
    Enumeration { name: "billing_status", values: &["open", "posted", "voided"] };
pub static QUEUE_PRIORITY: Enumeration =
    Enumeration { name: "queue_priority", values: &["normal", "priority", "urgent"] };
pub static QUEUE_STATUS: Enumeration = Enumeration {
    name: "queue_status",
    values: &["waiting", "called", "serving", "completed", "skipped", "no_show", "transferred"],
};
pub static APPOINTMENT_STATUS: Enumeration = Enumeration {
    name: "appointment_status",
    values: &["booked", "arrived", "in_progress", "completed", "cancelled", "no_show"],
};
pub static RECALL_STATUS: Enumeration =
    Enumeration { name: "recall_status", values: &["pending", "booked", "done", "cancelled"] };

pub static LATERALITY: Enumeration =
    Enumeration { name: "laterality", values: &["right", "left", "both", "none"] };
pub static PROBLEM_STATUS: Enumeration =
    Enumeration { name: "problem_status", values: &["active", "resolved"] };

/// All of them, in the order `GET /enums` answers.
pub static ALL: &[&Enumeration] = &[
    &SEX,
    &CIVIL_STATUS,
    &PATIENT_STATUS,
    &VISIT_TYPE,
    &VISIT_STATUS,
    &EYE,
    &SEVERITY,
    &ALLERGY_STATUS,
    &BRANCH_STATUS,
    &MIGRATION_STATE,
    &RECORD_STATUS,
    &EXAM_KIND,
    &EXAM_STATUS,
    &MEASUREMENT_KIND,
    &VA_DISTANCE,
    &VA_CORRECTION,
    &VA_NOTATION,
    &REFRACTION_KIND,
    &PRISM_BASE,
    &TONOMETRY_METHOD,
    &STRUCTURE_STATUS,
    &NUCLEAR_CATARACT,
    &CORTICAL_CATARACT,
    &IRIS_CONFIGURATION,
    &EOM_DEVIATION,
    &PUNCTUM_STATE,
    &LACRIMAL_PASSAGE,
    &REGURGITATION,
    &VITREOUS_STATE,
    &PERIPHERY_FINDING,
    &IMAGING_MODALITY,
    &MEDICINE_FORM,
    &MEDICINE_ROUTE,
    &PROCEDURE_CATEGORY,
    &SURGERY_EYE,
    &ANAESTHESIA,
    &SURGERY_PRIORITY,
    &SURGERY_STATUS,
    &STOCK_MOVEMENT_KIND,
    &PURCHASE_ORDER_STATUS,
    &DELIVERY_STATUS,
    &PHARMACY_TRANSACTION_STATUS,
    &BILLING_KIND,
    &BILLING_STATUS,
    &QUEUE_PRIORITY,
    &QUEUE_STATUS,
    &APPOINTMENT_STATUS,
    &RECALL_STATUS,
    &LATERALITY,
    &PROBLEM_STATUS,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_words_or_as_their_own_label() {
        assert_eq!(SEX.label("female"), "Female");
        assert_eq!(CIVIL_STATUS.label("married"), "Married");
        assert_eq!(QUEUE_STATUS.label("no_show"), "No show");
        assert_eq!(VISIT_TYPE.label("follow_up"), "Follow-up");
        assert_eq!(IMAGING_MODALITY.label("oct"), "OCT");
        assert_eq!(SEX.label(""), "");
    }

    #[test]
    fn every_own_label_is_of_a_listed_enumerations_value() {
        for (enumeration, labels) in LABELS {
            assert!(ALL.iter().any(|listed| std::ptr::eq(*listed, *enumeration)), "{}", enumeration.name);
            for (value, _) in *labels {
                assert!(enumeration.values.contains(value), "{}: {value}", enumeration.name);
            }
        }
    }
}

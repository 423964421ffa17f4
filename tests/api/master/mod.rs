//! Master data, lookups and enumerations: money and codes,
//! status toggles, references that must name live and active rows, surgery schedules with
//! their moves and conflicts (concurrent bookings included), and branch time zones. Global
//! routes, over HTTP against a real server and a fresh database.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::collections::BTreeSet;

use crate::support::{
    Clinic, Reply, TestApp, assert_error, assert_invalid, assert_status, column, id_of, ids, reply,
};
use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

mod lookups;
mod references;
mod resources;
mod surgery;
mod time_zones;

const BILL_ITEMS: &str = "/api/v1/bill-items";
const MEDICINES: &str = "/api/v1/medicines";
const PROCEDURES: &str = "/api/v1/procedures";
const INSURANCES: &str = "/api/v1/insurances";
const SERVICES: &str = "/api/v1/services";
const DOCTORS: &str = "/api/v1/doctors";
const SCHEDULES: &str = "/api/v1/surgery-schedules";
const CATEGORIES: &str = "/api/v1/bill-item-categories";
const PAYMENT_METHODS: &str = "/api/v1/payment-methods";
const SUPPLIERS: &str = "/api/v1/suppliers";
const PO_STATUSES: &str = "/api/v1/purchase-order-statuses";
const SYSTEM_AUDIT: &str = "/api/v1/system-audit-logs";
const BRANCHES: &str = "/api/v1/branches";

/// Every enumeration `/enums` lists, values in order.
const ENUMS: &[(&str, &[&str])] = &[
    ("sex", &["male", "female", "other", "unknown"]),
    ("civil_status", &["single", "married", "widowed", "separated", "divorced"]),
    ("patient_status", &["active", "inactive", "deceased"]),
    ("visit_type", &["new", "follow_up", "emergency", "post_op"]),
    ("visit_status", &["scheduled", "checked_in", "in_progress", "completed", "cancelled"]),
    ("eye", &["right", "left", "both", "n_a"]),
    ("severity", &["mild", "moderate", "severe"]),
    ("allergy_status", &["active", "inactive", "resolved"]),
    ("branch_status", &["provisioning", "active", "archived"]),
    ("migration_state", &["pending", "current", "failed"]),
    ("record_status", &["active", "inactive"]),
    (
        "exam_kind",
        &[
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
    ),
    ("exam_status", &["draft", "signed"]),
    ("measurement_kind", &["iop", "va_logmar", "sphere", "cylinder", "cd_ratio"]),
    ("va_distance", &["distance", "near"]),
    (
        "va_correction",
        &["unaided", "glasses", "contact_lens", "pinhole", "auto_refraction", "formal_refraction"],
    ),
    ("va_notation", &["snellen_m", "snellen_ft", "decimal", "logmar", "etdrs_letters", "n_point"]),
    ("refraction_kind", &["auto", "retinoscopy", "manifest", "cycloplegic", "own_glasses", "final_rx"]),
    ("prism_base", &["up", "down", "in", "out"]),
    (
        "tonometry_method",
        &[
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
    ),
    ("structure_status", &["normal", "abnormal", "not_examined"]),
    ("nuclear_cataract", &["none", "mild", "moderate", "brunescent"]),
    ("cortical_cataract", &["none", "mild", "moderate", "white"]),
    ("iris_configuration", &["flat", "plateau", "concave", "bombe"]),
    (
        "eom_deviation",
        &[
            "orthophoria",
            "esophoria",
            "esotropia",
            "exophoria",
            "exotropia",
            "right_hypertropia",
            "left_hypertropia",
        ],
    ),
    ("punctum_state", &["patent", "stenosed", "absent"]),
    ("lacrimal_passage", &["free", "partial", "none"]),
    ("regurgitation", &["none", "same_punctum", "opposite_punctum"]),
    ("vitreous_state", &["clear", "pvd", "haemorrhage", "cells", "other"]),
    (
        "periphery_finding",
        &["tear", "hole", "detachment", "lattice", "schisis", "neovascularisation", "other"],
    ),
    ("imaging_modality", &["xray", "ct", "mri", "b_scan", "oct", "ffa", "ultrasound", "other"]),
    (
        "medicine_form",
        &[
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
    ),
    (
        "medicine_route",
        &[
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
    ),
    (
        "procedure_category",
        &["consultation", "diagnostic", "laser", "injection", "minor_surgery", "major_surgery", "other"],
    ),
    ("surgery_eye", &["right", "left", "both"]),
    ("anaesthesia", &["topical", "sub_tenon", "peribulbar", "retrobulbar", "local", "sedation", "general"]),
    ("surgery_priority", &["routine", "urgent", "emergency"]),
    ("surgery_status", &["scheduled", "confirmed", "completed", "cancelled", "postponed"]),
    (
        "stock_movement_kind",
        &["receipt", "dispense", "return", "adjustment", "transfer_out", "transfer_in", "expired", "damaged"],
    ),
    ("purchase_order_status", &["draft", "ordered", "partially_received", "received", "closed", "cancelled"]),
    ("delivery_status", &["draft", "posted", "cancelled"]),
    ("pharmacy_transaction_status", &["draft", "completed", "voided"]),
    ("billing_kind", &["charge", "discount", "payment", "refund"]),
    ("billing_status", &["open", "posted", "voided"]),
    ("queue_priority", &["normal", "priority", "urgent"]),
    ("queue_status", &["waiting", "called", "serving", "completed", "skipped", "no_show", "transferred"]),
    ("appointment_status", &["booked", "arrived", "in_progress", "completed", "cancelled", "no_show"]),
    ("recall_status", &["pending", "booked", "done", "cancelled"]),
    ("laterality", &["right", "left", "both", "none"]),
    ("problem_status", &["active", "resolved"]),
];

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn merged(mut body: Value, extra: Value) -> Value {
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
    body
}

fn day(offset: i64) -> String {
    (OffsetDateTime::now_utc().date() + time::Duration::days(offset)).to_string()
}

/// An RFC 3339 instant `minutes` from now (negative: in the past), to the minute.
fn from_now(minutes: i64) -> String {
    let at = OffsetDateTime::now_utc() + time::Duration::minutes(minutes);
    at.replace_second(0).unwrap().replace_nanosecond(0).unwrap().format(&Rfc3339).unwrap()
}

/// A valid create body for a master-data path, `extra` merged in.
fn master_body(path: &str, extra: Value) -> Value {
    let body = match path {
        BILL_ITEMS => {
            json!({ "code": "cons-01", "name": "Consultation", "bill_item_category_id": 1, "unit_price": 1250 })
        }
        MEDICINES => {
            json!({ "generic_name": "Timolol", "form": "drops", "route": "ophthalmic", "unit": "bottle" })
        }
        PROCEDURES => json!({ "code": "phaco", "name": "Phacoemulsification", "category": "major_surgery" }),
        INSURANCES => json!({
            "code": "hmo-a", "payer_name": "Acme Health", "coverage_percent": 80, "valid_from": day(-30),
        }),
        SERVICES => json!({ "code": "cons", "name": "Consultation", "price": "500" }),
        DOCTORS => json!({ "first_name": "Rosa", "last_name": "Santos", "license_no": "PRC-0001" }),
        other => panic!("no sample for {other}"),
    };
    merged(body, extra)
}

async fn master(app: &TestApp, path: &str, extra: Value) -> Value {
    app.created(path, None, master_body(path, extra)).await
}

//! Master data: what branches bill, prescribe, perform and refer
//! to. Medicines, procedures, insurances and services toggle between active and inactive.

use serde_json::{Map, Value};

use crate::enums::{MEDICINE_FORM, MEDICINE_ROUTE, PROCEDURE_CATEGORY, RECORD_STATUS};
use crate::permissions::{MASTER_DATA_READ, MASTER_DATA_WRITE};
use crate::resource::actions::TOGGLE_STATUS;
use crate::resource::field::{
    Field, Kind, boolean, code, date, days_in_order, integer, money, num, one_of, plain_code, registry_ref,
    text,
};
use crate::resource::{Resource, Scope, Unique};

/// Master data lives in the registry and is read and written with the master-data permissions.
const MASTER: Resource = Resource {
    scope: Scope::Registry,
    read_permission: MASTER_DATA_READ,
    write_permission: MASTER_DATA_WRITE,
    ..Resource::DEFAULTS
};

const fn status() -> Field {
    one_of("status", &RECORD_STATUS).defaulted()
}

const fn unique_code(index: &'static str) -> [Unique; 1] {
    [Unique { index, field: "code", message: "The code has already been taken." }]
}

pub static BILL_ITEMS: Resource = Resource {
    path: "bill-items",
    table: "bill_items",
    label: "Bill item",
    plural: "bill items",
    fields: &[
        code("code").required(),
        text("name", 200).required(),
        registry_ref("bill_item_category_id", "bill_item_categories").required(),
        money("unit_price").required(),
        text("description", 500),
        boolean("active").defaulted(),
    ],
    search: &["code", "name"],
    sort_fields: &["name", "code", "unit_price", "created_at"],
    default_sort: "name",
    filters: &["bill_item_category_id", "active"],
    unique: &unique_code("bill_items_code_key"),
    ..MASTER
};

pub static MEDICINES: Resource = Resource {
    path: "medicines",
    table: "medicines",
    label: "Medicine",
    plural: "medicines",
    fields: &[
        text("generic_name", 200).required(),
        text("brand_name", 200),
        one_of("form", &MEDICINE_FORM).required(),
        text("strength", 50),
        one_of("route", &MEDICINE_ROUTE).required(),
        text("unit", 30).required(),
        boolean("requires_prescription").defaulted(),
        status(),
    ],
    search: &["generic_name", "brand_name"],
    sort_fields: &["generic_name", "brand_name", "created_at"],
    default_sort: "generic_name",
    filters: &["form", "route", "requires_prescription", "status"],
    actions: &[TOGGLE_STATUS],
    ..MASTER
};

pub static PROCEDURES: Resource = Resource {
    path: "procedures",
    table: "procedures",
    label: "Procedure",
    plural: "procedures",
    fields: &[
        code("code").required(),
        text("name", 200).required(),
        one_of("category", &PROCEDURE_CATEGORY).required(),
        integer("default_duration_minutes", 1, 720),
        money("price").defaulted(),
        boolean("billable").defaulted(),
        status(),
    ],
    search: &["code", "name"],
    sort_fields: &["name", "code", "price", "created_at"],
    default_sort: "name",
    filters: &["category", "billable", "status"],
    unique: &unique_code("procedures_code_key"),
    actions: &[TOGGLE_STATUS],
    ..MASTER
};

/// A plan's validity ends on or after it starts.
fn valid_in_order(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    days_in_order(
        record,
        "valid_from",
        "valid_to",
        "The valid to date must be on or after the valid from date.",
    )
}

pub static INSURANCES: Resource = Resource {
    path: "insurances",
    table: "insurances",
    label: "Insurance",
    plural: "insurances",
    fields: &[
        code("code").required(),
        text("payer_name", 200).required(),
        text("plan_name", 200),
        num("coverage_percent", "0", "100", "0.01").required(),
        money("copay").defaulted(),
        date("valid_from").required(),
        date("valid_to"),
        status(),
    ],
    rules: &[valid_in_order],
    search: &["code", "payer_name", "plan_name"],
    sort_fields: &["payer_name", "code", "valid_to", "created_at"],
    default_sort: "payer_name",
    filters: &["status"],
    unique: &unique_code("insurances_code_key"),
    actions: &[TOGGLE_STATUS],
    ..MASTER
};

pub static SERVICES: Resource = Resource {
    path: "services",
    table: "services",
    label: "Service",
    plural: "services",
    fields: &[
        plain_code("code", 2, 10).required(),
        text("name", 200).required(),
        text("description", 1000),
        money("price").required(),
        integer("default_duration_minutes", 1, 720),
        status(),
    ],
    search: &["code", "name"],
    sort_fields: &["name", "code", "price", "created_at"],
    default_sort: "name",
    filters: &["status"],
    unique: &unique_code("services_code_key"),
    actions: &[TOGGLE_STATUS],
    ..MASTER
};

pub static DOCTORS: Resource = Resource {
    path: "doctors",
    table: "doctors",
    label: "Doctor",
    plural: "doctors",
    fields: &[
        text("first_name", 100).required(),
        text("last_name", 100).required(),
        text("specialization", 100),
        text("license_no", 50).required(),
        Field::new("phone", Kind::Phone),
        Field::new("email", Kind::Email),
        registry_ref("user_id", "users"),
        money("consultation_fee").defaulted(),
        boolean("active").defaulted(),
    ],
    search: &["first_name", "last_name", "license_no"],
    sort_fields: &["last_name", "first_name", "created_at"],
    default_sort: "last_name",
    filters: &["specialization", "user_id", "active"],
    unique: &[
        Unique {
            index: "doctors_license_no_key",
            field: "license_no",
            message: "The license number has already been taken.",
        },
        Unique { index: "doctors_user_id_key", field: "user_id", message: "The user is already a doctor." },
    ],
    ..MASTER
};

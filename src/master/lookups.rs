//! Lookups: short lists every signed-in user reads and admins keep.

use crate::permissions::{ADMIN_ACCESS, ANY_USER};
use crate::resource::field::{Field, Kind, boolean, code, text};
use crate::resource::{Resource, Scope, Unique};

const LOOKUP: Resource = Resource {
    scope: Scope::Registry,
    read_permission: ANY_USER,
    write_permission: ADMIN_ACCESS,
    ..Resource::DEFAULTS
};

pub static BILL_ITEM_CATEGORIES: Resource = Resource {
    path: "bill-item-categories",
    table: "bill_item_categories",
    label: "Bill item category",
    plural: "bill item categories",
    fields: &[text("name", 100).required(), text("description", 500), boolean("active").defaulted()],
    search: &["name"],
    sort_fields: &["name", "created_at"],
    default_sort: "name",
    filters: &["active"],
    unique: &[Unique {
        index: "bill_item_categories_name_key",
        field: "name",
        message: "The name has already been taken.",
    }],
    ..LOOKUP
};

pub static PAYMENT_METHODS: Resource = Resource {
    path: "payment-methods",
    table: "payment_methods",
    label: "Payment method",
    plural: "payment methods",
    fields: &[
        code("code").required(),
        text("name", 100).required(),
        boolean("requires_reference").defaulted(),
        boolean("active").defaulted(),
    ],
    search: &["code", "name"],
    sort_fields: &["name", "code", "created_at"],
    default_sort: "name",
    filters: &["active"],
    unique: &[Unique {
        index: "payment_methods_code_key",
        field: "code",
        message: "The code has already been taken.",
    }],
    ..LOOKUP
};

pub static SUPPLIERS: Resource = Resource {
    path: "suppliers",
    table: "suppliers",
    label: "Supplier",
    plural: "suppliers",
    fields: &[
        text("name", 200).required(),
        text("contact_name", 200),
        Field::new("phone", Kind::Phone),
        Field::new("email", Kind::Email),
        text("address", 500),
        text("tax_id", 50),
        boolean("active").defaulted(),
    ],
    search: &["name", "contact_name"],
    sort_fields: &["name", "created_at"],
    default_sort: "name",
    filters: &["active"],
    unique: &[Unique {
        index: "suppliers_name_key",
        field: "name",
        message: "The name has already been taken.",
    }],
    ..LOOKUP
};

/// Fixed, in lifecycle order; a list only.
pub static PURCHASE_ORDER_STATUSES: Resource = Resource {
    path: "purchase-order-statuses",
    table: "purchase_order_statuses",
    label: "Purchase order status",
    plural: "purchase order statuses",
    read_only: &[
        ("value", crate::resource::Shape::Text),
        ("label", crate::resource::Shape::Text),
        ("position", crate::resource::Shape::Integer),
    ],
    computed: &[],
    sort_fields: &["position", "value"],
    default_sort: "position",
    writable: false,
    soft_delete: false,
    trailing: &[],
    ..LOOKUP
};

//! Master data and lookups shared by every branch, and the enumerations of the API.

pub mod catalogue;
pub mod diagnosis_codes;
pub mod lookups;
pub mod schedules;

use salvo::oapi::{Array, Object, PathItemType};
use salvo::prelude::*;
use serde_json::{Map, Value};

use crate::enums::ALL;
use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::{self as web};
use crate::resource::Resource;

pub static RESOURCES: &[&Resource] = &[
    &catalogue::BILL_ITEMS,
    &catalogue::MEDICINES,
    &catalogue::PROCEDURES,
    &catalogue::INSURANCES,
    &catalogue::SERVICES,
    &catalogue::DOCTORS,
    &schedules::SURGERY_SCHEDULES,
    &lookups::BILL_ITEM_CATEGORIES,
    &lookups::PAYMENT_METHODS,
    &lookups::SUPPLIERS,
    &lookups::PURCHASE_ORDER_STATUSES,
    &diagnosis_codes::DIAGNOSIS_CODES,
];

/// `GET /enums`: every enumeration the API uses, its values in order.
#[handler]
pub async fn enums(res: &mut Response) {
    let all: Map<String, Value> =
        ALL.iter().map(|e| (e.name.to_owned(), Value::from(e.values.to_vec()))).collect();
    web::ok(res, "Enumerations retrieved.", all);
}

/// `GET /enums`.
pub fn endpoints() -> Vec<Endpoints> {
    let mut signed_in = Endpoints::new(Access::User);
    let mut values = Object::new();
    for e in ALL {
        let component = salvo::oapi::Ref::from_schema_name(crate::resource::docs::enumeration_name(e));
        values = values.property(e.name, Array::new().items(component));
    }
    let op = signed_in.operation("lookups", "Every enumeration and its values, in order");
    let op = Doc::answers(op, "200", "Enumerations", docs::envelope(values));
    signed_in.add(PathItemType::Get, "enums", "listEnums", enums, op);
    vec![signed_in]
}

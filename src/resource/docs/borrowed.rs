//! What hand-written routes borrow from the declarations' description.

use salvo::oapi::{Operation, Ref};

use super::schema_name;
use crate::http::docs::Doc;
use crate::resource::Resource;

/// `op` taking the create body of `resource` (its `…Input` component), for a hand-written
/// route that reads it with [`create_body`](crate::resource::input::create_body): a recall
/// made under the patient in its path.
pub fn taking_create_body(op: Operation, resource: &Resource) -> Operation {
    Doc::with_body(op, Ref::from_schema_name(format!("{}Input", schema_name(resource))))
}

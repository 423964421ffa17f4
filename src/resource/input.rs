//! The body of a hand-written route, declared once as fields. The one declaration gives the
//! route's check (the same checks a declared resource's fields get, with the same messages),
//! its typed value and its OpenAPI schema, so the three cannot disagree.
//!
//! A route that takes a body is registered with
//! [`Endpoints::add_taking`](crate::http::endpoints::Endpoints::add_taking), which describes the
//! body from the declaration; the handler reads the body with [`Input::read`], which refuses
//! (500, logged) to read a body the route was not registered with.

use salvo::oapi::{Object, RefOr, Schema};
use salvo::{Depot, Request};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::Resource;
use super::docs::sent_schema;
use super::field::{Field, Rule};
use super::row::typed;
use super::validate::{check_fields, validate};
use crate::http::endpoints::{DeclaredBody, declared_body_of};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::state::AppState;

/// A route's body: its fields (kinds and presence rules) and the rules between them.
#[derive(Debug)]
pub struct Input {
    /// The schema's name in the OpenAPI document's components (`LoginRequest`).
    pub name: &'static str,
    pub fields: &'static [Field],
    /// Rules between the fields, run on those that passed their own check.
    pub rules: &'static [Rule],
    /// What the document says of a field beyond its kind: `(field, description)`.
    pub notes: &'static [(&'static str, &'static str)],
}

impl Input {
    pub const fn new(name: &'static str, fields: &'static [Field]) -> Self {
        Self { name, fields, rules: &[], notes: &[] }
    }

    pub const fn with_notes(mut self, notes: &'static [(&'static str, &'static str)]) -> Self {
        self.notes = notes;
        self
    }

    pub const fn with_rules(mut self, rules: &'static [Rule]) -> Self {
        self.rules = rules;
        self
    }

    /// The body checked and read as `T`; 422 naming every field found wrong.
    pub async fn read<T: DeserializeOwned>(&self, req: &mut Request, depot: &Depot) -> ApiResult<T> {
        let (value, errors) = self.read_partly(req, depot).await?;
        if errors.is_empty() { Ok(value) } else { Err(ApiError::Validation(errors)) }
    }

    /// The fields that passed, read as `T` (whose fields are then optional), beside the errors
    /// of those that did not: for a handler that adds checks of its own (a reference looked up)
    /// and reports them all together.
    pub async fn read_partly<T: DeserializeOwned>(
        &self,
        req: &mut Request,
        depot: &Depot,
    ) -> ApiResult<(T, FieldErrors)> {
        if declared_body_of(depot) != Some(self.name) {
            return Err(ApiError::Internal(anyhow::anyhow!(
                "a route reads the body {} it was not registered with",
                self.name
            )));
        }
        let body = crate::http::json_object(req, &AppState::of(depot).settings).await?;
        self.check(&body)
    }

    /// [`read_partly`](Self::read_partly) of a body already parsed.
    pub fn check<T: DeserializeOwned>(&self, body: &Map<String, Value>) -> ApiResult<(T, FieldErrors)> {
        let (mut clean, mut errors) = check_fields(self.fields.iter(), body, true, |_| false);
        for rule in self.rules {
            for (path, message) in rule(&mut clean) {
                errors.entry(path).or_default().push(message);
            }
        }
        match typed(&clean) {
            Ok(value) => Ok((value, errors)),
            // A required field that failed is missing from what passed.
            Err(_) if !errors.is_empty() => Err(ApiError::Validation(errors)),
            Err(e) => Err(e),
        }
    }
}

/// The body of a create of `resource` that a hand-written handler serves in place of the shared
/// one (`Endpoints::serve_declared`), checked against the resource's declaration, which
/// describes it: 422 naming every field found wrong.
pub async fn create_body(
    req: &mut Request,
    depot: &Depot,
    resource: &Resource,
) -> ApiResult<Map<String, Value>> {
    let body = crate::http::json_object(req, &AppState::of(depot).settings).await?;
    validate(resource, &body, true).map_err(ApiError::Validation)
}

impl DeclaredBody for Input {
    fn name(&self) -> &'static str {
        self.name
    }

    fn schema(&self) -> RefOr<Schema> {
        let mut body = Object::new();
        for f in self.fields {
            let schema =
                match (sent_schema(f.kind, !f.required), self.notes.iter().find(|(n, _)| *n == f.name)) {
                    (RefOr::Type(Schema::Object(object)), Some((_, note))) => {
                        RefOr::Type(Schema::Object(Box::new((*object).description(*note))))
                    }
                    (schema, _) => schema,
                };
            body = body.property(f.name, schema);
            if f.required {
                body = body.required(f.name);
            }
        }
        body.into()
    }

    fn is_required(&self) -> bool {
        self.fields.iter().any(|f| f.required)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::resource::field::{integer, text};

    const MERGE: Input =
        Input::new("MergeRequest", &[integer("duplicate_id", 1, i64::MAX).required(), text("reason", 500)]);

    #[derive(Deserialize, Debug)]
    struct Merge {
        duplicate_id: i64,
        reason: Option<String>,
    }

    #[test]
    fn a_body_is_checked_then_read_typed() {
        let body = json!({ "duplicate_id": 7, "reason": "  same person " });
        let (merge, errors) = MERGE.check::<Merge>(body.as_object().unwrap()).unwrap();
        assert!(errors.is_empty());
        assert_eq!((merge.duplicate_id, merge.reason.as_deref()), (7, Some("same person")));
    }

    #[test]
    fn a_missing_required_field_is_a_422_not_a_500() {
        let body = json!({ "reason": "x" });
        match MERGE.check::<Merge>(body.as_object().unwrap()) {
            Err(ApiError::Validation(errors)) => {
                assert_eq!(errors["duplicate_id"], ["The duplicate id field is required."]);
            }
            other => panic!("expected a 422, got {other:?}"),
        }
    }
}

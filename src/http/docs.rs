//! The OpenAPI description, generated from the route declarations, and the interactive page.
//!
//! Every route adds itself through [`Doc`]; resources declared through the shared machinery
//! describe themselves from their field lists, so the document cannot drift from the code.
//! The page (Swagger UI) is served from files compiled into the binary: it loads nothing
//! from another host, because clinics often run on closed networks.

use salvo::oapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme};
use salvo::oapi::{
    BasicType, Content, KnownFormat, Object, OpenApi, Operation, Parameter, ParameterIn, PathItem,
    PathItemType, RefOr, RequestBody, Required, Schema, SchemaFormat, SecurityRequirement, SecurityScheme,
};

use super::text::Lines;

pub const BEARER: &str = "bearerAuth";
/// A waiting-room screen's key (`X-Display-Key`): its own stream, nothing else.
pub const DISPLAY_KEY: &str = "displayKey";
/// A doctor's calendar key (`?key=`): their appointment feed at one branch, nothing else.
pub const CALENDAR_KEY: &str = "calendarKey";

pub struct Doc {
    api: OpenApi,
}

/// Who may call a route.
#[derive(Clone, Copy)]
pub enum Access {
    Public,
    User,
    /// Needs `X-Branch-Id` too.
    Branch,
}

pub fn string() -> Object {
    Object::with_type(BasicType::String)
}

/// Characters text may hold: no control characters but tab, and for one line of text no line
/// breaks either (what `resource::check` refuses), as a regular-expression class.
fn text_characters(one_line: bool) -> &'static str {
    if one_line { r"[^\x00-\x08\x0a-\x1f\x7f-\x9f]" } else { r"[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]" }
}

/// The pattern of text as the server takes it; `blank`: whether it may be empty or only
/// white space (optional fields, where that clears them).
pub fn text_pattern(one_line: bool, blank: bool) -> String {
    let c = text_characters(one_line);
    if blank { format!("^{c}*$") } else { format!(r"^{c}*[^\s\x00-\x1f\x7f-\x9f]{c}*$") }
}

/// A value that is only white space, which the server trims to nothing: Unicode's white space
/// less the control characters `http::text` refuses (tab taken, line breaks where `lines`
/// allows them).
pub fn blank_pattern(lines: Lines) -> &'static str {
    match lines {
        Lines::One => r"^[\t \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$",
        Lines::Many => r"^[\t\n\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$",
    }
}

/// A search term: at most 200 characters, no control characters but tab.
pub fn search_term() -> Object {
    string().max_length(crate::http::list::MAX_SEARCH_LEN).pattern(text_pattern(true, true))
}
/// Bytes of `media_type`, as a body or an answer: `format: binary`, which client generators
/// read as a file, and `contentMediaType`, which OpenAPI 3.1 says it with.
pub fn binary(media_type: &str) -> Object {
    string().format(SchemaFormat::Custom("binary".into())).content_media_type(media_type)
}

pub fn integer() -> Object {
    Object::with_type(BasicType::Integer).format(SchemaFormat::KnownFormat(KnownFormat::Int64))
}
pub fn date() -> Object {
    string().format(SchemaFormat::KnownFormat(KnownFormat::Date))
}
pub fn timestamp() -> Object {
    string().format(SchemaFormat::KnownFormat(KnownFormat::DateTime))
}
/// A local date or an instant (`from` / `to` of a span).
pub fn day_or_instant() -> RefOr<Schema> {
    Schema::AnyOf(salvo::oapi::schema::AnyOf::new().item(date()).item(timestamp())).into()
}

fn error_schema() -> Object {
    Object::new()
        .property("message", string())
        .property("code", string().description("Stable snake_case error code"))
        .required("message")
}

/// The body of a 301 or 410 `merged`.
fn merged_schema() -> Object {
    error_schema()
        .property("merged_into_id", integer().description("The record it was merged into"))
        .property("location", string().description("The same route of that record"))
}

fn validation_schema() -> Object {
    Object::new()
        .property("message", string())
        .property("code", string())
        .property(
            "errors",
            Object::new()
                .additional_properties(salvo::oapi::Array::new().items(string()))
                .description("Field name -> messages"),
        )
        .required("message")
        .required("errors")
}

fn json(schema: impl Into<RefOr<Schema>>) -> Content {
    Content::new(schema)
}

fn response(description: &str, schema: impl Into<RefOr<Schema>>) -> salvo::oapi::Response {
    salvo::oapi::Response::new(description).add_content("application/json", json(schema))
}

/// `X-Branch-Id`, the header of every branch route.
fn branch_header() -> Parameter {
    Parameter::new("X-Branch-Id")
        .location(ParameterIn::Header)
        .required(Required::True)
        .schema(integer().minimum(1))
        .description("The branch whose data this request reads or writes")
}

/// The media type of FHIR's JSON.
pub const FHIR_JSON: &str = "application/fhir+json";

/// A FHIR answer, in FHIR JSON or plain JSON (the same body).
fn fhir_response(description: &str, schema: Object) -> salvo::oapi::Response {
    salvo::oapi::Response::new(description)
        .add_content(FHIR_JSON, Content::new(schema.clone()))
        .add_content("application/json", Content::new(schema))
}

/// A FHIR R4 `OperationOutcome`: how a FHIR route answers an error.
fn operation_outcome() -> Object {
    let issue = Object::new()
        .property("severity", string().enum_values(["fatal", "error", "warning", "information"]))
        .property("code", string().description("FHIR issue type: invalid, login, forbidden, not-found, ..."))
        .property("diagnostics", string())
        .property("details", Object::new().description("The server's stable error code and message"))
        .required("severity")
        .required("code");
    Object::new()
        .description("A FHIR R4 OperationOutcome")
        .property("resourceType", string().enum_values(["OperationOutcome"]))
        .property("issue", salvo::oapi::Array::new().items(issue))
        .required("resourceType")
        .required("issue")
}

/// `{message, data}`.
pub fn envelope(data: impl Into<RefOr<Schema>>) -> Object {
    Object::new().property("message", string()).property("data", data).required("message")
}

/// `{data, links, meta}`.
pub fn paginated(item: impl Into<RefOr<Schema>>) -> Object {
    let nullable_string = Object::with_type(
        [BasicType::String, BasicType::Null].into_iter().collect::<salvo::oapi::SchemaType>(),
    );
    let nullable_int = Object::with_type(
        [BasicType::Integer, BasicType::Null].into_iter().collect::<salvo::oapi::SchemaType>(),
    );
    Object::new()
        .property("data", salvo::oapi::Array::new().items(Into::<RefOr<Schema>>::into(item)))
        .property(
            "links",
            Object::new()
                .property("first", string())
                .property("last", string())
                .property("prev", nullable_string.clone())
                .property("next", nullable_string),
        )
        .property(
            "meta",
            Object::new()
                .property("current_page", integer())
                .property("from", nullable_int.clone())
                .property("last_page", integer())
                .property("per_page", integer())
                .property("to", nullable_int)
                .property("total", integer()),
        )
}

pub fn query(name: &str, schema: impl Into<RefOr<Schema>>, description: &str) -> Parameter {
    Parameter::new(name)
        .location(ParameterIn::Query)
        .required(Required::False)
        .schema(schema)
        .description(description)
}

pub fn path_id() -> Parameter {
    path_param("id")
}

/// A record's id in a path: a positive 64-bit integer (anything else names no record: 404).
pub fn path_param(name: &str) -> Parameter {
    Parameter::new(name).location(ParameterIn::Path).required(Required::True).schema(id())
}

/// A record's id: a positive 64-bit integer.
pub fn id() -> Object {
    integer().minimum(1).maximum(i64::MAX)
}

/// A query parameter's value, or a blank one, which the server takes as left out.
pub fn or_blank(schema: impl Into<RefOr<Schema>>) -> RefOr<Schema> {
    let blank = string().pattern(blank_pattern(Lines::One)).description("Blank: left out");
    Schema::AnyOf(salvo::oapi::schema::AnyOf::new().item(schema).item(blank)).into()
}

impl Default for Doc {
    fn default() -> Self {
        let mut api = OpenApi::new("clinic-server", env!("CARGO_PKG_VERSION"))
            .add_security_scheme(
                BEARER,
                SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer).bearer_format("opaque")),
            )
            .add_security_scheme(
                DISPLAY_KEY,
                SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                    "X-Display-Key",
                    "A display key of the branch service (`dk_...`), made by an administrator",
                ))),
            )
            .add_security_scheme(
                CALENDAR_KEY,
                SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                    "key",
                    "A calendar key of the doctor at a branch (`ck_...`), made by an administrator",
                ))),
            );
        api.info.description = Some(
            "Multi-branch clinic records API. Authenticate with `POST /api/v1/auth/login`, then send \
             `Authorization: Bearer <token>`; branch-scoped routes also need `X-Branch-Id`."
                .into(),
        );
        Self { api }
    }
}

impl Doc {
    /// Starts an operation with the parameters, security and error answers its access implies.
    pub fn operation(access: Access, tag: &str, summary: &str) -> Operation {
        let mut op = Operation::new().summary(summary).add_tag(tag);
        match access {
            Access::Public => op = op.securities([]),
            Access::User | Access::Branch => {
                op = op
                    .add_security(SecurityRequirement::new(BEARER, Vec::<String>::new()))
                    .add_response("401", response("Missing or invalid token", error_schema()))
                    .add_response(
                        "403",
                        response(
                            "Not permitted; mfa_enrolment_required: the caller's permissions require a second factor, not yet on",
                            error_schema(),
                        ),
                    )
                    .add_response("429", response("Rate limit exceeded", error_schema()))
                    .add_response(
                        "503",
                        response(
                            "No database connection free in time, or the branch is under maintenance",
                            error_schema(),
                        ),
                    );
            }
        }
        if let Access::Branch = access {
            op = op
                .add_parameter(branch_header())
                .add_response("400", response("Missing or malformed X-Branch-Id", error_schema()));
        }
        op
    }

    /// Starts the operation of a FHIR route: as [`Doc::operation`], but every answer is FHIR
    /// JSON (`application/fhir+json`, or `application/json` for a client that asks only for
    /// that) and every error an `OperationOutcome`.
    pub fn fhir_operation(access: Access, tag: &str, summary: &str) -> Operation {
        let outcome = |description: &str| fhir_response(description, operation_outcome());
        let mut op = Operation::new()
            .summary(summary)
            .add_tag(tag)
            .add_response("406", outcome("Neither FHIR JSON nor JSON is acceptable"))
            .add_response(
                "503",
                outcome("The database is busy or out of reach; try again after Retry-After"),
            );
        match access {
            Access::Public => op = op.securities([]),
            Access::User | Access::Branch => {
                op = op
                    .add_security(SecurityRequirement::new(BEARER, Vec::<String>::new()))
                    .add_response("401", outcome("Missing or invalid token"))
                    .add_response("403", outcome("Not permitted to read this resource type, or this branch"))
                    .add_response("429", outcome("Rate limit exceeded"));
            }
        }
        if let Access::Branch = access {
            op = op.add_parameter(branch_header()).add_response(
                "400",
                outcome("Missing X-Branch-Id, or a search parameter that is unknown or malformed"),
            );
        }
        op
    }

    /// A FHIR answer of a FHIR route.
    pub fn fhir_answers(op: Operation, status: &str, description: &str, schema: Object) -> Operation {
        op.add_response(status, fhir_response(description, schema))
    }

    pub fn with_body(op: Operation, schema: impl Into<RefOr<Schema>>) -> Operation {
        Self::body(op, schema, Required::True)
    }

    /// A body that may be left out (an update that sends no field).
    pub fn with_optional_body(op: Operation, schema: impl Into<RefOr<Schema>>) -> Operation {
        Self::body(op, schema, Required::False)
    }

    fn body(op: Operation, schema: impl Into<RefOr<Schema>>, required: Required) -> Operation {
        op.request_body(RequestBody::new().required(required).add_content("application/json", json(schema)))
            .add_response("422", response("Validation failed", validation_schema()))
            .add_response("400", response("The body is not a JSON object", error_schema()))
            .add_response("413", response("The body is too large", error_schema()))
            .add_response("415", response("The body is not JSON", error_schema()))
    }

    /// A 422 for bad query parameters.
    pub fn invalid(op: Operation, description: &str) -> Operation {
        op.add_response("422", response(description, validation_schema()))
    }

    /// A 412 for an `If-Match` that no longer matches.
    pub fn stale(op: Operation) -> Operation {
        op.add_response("412", response("The record changed since the ETag sent", error_schema()))
    }

    /// A 409 for a change the record's state forbids.
    pub fn conflict(op: Operation, description: &str) -> Operation {
        op.add_response("409", response(description, error_schema()))
    }

    /// Changes an operation already described (handlers that answer more than the shared ones).
    pub fn amend(&mut self, method: PathItemType, path: &str, amend: impl FnOnce(Operation) -> Operation) {
        if let Some(item) = self.api.paths.get_mut(path)
            && let Some(op) = item.operations.0.remove(&method)
        {
            item.operations.0.insert(method, amend(op));
        }
    }

    pub fn answers(
        op: Operation,
        status: &str,
        description: &str,
        schema: impl Into<RefOr<Schema>>,
    ) -> Operation {
        op.add_response(status, response(description, schema))
    }

    /// An operation that also answers a printed document, in PDF, when `Accept` prefers it
    /// to JSON; a record without a printed form is a 406 `not_printable`.
    pub fn printable(mut op: Operation, describes: &str) -> Operation {
        let pdf = Content::new(binary("application/pdf"));
        if let Some(RefOr::Type(ok)) = op.responses.get_mut("200") {
            ok.contents.insert("application/pdf".into(), pdf);
            ok.description = format!(
                "{} (JSON); with `Accept: application/pdf`, {} under the branch's letterhead, marked DRAFT while unsigned",
                ok.description,
                describes.to_lowercase()
            );
        }
        op.add_response(
            "406",
            response(
                "not_printable: this record has no printed form (the answer says why); not_acceptable: neither JSON nor PDF is allowed",
                error_schema(),
            ),
        )
    }

    /// 401 and 403 for a route that checks a credential of its own (a display key), with the
    /// 429 of the bad-credential limit.
    pub fn rejected(op: Operation, unauthenticated: &str, forbidden: &str) -> Operation {
        op.add_response("401", response(unauthenticated, error_schema()))
            .add_response("403", response(forbidden, error_schema()))
            .add_response("429", response("Too many bad keys or tokens from this address", error_schema()))
    }

    /// 401 for a route that checks a credential of its own and tells no wrong one from
    /// another (a calendar key), with the 429 of the bad-credential limit.
    pub fn unkeyed(op: Operation, unauthenticated: &str) -> Operation {
        op.add_response("401", response(unauthenticated, error_schema()))
            .add_response("429", response("Too many bad keys or tokens from this address", error_schema()))
    }

    /// An error answer (`{message, code}`) at `status`.
    pub fn error(op: Operation, status: &str, description: &str) -> Operation {
        op.add_response(status, response(description, error_schema()))
    }

    /// A file sent as the body: as itself, in one of `media_types`, or in the part `file` of
    /// `multipart/form-data` beside the fields of `form`.
    pub fn with_file_body(op: Operation, media_types: &[&str], form: Object) -> Operation {
        let mut body = RequestBody::new().required(Required::True);
        for media_type in media_types {
            body = body.add_content(*media_type, Content::new(binary(media_type)));
        }
        let form = form.property("file", binary("application/octet-stream")).required("file");
        op.request_body(body.add_content("multipart/form-data", Content::new(form)))
    }

    /// An answer of bytes in one of `media_types`.
    pub fn answers_bytes(op: Operation, status: &str, description: &str, media_types: &[&str]) -> Operation {
        let mut answer = salvo::oapi::Response::new(description);
        for media_type in media_types {
            answer = answer.add_content(*media_type, Content::new(binary(media_type)));
        }
        op.add_response(status, answer)
    }

    pub fn not_found(op: Operation) -> Operation {
        op.add_response("404", response("Not found", error_schema()))
    }

    /// The answer of a route of a record merged into another: 301 to the same route of that
    /// record for a read, 410 for a write.
    pub fn merged(op: Operation, write: bool) -> Operation {
        if write {
            return Self::merged_write(op, "The record was merged into another; write to that one");
        }
        let location =
            salvo::oapi::Header::new(string()).description("The same route of the record it was merged into");
        op.add_response(
            "301",
            response("The record was merged into another", merged_schema()).add_header("Location", location),
        )
    }

    /// A 410 `merged`: a write naming a record merged into another (`description` says which).
    pub fn merged_write(op: Operation, description: &str) -> Operation {
        op.add_response("410", response(description, merged_schema()))
    }

    /// Changes every operation of the document, given its method and path.
    /// The schema of the document's component `name`, as JSON (what a body's `$ref` names).
    pub fn component(&self, name: &str) -> Option<serde_json::Value> {
        self.api.components.schemas.get(name).and_then(|schema| serde_json::to_value(schema).ok())
    }

    /// Looks at every operation.
    pub fn each_operation_read(&self, mut look: impl FnMut(&Operation)) {
        for item in self.api.paths.values() {
            for op in item.operations.0.values() {
                look(op);
            }
        }
    }

    pub fn each_operation(&mut self, mut change: impl FnMut(PathItemType, &str, Operation) -> Operation) {
        for (path, item) in self.api.paths.iter_mut() {
            let methods: Vec<PathItemType> = item.operations.0.keys().copied().collect();
            for method in methods {
                if let Some(op) = item.operations.0.remove(&method) {
                    item.operations.0.insert(method, change(method, path, op));
                }
            }
        }
    }

    pub fn add(&mut self, method: PathItemType, path: &str, op: Operation) {
        let api = std::mem::take(&mut self.api);
        self.api = api.add_path(path, PathItem::new(method, op));
    }

    /// Adds the component `name`; adding it again must add the same schema (a structure that
    /// several declarations share), never another one under a name already taken.
    pub fn add_schema(&mut self, name: &str, schema: impl Into<RefOr<Schema>>) {
        let schema = schema.into();
        if let Some(known) = self.api.components.schemas.get(name) {
            let json = |s: &RefOr<Schema>| serde_json::to_value(s).ok();
            assert_eq!(json(known), json(&schema), "two schemas are named {name}");
        }
        let api = std::mem::take(&mut self.api);
        self.api = api.add_schema(name, schema);
    }

    /// The document, with the answers every route of a kind can give added where missing:
    /// 406 for an `Accept` the route cannot serve and 503 when the database is out of reach
    /// (every route); 400 for a malformed `Idempotency-Key` and 409 for one reused with another
    /// body (authenticated POSTs).
    pub fn finish(mut self) -> OpenApi {
        for item in self.api.paths.values_mut() {
            for (method, op) in item.operations.0.iter_mut() {
                let authenticated = op.securities.as_ref().is_none_or(|s| !s.is_empty());
                let mut standard = vec![
                    ("406", "No media type the Accept header allows"),
                    ("503", "The database is busy or out of reach; try again after Retry-After"),
                ];
                if *method == PathItemType::Post && authenticated {
                    standard.push(("400", "A malformed Idempotency-Key (or body)"));
                    standard.push(("409", "idempotency_key_reused: the key came with another body"));
                }
                for (status, description) in standard {
                    if !op.responses.contains_key(status) {
                        op.responses.insert(status, response(description, error_schema()));
                    }
                }
            }
        }
        self.api
    }
}

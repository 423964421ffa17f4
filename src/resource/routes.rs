//! HTTP for declared resources: one handler type serves every resource and operation.

use std::sync::Arc;

use salvo::http::header::{ETAG, HeaderValue, LOCATION};
use salvo::oapi::{BasicType, Object, PathItemType, Ref};
use salvo::prelude::*;

use super::field::Kind;
use super::store::{self, Conn, IfMatch, Writer};
use super::{Resource, Scope, Shape};
use crate::app::AppState;
use crate::auth::current_user;
use crate::http::docs::{self, Access, Doc};
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web, list};
use crate::tenancy::BranchRoute;

#[derive(Clone, Copy, Debug)]
pub enum Op {
    List,
    Create,
    Show,
    Update,
    Delete,
}

/// The shared handler of one operation on one resource.
pub struct ResourceHandler {
    resource: &'static Resource,
    op: Op,
}

pub fn handler(resource: &'static Resource, op: Op) -> ResourceHandler {
    ResourceHandler { resource, op }
}

#[async_trait]
impl Handler for ResourceHandler {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, _ctrl: &mut FlowCtrl) {
        if let Err(e) = self.run(req, depot, res).await {
            res.render(e);
        }
    }
}

/// The `If-Match` of a request, if any.
pub fn if_match(req: &Request) -> Option<IfMatch> {
    req.headers().get("if-match").and_then(|v| v.to_str().ok()).map(IfMatch::parse)
}

/// 201 with the record, its ETag and its Location.
pub fn respond_created(req: &Request, res: &mut Response, resource: &Resource, record: serde_json::Value) {
    set_etag(res, &record);
    if let Some(id) = record.get("id").and_then(|v| v.as_i64())
        && let Ok(location) =
            HeaderValue::from_str(&format!("{}/{id}", req.uri().path().trim_end_matches('/')))
    {
        res.headers_mut().insert(LOCATION, location);
    }
    web::created(res, &format!("{} created.", resource.label), record);
}

/// 200 with the record and its ETag.
pub fn respond_updated(res: &mut Response, resource: &Resource, record: serde_json::Value) {
    set_etag(res, &record);
    web::ok(res, &format!("{} updated.", resource.label), record);
}

fn set_etag(res: &mut Response, record: &serde_json::Value) {
    if let Some(tag) = store::etag(record).and_then(|t| HeaderValue::from_str(&t).ok()) {
        res.headers_mut().insert(ETAG, tag);
    }
}

impl ResourceHandler {
    async fn connect(&self, state: &AppState, depot: &Depot) -> ApiResult<Conn> {
        match self.resource.scope {
            Scope::Branch => {
                let route = depot.get_typed::<Arc<BranchRoute>>().map_err(|_| {
                    ApiError::Internal(anyhow::anyhow!("branch route missing for {}", self.resource.path))
                })?;
                Ok(Conn::Branch(state.directory.connect(route).await?))
            }
            Scope::Registry => Ok(Conn::Registry(state.registry.get().await?)),
        }
    }

    async fn run(&self, req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
        let resource = self.resource;
        let state = AppState::of(depot);
        let user = current_user(depot)?;
        let permission = match self.op {
            Op::List | Op::Show => resource.read_permission,
            Op::Create | Op::Update | Op::Delete => resource.write_permission,
        };
        if !user.can(permission) {
            return Err(ApiError::forbidden("You do not have permission to do this."));
        }
        let writer = Writer { user_id: user.id, registry: &state.registry };
        let if_match = || if_match(req);
        let within = match resource.parent {
            Some(parent) => Some((parent.column, web::path_id(req, parent.param)?)),
            None => None,
        };
        let mut conn = self.connect(&state, depot).await?;
        if let Some((_, parent_id)) = within
            && !store::parent_exists(&mut conn, resource, parent_id).await?
        {
            return Err(ApiError::NotFound);
        }
        match self.op {
            Op::List => {
                let pairs = list::query_pairs(req);
                let rules = list::ListRules {
                    sort_fields: resource.sort_fields,
                    default_sort: resource.default_sort,
                    default_direction: resource.default_direction,
                    filters: resource.filters,
                    date_range: resource.date_range.is_some(),
                };
                let query = list::parse(&pairs, &rules)?;
                let (total, rows) = store::list(&mut conn, resource, within, &query).await?;
                let base = web::base_url(req, state.trusts_forwarded_headers(req));
                res.render(Json(list::envelope(&base, req.uri().path(), &pairs, &query, total, rows)));
            }
            Op::Show => {
                let id = web::path_id(req, "id")?;
                let record = store::fetch(&mut conn, resource, within, id, user.id).await?;
                set_etag(res, &record);
                web::ok(res, &format!("{} retrieved.", resource.label), record);
            }
            Op::Create => {
                let body = web::json_object(req, state.settings.max_body_bytes).await?;
                let input = checked_input(&mut conn, &writer, resource, &body, true).await?;
                let record = store::create(&mut conn, &writer, resource, within, input).await?;
                respond_created(req, res, resource, record);
            }
            Op::Update => {
                let id = web::path_id(req, "id")?;
                let if_match = if_match();
                let body = web::json_object(req, state.settings.max_body_bytes).await?;
                let input = checked_input(&mut conn, &writer, resource, &body, false).await?;
                let record = store::update(&mut conn, &writer, resource, within, id, input, if_match).await?;
                respond_updated(res, resource, record);
            }
            Op::Delete => {
                let id = web::path_id(req, "id")?;
                let if_match = if_match();
                store::delete(&mut conn, &writer, resource, within, id, if_match).await?;
                web::done(res, &format!("{} deleted.", resource.label));
            }
        }
        Ok(())
    }
}

/// The body checked against the declaration; when fields are wrong, the references among
/// the others are checked too, so that one 422 names every bad field.
async fn checked_input(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    body: &serde_json::Map<String, serde_json::Value>,
    creating: bool,
) -> ApiResult<serde_json::Map<String, serde_json::Value>> {
    let (input, mut errors) = store::validate_fields(resource, body, creating);
    if errors.is_empty() {
        return Ok(input);
    }
    let more = store::reference_errors(conn, writer, resource, input, &errors).await?;
    errors.extend(more);
    Err(ApiError::Validation(errors))
}

/// `/<path>` and `/<path>/{id}` with the five CRUD operations.
pub fn router(resource: &'static Resource) -> Router {
    let h = |op| ResourceHandler { resource, op };
    if !resource.writable {
        return Router::with_path(resource.path)
            .get(h(Op::List))
            .push(Router::with_path("{id}").get(h(Op::Show)));
    }
    Router::with_path(resource.path)
        .get(h(Op::List))
        .post(h(Op::Create))
        .push(Router::with_path("{id}").get(h(Op::Show)).put(h(Op::Update)).delete(h(Op::Delete)))
}

fn schema_name(resource: &Resource) -> String {
    resource.label.replace(' ', "")
}

/// `type`, or `[type, "null"]` for values that may be null.
fn typed(basic: BasicType, nullable: bool) -> Object {
    if nullable {
        Object::with_type([basic, BasicType::Null].into_iter().collect::<salvo::oapi::SchemaType>())
    } else {
        Object::with_type(basic)
    }
}

fn formatted(format: salvo::oapi::KnownFormat) -> salvo::oapi::SchemaFormat {
    salvo::oapi::SchemaFormat::KnownFormat(format)
}

fn field_schema(kind: Kind, nullable: bool) -> salvo::oapi::RefOr<salvo::oapi::Schema> {
    use salvo::oapi::KnownFormat;
    let text = || typed(BasicType::String, nullable);
    let number = || typed(BasicType::Integer, nullable).format(formatted(KnownFormat::Int64));
    let schema = match kind {
        Kind::Text { max } | Kind::LongText { max } => text().max_length(max),
        Kind::Email => text().format(formatted(KnownFormat::Email)),
        Kind::Phone => text().max_length(32),
        Kind::Integer { min, max } => number().minimum(min).maximum(max),
        Kind::Ref(_) => number().minimum(1).description("Id of an existing record"),
        Kind::Date { .. } => text().format(formatted(KnownFormat::Date)),
        Kind::Bool => typed(BasicType::Boolean, nullable),
        Kind::Enum(values) => {
            let values = values.iter().map(|v| serde_json::Value::from(*v));
            let values: Vec<serde_json::Value> =
                if nullable { values.chain([serde_json::Value::Null]).collect() } else { values.collect() };
            text().enum_values(values)
        }
        Kind::Code { min, max } => {
            text().min_length(min).max_length(max).description("Uppercase letters and digits")
        }
        Kind::Username => text().min_length(3).max_length(50),
        Kind::Password => typed(BasicType::String, false)
            .min_length(8)
            .max_length(128)
            .format(formatted(KnownFormat::Password)),
        Kind::IdList => return list_of(docs::integer(), nullable),
        Kind::NameList => return list_of(docs::string(), nullable),
    };
    schema.into()
}

fn list_of(item: Object, nullable: bool) -> salvo::oapi::RefOr<salvo::oapi::Schema> {
    let list = salvo::oapi::Array::new().items(item);
    let list = if nullable {
        list.schema_type([BasicType::Array, BasicType::Null].into_iter().collect::<salvo::oapi::SchemaType>())
    } else {
        list
    };
    list.into()
}

/// The schema of a column the server fills in.
fn shape_schema(shape: Shape) -> salvo::oapi::RefOr<salvo::oapi::Schema> {
    use salvo::oapi::KnownFormat;
    let schema = match shape {
        Shape::Text => typed(BasicType::String, true),
        Shape::Integer => typed(BasicType::Integer, true).format(formatted(KnownFormat::Int64)),
        Shape::Date => typed(BasicType::String, true).format(formatted(KnownFormat::Date)),
        Shape::Timestamp => typed(BasicType::String, true).format(formatted(KnownFormat::DateTime)),
        Shape::Ids => return salvo::oapi::Array::new().items(docs::integer()).into(),
        Shape::Names => return salvo::oapi::Array::new().items(docs::string()).into(),
        Shape::Json => Object::new().schema_type(salvo::oapi::SchemaType::AnyValue),
    };
    schema.read_only(true).into()
}

/// Describes a resource's routes and schemas.
pub fn document(doc: &mut Doc, resource: &'static Resource) {
    let name = schema_name(resource);
    let mut input = Object::new();
    let mut output = Object::new().property("id", docs::integer());
    for (column, shape) in resource.read_only {
        output = output.property(*column, shape_schema(*shape));
    }
    if let Some(parent) = resource.parent {
        output = output.property(parent.column, docs::integer());
    }
    for f in resource.fields {
        // Optional fields may be sent as null (to clear them) and come back as null.
        input = input.property(f.name, field_schema(f.kind, !f.required && !f.defaulted));
        output = output.property(f.name, field_schema(f.kind, !f.required && !f.defaulted));
        if f.required {
            input = input.required(f.name);
        }
    }
    for f in resource.write_only {
        input = input.property(f.name, field_schema(f.kind, !f.required));
        if f.required {
            input = input.required(f.name);
        }
    }
    for (computed, _, shape) in resource.computed {
        output = output.property(*computed, shape_schema(*shape));
    }
    for column in resource.trailing {
        output = match *column {
            "version" => output
                .property("version", docs::integer().description("Send back in If-Match to update safely")),
            other => output.property(other, docs::timestamp()),
        };
    }
    doc.add_schema(&name, output);
    doc.add_schema(&format!("{name}Input"), input);
    let item = || Ref::from_schema_name(&name);
    let body = || Ref::from_schema_name(format!("{name}Input"));
    let access = match resource.scope {
        Scope::Branch => Access::Branch,
        Scope::Registry => Access::User,
    };
    let tag = resource.path.split('/').next().unwrap_or(resource.path);
    let collection = resource.collection_path();
    let member = format!("{collection}/{{id}}");
    let parent_param = resource.parent.map(|p| {
        salvo::oapi::Parameter::new(p.param)
            .location(salvo::oapi::ParameterIn::Path)
            .required(salvo::oapi::Required::True)
            .schema(docs::integer().minimum(1))
    });
    let operation = |summary: &str| {
        let op = Doc::operation(access, tag, summary);
        match &parent_param {
            Some(p) => op.add_parameter(p.clone()),
            None => op,
        }
    };

    let mut list_op = operation(&format!("List {}", resource.label.to_lowercase()))
        .add_parameter(docs::query(
            "page",
            docs::integer().minimum(1).maximum(i64::MAX / list::MAX_PER_PAGE),
            "Page number (default 1)",
        ))
        .add_parameter(docs::query(
            "perPage",
            docs::integer().minimum(1).maximum(list::MAX_PER_PAGE),
            "Items per page (default 15)",
        ))
        .add_parameter(docs::query(
            "sortField",
            docs::string().enum_values(resource.sort_fields.iter().copied()),
            &format!("Default {}", resource.default_sort),
        ))
        .add_parameter(docs::query(
            "sortDirection",
            docs::string().enum_values(["asc", "desc"]),
            "Default asc",
        ));
    if let Some(column) = resource.search_words {
        list_op = list_op.add_parameter(docs::query(
            "search",
            docs::string().max_length(list::MAX_SEARCH_LEN),
            &format!("Every word must occur in {column} (any order; case and accents ignored)"),
        ));
    } else if !resource.search.is_empty() {
        list_op = list_op.add_parameter(docs::query(
            "search",
            docs::string().max_length(list::MAX_SEARCH_LEN),
            &format!("Matches {}", resource.search.join(", ")),
        ));
    }
    if let Some(column) = resource.date_range {
        for (name, bound) in [("start_date", "on or after"), ("end_date", "on or before")] {
            list_op = list_op.add_parameter(docs::query(
                name,
                docs::date(),
                &format!("Only rows whose {column} is {bound} this date"),
            ));
        }
    }
    for filter in resource.filters {
        let schema = resource
            .filter_field(filter)
            .map_or_else(|| docs::string().into(), |f| field_schema(f.kind, false));
        list_op = list_op.add_parameter(docs::query(&format!("filters[{filter}]"), schema, "Exact match"));
    }
    let list_op = Doc::answers(list_op, "200", "One page", docs::paginated(item()));
    let list_op = Doc::invalid(list_op, "A list parameter is out of range or unknown");
    let list_op = if resource.parent.is_some() { Doc::not_found(list_op) } else { list_op };
    doc.add(PathItemType::Get, &collection, list_op);

    let show = operation(&format!("Get a {}", resource.label.to_lowercase())).add_parameter(docs::path_id());
    doc.add(
        PathItemType::Get,
        &member,
        Doc::not_found(Doc::answers(show, "200", "The record", docs::envelope(item()))),
    );
    if !resource.writable {
        return;
    }

    let create = operation(&format!("Create a {}", resource.label.to_lowercase()));
    doc.add(PathItemType::Post, &collection, {
        let create = Doc::answers(Doc::with_body(create, body()), "201", "Created", docs::envelope(item()));
        if resource.parent.is_some() { Doc::not_found(create) } else { create }
    });

    let update = operation(&format!("Update a {} (fields sent are changed)", resource.label.to_lowercase()))
        .add_parameter(docs::path_id())
        .add_parameter(
            salvo::oapi::Parameter::new("If-Match")
                .location(salvo::oapi::ParameterIn::Header)
                .schema(docs::string())
                .description("ETag of the version being edited; 412 when it changed meanwhile"),
        );
    let update = Doc::answers(Doc::with_body(update, body()), "200", "Updated", docs::envelope(item()));
    let update = Doc::stale(update);
    doc.add(PathItemType::Put, &member, Doc::not_found(update));

    let delete =
        operation(&format!("Delete a {}", resource.label.to_lowercase())).add_parameter(docs::path_id());
    let deleted = Object::new().property("message", docs::string());
    let delete = Doc::stale(Doc::answers(delete, "200", "Deleted", deleted)).add_parameter(
        salvo::oapi::Parameter::new("If-Match")
            .location(salvo::oapi::ParameterIn::Header)
            .schema(docs::string())
            .description("ETag of the version being deleted; 412 when it changed meanwhile"),
    );
    doc.add(PathItemType::Delete, &member, Doc::not_found(delete));
}

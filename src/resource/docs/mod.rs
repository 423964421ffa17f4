//! The OpenAPI description of a declared resource: its schemas from the field list, and
//! one operation per route, so the document cannot drift from the code.

use salvo::oapi::{
    Array, BasicType, KnownFormat, Object, Operation, Parameter, ParameterIn, PathItemType, Ref, RefOr,
    Required, Schema, SchemaFormat, SchemaType,
};

use super::actions::{Action, Verb};
use super::decimal::{Decimal, Style};
use super::field::{Field, Kind, Structure};
use super::{Resource, Scope, Shape};
use crate::enums::Enumeration;
use crate::http::docs::{self, Access, Doc};
use crate::http::text::Lines;

mod borrowed;
mod merged;
mod parameters;
pub use borrowed::taking_create_body;
pub use merged::merged_answers;
pub use parameters::list_parameters;

/// The component name of a resource's records (`PatientVisit`); its input is `<name>Input`.
pub fn schema_name(resource: &Resource) -> String {
    pascal_case(resource.label)
}

/// Words (`Amsler grid`, `toggle_status`) run together, each capitalised: `AmslerGrid`.
fn pascal_case(words: &str) -> String {
    words.split([' ', '_']).map(capitalised).collect()
}

/// The component of an enumeration's values (`AllergyStatusEnum`), one for every field of it:
/// a nullable field refers to it beside `null`, so that a client generator makes one type of
/// it. The suffix keeps it apart from records named alike (a purchase order status).
pub fn enumeration_name(enumeration: &Enumeration) -> String {
    format!("{}Enum", pascal_case(enumeration.name))
}

/// Adds the component of every enumeration.
pub fn enumerations(doc: &mut Doc) {
    for enumeration in crate::enums::ALL {
        let values = docs::string()
            .enum_values(enumeration.values.iter().copied())
            .description(format!("`{}` of `GET /enums`", enumeration.name));
        doc.add_schema(&enumeration_name(enumeration), values);
    }
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// `type`, or `[type, "null"]` for values that may be null.
fn typed(basic: BasicType, nullable: bool) -> Object {
    if nullable {
        Object::with_type([basic, BasicType::Null].into_iter().collect::<SchemaType>())
    } else {
        Object::with_type(basic)
    }
}

fn formatted(format: KnownFormat) -> SchemaFormat {
    SchemaFormat::KnownFormat(format)
}

/// Which side of the API a schema describes: what a client may send is sometimes more than
/// what the server answers (money is answered as a string, and sent as a string or a number).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Sent,
    Answered,
}

/// The schema of a value of `kind`, as answered.
pub fn field_schema(kind: Kind, nullable: bool) -> RefOr<Schema> {
    schema_of(kind, nullable, Side::Answered)
}

/// The schema of a value of `kind`, as a client may send it.
pub fn sent_schema(kind: Kind, nullable: bool) -> RefOr<Schema> {
    schema_of(kind, nullable, Side::Sent)
}

/// Dates the server takes: years from 1850 (`resource::check`).
const DATE_PATTERN: &str = "^(18[5-9][0-9]|19[0-9]{2}|[2-9][0-9]{3})-[0-9]{2}-[0-9]{2}$";
/// Instants the server takes: years from 1900, with an offset.
const TIMESTAMP_PATTERN: &str = "^(19[0-9]{2}|[2-9][0-9]{3})-";
/// A phone number: digits and `+ - ( ) .` and spaces, with 5 to 20 digits.
const PHONE_PATTERN: &str = r"^[ +().-]*([0-9][ +().-]*){5,20}$";

fn schema_of(kind: Kind, nullable: bool, side: Side) -> RefOr<Schema> {
    let schema = value_schema(kind, nullable, side);
    // A blank string clears an optional field written as a string, as an emptied form box
    // sends it (free text says so in its own pattern).
    let blank_clears = side == Side::Sent
        && nullable
        && kind.is_string()
        && !matches!(kind, Kind::Text { .. } | Kind::LongText { .. });
    if !blank_clears {
        return schema;
    }
    let blank = Object::with_type(BasicType::String)
        .pattern(docs::blank_pattern(Lines::Many))
        .description("Blank: no value");
    Schema::AnyOf(salvo::oapi::schema::AnyOf::new().item(schema).item(blank)).into()
}

fn value_schema(kind: Kind, nullable: bool, side: Side) -> RefOr<Schema> {
    let text = || typed(BasicType::String, nullable);
    let number = || typed(BasicType::Integer, nullable).format(formatted(KnownFormat::Int64));
    // Values that may not be null may not be blank either (they are required, or emptying
    // them is refused).
    let schema = match kind {
        Kind::Text { max } => text().max_length(max).pattern(docs::text_pattern(true, nullable)),
        Kind::LongText { max } => text().max_length(max).pattern(docs::text_pattern(false, nullable)),
        Kind::Email => text().format(formatted(KnownFormat::Email)).max_length(254),
        Kind::Phone => text().max_length(32).pattern(PHONE_PATTERN),
        Kind::Integer { min, max } => number().minimum(min).maximum(max),
        Kind::Ref(_) => number().minimum(1).description("Id of an existing record"),
        Kind::Date { past } => text()
            .format(formatted(KnownFormat::Date))
            .pattern(DATE_PATTERN)
            .description(if past { "Not in the future" } else { "YYYY-MM-DD" }),
        Kind::Bool => typed(BasicType::Boolean, nullable),
        Kind::Enum(enumeration) => return nullable_ref(&enumeration_name(enumeration), nullable),
        Kind::Code { min, max, marks } => text()
            .min_length(min)
            .max_length(max)
            .pattern(format!("^[A-Za-z0-9{}]+$", marks.replace('-', "\\-")))
            .description("Uppercased when stored"),
        Kind::TimeZone => text().max_length(64).description("IANA time zone, e.g. Asia/Manila"),
        Kind::Username => text().min_length(3).max_length(50).pattern("^[A-Za-z0-9._-]+$"),
        Kind::Password => typed(BasicType::String, false)
            .min_length(8)
            .max_length(128)
            .pattern(r"^[^\x00-\x1f\x7f-\x9f]*$")
            .format(formatted(KnownFormat::Password)),
        Kind::Secret { max } => typed(BasicType::String, false)
            .min_length(1)
            .max_length(max)
            .format(formatted(KnownFormat::Password)),
        Kind::IdList => return list_of(docs::integer().minimum(1), nullable),
        Kind::NameList => {
            let name = docs::string().min_length(1).max_length(100).pattern(docs::text_pattern(true, false));
            return list_of(name, nullable);
        }
        Kind::Decimal(spec) if side == Side::Sent => return sent_decimal(spec, nullable),
        Kind::Decimal(spec) => decimal_schema(spec, nullable),
        Kind::Timestamp { past } => text()
            .format(formatted(KnownFormat::DateTime))
            .pattern(TIMESTAMP_PATTERN)
            .description(if past { "RFC 3339; not in the future" } else { "RFC 3339" }),
        Kind::Time => text().pattern("^([01][0-9]|2[0-3]):[0-5][0-9]$").description("HH:MM"),
        Kind::Object(structure) => return nullable_ref(structure.name, nullable),
        Kind::List { item, min, max, distinct } => {
            let list = Array::new().items(schema_of(*item, false, side)).min_items(min).max_items(max);
            let list = if distinct { list.unique_items(true) } else { list };
            return if nullable {
                list.schema_type([BasicType::Array, BasicType::Null].into_iter().collect::<SchemaType>())
                    .into()
            } else {
                list.into()
            };
        }
    };
    schema.into()
}

/// A decimal as a client may send it: a JSON number on the declared range and step, or a
/// numeric string (`"1250.5"`, `"-2.25"`).
fn sent_decimal(spec: Decimal, nullable: bool) -> RefOr<Schema> {
    let as_f64 = |d: rust_decimal::Decimal| d.to_string().parse::<f64>().unwrap_or_default();
    let number = Object::with_type(BasicType::Number)
        .minimum(as_f64(spec.min_value()))
        .maximum(as_f64(spec.max_value()))
        .multiple_of(as_f64(spec.step_value()));
    let sign = if spec.min < 0 { "-?" } else { "" };
    let string = match spec.style {
        // Any number of decimals that are zeros past the scale (`"2.500"` is 2.50).
        Style::Money | Style::Quantity => {
            let digits = spec.max_value().trunc().to_string().len();
            Object::with_type(BasicType::String).pattern(format!(
                "^{sign}0*[0-9]{{1,{digits}}}(\\.[0-9]{{1,{scale}}}0*)?$",
                scale = spec.scale
            ))
        }
        Style::Measurement => {
            Object::with_type(BasicType::String).pattern(format!("^{sign}[0-9]+(\\.[0-9]+)?$"))
        }
    };
    let mut either = salvo::oapi::schema::AnyOf::new().item(number).item(string);
    if nullable {
        either = either.item(typed(BasicType::Null, false));
    }
    Schema::AnyOf(either.description(format!(
        "Exact decimal from {} to {} in steps of {}: a number, or a string of digits",
        spec.min_value(),
        spec.max_value(),
        spec.step_value().normalize()
    )))
    .into()
}

/// A component (a structure, an enumeration), or null.
fn nullable_ref(name: &str, nullable: bool) -> RefOr<Schema> {
    if !nullable {
        return Ref::from_schema_name(name).into();
    }
    let either = salvo::oapi::schema::OneOf::new()
        .item(Ref::from_schema_name(name))
        .item(typed(BasicType::Null, false));
    Schema::OneOf(either).into()
}

/// Measurements are numbers on a step; money and quantities are fixed-scale strings.
fn decimal_schema(spec: Decimal, nullable: bool) -> Object {
    match spec.style {
        Style::Measurement => {
            let as_f64 = |d: rust_decimal::Decimal| d.to_string().parse::<f64>().unwrap_or_default();
            typed(BasicType::Number, nullable)
                .minimum(as_f64(spec.min_value()))
                .maximum(as_f64(spec.max_value()))
                .multiple_of(as_f64(spec.step_value()))
                .description("Exact decimal; a numeric string is accepted too")
        }
        Style::Money | Style::Quantity => typed(BasicType::String, nullable)
            .pattern(format!("^-?[0-9]+\\.[0-9]{{{}}}$", spec.scale))
            .description(format!(
                "Exact decimal with {} places, {} to {}; a number is accepted on input",
                spec.scale,
                spec.min_value(),
                spec.max_value()
            )),
    }
}

/// The component of a structure (an eye's findings, a reading).
pub fn structure_schema(structure: &Structure) -> Object {
    let mut schema = Object::new().description(if structure.per_eye {
        "One eye's findings; unable_to_assess true means no measurement may be given"
    } else {
        "Unknown keys are dropped"
    });
    if structure.per_eye {
        schema =
            schema.property("unable_to_assess", typed(BasicType::Boolean, false).default_value(false.into()));
    }
    // One component serves both sides: what may be sent covers what is answered.
    for f in structure.fields {
        schema = schema.property(f.name, sent_schema(f.kind, !f.required));
        if f.required {
            schema = schema.required(f.name);
        }
    }
    schema
}

/// Every structure a kind reaches, nested ones included.
fn structures_in(kind: Kind, found: &mut Vec<&'static Structure>) {
    match kind {
        Kind::Object(structure) if !found.iter().any(|s| std::ptr::eq(*s, structure)) => {
            found.push(structure);
            for f in structure.fields {
                structures_in(f.kind, found);
            }
        }
        Kind::List { item, .. } => structures_in(*item, found),
        _ => {}
    }
}

fn list_of(item: Object, nullable: bool) -> RefOr<Schema> {
    let list = Array::new().items(item);
    let list = if nullable {
        list.schema_type([BasicType::Array, BasicType::Null].into_iter().collect::<SchemaType>())
    } else {
        list
    };
    list.into()
}

/// The schema of a column the server fills in.
fn shape_schema(shape: Shape) -> RefOr<Schema> {
    let schema = match shape {
        Shape::Text => typed(BasicType::String, true),
        Shape::Integer => typed(BasicType::Integer, true).format(formatted(KnownFormat::Int64)),
        Shape::Number => typed(BasicType::Number, true),
        Shape::Money => typed(BasicType::String, true).pattern("^-?[0-9]+\\.[0-9]{2}$"),
        Shape::Quantity => typed(BasicType::String, true).pattern("^-?[0-9]+\\.[0-9]{3}$"),
        Shape::Date => typed(BasicType::String, true).format(formatted(KnownFormat::Date)),
        Shape::Timestamp => typed(BasicType::String, true).format(formatted(KnownFormat::DateTime)),
        Shape::Boolean => typed(BasicType::Boolean, true),
        Shape::Ids => return Array::new().items(docs::integer()).into(),
        Shape::Names => return Array::new().items(docs::string()).into(),
        Shape::Json => Object::new().schema_type(SchemaType::AnyValue),
    };
    schema.read_only(true).into()
}

/// The record as answered.
fn output_schema(resource: &Resource) -> Object {
    let mut output = Object::new().property("id", docs::integer());
    for (column, shape) in resource.read_only {
        output = output.property(*column, shape_schema(*shape));
    }
    if let Some(parent) = resource.parent {
        output = output.property(parent.column, docs::integer());
    }
    for f in resource.all_fields() {
        // Optional fields may be sent as null (to clear them) and come back as null.
        output = output.property(f.name, field_schema(f.kind, !f.required && !f.defaulted));
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
    output
}

/// The body of a create or an update.
/// The body of a create: required fields the server does not fill in must be sent; a
/// defaulted field left out or null takes its default.
fn create_schema(resource: &Resource) -> Object {
    let filled = |f: &Field| f.caller_by_default || resource.derived.iter().any(|d| d.field == f.name);
    let mut input = Object::new();
    for f in resource.all_fields().chain(resource.write_only) {
        input = input.property(f.name, sent_schema(f.kind, !f.required));
        if f.required && !filled(f) {
            input = input.required(f.name);
        }
    }
    input
}

/// The body of an update: only the fields sent change, so none is required; a required or
/// defaulted field may not be emptied.
fn change_schema(resource: &Resource) -> Object {
    let mut input = Object::new();
    for f in resource.all_fields().chain(resource.write_only) {
        input = input.property(f.name, sent_schema(f.kind, !f.required && !f.defaulted));
    }
    input
}

fn if_match_header(description: &str) -> Parameter {
    Parameter::new("If-Match").location(ParameterIn::Header).schema(docs::string()).description(description)
}

/// Builds a resource's operations with what they all share (access, tag, parent parameter).
struct Operations<'a> {
    resource: &'a Resource,
    access: Access,
    tag: &'a str,
}

impl Operations<'_> {
    fn new(resource: &Resource) -> Operations<'_> {
        let access = match resource.scope {
            Scope::Branch => Access::Branch,
            Scope::Registry => Access::User,
        };
        Operations { resource, access, tag: resource.path.split('/').next().unwrap_or(resource.path) }
    }

    /// `verb` and the records' name: `listPatients` (`plural`), `getPatient`,
    /// `signMedicalCertificate`.
    fn named(&self, verb: &str, plural: bool) -> String {
        let records = if plural { self.resource.plural } else { self.resource.label };
        let verb = pascal_case(verb);
        let mut verb = verb.chars();
        let verb: String = verb.next().map(|c| c.to_ascii_lowercase()).into_iter().chain(verb).collect();
        verb + &pascal_case(records)
    }

    /// Starts the operation `verb` (see [`Operations::named`]).
    fn start(&self, verb: &str, plural: bool, summary: &str) -> Operation {
        let op = Doc::operation(self.access, self.tag, summary).operation_id(self.named(verb, plural));
        match self.resource.parent {
            Some(p) => op.add_parameter(
                Parameter::new(p.param)
                    .location(ParameterIn::Path)
                    .required(Required::True)
                    .schema(docs::id()),
            ),
            None => op,
        }
    }

    /// A parent that does not exist is a 404 for every operation.
    fn nested(&self, op: Operation) -> Operation {
        if self.resource.parent.is_some() { Doc::not_found(op) } else { op }
    }

    fn list(&self, item: impl Into<RefOr<Schema>>) -> Operation {
        let r = self.resource;
        let mut op = self.start("list", true, &format!("List {}", r.plural));
        for parameter in list_parameters(r) {
            op = op.add_parameter(parameter);
        }
        let op = Doc::answers(op, "200", "One page", docs::paginated(item));
        self.nested(Doc::invalid(op, "A list parameter is out of range or unknown"))
    }

    fn show(&self, item: impl Into<RefOr<Schema>>) -> Operation {
        let op = self
            .start("get", false, &format!("Get {} {}", self.resource.article(), self.resource.noun()))
            .add_parameter(docs::path_id());
        let op = Doc::not_found(Doc::answers(op, "200", "The record", docs::envelope(item)));
        match self.resource.printable {
            Some(printable) => Doc::printable(op, printable.describes()),
            None => op,
        }
    }

    fn create(&self, item: impl Into<RefOr<Schema>>, body: impl Into<RefOr<Schema>>) -> Operation {
        let op = self.start(
            "create",
            false,
            &format!("Create {} {}", self.resource.article(), self.resource.noun()),
        );
        self.nested(Doc::answers(Doc::with_body(op, body), "201", "Created", docs::envelope(item)))
    }

    fn update(&self, item: impl Into<RefOr<Schema>>, body: impl Into<RefOr<Schema>>) -> Operation {
        let op = self
            .start(
                "update",
                false,
                &format!(
                    "Update {} {} (fields sent are changed)",
                    self.resource.article(),
                    self.resource.noun()
                ),
            )
            .add_parameter(docs::path_id())
            .add_parameter(if_match_header(
                "ETag of the version being edited; 412 when it changed meanwhile",
            ));
        // Only the fields sent change: an empty body changes nothing but the version.
        let op = Doc::answers(Doc::with_optional_body(op, body), "200", "Updated", docs::envelope(item));
        Doc::not_found(Doc::stale(op))
    }

    fn action(&self, action: &Action, item: impl Into<RefOr<Schema>>) -> (PathItemType, Operation) {
        let moves: Vec<String> =
            action.moves.iter().map(|m| format!("{} -> {}", m.from.join(" | "), m.to)).collect();
        let op = self
            .start(action.name, false, &format!("{}: {}", action.name.replace('_', " "), moves.join("; ")))
            .add_parameter(docs::path_id())
            .add_parameter(if_match_header("ETag of the version acted on; 412 when it changed meanwhile"));
        let op = if action.input.is_empty() {
            op
        } else {
            let mut body = Object::new();
            for f in action.input {
                body = body.property(f.name, sent_schema(f.kind, !f.required));
                if f.required {
                    body = body.required(f.name);
                }
            }
            Doc::with_body(op, body)
        };
        let op = Doc::answers(op, "200", action.done, docs::envelope(item));
        let op = Doc::conflict(
            Doc::stale(Doc::not_found(op)),
            "invalid_transition: not possible from the current status",
        );
        let verb = match action.verb {
            Verb::Post => PathItemType::Post,
            Verb::Put => PathItemType::Put,
            Verb::Patch => PathItemType::Patch,
        };
        (verb, op)
    }

    fn delete(&self) -> Operation {
        let op = self
            .start("delete", false, &format!("Delete {} {}", self.resource.article(), self.resource.noun()))
            .add_parameter(docs::path_id())
            .add_parameter(if_match_header(
                "ETag of the version being deleted; 412 when it changed meanwhile",
            ));
        let deleted = Object::new().property("message", docs::string());
        Doc::not_found(Doc::stale(Doc::answers(op, "200", "Deleted", deleted)))
    }
}

/// Describes a resource's routes and schemas.
pub fn document(doc: &mut Doc, resource: &'static Resource) {
    let name = schema_name(resource);
    let mut structures = Vec::new();
    for f in
        resource.all_fields().chain(resource.write_only).chain(resource.actions.iter().flat_map(|a| a.input))
    {
        structures_in(f.kind, &mut structures);
    }
    for structure in structures {
        doc.add_schema(structure.name, structure_schema(structure));
    }
    doc.add_schema(&name, output_schema(resource));
    doc.add_schema(&format!("{name}Input"), create_schema(resource));
    doc.add_schema(&format!("{name}Change"), change_schema(resource));
    let item = || Ref::from_schema_name(&name);
    let body = || Ref::from_schema_name(format!("{name}Input"));
    let change = || Ref::from_schema_name(format!("{name}Change"));
    let collection = resource.collection_path();
    let member = format!("{collection}/{{id}}");
    let ops = Operations::new(resource);
    doc.add(PathItemType::Get, &collection, ops.list(item()));
    doc.add(PathItemType::Get, &member, ops.show(item()));
    for action in resource.actions {
        let (verb, op) = ops.action(action, item());
        doc.add(verb, &format!("{member}/{}", action.segment), op);
    }
    if !resource.writable {
        return;
    }
    doc.add(PathItemType::Post, &collection, ops.create(item(), body()));
    let (update, delete) = (ops.update(item(), change()), ops.delete());
    match resource.lock {
        Some(lock) => {
            let update = match lock.amend {
                Some(amend) => Doc::invalid(
                    update,
                    &format!("A {} record changes only with {}", lock.states.join(" or "), amend.reason),
                ),
                None => Doc::conflict(
                    update,
                    &format!("{}: the record's state allows no such change", lock.conflict),
                ),
            };
            doc.add(PathItemType::Put, &member, update);
            let delete = match lock.delete {
                Some(code) => {
                    Doc::conflict(delete, &format!("{code}: a {} record is kept", lock.states.join(" or ")))
                }
                None => delete,
            };
            doc.add(PathItemType::Delete, &member, delete);
        }
        None => {
            doc.add(PathItemType::Put, &member, update);
            doc.add(PathItemType::Delete, &member, delete);
        }
    }
}

//! The answers of a merged record (a duplicate patient) in the operations that can give them.

use salvo::oapi::{Operation, PathItemType, RefOr};

use crate::http::docs::Doc;
use crate::resource::Resource;
use crate::resource::field::{Field, Kind, Target};
use crate::resource::merged;

/// The answers of a merged record (a duplicate patient), added to every operation that can
/// give them, from the mechanism that gives them: the hoop [`merged::MergedRecords`] answers
/// 301 to a read and 410 to a write on every branch route of a mergeable record; the
/// reference check answers 410 to a declared write whose body names one, and the schemas'
/// triggers to any other write whose body names one.
pub fn merged_answers(doc: &mut Doc, resources: &[&'static Resource]) {
    let tables: Vec<&str> = merged::mergeable(resources).map(|r| r.table).collect();
    let names_merged = |f: &Field| matches!(f.kind, Kind::Ref(Target::Branch(t) | Target::InBranch(t)) if tables.contains(&t));
    // The names declarations give a reference to a mergeable record (`patient_id`): the
    // column the schemas' triggers refuse a merged record in, whatever route writes it.
    let mut names: Vec<&str> = Vec::new();
    for f in resources.iter().flat_map(|r| r.all_fields()).filter(|f| names_merged(f)) {
        if !names.contains(&f.name) {
            names.push(f.name);
        }
    }
    let mut naming: Vec<(Option<PathItemType>, String)> = Vec::new();
    for r in resources.iter().filter(|r| r.writable) {
        let member = format!("{}/{{id}}", r.collection_path());
        if r.all_fields().any(names_merged) {
            naming.extend([
                (Some(PathItemType::Post), r.collection_path()),
                (Some(PathItemType::Put), member.clone()),
            ]);
        }
        // An action's path has the one method of its verb.
        for action in r.actions.iter().filter(|a| a.input.iter().any(names_merged)) {
            naming.push((None, format!("{member}/{}", action.segment)));
        }
    }
    // The components that hand-written routes' bodies name by reference.
    let component_names = |doc: &Doc| -> Vec<String> {
        let mut found = Vec::new();
        doc.each_operation_read(|op| {
            if let Some(name) = body_reference(op) {
                found.push(name);
            }
        });
        found
    };
    let naming_components: Vec<String> = component_names(doc)
        .into_iter()
        .filter(|name| doc.component(name).is_some_and(|schema| properties_name(&schema, &names)))
        .collect();
    doc.each_operation(|method, path, op| {
        let in_branch =
            op.parameters.0.iter().any(|p| matches!(p, RefOr::Type(p) if p.name == "X-Branch-Id"));
        let status = |write| if write { "410" } else { "301" };
        let op = match merged::documented_answer(resources, &format!("{method:?}"), path) {
            Some(write) if in_branch && !op.responses.contains_key(status(write)) => Doc::merged(op, write),
            _ => op,
        };
        let declared = naming.iter().any(|(m, p)| m.is_none_or(|m| m == method) && p == path);
        let referenced = body_reference(&op).is_some_and(|name| naming_components.contains(&name));
        if (declared || referenced || body_names(&op, &names)) && !op.responses.contains_key("410") {
            Doc::merged_write(op, "merged: a record the body names was merged into another; name that one")
        } else {
            op
        }
    });
}

/// Whether an operation's body (described in place) has a property of one of these `names`.
fn body_names(op: &Operation, names: &[&str]) -> bool {
    let Some(body) = &op.request_body else { return false };
    let body = serde_json::to_value(body).unwrap_or_default();
    properties_name(&body["content"]["application/json"]["schema"], names)
}

/// The component an operation's JSON body refers to (a declared body, `resource::input`).
fn body_reference(op: &Operation) -> Option<String> {
    let body = serde_json::to_value(op.request_body.as_ref()?).ok()?;
    let reference = body["content"]["application/json"]["schema"]["$ref"].as_str()?;
    reference.strip_prefix("#/components/schemas/").map(str::to_owned)
}

/// Whether an object schema has a property of one of these `names`.
fn properties_name(schema: &serde_json::Value, names: &[&str]) -> bool {
    names.iter().any(|name| !schema["properties"][*name].is_null())
}

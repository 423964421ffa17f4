//! The query parameters of a declared resource's list.

use salvo::oapi::{BasicType, Object, Parameter, RefOr, Schema};

use super::field_schema;
use crate::http::docs;
use crate::http::list;
use crate::http::text::Lines;
use crate::resource::Resource;
use crate::resource::field::Kind;

/// The parameters of a resource's list: paging, sorting, its search, date range and filters.
pub fn list_parameters(r: &Resource) -> Vec<Parameter> {
    let mut parameters = vec![
        docs::query(
            "page",
            docs::integer().minimum(1).maximum(i64::MAX / list::MAX_PER_PAGE),
            "Page number (default 1)",
        ),
        docs::query(
            "perPage",
            docs::integer().minimum(1).maximum(list::MAX_PER_PAGE),
            "Items per page (default 15)",
        ),
        docs::query(
            "sortField",
            docs::string().enum_values(r.sort_fields.iter().copied()),
            &format!("Default {}", r.default_sort),
        ),
        docs::query("sortDirection", docs::string().enum_values(["asc", "desc"]), "Default asc"),
    ];
    parameters.extend(search_parameter(r));
    parameters.extend(date_range_parameters(r));
    parameters.extend(filter_parameters(r));
    parameters
}

fn search_parameter(r: &Resource) -> Option<Parameter> {
    let schema = docs::search_term;
    if let Some(column) = r.search_words {
        Some(docs::query(
            "search",
            schema(),
            &format!("Every word must occur in {column} (any order; case and accents ignored)"),
        ))
    } else if !r.search.is_empty() {
        Some(docs::query("search", schema(), &format!("Matches {}", r.search.join(", "))))
    } else {
        None
    }
}

fn date_range_parameters(r: &Resource) -> Vec<Parameter> {
    let Some(column) = r.date_range else { return Vec::new() };
    let (local, instants) = if r.dated_by_instants() { (" (local)", 4) } else { ("", 2) };
    let bounds = [
        ("start_date", "on or after this date", docs::date().into()),
        ("end_date", "on or before this date", docs::date().into()),
        ("from", "at or after this instant, or on or after this date", docs::day_or_instant()),
        ("to", "before this instant, or on or before this date", docs::day_or_instant()),
    ];
    let said = |bound: &str| format!("Only rows whose {column} is {bound}{local}");
    bounds
        .into_iter()
        .take(instants)
        .map(|(name, bound, schema)| docs::query(name, schema, &said(bound)))
        .collect()
}

/// A filter's value: one of its kind, or blank for no filter (what an emptied box sends).
fn filter_schema(kind: Kind) -> RefOr<Schema> {
    let empty = Object::with_type(BasicType::String).pattern(docs::blank_pattern(Lines::One));
    Schema::AnyOf(salvo::oapi::schema::AnyOf::new().item(field_schema(kind, false)).item(empty)).into()
}

fn filter_parameters(r: &Resource) -> Vec<Parameter> {
    let kind_of =
        |filter: &str| r.condition(filter).map(|c| c.kind).or_else(|| r.filter_field(filter).map(|f| f.kind));
    r.filters
        .iter()
        .map(|filter| {
            let schema = kind_of(filter).map_or_else(|| docs::search_term().into(), filter_schema);
            let what = match (r.condition(filter), r.filter_aliases.contains(filter)) {
                (Some(condition), _) => condition.sql.to_owned(),
                (None, true) => format!("Exact match; also as {filter}=; empty: no filter"),
                (None, false) => "Exact match; empty: no filter".to_owned(),
            };
            docs::query(&format!("filters[{filter}]"), schema, &what)
        })
        .chain(r.filter_aliases.iter().map(|alias| {
            let schema = kind_of(alias).map_or_else(|| docs::search_term().into(), filter_schema);
            docs::query(alias, schema, &format!("The same as filters[{alias}]; both, different: 422"))
        }))
        .collect()
}

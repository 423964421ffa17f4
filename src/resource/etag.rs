//! Versions as entity tags: answers carry `ETag: "<version>"`, writes honour `If-Match`.

use crate::resource::row::Fields;
use salvo::Request;
use serde_json::Value;

/// The version a client last saw, from `If-Match`.
#[derive(Debug, Clone)]
pub enum IfMatch {
    Any,
    Versions(Vec<i64>),
}

impl IfMatch {
    /// Parses `If-Match: "3"`, `W/"3"`, `"3", "4"` or `*`. A tag this server never gives (a
    /// malformed one, a version no record reaches) matches nothing: the precondition fails
    /// (412), as RFC 9110 has it, and nothing is written.
    pub fn parse(header: &str) -> Self {
        if header.trim() == "*" {
            return Self::Any;
        }
        let versions = header
            .split(',')
            .filter_map(|tag| {
                let tag = tag.trim();
                let tag = tag.strip_prefix("W/").unwrap_or(tag);
                tag.strip_prefix('"')?.strip_suffix('"')?.parse().ok()
            })
            .collect();
        Self::Versions(versions)
    }

    /// The `If-Match` of a request, if any.
    pub fn of(req: &Request) -> Option<Self> {
        req.headers().get("if-match").map(|v| Self::parse(v.to_str().unwrap_or_default()))
    }

    pub fn allows(&self, version: i64) -> bool {
        match self {
            Self::Any => true,
            Self::Versions(v) => v.contains(&version),
        }
    }
}

/// The entity tag of a record's current version.
pub fn etag(record: &Value) -> Option<String> {
    record.integer("version").map(tag_of)
}

/// The entity tag of `version`.
pub fn tag_of(version: i64) -> String {
    format!("\"{version}\"")
}

#[cfg(test)]
mod tests {
    use super::IfMatch;

    #[test]
    fn parses_strong_weak_lists_and_star() {
        let parse = IfMatch::parse;
        assert!(parse("\"3\"").allows(3));
        assert!(parse("W/\"3\"").allows(3));
        assert!(parse("\"2\", \"4\"").allows(4));
        assert!(!parse("\"2\"").allows(3));
        assert!(parse("*").allows(9));
        for malformed in ["garbage", "", "\"\"", "3", "\"99999999999999999999\""] {
            assert!(!parse(malformed).allows(3), "{malformed}");
        }
    }
}

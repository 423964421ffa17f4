//! The query parameters of a route that is not a list: read one by one, every problem kept
//! and answered together as one 422 naming each parameter.

use salvo::prelude::*;
use time::Date;

use super::error::{ApiError, ApiResult, FieldErrors};
use super::list::{self, Bound};

/// A request's parameters, checked.
pub struct Params {
    pairs: Vec<(String, String)>,
    errors: FieldErrors,
}

impl Params {
    /// The request's parameters, any of them not among `takes` already an error.
    pub fn of(req: &Request, takes: &[&str]) -> Self {
        let pairs = list::query_pairs(req);
        let errors = match list::only(&pairs, takes) {
            Err(ApiError::Validation(errors)) => errors,
            _ => FieldErrors::new(),
        };
        Self { pairs, errors }
    }

    /// The last value sent, trimmed; an empty one is none.
    pub fn last(&self, name: &str) -> Option<String> {
        self.sent(name).filter(|v| !v.is_empty())
    }

    /// The last value sent, trimmed, even empty.
    fn sent(&self, name: &str) -> Option<String> {
        self.pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.trim().to_owned())
    }

    /// Keeps a problem with parameter `name`.
    pub fn error(&mut self, name: &str, message: impl Into<String>) {
        self.errors.entry(name.into()).or_default().push(message.into());
    }

    /// A date parameter: absent is none; anything sent, even empty, must be a date.
    pub fn date(&mut self, name: &str) -> Option<Date> {
        let raw = self.sent(name)?;
        let parsed = list::parse_date(&raw);
        if parsed.is_none() {
            self.error(name, format!("The {name} must be a date (YYYY-MM-DD)."));
        }
        parsed
    }

    /// A day or an instant: absent is none; anything sent, even empty, must be one.
    pub fn bound(&mut self, name: &str) -> Option<Bound> {
        let raw = self.sent(name)?;
        let parsed = Bound::parse(&raw);
        if parsed.is_none() {
            self.error(name, format!("The {name} must be a date (YYYY-MM-DD) or an RFC 3339 date-time."));
        }
        parsed
    }

    /// An integer from `min` to `max`: absent is none; anything sent must be one.
    pub fn integer(&mut self, name: &str, min: i64, max: i64) -> Option<i64> {
        let raw = self.sent(name)?;
        match raw.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.error(name, format!("The {name} must be an integer from {min} to {max}."));
                None
            }
        }
    }

    /// `start_date`..`end_date`, local, inclusive, each today by default, at most 366 days.
    pub fn range(&mut self, today: Date) -> (Date, Date) {
        let start = self.date("start_date").unwrap_or(today);
        let end = self.date("end_date").unwrap_or(today);
        if end < start {
            self.error("end_date", "The end_date must be on or after the start_date.");
        } else if (end - start).whole_days() >= 366 {
            self.error("end_date", "A range covers at most 366 days.");
        }
        (start, end)
    }

    /// `days`, from 1 to 90, 7 by default.
    pub fn days(&mut self) -> i32 {
        let Some(raw) = self.last("days") else { return 7 };
        match raw.parse::<i32>() {
            Ok(days) if (1..=90).contains(&days) => days,
            _ => {
                self.error("days", "The days must be an integer from 1 to 90.");
                7
            }
        }
    }

    /// A 422 naming every problem kept, if any.
    pub fn done(self) -> ApiResult<()> {
        if self.errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(self.errors)) }
    }
}

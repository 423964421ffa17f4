//! A date parameter's value: a prefix (`eq`, `gt`, `lt`, `ge`, `le`), then a date or a date
//! and time at any precision from a year to a fraction of a second, as the span of time it
//! covers. What it matches is `sql`'s.

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, Duration, Month, OffsetDateTime, PrimitiveDateTime, UtcOffset};

use crate::http::error::{ApiError, ApiResult};

/// `eq`, `gt`, `lt`, `ge`, `le` (none is `eq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    Eq,
    Gt,
    Lt,
    Ge,
    Le,
}

/// What a date parameter's value covers: from its start up to (not including) its end, at
/// the precision written (`2026` is a year, `2026-03-01T10:00Z` a minute). A span that ends
/// with year 9999 has no end the calendar can write (`None`): it reaches the end of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// Whole local days of the branch.
    Days(Date, Option<Date>),
    /// Instants (in UTC), when the value has a time and an offset.
    Instants(OffsetDateTime, Option<OffsetDateTime>),
    /// Local times of the branch, when the value has a time but no offset.
    Local(PrimitiveDateTime, Option<PrimitiveDateTime>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateParam {
    pub prefix: Prefix,
    pub span: Span,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_search", message)
}

/// A date parameter: an optional prefix, then a date or a date and time.
pub fn date_param(name: &str, value: &str) -> ApiResult<DateParam> {
    let (prefix, rest) = match value.get(..2) {
        Some("eq") => (Prefix::Eq, &value[2..]),
        Some("gt") => (Prefix::Gt, &value[2..]),
        Some("lt") => (Prefix::Lt, &value[2..]),
        Some("ge") => (Prefix::Ge, &value[2..]),
        Some("le") => (Prefix::Le, &value[2..]),
        Some(other) if other.chars().all(|c| c.is_ascii_lowercase()) => {
            return Err(invalid(format!(
                "{name}: the prefix {other} is not supported; use eq, gt, lt, ge or le."
            )));
        }
        _ => (Prefix::Eq, value),
    };
    let span = span(rest).map_err(|unreadable| match unreadable {
        Unreadable::Malformed => invalid(format!(
            "{name} must be a date (YYYY, YYYY-MM, YYYY-MM-DD) or a date and time \
             (YYYY-MM-DDThh:mm[:ss][Z|+hh:mm]), after an optional prefix; not {value}."
        )),
        Unreadable::OutOfRange => {
            invalid(format!("{name}: {value} is outside the years 1 to 9999 once its offset is taken away."))
        }
    })?;
    Ok(DateParam { prefix, span })
}

/// Why a date parameter's value is refused.
#[derive(Debug, PartialEq, Eq)]
enum Unreadable {
    Malformed,
    /// A date and time whose offset carries it past the calendar's years (`9999-12-31T20:00-05:00`).
    OutOfRange,
}

fn span(value: &str) -> Result<Span, Unreadable> {
    use Unreadable::Malformed;
    let first_of = |year: i32, month: Month| Date::from_calendar_date(year, month, 1).ok();
    let year = |text: &str| text.parse::<i32>().ok().filter(|y| (1..=9999).contains(y)).ok_or(Malformed);
    match value.len() {
        4 if value.bytes().all(|b| b.is_ascii_digit()) => {
            let year = year(value)?;
            return Ok(Span::Days(
                first_of(year, Month::January).ok_or(Malformed)?,
                first_of(year + 1, Month::January),
            ));
        }
        7 => {
            let (year_text, month) = value.split_once('-').ok_or(Malformed)?;
            let year = if year_text.len() == 4 { year(year_text)? } else { return Err(Malformed) };
            let month = month.parse::<u8>().ok().and_then(|m| Month::try_from(m).ok()).ok_or(Malformed)?;
            let first = first_of(year, month).ok_or(Malformed)?;
            let next = if month == Month::December {
                first_of(year + 1, Month::January)
            } else {
                first_of(year, month.next())
            };
            return Ok(Span::Days(first, next));
        }
        10 => {
            let day =
                Date::parse(value, format_description!("[year]-[month]-[day]")).map_err(|_| Malformed)?;
            return Ok(Span::Days(day, day.next_day()));
        }
        _ => {}
    }
    let (_, time) = value.split_once('T').ok_or(Malformed)?;
    // Minutes (hh:mm) or seconds, with or without a fraction: the span is one unit of it.
    let zoned = time.ends_with('Z') || time.contains('+') || time.contains('-');
    let clock = time.trim_end_matches('Z').split(['+', '-']).next().ok_or(Malformed)?;
    let unit = match clock.len() {
        5 => Duration::MINUTE,
        8 => Duration::SECOND,
        n if n > 9 && clock.as_bytes()[8] == b'.' => Duration::MILLISECOND,
        _ => return Err(Malformed),
    };
    if zoned {
        let with_seconds = if clock.len() == 5 {
            value.replacen(clock, &format!("{clock}:00"), 1)
        } else {
            value.to_owned()
        };
        let start = OffsetDateTime::parse(&with_seconds, &Rfc3339).map_err(|_| Malformed)?;
        // In UTC here, so that no later conversion (the database's) can overflow.
        let start = start.checked_to_offset(UtcOffset::UTC).ok_or(Unreadable::OutOfRange)?;
        Ok(Span::Instants(start, start.checked_add(unit)))
    } else {
        let format = format_description!(
            version = 2,
            "[year]-[month]-[day]T[hour]:[minute][optional [:[second][optional [.[subsecond]]]]]"
        );
        let start = PrimitiveDateTime::parse(value, format).map_err(|_| Malformed)?;
        Ok(Span::Local(start, start.checked_add(unit)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::{date, datetime};

    #[test]
    fn dates_cover_the_span_their_precision_gives() {
        let d = |v: &str| date_param("date", v).unwrap();
        assert_eq!(d("2026").span, Span::Days(date!(2026 - 01 - 01), Some(date!(2027 - 01 - 01))));
        assert_eq!(d("ge2026-12").span, Span::Days(date!(2026 - 12 - 01), Some(date!(2027 - 01 - 01))));
        assert_eq!(d("ge2026-12").prefix, Prefix::Ge);
        assert_eq!(d("lt2026-02-28").span, Span::Days(date!(2026 - 02 - 28), Some(date!(2026 - 03 - 01))));
        assert_eq!(
            d("gt2026-02-28T10:30Z").span,
            Span::Instants(datetime!(2026-02-28 10:30 UTC), Some(datetime!(2026-02-28 10:31 UTC)))
        );
        assert_eq!(
            d("eq2026-02-28T10:30:05+02:00").span,
            Span::Instants(datetime!(2026-02-28 08:30:05 UTC), Some(datetime!(2026-02-28 08:30:06 UTC)))
        );
        assert_eq!(
            d("2026-02-28T10:30").span,
            Span::Local(datetime!(2026-02-28 10:30), Some(datetime!(2026-02-28 10:31)))
        );
        for bad in ["2026-13", "2026-02-30", "sa2026", "ne2026-01-01", "yesterday", "2026-01-01T25:00Z", "ge"]
        {
            assert!(date_param("date", bad).is_err(), "{bad} was taken");
        }
    }

    #[test]
    fn the_last_year_reaches_the_end_of_time_and_nothing_overflows() {
        let d = |v: &str| date_param("date", v).unwrap().span;
        assert_eq!(d("9999"), Span::Days(date!(9999 - 01 - 01), None));
        assert_eq!(d("9999-12"), Span::Days(date!(9999 - 12 - 01), None));
        assert_eq!(d("9999-12-31"), Span::Days(date!(9999 - 12 - 31), None));
        assert_eq!(d("9999-12-31T23:59:59Z"), Span::Instants(datetime!(9999-12-31 23:59:59 UTC), None));
        assert_eq!(d("9999-12-31T23:59"), Span::Local(datetime!(9999-12-31 23:59), None));
        assert_eq!(
            d("9999-12-31T20:00:00+05:00"),
            Span::Instants(datetime!(9999-12-31 15:00 UTC), Some(datetime!(9999-12-31 15:00:01 UTC)))
        );
        // Past the calendar once its offset is taken away: a refusal, not a panic.
        assert_eq!(span("9999-12-31T20:00:00-05:00"), Err(Unreadable::OutOfRange));
        assert_eq!(span("0001-01-01T00:00:00+14:00").map(|_| ()), Ok(()));
    }
}

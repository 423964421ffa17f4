//! An iCalendar (RFC 5545) writer, of what a doctor's appointment feed needs: a VCALENDAR of
//! VEVENTs with times in UTC. Lines end in CRLF and are folded at 75 octets (never inside a
//! UTF-8 character); TEXT values are escaped (`\\`, `\;`, `\,`, `\n`).

use time::OffsetDateTime;
use time::macros::format_description;

/// The most octets of a line before it is folded (the CRLF not counted).
const LINE_OCTETS: usize = 75;

/// One event of the feed.
pub struct Event {
    pub uid: String,
    /// When the event's information last changed.
    pub stamp: OffsetDateTime,
    pub created: OffsetDateTime,
    pub starts_at: OffsetDateTime,
    pub ends_at: OffsetDateTime,
    pub summary: String,
    /// `CONFIRMED`, `TENTATIVE` or `CANCELLED`.
    pub status: &'static str,
    /// Each change of the appointment is one more (its version less one).
    pub sequence: i64,
}

/// A calendar of `events`, named `name`, as the lines of a `text/calendar` body.
pub struct Calendar {
    out: String,
}

impl Calendar {
    pub fn new(name: &str) -> Self {
        let mut calendar = Self { out: String::new() };
        calendar.line("BEGIN:VCALENDAR");
        calendar.line("VERSION:2.0");
        calendar.line("PRODID:-//clinic-server//Appointments//EN");
        calendar.line("CALSCALE:GREGORIAN");
        calendar.property("X-WR-CALNAME", &escape(name));
        calendar
    }

    pub fn event(&mut self, event: &Event) {
        self.line("BEGIN:VEVENT");
        self.property("UID", &escape(&event.uid));
        self.property("DTSTAMP", &utc(event.stamp));
        self.property("CREATED", &utc(event.created));
        self.property("LAST-MODIFIED", &utc(event.stamp));
        self.property("SEQUENCE", &event.sequence.max(0).to_string());
        self.property("DTSTART", &utc(event.starts_at));
        self.property("DTEND", &utc(event.ends_at));
        self.property("SUMMARY", &escape(&event.summary));
        self.property("STATUS", event.status);
        self.property("TRANSP", if event.status == "CANCELLED" { "TRANSPARENT" } else { "OPAQUE" });
        self.line("END:VEVENT");
    }

    pub fn finish(mut self) -> String {
        self.line("END:VCALENDAR");
        self.out
    }

    fn property(&mut self, name: &str, value: &str) {
        self.line(&format!("{name}:{value}"));
    }

    /// Writes `line` folded: after 75 octets, CRLF and one space, then the rest (whose space
    /// counts against its own 75).
    fn line(&mut self, line: &str) {
        let mut width = 0;
        for c in line.chars() {
            let octets = c.len_utf8();
            if width + octets > LINE_OCTETS {
                self.out.push_str("\r\n ");
                width = 1;
            }
            self.out.push(c);
            width += octets;
        }
        self.out.push_str("\r\n");
    }
}

/// A TEXT value escaped: backslash, semicolon, comma and line breaks; other control
/// characters (which no TEXT may hold) dropped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A DATE-TIME in UTC: `20260105T093000Z`.
pub fn utc(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    at.format(format_description!("[year][month][day]T[hour][minute][second]Z")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a,b;c\\d\r\ne\nf\u{7}"), "a\\,b\\;c\\\\d\\ne\\nf");
    }

    #[test]
    fn lines_fold_at_75_octets_and_never_inside_a_character() {
        let mut calendar = Calendar::new("x");
        let long = "é".repeat(100);
        calendar.property("SUMMARY", &long);
        let out = calendar.finish();
        for line in out.split("\r\n") {
            assert!(line.len() <= LINE_OCTETS, "{} octets: {line}", line.len());
        }
        let unfolded = out.replace("\r\n ", "");
        assert!(unfolded.contains(&format!("SUMMARY:{long}\r\n")));
        assert!(out.ends_with("END:VCALENDAR\r\n"));
        assert!(!out.replace("\r\n", "").contains('\n'), "only CRLF ends lines");
    }

    #[test]
    fn times_are_written_in_utc() {
        assert_eq!(utc(datetime!(2026-01-05 17:30 +08:00)), "20260105T093000Z");
    }
}

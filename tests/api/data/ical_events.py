"""Reads an iCalendar feed of the server with the icalendar library.

Usage: python3 ical_events.py FILE, where FILE holds the feed's bytes as answered. Prints a
JSON object: the calendar's PRODID and VERSION, and its events, each with its UID, DTSTAMP,
DTSTART and DTEND (ISO 8601, with their offsets), SUMMARY and STATUS. Exits 1 when the
library cannot read the feed.
"""

import json
import sys

import icalendar


def instant(component, name):
    value = component.get(name)
    return None if value is None else value.dt.isoformat()


def main(path):
    with open(path, "rb") as f:
        calendar = icalendar.Calendar.from_ical(f.read())
    events = []
    for event in calendar.walk("VEVENT"):
        events.append({
            "uid": str(event.get("UID")),
            "dtstamp": instant(event, "DTSTAMP"),
            "start": instant(event, "DTSTART"),
            "end": instant(event, "DTEND"),
            "summary": str(event.get("SUMMARY")),
            "status": str(event.get("STATUS")),
        })
    print(json.dumps({
        "prodid": str(calendar.get("PRODID")),
        "version": str(calendar.get("VERSION")),
        "events": events,
    }))


if __name__ == "__main__":
    main(sys.argv[1])

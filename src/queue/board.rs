//! What a waiting-room screen shows of a service's queue today: the numbers being served
//! with their counters, the next numbers waiting, and the number just called. Kept by the
//! display stream from its snapshot and every change since, so that a screen needs no
//! database read per change; it carries ticket numbers, counters and statuses, never whose
//! ticket it is.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

/// How many numbers of each list a screen is sent (a television shows fewer).
const SERVING_SHOWN: usize = 8;
const WAITING_SHOWN: usize = 12;

/// A ticket as a screen needs it.
#[derive(Deserialize)]
struct Ticket {
    id: i64,
    number: String,
    status: String,
    counter: Option<String>,
    priority: String,
    queue_date: String,
    called_at: Option<String>,
    version: i64,
}

pub(super) struct Board {
    service: Value,
    timezone: String,
    date: String,
    tickets: BTreeMap<i64, Ticket>,
}

impl Board {
    /// The board of a queue as `queue_view` answers it.
    pub(super) fn new(view: &Value, timezone: &str) -> Self {
        let service = json!({ "code": view["service"]["code"], "name": view["service"]["name"] });
        let mut board =
            Self { service, timezone: timezone.to_owned(), date: String::new(), tickets: BTreeMap::new() };
        board.reset(view);
        board
    }

    /// Starts again from a fresh view of the queue.
    pub(super) fn reset(&mut self, view: &Value) {
        self.date = view["date"].as_str().unwrap_or_default().to_owned();
        self.tickets = ["now_serving", "waiting", "done"]
            .iter()
            .filter_map(|list| view[list].as_array())
            .flatten()
            .filter_map(|t| Ticket::deserialize(t).ok())
            .map(|t| (t.id, t))
            .collect();
    }

    /// Takes in a changed ticket; answers whether the board changed, and the call to announce
    /// when it was called. A change older than what the board holds (events of one ticket may
    /// arrive after a snapshot that already has them, or out of order) or of another day
    /// changes nothing; the first ticket of a new day starts a new board.
    pub(super) fn apply(&mut self, changed: &Value) -> Option<Option<Value>> {
        let ticket = Ticket::deserialize(changed).ok()?;
        if ticket.queue_date < self.date {
            return None;
        }
        if ticket.queue_date > self.date {
            self.date = ticket.queue_date.clone();
            self.tickets.clear();
        }
        if self.tickets.get(&ticket.id).is_some_and(|held| held.version >= ticket.version) {
            return None;
        }
        // Only a call (or a call again) makes a ticket `called`.
        let announce = (ticket.status == "called").then(|| shown_number(&ticket));
        self.tickets.insert(ticket.id, ticket);
        Some(announce)
    }

    /// The board as a screen gets it, with `called` the number to announce, if any. What it
    /// shows follows from the tickets alone, whatever order their changes arrived in.
    pub(super) fn render(&self, called: Option<Value>) -> Value {
        // The latest first call first (a call again is announced, not moved up).
        let mut serving: Vec<&Ticket> =
            self.tickets.values().filter(|t| matches!(t.status.as_str(), "called" | "serving")).collect();
        serving.sort_by(|a, b| (&b.called_at, b.id).cmp(&(&a.called_at, a.id)));
        // Urgent, then priority, then normal, each in the order issued (ids grow with the
        // service's numbers: a number is taken under the counter's lock, the id after it).
        let rank = |p: &str| match p {
            "urgent" => 0,
            "priority" => 1,
            _ => 2,
        };
        let mut waiting: Vec<&Ticket> = self.tickets.values().filter(|t| t.status == "waiting").collect();
        waiting.sort_by_key(|t| (rank(&t.priority), t.id));
        json!({
            "service": self.service,
            "timezone": self.timezone,
            "date": self.date,
            "serving": serving.iter().take(SERVING_SHOWN).map(|t| shown_number(t)).collect::<Vec<_>>(),
            "waiting": waiting.iter().take(WAITING_SHOWN).map(|t| json!({ "number": t.number, "status": t.status })).collect::<Vec<_>>(),
            "waiting_total": waiting.len(),
            "called": called,
        })
    }
}

fn shown_number(ticket: &Ticket) -> Value {
    json!({ "number": ticket.number, "counter": ticket.counter, "status": ticket.status })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ticket of 20 November; one called was first called at 09:0<id>.
    fn ticket(id: i64, status: &str, version: i64) -> Value {
        let called_at = (status != "waiting").then(|| format!("2026-11-20T09:{id:02}:00+00:00"));
        json!({ "id": id, "number": format!("R-{id:03}"), "status": status, "counter": "2",
                "priority": if id == 9 { "urgent" } else { "normal" }, "queue_date": "2026-11-20",
                "called_at": called_at, "version": version, "patient_id": 77 })
    }

    fn board() -> Board {
        let view = json!({ "service": { "id": 1, "code": "R", "name": "Reception" }, "date": "2026-11-20",
                           "now_serving": [], "waiting": [ticket(1, "waiting", 1), ticket(2, "waiting", 1)],
                           "done": [] });
        Board::new(&view, "Asia/Manila")
    }

    #[test]
    fn a_call_is_announced_and_served_first() {
        let mut board = board();
        let called = board.apply(&ticket(2, "called", 2)).expect("a change");
        assert_eq!(called, Some(json!({ "number": "R-002", "counter": "2", "status": "called" })));
        // Heard after, called before: the latest call stays first.
        board.apply(&ticket(1, "called", 2));
        let shown = board.render(None);
        assert_eq!(shown["serving"][0]["number"], "R-002", "the latest call first: {shown}");
        assert_eq!(shown["serving"][1]["number"], "R-001");
        assert_eq!(shown["waiting_total"], 0);
        assert!(!shown.to_string().contains("patient"), "{shown}");
    }

    #[test]
    fn older_changes_and_other_days_change_nothing() {
        let mut board = board();
        board.apply(&ticket(1, "called", 3));
        assert!(board.apply(&ticket(1, "waiting", 1)).is_none());
        let mut yesterday = ticket(5, "waiting", 1);
        yesterday["queue_date"] = json!("2026-11-19");
        assert!(board.apply(&yesterday).is_none());
        let mut tomorrow = ticket(6, "waiting", 1);
        tomorrow["queue_date"] = json!("2026-11-21");
        board.apply(&tomorrow);
        let shown = board.render(None);
        assert_eq!(shown["date"], "2026-11-21");
        assert_eq!(shown["waiting"], json!([{ "number": "R-006", "status": "waiting" }]));
        assert_eq!(shown["serving"], json!([]));
    }

    #[test]
    fn urgent_tickets_wait_first() {
        let mut board = board();
        board.apply(&ticket(9, "waiting", 1));
        let shown = board.render(None);
        let numbers: Vec<&str> =
            shown["waiting"].as_array().unwrap().iter().map(|t| t["number"].as_str().unwrap()).collect();
        assert_eq!(numbers, ["R-009", "R-001", "R-002"]);
    }
}

//! The simulated scheduling product: calendars with `read-availability/v1`,
//! `create-appointment/v1` (receipt; declared refusal `slot-taken`) and
//! `cancel-appointment/v1` (receipt; declared refusal `already-cancelled`).
//!
//! Every calendar is open around the clock: the free slots of a window are the
//! back-to-back slots of the asked duration from `from` to `to` (at most 500)
//! that no booking overlaps. A slot id names its start and length
//! (`2026-11-02T08:00:00Z/30`), so booking needs no earlier read.

use std::collections::BTreeMap;
use std::time::SystemTime;

use axum::Router;
use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::{self, Accepted, Completion, Product, Sim};
use crate::error::Refusal;

/// The most slots one availability answer lists (the catalog's `maxItems`).
const MAX_SLOTS: usize = 500;
/// The most candidate slots one availability read looks at, however wide the window.
const MAX_CANDIDATES: usize = 100_000;

/// A booking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appointment {
    /// The calendar it is in.
    pub calendar_id: String,
    /// Start (UTC).
    pub start: DateTime<Utc>,
    /// End (UTC).
    pub end: DateTime<Utc>,
    /// Whether it was cancelled.
    pub cancelled: bool,
}

/// The scheduling product's state: appointments by id.
#[derive(Debug, Default)]
pub struct Scheduling {
    appointments: BTreeMap<String, Appointment>,
    created: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AvailabilityQuery {
    calendar_id: String,
    from: String,
    to: String,
    duration_minutes: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateAppointment {
    calendar_id: String,
    slot_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelAppointment {
    appointment_id: String,
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
fn format_instant(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn parse_instant(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc))
}

/// The start and end a slot id names.
fn parse_slot(slot_id: &str) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let (start, minutes) = slot_id.rsplit_once('/')?;
    let start = parse_instant(start)?;
    let minutes: i64 = minutes.parse().ok().filter(|m| (5..=480).contains(m))?;
    Some((start, start.checked_add_signed(TimeDelta::minutes(minutes))?))
}

impl Scheduling {
    fn is_free(&self, calendar_id: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> bool {
        !self
            .appointments
            .values()
            .any(|a| !a.cancelled && a.calendar_id == calendar_id && a.start < end && start < a.end)
    }

    fn availability(&self, query: AvailabilityQuery) -> Result<Accepted, Refusal> {
        let (Some(from), Some(to)) = (parse_instant(&query.from), parse_instant(&query.to)) else {
            return Err(Refusal::invalid_command());
        };
        let step = TimeDelta::minutes(query.duration_minutes);
        let mut slots = Vec::new();
        let mut start = from;
        for _ in 0..MAX_CANDIDATES {
            let Some(end) = start.checked_add_signed(step).filter(|end| *end <= to) else { break };
            if slots.len() == MAX_SLOTS {
                break;
            }
            if self.is_free(&query.calendar_id, start, end) {
                slots.push(json!({
                    "slotId": format!("{}/{}", format_instant(start), query.duration_minutes),
                    "start": format_instant(start),
                    "end": format_instant(end),
                }));
            }
            start = end;
        }
        Ok(Accepted::output(json!({"calendarId": query.calendar_id, "slots": slots})))
    }

    fn create(&mut self, command: CreateAppointment) -> Result<Accepted, Refusal> {
        let (start, end) = parse_slot(&command.slot_id).ok_or(Refusal::not_found("unknown-slot"))?;
        if !self.is_free(&command.calendar_id, start, end) {
            return Err(Refusal::conflict("slot-taken"));
        }
        self.created += 1;
        let appointment_id = format!("appt-{}", self.created);
        let appointment = Appointment { calendar_id: command.calendar_id.clone(), start, end, cancelled: false };
        self.appointments.insert(appointment_id.clone(), appointment);
        Ok(Accepted::output(json!({
            "appointmentId": appointment_id,
            "calendarId": command.calendar_id,
            "start": format_instant(start),
            "end": format_instant(end),
        })))
    }

    fn cancel(&mut self, command: CancelAppointment) -> Result<Accepted, Refusal> {
        let appointment =
            self.appointments.get_mut(&command.appointment_id).ok_or(Refusal::not_found("appointment-not-found"))?;
        if appointment.cancelled {
            return Err(Refusal::conflict("already-cancelled"));
        }
        appointment.cancelled = true;
        Ok(Accepted::output(json!({"appointmentId": command.appointment_id, "state": "cancelled"})))
    }
}

fn parse<T: for<'de> Deserialize<'de>>(command: &Value) -> Result<T, Refusal> {
    serde_json::from_value(command.clone()).map_err(|_| Refusal::invalid_command())
}

impl Product for Scheduling {
    const NAME: &'static str = "scheduling";
    const OPERATIONS: &'static [&'static str] =
        &["read-availability/v1", "create-appointment/v1", "cancel-appointment/v1"];

    fn perform(&mut self, operation: &str, command: &Value, _now: SystemTime) -> Result<Accepted, Refusal> {
        match operation {
            "read-availability/v1" => self.availability(parse(command)?),
            "create-appointment/v1" => self.create(parse(command)?),
            "cancel-appointment/v1" => self.cancel(parse(command)?),
            _ => Err(Refusal::not_found("unknown-operation")),
        }
    }

    fn completion(&self, _name: &str, _reference: &str) -> Option<Completion> {
        None
    }
}

impl Sim<Scheduling> {
    /// An appointment by id.
    pub fn appointment(&self, appointment_id: &str) -> Option<Appointment> {
        self.with_product(|s| s.appointments.get(appointment_id).cloned())
    }
}

/// The scheduling routes (protocol and control API), to be served at `/sim/scheduling`.
pub fn router(sim: Sim<Scheduling>) -> Router {
    engine::routes().with_state(sim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_skip_bookings_and_slot_ids_round_trip() {
        let mut s = Scheduling::default();
        let booked = s.create(CreateAppointment { calendar_id: "c".into(), slot_id: "2026-11-02T08:30:00Z/30".into() });
        assert!(booked.is_ok());
        let query = AvailabilityQuery {
            calendar_id: "c".into(),
            from: "2026-11-02T08:00:00Z".into(),
            to: "2026-11-02T10:00:00+00:00".into(),
            duration_minutes: 30,
        };
        let Ok(accepted) = s.availability(query) else { panic!("availability") };
        let ids: Vec<&str> =
            accepted.output["slots"].as_array().into_iter().flatten().filter_map(|s| s["slotId"].as_str()).collect();
        assert_eq!(ids, ["2026-11-02T08:00:00Z/30", "2026-11-02T09:00:00Z/30", "2026-11-02T09:30:00Z/30"]);
        let taken = s.create(CreateAppointment { calendar_id: "c".into(), slot_id: "2026-11-02T08:45:00Z/5".into() });
        assert_eq!(taken, Err(Refusal::conflict("slot-taken")));
        let elsewhere =
            s.create(CreateAppointment { calendar_id: "d".into(), slot_id: "2026-11-02T08:45:00Z/5".into() });
        assert!(elsewhere.is_ok());
        let bad = s.create(CreateAppointment { calendar_id: "c".into(), slot_id: "tomorrow".into() });
        assert_eq!(bad, Err(Refusal::not_found("unknown-slot")));
    }
}

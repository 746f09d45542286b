//! Schedules: runs admitted on the calendar. [`calendar`] says when a
//! schedule fires.

pub mod calendar;

pub use calendar::{Calendar, CalendarError, zone};

//! Signed product events: the header's rules are pure, so they live in
//! [`coordinator_core::signature`] (where the fuzz targets reach them without
//! the service); `events` verifies with them through this path.

pub use coordinator_core::signature::*;

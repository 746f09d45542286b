//! A clock tests move across processes: when `COORDINATOR_TEST_CLOCK_FILE`
//! names a file, every process started with it adds the whole number of
//! milliseconds the file holds to its clock ([`Engine::now`]), read again
//! every [`EVERY`]. Tests of several processes travel in time together with
//! it (a schedule's instants, a lease running out) instead of waiting for the
//! wall clock. A deployment never sets it; a process that follows one says so
//! at start (docs/internals/testing.md, "The test clock").

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::Engine;

/// The variable naming the file.
pub const VARIABLE: &str = "COORDINATOR_TEST_CLOCK_FILE";
/// How often the file is read.
const EVERY: Duration = Duration::from_millis(50);

/// The offset a file holds: a whole number of milliseconds, or none when it
/// is missing or unreadable (the clock then keeps its offset).
fn offset_in(text: &str) -> Option<i64> {
    text.trim().parse().ok()
}

/// Follows `file` for `engine` until the process ends.
pub fn follow(engine: &Arc<Engine>, file: PathBuf) {
    tracing::warn!(variable = VARIABLE, "this process follows a test clock: its time is shifted by a file");
    let engine = Arc::clone(engine);
    tokio::spawn(async move {
        loop {
            if let Some(offset) = tokio::fs::read_to_string(&file).await.ok().as_deref().and_then(offset_in) {
                engine.set_clock_offset(offset);
            }
            tokio::time::sleep(EVERY).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::offset_in;

    #[test]
    fn the_file_holds_whole_milliseconds() {
        assert_eq!(offset_in("30000\n"), Some(30_000));
        assert_eq!(offset_in("-5"), Some(-5));
        assert_eq!(offset_in("soon"), None);
        assert_eq!(offset_in(""), None);
    }
}

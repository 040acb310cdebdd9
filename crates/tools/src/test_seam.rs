//! A pause between a tool's listing (walk or list read) and its action, for the race tests.
//!
//! The tree can change between the two phases; the race tests change it there on purpose (a
//! directory swapped for a symlink to an outside tree) and check that nothing outside changes.
//! With `MFU_RS_TEST_PAUSE_AFTER_LISTING=FILE` in the environment, rank 0 creates `FILE.ready`
//! once the listing is done and waits (up to 60 s) until `FILE.go` exists; every rank waits for
//! it. Without the variable this is one environment look-up.

use std::path::PathBuf;
use std::time::{Duration, Instant};
use steal::Comm;

/// The environment variable that enables the pause.
pub const PAUSE_VAR: &str = "MFU_RS_TEST_PAUSE_AFTER_LISTING";

/// Pause here if the race tests asked for it (collective: every rank calls it).
pub fn after_listing(comm: &dyn Comm) {
    let Some(base) = std::env::var_os(PAUSE_VAR) else {
        return;
    };
    if comm.rank() == 0 {
        let base = PathBuf::from(base);
        let ready = with_suffix(&base, ".ready");
        let go = with_suffix(&base, ".go");
        let _ = std::fs::write(&ready, b"");
        let start = Instant::now();
        while !go.exists() && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    comm.barrier();
}

fn with_suffix(base: &std::path::Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

//! Mutexes shared by worker threads.

use std::sync::{Mutex, MutexGuard};

/// Lock `m`, and go on with its data when another worker panicked while holding it: the
/// panic is reported by rayon on its own, and what the workers collect (results, errors) is
/// still worth reporting.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

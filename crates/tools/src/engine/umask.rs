//! The process's umask, read without changing it. `umask(2)` can only read by setting: a
//! library that sets it to 0 and back races with every thread of the process creating files
//! meanwhile (they get mode 0777/0666), which an embedding service or a test harness running
//! tools side by side would see.

use rustix::fs::Mode;

/// The umask (permission bits, e.g. `0o022`), from `/proc/self/status` (Linux 4.7 and later);
/// only where that is missing by setting and restoring it.
pub fn current() -> u32 {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        if let Some(v) = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        {
            return v;
        }
    }
    // Set to 022 (not 0) for the moment it is changed: the least harm to other threads.
    let old = rustix::process::umask(Mode::from_raw_mode(0o022));
    rustix::process::umask(old);
    old.as_raw_mode()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    /// Stops the reading thread when the test ends, also by a failed assertion (the scope
    /// would otherwise wait for it forever).
    struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn reading_the_umask_never_lets_another_thread_create_with_a_wider_mode() {
        let want = 0o777 & !super::current();
        let tmp = tempfile::tempdir().unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // What every tool does at its start (cp, sync, tar -x, chmod).
                    let meta = crate::engine::copy::meta::MetaOptions::new(
                        false,
                        crate::engine::copy::meta::XattrPolicy::None,
                    );
                    assert_eq!(0o777 & !meta.umask, want);
                }
            });
            let _stop = StopOnDrop(&stop);
            for i in 0..1000 {
                let d = tmp.path().join(i.to_string());
                std::fs::create_dir(&d).unwrap();
                let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, want, "a directory made while the umask was read");
            }
        });
    }
}

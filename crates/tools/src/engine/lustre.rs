//! The Lustre options the copying tools share (layouts of new files) and the handle through
//! which every Lustre call goes, so that a test double can stand in for the real file system
//! (there is no Lustre on the build machines).

use lustre_sys::policy::{Overrides, StripeCount};
use lustre_sys::{Lustre, System};
use std::sync::Arc;

/// The Lustre calls a tool makes: the real ones ([`System`]) unless an embedding program or a
/// test substitutes its own (`lustre_sys::fake::Fake`).
#[derive(Clone)]
pub struct LustreHandle(pub Arc<dyn Lustre>);

impl LustreHandle {
    /// A handle on `api`.
    pub fn new(api: impl Lustre + 'static) -> LustreHandle {
        LustreHandle(Arc::new(api))
    }
}

impl Default for LustreHandle {
    /// The real calls, or the test double when the tests ask for it
    /// (`engine::test_seam::fake_lustre`).
    fn default() -> LustreHandle {
        crate::engine::test_seam::fake_lustre().unwrap_or_else(|| LustreHandle::new(System))
    }
}

impl std::fmt::Debug for LustreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::ops::Deref for LustreHandle {
    type Target = dyn Lustre;
    fn deref(&self) -> &(dyn Lustre + 'static) {
        &*self.0
    }
}

/// Layouts of new files on Lustre and the handle the Lustre calls go through: the
/// `--stripe-count`/`--stripe-size` overrides of the striping policy (which stripes by file size
/// and leaves PFL directory defaults alone).
#[derive(Clone, Debug, Default)]
pub struct StripeOptions {
    /// Stripe new files over N OSTs (-1: all, 0: the file system default) instead of the
    /// policy's count; `None`: the policy's. Only on Lustre.
    pub count: Option<i32>,
    /// Stripe size of new files, in bytes (a multiple of 64 KiB; rounded up), below 4 GiB;
    /// `None`: the chunk size (1-4 MiB).
    pub size: Option<u64>,
    /// The Lustre calls (the real ones by default; a test double or an embedder's own).
    pub api: LustreHandle,
}

impl StripeOptions {
    /// The user's overrides of the striping policy.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            count: self.count.map(|c| match c {
                -1 => StripeCount::All,
                0 => StripeCount::Default,
                n => StripeCount::Count(n as u16),
            }),
            size: self.size.map(|s| s as u32),
        }
    }
}

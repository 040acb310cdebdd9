//! The Lustre options the copying tools share (`--stripe-count`, `--stripe-size`) and the
//! handle through which every Lustre call goes, so that a test double can stand in for the
//! real file system (there is no Lustre on the build machines).

use crate::cli::args::size_arg;
use clap::Args;
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
    fn default() -> LustreHandle {
        LustreHandle::new(System)
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

/// `--stripe-count` and `--stripe-size`: explicit layouts for new files on Lustre, overriding
/// the policy (which stripes by file size and leaves PFL directory defaults alone).
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Lustre")]
pub struct StripeArgs {
    /// Stripe new files over N OSTs (-1: all, 0: the file system default) instead of the
    /// policy's count (1 below 1 GiB, floor(sqrt(GiB)) + 1 above, at most the OST count).
    /// Only on Lustre; elsewhere it is ignored.
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-1..=i64::from(lustre_sys::MAX_STRIPE_COUNT)))]
    pub stripe_count: Option<i32>,
    /// Stripe size of new files on Lustre (a multiple of 64 KiB; rounded up) instead of the
    /// chunk size (1-4 MiB).
    #[arg(long, value_name = "SIZE", value_parser = stripe_size_arg)]
    pub stripe_size: Option<u64>,
    /// The Lustre calls (set by programs embedding mfu-rs and by tests; the command line always
    /// uses the real ones).
    #[arg(skip)]
    pub api: LustreHandle,
}

/// A stripe size: more than 0, below 4 GiB.
fn stripe_size_arg(text: &str) -> Result<u64, String> {
    match size_arg(text)? {
        n if n >= 1 << 32 => Err(format!("'{text}': a stripe size must be below 4GiB")),
        n => Ok(n),
    }
}

impl StripeArgs {
    /// The user's overrides of the striping policy.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            count: self.stripe_count.map(|c| match c {
                -1 => StripeCount::All,
                0 => StripeCount::Default,
                n => StripeCount::Count(n as u16),
            }),
            size: self.stripe_size.map(|s| s as u32),
        }
    }
}

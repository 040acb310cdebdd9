//! Lustre striping for mfu-rs, defined by hand: constants and ioctl numbers, layout
//! encoding and decoding, the striping policy, and the system calls.
//!
//! No bindgen and no link against liblustreapi: one mfu-rs binary runs on Lustre and non-Lustre
//! nodes alike. Values come from Lustre's user-space API (`lustre_user.h`, stable since 2.12) as
//! documented in the project's `lustre.md`; the ioctl numbers are computed with the generic
//! Linux `_IOC` encoding (x86_64, aarch64) and checked against the documented values.
//!
//! ```
//! use lustre_sys::{choose, is_lustre, Decision, Overrides, GIB};
//! // Where does a file go? Off Lustre (a temporary directory here) there is nothing to stripe.
//! let dir = tempfile::tempdir().unwrap();
//! if !is_lustre(dir.path()).unwrap() {
//!     println!("{} is not on Lustre: files are created as usual", dir.path().display());
//! }
//! // On Lustre, the policy (a pure function) picks the layout of a new 4 GiB file on 8 OSTs,
//! // copied in 1 MiB chunks: 3 stripes of 1 MiB.
//! let decision = choose(4 * GIB, 8, None, &Overrides::default(), 1 << 20);
//! assert_eq!(decision, Decision::Set { count: 3, size: 1 << 20 });
//! ```
//!
//! - [`consts`]: magics, limits, ioctl numbers.
//! - [`layout`]: `lov_user_md` v1 / v3 / specific and `lov_comp_md_v1` as [`Layout`], encoded
//!   and decoded at explicit byte offsets (host byte order, no packed structs).
//! - [`policy`]: which layout a new file gets ([`choose`], [`archive_layout`]), a pure function.
//! - [`api`]: the calls ([`is_lustre`], [`ost_count`], [`layout_of`], [`layout_at`],
//!   [`create_striped`], group locks, [`mdt_index`], and the layout swap of `lfs migrate`:
//!   [`data_version`], [`swap_layouts`]) behind the [`Lustre`] trait, with [`System`] making
//!   the real calls.
//! - [`fake`]: a test double ([`fake::Fake`], which also models the layout swap and reads
//!   layouts a test stored on files); [`counting`]: a call counter
//!   ([`counting::Counting`], also re-exported from [`fake`]).
//!
//! **The ioctl path is untested on a live Lustre system.** There is no Lustre on the build
//! machines: the layouts are tested against the documented byte offsets, the ioctl numbers
//! against the formula, the policy as a pure function, and the calls only on file systems that
//! are not Lustre (where they must fail cleanly or report "not Lustre").

#![warn(missing_docs)]

pub mod api;
pub mod consts;
pub mod counting;
pub mod fake;
mod fields;
pub mod layout;
pub mod policy;
mod sys;

pub use api::{
    create_striped, data_version, getstripe_ioctl, group_lock, group_unlock, is_lustre, layout_at,
    layout_of, mdt_index, os_errno, ost_count, swap_layouts, Created, Lustre, SetOutcome, System,
};
pub use consts::*;
pub use layout::{Component, Composite, Layout, LayoutError, OstSlot, Plain};
pub use policy::{
    archive_layout, auto_stripe_count, choose, stripe_size_for, Decision, Overrides, StripeCount,
    GIB,
};

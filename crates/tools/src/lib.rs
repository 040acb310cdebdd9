//! The tools of mfu-rs, each a library function taking typed options and a [`steal::Comm`], and
//! the multi-call command line that drives them.
//!
//! ```no_run
//! // What `mfu-rs walk -o list.mfu /data` does, from Rust:
//! let code = mfu::main_with_args(["mfu-rs", "walk", "-o", "list.mfu", "/data"].map(Into::into).to_vec());
//! assert_eq!(code, 0);
//! ```

pub mod batches;
pub mod bcast;
pub mod bz2;
pub mod chmod;
pub mod cli;
pub mod cmp;
pub mod compare_expr;
pub mod copy;
pub mod cp;
pub mod dispatch;
pub mod dup;
pub mod filemaker;
pub mod find;
pub mod locks;
pub mod lustre;
pub mod output;
pub mod pairing;
pub mod regex_select;
pub mod reln;
pub mod rm;
pub mod runtime_stats;
pub mod select;
pub mod status;
pub mod stripe;
pub mod sync;
pub mod tar;
#[cfg(test)]
mod test_rng;
pub mod test_seam;
pub mod transfer;
pub mod walk;
pub mod walk_stripes;

pub use dispatch::main_with_args;
pub use status::Status;

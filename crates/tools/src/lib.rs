//! The tools of mfu-rs, each a library function taking typed options and a [`steal::Comm`], and
//! the multi-call command line that drives them.
//!
//! ```no_run
//! // What `mfu-rs walk -o list.mfu /data` does, from Rust:
//! let code = mfu::main_with_args(["mfu-rs", "walk", "-o", "list.mfu", "/data"].map(Into::into).to_vec());
//! assert_eq!(code, 0);
//! ```

pub mod bcast;
pub mod bz2;
pub mod chmod;
pub mod cli;
pub mod cmp;
pub mod cp;
pub mod dup;
pub mod engine;
pub mod filemaker;
pub mod find;
pub mod reln;
pub mod rm;
pub mod stripe;
pub mod sync;
pub mod tar;
pub mod walk;

pub use cli::dispatch::main_with_args;
pub use engine::status::Status;

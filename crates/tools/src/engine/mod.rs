//! What several tools share below the command line: the copy engine, pairing of two trees,
//! compare expressions, selection rules, batches, Lustre striping, exit statuses.

pub mod batches;
pub mod checkpoint;
pub mod codec;
pub mod compare_expr;
pub mod context;
pub mod copy;
pub mod digest;
pub mod find_expr;
pub mod hashing;
pub mod ids;
pub mod input;
pub mod locks;
pub mod lustre;
pub mod manifest;
pub mod mode_text;
pub mod outputs;
pub mod pairing;
pub mod pieces;
pub mod racy;
pub mod regex_select;
pub mod remove;
pub mod select;
pub mod serde_path;
pub mod setup;
pub mod status;
#[cfg(test)]
pub(crate) mod test_rng;
pub mod test_seam;
pub mod time_text;
pub mod umask;
pub mod verify;
pub mod verify_state;
pub mod walk_stripes;
pub mod wording;

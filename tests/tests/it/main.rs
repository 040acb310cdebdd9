//! The end-to-end tests of mfu-rs, one module per tool or theme, in one test binary (one link
//! instead of one per file; run one module with a filter: `cargo test -p mfu-tests --test it
//! cp::`). The harness they share is the `mfu_tests` library (tests/lib.rs).

mod bcast;
mod bz2;
mod checkpoint_tar;
mod chmod;
mod cli_edges;
mod cmp;
mod compat;
mod cp;
mod differential_cp;
mod differential_sync;
mod differential_tar;
mod dup;
mod embed;
mod faults;
mod filemaker;
mod find;
mod grep;
mod install;
mod launch;
mod lists;
mod lustre;
mod manifest;
mod parallel;
mod pipeline;
mod prune;
mod races;
mod readme;
mod reln;
mod resume;
mod rm;
mod runtime_mpi;
mod runtime_stats;
mod sh;
mod signals;
mod sync;
mod sync_xattrs;
mod tar;
mod tar_compressed;
mod tar_corpus;
mod tar_read;
mod tar_select;
mod tar_write;
mod verify;
mod walk;

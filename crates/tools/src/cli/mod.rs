//! Everything that touches argv or the terminal: the multi-call dispatcher, the argument groups
//! the tools share, and the rendering of the tools' reports and events.

pub mod args;
pub mod bcast;
pub mod bz2;
pub mod checks;
pub mod chmod;
pub mod cmp;
pub mod console;
pub mod copy_args;
pub mod cp;
pub mod dispatch;
pub mod du;
pub mod dup;
pub mod filemaker;
pub mod find;
pub mod grep;
pub mod list_args;
pub mod manuals;
pub mod parallel;
pub mod pfa;
pub mod progress_line;
pub mod reln;
pub mod rm;
pub mod run_tool;
pub mod runtime_stats;
pub mod sh;
pub mod status;
pub mod stripe;
pub mod sync;
pub mod tar;
pub mod tool;
pub mod version;
pub mod walk;

//! Everything that touches argv or the terminal: the multi-call dispatcher, the argument groups
//! the tools share, and the rendering of the tools' reports and events.

pub mod args;
pub mod bcast;
pub mod bz2;
pub mod chmod;
pub mod console;
pub mod dispatch;
pub mod filemaker;
pub mod legacy;
pub mod reln;
pub mod runtime_stats;
pub mod tool;

pub use args::Common;
pub use console::*;

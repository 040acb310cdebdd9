//! Everything that touches argv or the terminal: the multi-call dispatcher, the argument groups
//! the tools share, and the rendering of the tools' reports and events.

pub mod args;
pub mod console;
pub mod dispatch;
pub mod legacy;
pub mod manuals;
pub mod progress_line;
pub mod runtime_stats;
pub mod tool;
pub mod version;

pub use args::Common;
pub use console::*;

//! Lustre.

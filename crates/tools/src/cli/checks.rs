//! The lines `--verify` and `--manifest` add to a summary (cp, sync, tar): one renderer.

use crate::engine::{manifest, verify};

/// `Verified …` and `Manifest FILE: N files (HASH)` (or why it is missing), for what ran.
pub fn checks_lines(
    verified: Option<&verify::Summary>,
    listed: Option<&manifest::Summary>,
) -> String {
    let mut text = String::new();
    if let Some(v) = verified {
        text.push_str(&format!("Verified {}\n", v.text()));
    }
    if let Some(m) = listed {
        text.push_str(&manifest_line(m));
    }
    text
}

/// `Manifest FILE: N files (HASH)`, or why it is missing.
fn manifest_line(m: &manifest::Summary) -> String {
    if m.written {
        format!(
            "Manifest {}: {} files ({})\n",
            m.path,
            m.files,
            m.hash.name()
        )
    } else {
        format!("Manifest {}: not written\n", m.path)
    }
}

//! The compression formats an archive or a file can be wrapped in, recognised by their first
//! bytes (never by a name, which any file can carry).

/// First four bytes of every zstd frame (little-endian).
pub const ZSTD_MAGIC: u32 = 0xFD2F_B528;

/// A compression format a whole archive can be wrapped in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    /// gzip (RFC 1952), one member or several.
    Gzip,
    /// bzip2, one stream or several.
    Bzip2,
    /// xz (LZMA2), one stream or several.
    Xz,
    /// zstd, one frame or several.
    #[default]
    Zstd,
}

/// Bytes of the longest magic [`Codec::of_magic`] looks at.
pub const MAGIC_LEN: usize = 6;

impl Codec {
    /// The format whose magic `head` (the first bytes of a file, up to `MAGIC_LEN`) starts
    /// with; `None` for anything else (a plain tar starts with a name).
    pub fn of_magic(head: &[u8]) -> Option<Codec> {
        if head.starts_with(&[0x1f, 0x8b, 0x08]) {
            Some(Codec::Gzip)
        } else if head.len() >= 4 && head.starts_with(b"BZh") && (b'1'..=b'9').contains(&head[3]) {
            Some(Codec::Bzip2)
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Some(Codec::Xz)
        } else if head.starts_with(&ZSTD_MAGIC.to_le_bytes()) {
            Some(Codec::Zstd)
        } else {
            None
        }
    }

    /// The format's usual name (`gzip`, `bzip2`, `xz`, `zstd`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Bzip2 => "bzip2",
            Codec::Xz => "xz",
            Codec::Zstd => "zstd",
        }
    }
}

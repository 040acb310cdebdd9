//! The argument groups of the copying tools, defined once and flattened into each tool that
//! takes them: copy I/O (the shared [`IoArgs`] with `-X -s -S`), include/exclude
//! filters, Lustre layouts of new files. Each converts to the engine's plain options.

use crate::cli::args::{size_arg, IoArgs};
use crate::engine::copy::drive::IoOptions;
use crate::engine::copy::meta::XattrPolicy;
use crate::engine::digest::HashKind;
use crate::engine::lustre::{LustreHandle, StripeOptions};
use crate::engine::manifest::ManifestOptions;
use clap::Args;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// How file data moves: buffer and chunk sizes, holes, `O_DIRECT`, `O_NOATIME`, xattrs. cp
/// gives `--bufsize` and `--chunksize` their short names `-b` and `-k` (sync's `-b` is
/// `--batch-files`).
#[derive(Args, Clone, Debug, Default)]
pub struct CopyIoArgs {
    /// `--bufsize`, `--chunksize`, `--noatime`.
    #[command(flatten)]
    pub io: IoArgs,
    /// Extended attributes to copy (default when metadata is kept (cp -p, sync): all but
    /// Lustre's own; otherwise none unless this is given).
    #[arg(short = 'X', long, value_name = "POLICY", value_enum)]
    pub xattrs: Option<XattrPolicy>,
    /// Open files with O_DIRECT (bypass the page cache).
    #[arg(short = 's', long, visible_alias = "synchronous")]
    pub direct: bool,
    /// Keep holes: copy only the data regions of sparse files (found with SEEK_DATA/SEEK_HOLE;
    /// where the file system refuses SEEK_DATA the data is copied whole).
    #[arg(short = 'S', long)]
    pub sparse: bool,
}

/// `--verify` and `--manifest`: check what was written, list digests of what was copied.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Checks")]
pub struct CheckArgs {
    /// Hash every chunk (BLAKE3) as it is read from the source, read what was written back
    /// (O_DIRECT, or after fdatasync + posix_fadvise(DONTNEED) where O_DIRECT is refused; the
    /// summary and --json say which) and compare; a file that differs is named with the offset, exit 1, and is
    /// left without the source's time, so a rerun of sync copies it again. Data moves by
    /// pread/pwrite then (never copy_file_range, which does not show the bytes).
    #[arg(long)]
    pub verify: bool,
    /// Write a checksum manifest of the files copied to FILE: `HASH  PATH` lines sorted by
    /// path, relative to the destination, as b3sum (or sha256sum) writes them, so `cd DEST &&
    /// b3sum --check FILE` or `mfu-rs cmp --manifest FILE DEST` verifies the copy later.
    /// Hashed from the bytes read during the copy (data moves by pread/pwrite). Written only
    /// when the whole operation succeeded.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<OsString>,
    /// The manifest's hash: blake3 (b3sum format) or sha256 (sha256sum format; a file copied
    /// in several chunks is read once more from the source to hash it).
    #[arg(long = "manifest-hash", value_name = "HASH", value_enum, default_value_t = HashKind::Blake3,
          requires = "manifest")]
    pub manifest_hash: HashKind,
}

impl CheckArgs {
    /// Set `io.verify` and `io.manifest` from these (the manifest's base is the tool's to set).
    pub fn apply(&self, io: &mut IoOptions) {
        io.verify = self.verify;
        io.manifest = self
            .manifest
            .as_ref()
            .map(|m| ManifestOptions::new(m.as_bytes(), self.manifest_hash));
    }

    /// The manifest file, for the checks of output files before the run.
    pub fn output_files(&self) -> Vec<(&'static str, &[u8])> {
        self.manifest
            .iter()
            .map(|m| ("--manifest", m.as_bytes()))
            .collect()
    }
}

impl CopyIoArgs {
    /// The engine's I/O options: these, with `preserve`, `batch_files` and the Lustre options.
    pub fn options(&self, preserve: bool, batch_files: u64, stripe: StripeOptions) -> IoOptions {
        IoOptions {
            bufsize: self.io.bufsize,
            chunksize: self.io.chunksize,
            sparse: self.sparse,
            direct: self.direct,
            preserve,
            xattrs: self.xattrs,
            batch_files,
            stripe,
            verify: false,
            manifest: None,
        }
    }
}

/// `--exclude`, `--include` and their regex variants (flattened into the options of cp and
/// sync). Their command-line order matters, so the rules themselves are read from the parsed
/// matches ([`crate::engine::select::Rules::from_matches`]); these fields are for help and
/// parsing.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Filters")]
pub struct FilterArgs {
    /// Leave out paths matching GLOB (repeatable; rules apply in command-line order, the first
    /// match decides; see `--include`). Without `/` GLOB matches a name at any depth, with `/`
    /// the path relative to the source, a leading `/` anchors it there, a trailing `/` matches
    /// directories only; `**` crosses directories.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Keep paths matching GLOB even if a later --exclude matches them (e.g.
    /// `--include '*.h' --exclude '*.tmp'`).
    #[arg(long, value_name = "GLOB")]
    pub include: Vec<String>,
    /// Like --exclude with a regular expression searched in the relative path.
    #[arg(long = "exclude-regex", value_name = "REGEX")]
    pub exclude_regex: Vec<String>,
    /// Like --include with a regular expression searched in the relative path.
    #[arg(long = "include-regex", value_name = "REGEX")]
    pub include_regex: Vec<String>,
}

/// `--stripe-count` and `--stripe-size`: explicit layouts for new files on Lustre, overriding
/// the policy (which stripes by file size and leaves PFL directory defaults alone).
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Lustre")]
pub struct StripeArgs {
    /// Stripe new files over N OSTs (-1: all, 0: the file system default) instead of the
    /// policy's count (1 below 1 GiB, floor(sqrt(GiB)) + 1 above, at most the OST count).
    /// Only on Lustre; elsewhere it is ignored.
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-1..=i64::from(lustre_sys::MAX_STRIPE_COUNT)))]
    pub stripe_count: Option<i32>,
    /// Stripe size of new files on Lustre (a multiple of 64 KiB; rounded up) instead of the
    /// chunk size (1-4 MiB).
    #[arg(long, value_name = "SIZE", value_parser = stripe_size_arg)]
    pub stripe_size: Option<u64>,
    /// The Lustre calls, for the tools still run from their clap options (tar; its tests set
    /// a fake here). The command line always uses the real ones; typed options carry theirs in
    /// [`StripeOptions::api`].
    #[arg(skip)]
    pub api: LustreHandle,
}

/// A stripe size: more than 0, below 4 GiB.
fn stripe_size_arg(text: &str) -> Result<u64, String> {
    match size_arg(text)? {
        n if n >= 1 << 32 => Err(format!("'{text}': a stripe size must be below 4GiB")),
        n => Ok(n),
    }
}

impl StripeArgs {
    /// The engine's Lustre options.
    pub fn options(&self) -> StripeOptions {
        StripeOptions {
            count: self.stripe_count,
            size: self.stripe_size,
            api: self.api.clone(),
        }
    }

    /// The user's overrides of the striping policy.
    pub fn overrides(&self) -> lustre_sys::policy::Overrides {
        self.options().overrides()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::select::Rules;

    #[test]
    fn command_line_order_is_kept_across_options() {
        use clap::{CommandFactory, Parser};
        #[derive(Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            f: FilterArgs,
        }
        let m = Cli::command()
            .try_get_matches_from([
                "x",
                "--exclude-regex",
                "^keep",
                "--include",
                "keep*",
                "--exclude",
                "*",
            ])
            .unwrap();
        let r = Rules::from_matches(&m).unwrap();
        // The regex came first, so keep1 is excluded although --include matches it.
        assert!(r.excludes(b"keep1", false));
        assert!(r.excludes(b"other", false));
        let m = Cli::command()
            .try_get_matches_from(["x", "--include", "keep*", "--exclude", "*"])
            .unwrap();
        assert!(!Rules::from_matches(&m).unwrap().excludes(b"keep1", false));
    }
}

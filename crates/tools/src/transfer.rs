//! What cp and sync share around the copy engine: I/O options, identity switching, filters on
//! walked lists, and reporting a run.

use crate::cli::{report_error, Common};
use crate::copy::data::DataOptions;
use crate::copy::meta::{MetaOptions, XattrPolicy};
use crate::copy::{self, CopyOptions, Mapping, Plan, Report};
use crate::select::Rules;
use crate::status::Status;
use flist::units::parse_size;
use flist::walk::{walk, WalkOptions, Walked};
use flist::{Detail, FileList, FileType};
use std::sync::atomic::AtomicBool;
use steal::progress::{human_bytes, Progress};
use steal::Comm;

/// Parse a size argument (`4MB`, `64k`...) for clap.
pub fn size_arg(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err(format!("'{text}': must be more than 0 bytes")),
        n => Ok(n),
    }
}

/// I/O settings from the command line.
pub struct IoArgs {
    /// Bytes per read/write call; `None`: adaptive.
    pub bufsize: Option<u64>,
    /// Bytes per chunk (unit of parallel work); `None`: automatic.
    pub chunksize: Option<u64>,
    /// Keep holes.
    pub sparse: bool,
    /// `O_DIRECT`.
    pub direct: bool,
    /// `O_NOATIME` on sources.
    pub open_noatime: bool,
    /// Preserve owner, mode, times.
    pub preserve: bool,
    /// `-X`, if given.
    pub xattrs: Option<XattrPolicy>,
    /// Files per batch (0 = all at once).
    pub batch_files: u64,
    /// Lustre layouts of new files, and the Lustre calls.
    pub stripe: crate::lustre::StripeArgs,
}

impl IoArgs {
    /// The engine's options. Xattrs are copied when preserving (Lustre's own left out) or when
    /// `-X` asks.
    pub fn options<'a>(
        &'a self,
        stop: Option<&'a AtomicBool>,
        progress: &'a Progress,
    ) -> CopyOptions<'a> {
        let xattrs = self.xattrs.unwrap_or(if self.preserve {
            XattrPolicy::NonLustre
        } else {
            XattrPolicy::None
        });
        CopyOptions {
            chunk_size: self.chunksize.unwrap_or(0),
            data: DataOptions {
                bufsize: self.bufsize.map_or(0, |b| b.min(1 << 30) as usize),
                sparse: self.sparse,
                direct: self.direct,
            },
            meta: MetaOptions::new(self.preserve, xattrs),
            open_noatime: self.open_noatime,
            batch_files: self.batch_files,
            stop,
            progress: Some(progress),
            lustre: &*self.stripe.api,
            stripe: self.stripe.overrides(),
        }
    }
}

/// Become `uid`/`gid` for the whole process (`-U`/`-G`: copy as that user). Done before any
/// thread does file-system work; glibc applies it to every thread.
///
/// The groups change too, or root's group 0 and its supplementary groups would still open
/// files the user cannot read: with `-G` the groups are exactly that one group; with `-U` alone
/// they are the user's (its passwd entry's primary group and `initgroups`). The order is
/// groups, group, user: once the user is no longer root, the groups can't be changed.
pub fn switch_identity(uid: Option<u32>, gid: Option<u32>) -> Result<(), String> {
    let os = std::io::Error::last_os_error;
    let (groups_of, gid) = match (uid, gid) {
        (_, Some(g)) => (None, Some(g)),
        (Some(u), None) => {
            let (name, primary) = user_entry(u).ok_or_else(|| {
                format!("user {u} has no passwd entry to take its groups from: give -G GID too")
            })?;
            (Some(name), Some(primary))
        }
        (None, None) => return Ok(()),
    };
    let g = gid.expect("set above");
    // SAFETY: plain system calls; `name` is a NUL-terminated string that outlives the call.
    let grouped = unsafe {
        match &groups_of {
            Some(name) => libc::initgroups(name.as_ptr(), g) == 0,
            None => libc::setgroups(1, &g) == 0,
        }
    };
    if !grouped {
        return Err(format!("set the groups of {}: {}", who(uid, g), os()));
    }
    // SAFETY: as above.
    if unsafe { libc::setgid(g) } != 0 {
        return Err(format!("switch to group {g}: {}", os()));
    }
    if let Some(u) = uid {
        // SAFETY: as above.
        if unsafe { libc::setuid(u) } != 0 {
            return Err(format!("switch to user {u}: {}", os()));
        }
    }
    Ok(())
}

fn who(uid: Option<u32>, gid: u32) -> String {
    match uid {
        Some(u) => format!("user {u}"),
        None => format!("group {gid}"),
    }
}

/// The name and primary group of user `uid`, from the passwd database.
fn user_entry(uid: u32) -> Option<(std::ffi::CString, u32)> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value to be filled in.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives the use of `pwd`'s strings.
    let r = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if r != 0 || found.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded: pw_name points to a NUL-terminated string in `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }.to_owned();
    Some((name, pwd.pw_gid))
}

/// Walk `roots` with full metadata, reporting failures as `tool` on stderr.
pub fn walk_sources(
    comm: &dyn Comm,
    tool: &str,
    roots: &[Vec<u8>],
    dereference: bool,
    progress: &Progress,
) -> Walked {
    walk_sources_named(comm, tool, roots, dereference, progress, true)
}

/// [`walk_sources`], with the user and group names in the list only if `names` (see
/// [`WalkOptions::id_tables`]: only printing names and writing v4 lists need them).
pub fn walk_sources_named(
    comm: &dyn Comm,
    tool: &str,
    roots: &[Vec<u8>],
    dereference: bool,
    progress: &Progress,
    names: bool,
) -> Walked {
    let opts = WalkOptions {
        detail: Detail::Stat,
        dereference,
        stop: Some(steal::signals::stop_flag()),
        progress: Some(progress),
        id_tables: names,
        ..WalkOptions::default()
    };
    let walked = walk(comm, roots, &opts);
    for e in &walked.errors {
        report_error(tool, e);
    }
    walked
}

/// Drop the records `rules` exclude (paths relative to their source root through `map`).
pub fn apply_rules(list: &mut FileList, rules: &Rules, map: &Mapping) {
    if !rules.is_empty() {
        list.retain(|e| !rules.excludes(map.rel(e.path), e.kind == FileType::Dir));
    }
}

/// Print a run's failures (every rank its own) and, with `-v`, its skips.
pub fn report_failures(tool: &str, report: &Report) {
    for e in &report.errors {
        report_error(tool, e);
    }
    for e in &report.skips {
        report_error(tool, format_args!("skipped: {e}"));
    }
}

/// `12.0 MiB (12582912 bytes)`.
pub fn bytes_text(n: u64) -> String {
    format!("{} ({n} bytes)", human_bytes(n))
}

/// Checks every rank made before touching anything: the value if they passed on every rank;
/// otherwise `Status::Usage` on every rank, with rank 0's message (if it failed) on stderr.
/// Collective.
pub fn agree_setup<T>(
    comm: &dyn Comm,
    tool: &str,
    checked: Result<T, String>,
) -> Result<T, Status> {
    let mine = if checked.is_err() {
        Status::Usage
    } else {
        Status::Ok
    };
    match (mine.agree(comm), checked) {
        (Status::Ok, Ok(v)) => Ok(v),
        (_, Err(e)) => {
            if comm.rank() == 0 {
                report_error(tool, e);
            }
            Err(Status::Usage)
        }
        (s, Ok(_)) => Err(s),
    }
}

/// Run the copy engine for `tool` with progress lines and `-v` sizes; report this rank's
/// failures, sum the counts over ranks, and say how to finish an interrupted run
/// (`resume_hint`). The `-v` lines go through `print` (stdout, or stderr when a list owns
/// stdout). Returns the summed report and the status it implies. Collective.
#[allow(clippy::too_many_arguments)]
pub fn copy_and_report(
    comm: &dyn Comm,
    tool: &str,
    plan: Plan,
    map: &Mapping,
    io: &IoArgs,
    common: &Common,
    resume_hint: &str,
    print: fn(&[u8]),
) -> (Report, Status) {
    let rank0 = comm.rank() == 0;
    let say = |text: String| {
        if rank0 && common.verbose {
            print(text.as_bytes());
        }
    };
    say(format!(
        "Chunk size {}, buffer size {}, {} ranks\n",
        io.chunksize
            .map_or("automatic".to_string(), |c| format!("{c} bytes")),
        io.bufsize
            .map_or("adaptive".to_string(), |b| format!("{b} bytes")),
        comm.size()
    ));
    let progress = common.progress(comm.rank(), "Copied");
    let opts = io.options(Some(steal::signals::stop_flag()), &progress);
    let mut report = copy::run(comm, plan, map, &opts);
    report_failures(tool, &report);
    report.sum(comm);
    if report.chunk_size > 0 {
        say(format!(
            "Chunk size used: {} bytes ({})\n",
            report.chunk_size, report.chunk_reason
        ));
    }
    if common.verbose && rank0 {
        say(format!(
            "{} (this process)\n",
            crate::copy::iosize::chosen()
        ));
    }
    if let Some(osts) = report.lustre_osts {
        say(lustre_line(osts, &report.stripes));
    }
    // Skipped entries (a device node without the privilege to make it) were asked for too.
    let status = Status::of_work(report.total_errors, report.skipped, report.interrupted);
    if report.interrupted && rank0 {
        report_error(
            tool,
            format_args!("interrupted by a signal: the copy is incomplete ({resume_hint})"),
        );
    }
    (report, status)
}

/// `-v`: what layouts new files got on a Lustre destination.
pub fn lustre_line(osts: u32, s: &crate::copy::striping::StripeCounts) -> String {
    let osts = match osts {
        0 => "OST count unknown".to_string(),
        n => format!("{n} OSTs"),
    };
    format!(
        "Lustre destination ({osts}): {} files given a layout ({} over several OSTs), {} inherit a \
         one-stripe directory default, {} follow a PFL directory default, {} existing files \
         keep theirs, {} refused by the file system\n",
        s.set, s.wide, s.inherited, s.pfl, s.kept, s.refused
    )
}

/// True when `path` is a directory (following links).
pub fn is_dir(path: &[u8]) -> bool {
    flist::walk::stat_path(path, true)
        .is_ok_and(|st| FileType::from_mode(st.st_mode) == FileType::Dir)
}

/// A destination that does not exist yet can be created only in an existing directory.
pub fn check_parent(dest: &[u8]) -> Result<(), String> {
    let p = flist::path::parent(dest);
    if is_dir(p) {
        Ok(())
    } else {
        Err(format!(
            "cannot create {}: the directory {} does not exist",
            flist::path::display(dest),
            flist::path::display(p)
        ))
    }
}

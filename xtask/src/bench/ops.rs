//! The operations compared, and for each the command lines of mfu-rs and of its peers, with
//! what each run needs before it (a fresh destination, a tree to remove) and the check of its
//! result.

use super::deep::deep_same;
use super::fsutil::{archive_ok, clear, extracted_ok, flush_fs, remove, s, same_tree};
use super::measure::{case, Case};
use super::workload::{Kind, Workload};
use crate::setup::have;
use anyhow::{ensure, Context, Result};
use serde::Serialize;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An operation of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Walk with metadata (`mfu-rs walk`; `find -printf` and `du -s` stat every entry too).
    Walk,
    /// Walk of names and types only (`mfu-rs walk -l`; plain `find`).
    WalkLite,
    /// Copy into a fresh destination, keeping modes, owners and times.
    Cp,
    /// Sync of a destination already equal to the source.
    SyncUnchanged,
    /// Sync after 1% of the destination's files changed.
    SyncChanged,
    /// Remove the tree.
    Rm,
    /// Archive the tree.
    TarCreate,
    /// Extract the tree's archive made by GNU tar (default format, no index), every tool the
    /// same archive: the common case.
    TarExtract,
    /// mfu-rs extracting its own indexed archive (GNU tar extracting GNU tar's as the peer).
    TarExtractIndexed,
}

impl Op {
    /// Every operation, in the order they run.
    pub const ALL: [Op; 9] = [
        Op::Walk,
        Op::WalkLite,
        Op::Cp,
        Op::SyncUnchanged,
        Op::SyncChanged,
        Op::Rm,
        Op::TarCreate,
        Op::TarExtract,
        Op::TarExtractIndexed,
    ];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Op::Walk => "walk",
            Op::WalkLite => "walk-lite",
            Op::Cp => "cp",
            Op::SyncUnchanged => "sync-unchanged",
            Op::SyncChanged => "sync-1%",
            Op::Rm => "rm",
            Op::TarCreate => "tar-create",
            Op::TarExtract => "tar-extract",
            Op::TarExtractIndexed => "tar-extract-indexed",
        }
    }

    /// The operation named `name`.
    pub fn parse(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Whether the operation says anything on `kind`: walking or removing two big files
    /// measures process start-up only.
    pub fn applies_to(self, kind: Kind) -> bool {
        match kind {
            Kind::Big => !matches!(self, Op::Walk | Op::WalkLite | Op::Rm),
            // The deep tree: what its depth costs a copy and an extraction.
            Kind::Deep => matches!(self, Op::Cp | Op::TarExtract),
            _ => true,
        }
    }

    /// mfu-rs's time over the reference's, at most (issue 17): 0.8 of GNU tar's on the
    /// extraction of a GNU-made archive, even with the fastest peer everywhere else.
    pub fn target(self) -> f64 {
        match self {
            Op::TarExtract => 0.8,
            _ => 1.0,
        }
    }

    /// The peer the ratio is taken against: GNU tar on a GNU-made archive; otherwise (None)
    /// the fastest peer.
    pub fn reference(self) -> Option<&'static str> {
        match self {
            Op::TarExtract => Some(GNU_TAR_X),
            _ => None,
        }
    }
}

/// GNU tar's name among the contestants of the extractions.
pub const GNU_TAR_X: &str = "tar -x";

/// Who a contestant is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// mfu-rs at `np` ranks (1: one process, no launcher; 2: `mpirun -np 2`).
    Mfu {
        /// Ranks.
        np: u32,
    },
    /// A tool users would otherwise pick.
    Peer,
    /// The C floor: only the system calls a copy needs (not a tool, not a peer).
    Floor,
}

/// A contestant of one operation: its role and its case.
pub struct Contestant {
    /// Who it is.
    pub role: Role,
    /// What runs.
    pub case: Case,
}

/// What the cases of one operation need to know.
pub struct Setup<'a> {
    /// The mfu-rs binary.
    pub bin: &'a Path,
    /// The workload.
    pub w: &'a Workload,
    /// Scratch directory of this workload on this file system (destinations, archives).
    pub scratch: PathBuf,
    /// Run mfu-rs under `mpirun -np 2` too.
    pub mpi: bool,
    /// The C floor's binary, when built (small-file copies only).
    pub floor: Option<&'a Path>,
    /// Instead of np 1 and `mpirun -np 2`: mfu-rs at each of these thread ranks (`--ranks N`),
    /// with its work-queue statistics on (`MFU_RS_STATS=1`) and its stderr kept.
    pub ranks: Option<&'a [usize]>,
    /// On disk: where set-ups move a previous run's output instead of removing it
    /// ([`super::fsutil::clear`]).
    pub aside: Option<PathBuf>,
}

impl Setup<'_> {
    /// mfu-rs running `args`: one process, and under `mpirun -np 2` when MPI is on.
    fn mfu(&self, args: &[&str]) -> Vec<Contestant> {
        let b = s(self.bin);
        if let Some(ranks) = self.ranks {
            return ranks
                .iter()
                .map(|&n| {
                    let n_ = n.to_string();
                    Contestant {
                        role: Role::Mfu { np: n as u32 },
                        case: case(
                            &format!("mfu-rs --ranks {n}"),
                            false,
                            &[&[b, "--ranks", &n_][..], args].concat(),
                        )
                        .env("MFU_RS_STATS", "1")
                        .capture(),
                    }
                })
                .collect();
        }
        let mut v = vec![Contestant {
            role: Role::Mfu { np: 1 },
            case: case("mfu-rs np 1", false, &[&[b][..], args].concat()),
        }];
        if self.mpi {
            v.push(Contestant {
                role: Role::Mfu { np: 2 },
                case: case(
                    "mfu-rs mpirun -np 2",
                    true,
                    &[&["mpirun", "-np", "2", b][..], args].concat(),
                ),
            });
        }
        v
    }
}

fn peer(name: &str, cmd: &[&str]) -> Contestant {
    Contestant {
        role: Role::Peer,
        case: case(name, false, cmd),
    }
}

/// Apply `f` to every contestant's case.
fn each(v: Vec<Contestant>, f: impl Fn(Case) -> Case) -> Vec<Contestant> {
    v.into_iter()
        .map(|c| Contestant {
            role: c.role,
            case: f(c.case),
        })
        .collect()
}

/// The contestants of `op` on the set-up workload; untimed set-up of the operation (a synced
/// destination, archives to extract) happens here.
// One arm per operation listing its contestants: read as a table of operations, not split.
#[allow(clippy::too_many_lines)]
pub fn contestants(op: Op, st: &Setup) -> Result<Vec<Contestant>> {
    let src = st.w.src.clone();
    let sp = s(&src).to_string();
    std::fs::create_dir_all(&st.scratch)
        .with_context(|| format!("mkdir {}", st.scratch.display()))?;
    Ok(match op {
        Op::Walk => {
            let mut v = st.mfu(&["walk", "-q", &sp]);
            v.push(peer(
                "find -printf",
                &["find", &sp, "-printf", "%s %T@ %m\\n"],
            ));
            v.push(peer("du -s", &["du", "-s", &sp]));
            v
        }
        Op::WalkLite => {
            let mut v = st.mfu(&["walk", "-q", "-l", &sp]);
            v.push(peer("find", &["find", &sp]));
            v
        }
        Op::Cp => {
            let dst = st.scratch.join("cp-dst");
            let dp = s(&dst).to_string();
            // (contestant, whether it keeps owners and times): xcp and the C floor keep modes
            // only, so only their bytes and types are checked.
            let mut v: Vec<(Contestant, bool)> = st
                .mfu(&["cp", "-q", "-p", &sp, &dp])
                .into_iter()
                .map(|c| (c, true))
                .collect();
            v.push((peer("cp -a", &["cp", "-a", &sp, &dp]), true));
            v.push((
                peer(
                    "rsync -a",
                    &["rsync", "-a", &format!("{sp}/"), &format!("{dp}/")],
                ),
                true,
            ));
            if have("xcp") {
                v.push((peer("xcp -r", &["xcp", "-r", &sp, &dp]), false));
            }
            if let (Some(floor), Kind::Small) = (st.floor, st.w.kind) {
                let c = case("C floor, 2 threads", false, &[s(floor), &sp, &dp, "2"]);
                v.push((
                    Contestant {
                        role: Role::Floor,
                        case: c,
                    },
                    false,
                ));
            }
            let deep = st.w.kind == Kind::Deep;
            v.into_iter()
                .map(|(c, meta)| {
                    let (d1, s2, d2) = (dst.clone(), src.clone(), dst.clone());
                    let aside = st.aside.clone();
                    Contestant {
                        role: c.role,
                        case: c
                            .case
                            .prep(move || {
                                clear(&d1, aside.as_deref())?;
                                flush_fs()
                            })
                            .check(move || {
                                if deep {
                                    deep_same(&s2, &d2)
                                } else {
                                    same_tree(&s2, &d2, meta)
                                }
                            }),
                    }
                })
                .collect()
        }
        Op::SyncUnchanged | Op::SyncChanged => {
            let dst = st.scratch.join("sync-dst");
            let dp = s(&dst).to_string();
            rsync(&src, &dst)?;
            flush_fs()?;
            let mut v = st.mfu(&["sync", "-q", &sp, &dp]);
            v.push(peer(
                "rsync -a",
                &["rsync", "-a", &format!("{sp}/"), &format!("{dp}/")],
            ));
            let changed = op == Op::SyncChanged;
            each(v, |c| {
                let (s2, d2) = (src.clone(), dst.clone());
                let c = c.check(move || same_tree(&s2, &d2, true));
                if changed {
                    let d1 = dst.clone();
                    c.prep(move || {
                        change_one_percent(&d1)?;
                        flush_fs()
                    })
                } else {
                    c
                }
            })
        }
        Op::Rm => {
            let victim = st.scratch.join("rm-victim");
            let vp = s(&victim).to_string();
            let mut v = st.mfu(&["rm", "-q", &vp]);
            v.push(peer("rm -rf", &["rm", "-rf", &vp]));
            let bin = st.bin.to_path_buf();
            each(v, |c| {
                let (s1, v1, v2, b1) = (src.clone(), victim.clone(), victim.clone(), bin.clone());
                c.prep(move || {
                    remove(&v1)?;
                    // A real copy (not hard links: freeing inodes and blocks is part of rm's
                    // work), made fast by mfu-rs itself, untimed.
                    let out = Command::new(&b1)
                        .args(["cp", "-q", "-p"])
                        .arg(&s1)
                        .arg(&v1)
                        .output()
                        .context("start mfu-rs cp")?;
                    ensure!(
                        out.status.success(),
                        "mfu-rs cp -p {} {}: {}",
                        s1.display(),
                        v1.display(),
                        String::from_utf8_lossy(&out.stderr).trim_end()
                    );
                    flush_fs()
                })
                .check(move || {
                    ensure!(!v2.exists(), "{} still exists", v2.display());
                    Ok(())
                })
            })
        }
        Op::TarCreate => {
            let (parent, name) = parent_and_name(&src)?;
            let archive = st.scratch.join("create.tar");
            let ap = s(&archive).to_string();
            let mut v = st.mfu(&["tar", "-c", "-q", "-f", &ap, "-C", &parent, &name]);
            v.push(peer("tar -c", &["tar", "-cf", &ap, "-C", &parent, &name]));
            let entries = st.w.entries as usize;
            each(v, |c| {
                let (a1, a2, p2) = (archive.clone(), archive.clone(), PathBuf::from(&parent));
                c.prep(move || {
                    remove(&a1)?;
                    flush_fs()
                })
                .check(move || archive_ok(&a2, &p2, entries))
            })
        }
        Op::TarExtract | Op::TarExtractIndexed => {
            let (parent, name) = parent_and_name(&src)?;
            let (gnu, mfu) = (st.scratch.join("gnu.tar"), st.scratch.join("mfu.tar"));
            let out = st.scratch.join("extract-out");
            if !gnu.exists() {
                // GNU tar's default format (gnu): what users are handed.
                crate::run(
                    Command::new("tar")
                        .arg("-cf")
                        .arg(&gnu)
                        .args(["-C", &parent, &name]),
                )?;
            }
            let op_ = s(&out).to_string();
            let mut v = if op == Op::TarExtract {
                st.mfu(&["tar", "-x", "-q", "-f", s(&gnu), "-C", &op_])
            } else {
                remove(&mfu)?;
                crate::run(Command::new(st.bin).args([
                    "tar",
                    "-c",
                    "-q",
                    "-f",
                    s(&mfu),
                    "-C",
                    &parent,
                    &name,
                ]))?;
                st.mfu(&["tar", "-x", "-q", "-f", s(&mfu), "-C", &op_])
            };
            v.push(peer(GNU_TAR_X, &["tar", "-xf", s(&gnu), "-C", &op_]));
            if op == Op::TarExtract && have("bsdtar") {
                v.push(peer("bsdtar -x", &["bsdtar", "-xf", s(&gnu), "-C", &op_]));
            }
            let deep = st.w.kind == Kind::Deep;
            each(v, |c| {
                let (o1, o2, s2) = (out.clone(), out.clone(), src.clone());
                let aside = st.aside.clone();
                c.prep(move || {
                    clear(&o1, aside.as_deref())?;
                    std::fs::create_dir_all(&o1)
                        .with_context(|| format!("mkdir {}", o1.display()))?;
                    flush_fs()
                })
                .check(move || {
                    if deep {
                        let name = s2.file_name().context("deep tree without a name")?;
                        deep_same(&s2, &o2.join(name))
                    } else {
                        extracted_ok(&s2, &o2)
                    }
                })
            })
        }
    })
}

/// `rsync -a --delete SRC/ DST/`: make `dst` equal to `src` (untimed set-up).
fn rsync(src: &Path, dst: &Path) -> Result<()> {
    crate::run(Command::new("rsync").args([
        "-a",
        "--delete",
        &format!("{}/", s(src)),
        &format!("{}/", s(dst)),
    ]))
}

/// A tree's parent directory and its name, as arguments.
fn parent_and_name(src: &Path) -> Result<(String, String)> {
    let parent = src.parent().context("workload without a parent")?;
    let name = src.file_name().context("workload without a name")?;
    Ok((s(parent).to_string(), name.to_string_lossy().into_owned()))
}

/// Change 1% of the regular files under `dir` (every 100th in path order, at least one) so that
/// any sync must copy them again: a file of even rank gets its first bytes flipped and its
/// mtime moved one hour back (same size), one of odd rank grows by one byte. Returns the count.
pub fn change_one_percent(dir: &Path) -> Result<usize> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).with_context(|| format!("stat {}", p.display()))?;
        if m.is_dir() {
            for e in std::fs::read_dir(&p).with_context(|| format!("read {}", p.display()))? {
                stack.push(e?.path());
            }
        } else if m.is_file() {
            files.push(p);
        }
    }
    files.sort();
    let picked: Vec<&PathBuf> = files.iter().step_by(100).collect();
    for (i, p) in picked.iter().enumerate() {
        use std::io::{Read, Seek, Write};
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(p)
            .with_context(|| format!("open {}", p.display()))?;
        let m = f.metadata()?;
        if i % 2 == 0 {
            let mut head = vec![0u8; m.len().min(4096) as usize];
            f.read_exact(&mut head)?;
            head.iter_mut().for_each(|b| *b = !*b);
            f.rewind()?;
            f.write_all(&head)?;
            let t = std::time::UNIX_EPOCH
                + std::time::Duration::new(m.mtime().max(3600) as u64 - 3600, 0);
            f.set_modified(t)
                .with_context(|| format!("set the mtime of {}", p.display()))?;
        } else {
            f.seek(std::io::SeekFrom::End(0))?;
            f.write_all(b"+")?;
        }
    }
    Ok(picked.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_percent_of_the_files_change_and_a_copy_sees_it() {
        let t = std::env::temp_dir().join(format!("mfu-bench-change-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        std::fs::create_dir_all(t.join("d")).unwrap();
        for i in 0..250 {
            std::fs::write(t.join(format!("d/f{i:03}")), vec![7u8; 100]).unwrap();
        }
        let before: Vec<(u64, i64, Vec<u8>)> = (0..250)
            .map(|i| {
                let p = t.join(format!("d/f{i:03}"));
                let m = std::fs::metadata(&p).unwrap();
                (m.len(), m.mtime(), std::fs::read(&p).unwrap())
            })
            .collect();
        assert_eq!(change_one_percent(&t).unwrap(), 3);
        let changed: Vec<usize> = (0..250)
            .filter(|&i| {
                let p = t.join(format!("d/f{i:03}"));
                let m = std::fs::metadata(&p).unwrap();
                (m.len(), m.mtime(), std::fs::read(&p).unwrap()) != before[i]
            })
            .collect();
        assert_eq!(changed, [0, 100, 200]);
        let m = std::fs::metadata(t.join("d/f100")).unwrap();
        assert_eq!(m.len(), 101);
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn big_files_are_not_walked_or_removed() {
        assert!(!Op::Walk.applies_to(Kind::Big));
        assert!(Op::Cp.applies_to(Kind::Big));
        assert!(Op::Rm.applies_to(Kind::Small));
        for op in Op::ALL {
            assert_eq!(Op::parse(op.name()), Some(op));
        }
    }
}

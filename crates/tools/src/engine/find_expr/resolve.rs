//! Turning the written expression into one every rank can evaluate: the clock, reference files
//! and user and group names are looked up once, on rank 0, and the results broadcast, so that
//! every rank applies the same moment and the same ids.

use super::expr::Expr;
use super::lustre::LayoutTest;
use super::primary::Primary;
use flist::filter::{nanos, Cmp, Test};
use flist::path::display;
use flist::walk::stat_path;
use flist::IdTable;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::{Comm, CommExt};

/// A leaf of a resolved expression.
#[derive(Clone, Debug)]
pub enum Node {
    /// A test on the record.
    Test(Test),
    /// Print the path, ended by a newline or a NUL byte.
    Print {
        /// End with NUL instead of a newline.
        nul: bool,
    },
    /// Run the command (`{}` is the path).
    Exec(Vec<OsString>),
    /// A test of the file's Lustre layout.
    Lustre(LayoutTest),
}

/// What rank 0 looked up: the moment the search starts, and one number per lookup in
/// command-line order (a reference file's mtime in nanoseconds, or a user or group id).
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Lookups {
    now: i128,
    values: Vec<i128>,
}

/// `expr` with every leaf resolved. `tables` are the user and group tables of an input list,
/// consulted for names this machine does not know. Collective; `Err` (the same on every rank)
/// names the leaf that could not be resolved.
pub fn resolve(
    comm: &dyn Comm,
    expr: Option<Expr<Primary>>,
    tables: (&IdTable, &IdTable),
) -> Result<Option<Expr<Node>>, String> {
    let lookups = comm.bcast_with(0, || look_up(expr.as_ref(), tables))?;
    let mut values = lookups.values.into_iter();
    let mut next = || values.next().ok_or("lookups out of step");
    let Some(expr) = expr else { return Ok(None) };
    expr.try_map(&mut |leaf| -> Result<Node, String> {
        Ok(match leaf {
            Primary::Test(t) => Node::Test(t),
            Primary::Age { field, unit, spec } => {
                Node::Test(Test::age(field, unit, &spec, lookups.now).map_err(|e| e.to_string())?)
            }
            Primary::Newer { field, .. } => Node::Test(Test::Newer {
                field,
                than: next()?,
            }),
            Primary::User(_) => Node::Test(Test::Uid {
                cmp: Cmp::Equal,
                id: next()? as u64,
            }),
            Primary::Group(_) => Node::Test(Test::Gid {
                cmp: Cmp::Equal,
                id: next()? as u64,
            }),
            Primary::Print { nul } => Node::Print { nul },
            Primary::Exec(words) => Node::Exec(words),
            Primary::Lustre(t) => Node::Lustre(t),
        })
    })
    .map(Some)
}

/// Rank 0's lookups, in command-line order.
fn look_up(expr: Option<&Expr<Primary>>, tables: (&IdTable, &IdTable)) -> Result<Lookups, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| format!("the clock is before 1970: {e}"))?;
    let now = nanos(now.as_secs() as i64, now.subsec_nanos());
    let mut values = Vec::new();
    if let Some(expr) = expr {
        let mut failure = None;
        let mut leaves = Vec::new();
        collect(expr, &mut leaves);
        for leaf in leaves {
            let value = match leaf {
                Primary::Newer { file, .. } => reference_mtime(file),
                Primary::User(name) => id_of(name, false, tables.0),
                Primary::Group(name) => id_of(name, true, tables.1),
                _ => continue,
            };
            match value {
                Ok(v) => values.push(v),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
    }
    Ok(Lookups { now, values })
}

/// The leaves of `expr` in command-line order.
fn collect<'a>(expr: &'a Expr<Primary>, out: &mut Vec<&'a Primary>) {
    match expr {
        Expr::Leaf(l) => out.push(l),
        Expr::Not(e) => collect(e, out),
        Expr::And(v) | Expr::Or(v) => v.iter().for_each(|e| collect(e, out)),
    }
}

/// The modification time of `file` itself (a link is not followed, as in GNU find without
/// -H/-L), in nanoseconds since the epoch.
fn reference_mtime(file: &OsString) -> Result<i128, String> {
    let st = stat_path(file.as_bytes(), false)
        .map_err(|e| format!("reference file {}: {e}", display(file.as_bytes())))?;
    Ok(nanos(st.st_mtime, st.st_mtime_nsec as u32))
}

/// The id of a user (`group` false) or group named `name`: from this machine's databases, else
/// a number, else from the input list's table (for lists made elsewhere).
fn id_of(name: &OsString, group: bool, table: &IdTable) -> Result<i128, String> {
    let what = if group { "group" } else { "user" };
    let bytes = name.as_bytes();
    // A name with a NUL can't be in the databases (nor be a number): the table may have it.
    if let Ok(c) = CString::new(bytes) {
        let found = if group {
            crate::engine::ids::group_id(&c)
        } else {
            crate::engine::ids::user_id(&c)
        };
        match found {
            Ok(Some(id)) => return Ok(id as i128),
            Ok(None) => {}
            Err(e) => return Err(format!("look up {what} '{}': {e}", display(bytes))),
        }
    }
    if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) {
        if let Ok(id) = name.to_string_lossy().parse::<u32>() {
            return Ok(id as i128);
        }
    }
    table
        .id_of(bytes)
        .map(|id| id as i128)
        .ok_or_else(|| format!("unknown {what} '{}'", display(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_travel_between_ranks() {
        let l = Ok(Lookups {
            now: -5,
            values: vec![i128::MAX, 0, 7],
        });
        let back = |l: &Result<Lookups, String>| {
            steal::decode::<Result<Lookups, String>>(&steal::typed::encode(l)).unwrap()
        };
        assert_eq!(back(&l), l);
        let e: Result<Lookups, String> = Err("unknown user 'x'".into());
        assert_eq!(back(&e), e);
    }

    #[test]
    fn names_resolve_through_the_system_then_numbers_then_the_list() {
        let empty = IdTable::default();
        assert_eq!(id_of(&"root".into(), false, &empty), Ok(0));
        assert_eq!(id_of(&"root".into(), true, &empty), Ok(0));
        assert_eq!(id_of(&"4321".into(), false, &empty), Ok(4321));
        let list = IdTable {
            entries: vec![(b"elsewhere".to_vec(), 777)],
        };
        assert_eq!(id_of(&"elsewhere".into(), false, &list), Ok(777));
        assert!(id_of(&"no-such-user-xyz".into(), false, &empty)
            .unwrap_err()
            .contains("unknown user"));
    }
}

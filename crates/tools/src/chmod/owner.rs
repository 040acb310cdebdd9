//! `-u USER|UID` and `-g GROUP|GID`: numbers as they are, names looked up once on rank 0 (so
//! that 256 ranks don't ask the directory service 256 times) and broadcast.

use std::ffi::{CStr, CString};
use std::io;
use steal::wire::{self, Reader};
use steal::Comm;

/// The owner and group to give, `None` for "leave as is".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    /// New user id.
    pub uid: Option<u32>,
    /// New group id.
    pub gid: Option<u32>,
}

impl Owner {
    /// True when neither is to change.
    pub fn is_none(&self) -> bool {
        self.uid.is_none() && self.gid.is_none()
    }
}

/// Resolve `user` and `group` (names or numbers; `+N` is always a number). `Err` is the same
/// message on every rank. Collective: one broadcast.
pub fn resolve(comm: &dyn Comm, user: Option<&str>, group: Option<&str>) -> Result<Owner, String> {
    let mut bytes = Vec::new();
    if comm.rank() == 0 {
        let uid = user.map(|u| lookup(u, "user", user_id)).transpose();
        let gid = group.map(|g| lookup(g, "group", group_id)).transpose();
        match (uid, gid) {
            (Ok(uid), Ok(gid)) => {
                bytes.push(0);
                for id in [uid, gid] {
                    wire::put_u64(&mut bytes, id.map_or(u64::MAX, u64::from));
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                bytes.push(1);
                wire::put_bytes(&mut bytes, e.as_bytes());
            }
        }
    }
    comm.bcast(0, &mut bytes);
    let mut input = Reader::new(&bytes);
    if input.u8() != 0 {
        return Err(String::from_utf8_lossy(input.bytes()).into_owned());
    }
    let mut id = || u32::try_from(input.u64()).ok();
    Ok(Owner {
        uid: id(),
        gid: id(),
    })
}

/// A number (digits, or `+digits`), else the id the database gives the name.
fn lookup(
    text: &str,
    what: &str,
    by_name: fn(&CStr) -> io::Result<Option<u32>>,
) -> Result<u32, String> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // u32::MAX is (uid_t)-1, "no change" to chown(2): not an id.
        return match digits.parse::<u32>() {
            Ok(id) if id != u32::MAX => Ok(id),
            _ => Err(format!("invalid {what} id: '{text}'")),
        };
    }
    if text.starts_with('+') {
        return Err(format!("invalid {what} id: '{text}'"));
    }
    let name = CString::new(text).map_err(|_| format!("invalid {what}: '{text}'"))?;
    match by_name(&name) {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(format!("invalid {what}: '{text}' (no such {what})")),
        Err(e) => Err(format!("look up {what} '{text}': {e}")),
    }
}

/// `getpwnam_r`: the uid of a user name, `None` when there is no such user.
fn user_id(name: &CStr) -> io::Result<Option<u32>> {
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: zeroed is a valid `passwd` (pointers null, ids 0); it is only read after
        // getpwnam_r filled it, and its strings point into `buf`, which outlives that read.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; `buf.len()` is the buffer's size.
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        match rc {
            0 if found.is_null() => return Ok(None),
            0 => return Ok(Some(pwd.pw_uid)),
            libc::ERANGE if buf.len() < 1 << 24 => buf.resize(buf.len() * 4, 0),
            // "Not found" comes back as one of these from some NSS modules.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// `getgrnam_r`: the gid of a group name, `None` when there is no such group.
fn group_id(name: &CStr) -> io::Result<Option<u32>> {
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: as in `user_id`.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; `buf.len()` is the buffer's size.
        let rc = unsafe {
            libc::getgrnam_r(
                name.as_ptr(),
                &mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        match rc {
            0 if found.is_null() => return Ok(None),
            0 => return Ok(Some(grp.gr_gid)),
            libc::ERANGE if buf.len() < 1 << 24 => buf.resize(buf.len() * 4, 0),
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_resolve_on_every_rank() {
        for ranks in [1, 3] {
            let out = steal::local::run(ranks, |comm| {
                (
                    resolve(comm, Some("1234"), Some("+5678")),
                    resolve(comm, Some("root"), Some("root")),
                    resolve(comm, None, Some("0")),
                    resolve(comm, Some("no-such-user-mfu"), None),
                    resolve(comm, None, Some("4294967295")),
                )
            });
            for (nums, names, group_only, missing, minus_one) in out {
                assert_eq!(
                    nums,
                    Ok(Owner {
                        uid: Some(1234),
                        gid: Some(5678)
                    })
                );
                assert_eq!(
                    names,
                    Ok(Owner {
                        uid: Some(0),
                        gid: Some(0)
                    })
                );
                assert_eq!(
                    group_only,
                    Ok(Owner {
                        uid: None,
                        gid: Some(0)
                    })
                );
                assert!(missing.unwrap_err().contains("no such user"));
                assert!(minus_one.unwrap_err().contains("invalid group id"));
            }
        }
    }
}

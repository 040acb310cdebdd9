//! User and group names and ids from this machine's databases (through NSS): a name to its id
//! (`chmod -u alice -g proj`), and a user's name and primary group (to take its groups when
//! switching to it), and a group's name (`du`'s tables). One place for the `getpwnam_r`,
//! `getgrnam_r`, `getpwuid_r` and `getgrgid_r` calls and their buffer handling.
//!
//! These ask the directory service once per call: a collective tool asks on rank 0 and
//! broadcasts the answer (as `chmod` does), so that 256 ranks don't ask 256 times.

use std::ffi::{CStr, CString};
use std::io;

/// The largest buffer offered to a look-up (it grows from 4 KiB while the call says ERANGE).
const MAX_BUFFER: usize = 1 << 24;

/// Run a reentrant look-up with a buffer that grows while the call says it is too small.
/// `call` returns the call's result code and the value read from the record it filled (`None`
/// when the call found no entry). "Not found" also comes back as ENOENT, ESRCH, EBADF or EPERM
/// from some NSS modules: `Ok(None)` too.
fn with_buffer<T>(
    mut call: impl FnMut(&mut [u8]) -> (libc::c_int, Option<T>),
) -> io::Result<Option<T>> {
    let mut buf = vec![0u8; 4096];
    loop {
        let (rc, found) = call(&mut buf);
        match rc {
            0 => return Ok(found),
            libc::ERANGE if buf.len() < MAX_BUFFER => {
                let len = buf.len() * 4;
                buf.resize(len, 0);
            }
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// The uid of the user `name` (`getpwnam_r`), `None` when there is no such user.
pub fn user_id(name: &CStr) -> io::Result<Option<u32>> {
    with_buffer(|buf| {
        // SAFETY: zeroed is a valid `passwd` (pointers null, ids 0); it is only read after
        // getpwnam_r filled it.
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
        (rc, (!found.is_null()).then_some(pwd.pw_uid))
    })
}

/// The gid of the group `name` (`getgrnam_r`), `None` when there is no such group.
pub fn group_id(name: &CStr) -> io::Result<Option<u32>> {
    with_buffer(|buf| {
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
        (rc, (!found.is_null()).then_some(grp.gr_gid))
    })
}

/// The name and primary group of the user `uid` (`getpwuid_r`), `None` when it has no passwd
/// entry.
pub fn user_entry(uid: u32) -> io::Result<Option<(CString, u32)>> {
    with_buffer(|buf| {
        // SAFETY: as in `user_id`.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; `buf.len()` is the buffer's size.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        let entry = (!found.is_null()).then(|| {
            // SAFETY: getpwuid_r filled `pwd`: pw_name points to a NUL-terminated string in
            // `buf`, which is still alive here.
            let name = unsafe { CStr::from_ptr(pwd.pw_name) }.to_owned();
            (name, pwd.pw_gid)
        });
        (rc, entry)
    })
}

/// The name of the group `gid` (`getgrgid_r`), `None` when it has no group entry.
pub fn group_name(gid: u32) -> io::Result<Option<CString>> {
    with_buffer(|buf| {
        // SAFETY: as in `user_id`.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; `buf.len()` is the buffer's size.
        let rc = unsafe {
            libc::getgrgid_r(
                gid,
                &mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        let name = (!found.is_null()).then(|| {
            // SAFETY: getgrgid_r filled `grp`: gr_name points to a NUL-terminated string in
            // `buf`, which is still alive here.
            unsafe { CStr::from_ptr(grp.gr_name) }.to_owned()
        });
        (rc, name)
    })
}

/// Users or groups: which database a name is looked up in, and the word for it in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdKind {
    /// The passwd database: uids.
    User,
    /// The group database: gids.
    Group,
}

impl IdKind {
    fn word(self) -> &'static str {
        match self {
            IdKind::User => "user",
            IdKind::Group => "group",
        }
    }
}

/// The id `text` stands for, as `chown` reads it: digits (or `+digits`, always a number) are
/// the id itself; anything else is a name looked up in the database of `kind`. `Err` names
/// what is wrong: `invalid user id: '+x'`, `invalid group: 'nope' (no such group)`, or the
/// look-up's failure. `u32::MAX` is refused: it is `(uid_t)-1`, "no change" to `chown(2)`.
pub fn id_of(text: &str, kind: IdKind) -> Result<u32, String> {
    let what = kind.word();
    let digits = text.strip_prefix('+').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return match digits.parse::<u32>() {
            Ok(id) if id != u32::MAX => Ok(id),
            _ => Err(format!("invalid {what} id: '{text}'")),
        };
    }
    if text.starts_with('+') {
        return Err(format!("invalid {what} id: '{text}'"));
    }
    let name = CString::new(text).map_err(|_| format!("invalid {what}: '{text}'"))?;
    let found = match kind {
        IdKind::User => user_id(&name),
        IdKind::Group => group_id(&name),
    };
    match found {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(format!("invalid {what}: '{text}' (no such {what})")),
        Err(e) => Err(format!("look up {what} '{text}': {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_missing_names() {
        assert_eq!(user_id(c"root").unwrap(), Some(0));
        assert_eq!(group_id(c"root").unwrap(), Some(0));
        assert_eq!(user_id(c"no-such-user-mfu").unwrap(), None);
        assert_eq!(group_id(c"no-such-group-mfu").unwrap(), None);
        assert_eq!(user_entry(0).unwrap(), Some((c"root".to_owned(), 0)));
        assert_eq!(user_entry(4_000_000_123).unwrap(), None);
        assert_eq!(group_name(0).unwrap(), Some(c"root".to_owned()));
        assert_eq!(group_name(4_000_000_123).unwrap(), None);
    }

    #[test]
    fn numbers_names_and_refusals() {
        assert_eq!(id_of("1234", IdKind::User), Ok(1234));
        assert_eq!(id_of("+5678", IdKind::Group), Ok(5678));
        assert_eq!(id_of("root", IdKind::Group), Ok(0));
        assert_eq!(
            id_of("4294967295", IdKind::Group),
            Err("invalid group id: '4294967295'".into())
        );
        assert_eq!(
            id_of("+x", IdKind::User),
            Err("invalid user id: '+x'".into())
        );
        assert_eq!(
            id_of("no-such-user-mfu", IdKind::User),
            Err("invalid user: 'no-such-user-mfu' (no such user)".into())
        );
        assert_eq!(
            id_of("a\0b", IdKind::User),
            Err("invalid user: 'a\0b'".into())
        );
    }
}

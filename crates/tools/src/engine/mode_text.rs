//! The `ls -l` mode column (`drwxr-xr-x`): one formatter for walk's `-p` lines, `sh`'s `ls` and
//! `stat`, and `tar -tv`. Each caller only picks the type letter: a walked entry from its
//! mode's type bits, a lite entry from its file type, a tar member from its kind (`h` for a
//! hard link, as bsdtar and GNU tar show one).

use flist::FileType;

/// The type letter `ls -l` shows for `kind` (`-` for a regular file or anything unknown).
pub fn type_letter(kind: FileType) -> char {
    match kind {
        FileType::Dir => 'd',
        FileType::Symlink => 'l',
        FileType::Fifo => 'p',
        FileType::Socket => 's',
        FileType::BlockDev => 'b',
        FileType::CharDev => 'c',
        _ => '-',
    }
}

/// `letter` then the nine permission letters of `mode` (only its low 12 bits are read), with
/// `s`/`S` for set-user-id and set-group-id, `t`/`T` for the sticky bit (upper case: the bit
/// without the execute permission under it), as `ls -l` prints them.
pub fn mode_text(letter: char, mode: u32) -> String {
    let bit = |m: u32, c: char| if mode & m != 0 { c } else { '-' };
    let special = |x: u32, s: u32, set: char, unset_exec: char| match (mode & x != 0, mode & s != 0)
    {
        (true, true) => set,
        (false, true) => unset_exec,
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        letter,
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(0o100, 0o4000, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(0o010, 0o2000, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(0o001, 0o1000, 't', 'T'),
    ]
    .iter()
    .collect()
}

/// [`mode_text`] of a full `st_mode`: the type letter from its type bits.
pub fn st_mode_text(mode: u32) -> String {
    mode_text(type_letter(FileType::from_mode(mode)), mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_print_like_ls() {
        assert_eq!(st_mode_text(0o100644), "-rw-r--r--");
        assert_eq!(st_mode_text(0o040755), "drwxr-xr-x");
        assert_eq!(st_mode_text(0o104755), "-rwsr-xr-x");
        assert_eq!(st_mode_text(0o041777), "drwxrwxrwt");
        assert_eq!(st_mode_text(0o120777), "lrwxrwxrwx");
        assert_eq!(mode_text('-', 0o2644), "-rw-r-Sr--");
        assert_eq!(mode_text('-', 0o444), "-r--r--r--");
        assert_eq!(mode_text(type_letter(FileType::Fifo), 0o600), "prw-------");
        // Type bits in `mode` never leak into the permission letters.
        assert_eq!(mode_text('d', 0o40755), "drwxr-xr-x");
    }
}

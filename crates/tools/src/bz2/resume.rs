//! What lets an interrupted `bz2` continue: a checkpoint (`engine::checkpoint`) whose units are
//! the blocks (key: the block's index, the same at any rank count), and a record, in the
//! checkpoint's directory, of the partial output the blocks were written into.
//!
//! The partial output stays where it was written (a temporary beside the final name, on the
//! output's file system, whatever `--checkpoint` says); the record names it and its (device,
//! inode) and birth time. A rerun takes it over only when it still is that file
//! ([`flist::atomic::Output::adopt`])
//! and holds every recorded block; otherwise the marks are not used and the run starts over.

use crate::engine::checkpoint::Checkpoint;
use flist::atomic::{Stamp, STAMP_LEN};
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::io::{Read, Write};

/// The record's name in the checkpoint directory.
const RECORD: &[u8] = b"bz2-output";
/// Where a new record is written before it replaces the old one.
const RECORD_NEW: &[u8] = b"bz2-output.new";
/// A record longer than this is not one of ours.
const RECORD_MAX: u64 = 4096;

/// The partial output recorded in `checkpoint`: its name (one component, beside the final
/// output) and stamp ((device, inode), birth time). `None` when there is no record or it is
/// not well formed.
pub fn read_record(checkpoint: &Checkpoint) -> Option<(Vec<u8>, Stamp)> {
    let fd = rustix::fs::openat(
        checkpoint.dir(),
        RECORD,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
        || st.st_size as u64 > RECORD_MAX
    {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(RECORD_MAX)
        .read_to_end(&mut bytes)
        .ok()?;
    decode(&bytes)
}

/// Record (durably: synced, renamed over the old record, the directory synced) that the blocks
/// of this run go into the partial output `name` with stamp `stamp`. Rank 0, before any block
/// is marked.
pub fn write_record(checkpoint: &Checkpoint, name: &[u8], stamp: &Stamp) -> std::io::Result<()> {
    let dir = checkpoint.dir();
    // A leftover of a run killed while writing the record: ours (the directory is 0700).
    let _ = rustix::fs::unlinkat(dir, RECORD_NEW, AtFlags::empty());
    let fd = rustix::fs::openat(
        dir,
        RECORD_NEW,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&encode(name, stamp))?;
    file.sync_all()?;
    rustix::fs::renameat(dir, RECORD_NEW, dir, RECORD)?;
    rustix::fs::fsync(dir.as_fd())?;
    Ok(())
}

/// The stamp ([`Stamp::encode`]), then the name.
fn encode(name: &[u8], stamp: &Stamp) -> Vec<u8> {
    [&stamp.encode()[..], name].concat()
}

fn decode(bytes: &[u8]) -> Option<(Vec<u8>, Stamp)> {
    if bytes.len() <= STAMP_LEN {
        return None;
    }
    let stamp = Stamp::decode(&bytes[..STAMP_LEN])?;
    Some((bytes[STAMP_LEN..].to_vec(), stamp))
}

/// A compressed block's place in the output: the payload of its mark.
pub fn encode_entry(offset: u64, length: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&offset.to_be_bytes());
    b[8..].copy_from_slice(&length.to_be_bytes());
    b
}

/// The (offset, length) of a compressed block from its mark's payload.
pub fn decode_entry(payload: &[u8]) -> Option<(u64, u64)> {
    let b: &[u8; 16] = payload.try_into().ok()?;
    let offset = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
    let length = u64::from_be_bytes(b[8..].try_into().expect("8 bytes"));
    Some((offset, length))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_entries_travel_and_garbage_is_refused() {
        let stamp = Stamp {
            id: (3, 4),
            born: flist::atomic::Born::Birth(5, 6),
        };
        let r = encode(b".f.bz2.host.12.mfu-tmp", &stamp);
        assert_eq!(
            decode(&r),
            Some((b".f.bz2.host.12.mfu-tmp".to_vec(), stamp))
        );
        assert_eq!(decode(&r[..STAMP_LEN]), None);
        assert_eq!(decode(b"short"), None);
        assert_eq!(decode_entry(&encode_entry(7, 9)), Some((7, 9)));
        assert_eq!(decode_entry(&[1, 2, 3]), None);
        assert_eq!(decode_entry(&[0; 17]), None);
    }
}

//! Archives in one compressed stream (`.tar.gz`, `.tar.bz2`, `.tar.xz`, a `.tar.zst` without a
//! seek table): recognised by their first bytes, never by their names, and read front to back,
//! the only way such a stream can be read.
//!
//! A decoder thread decompresses the file into blocks that a bounded channel hands to the reader
//! ([`TarStream`]), which walks the tar headers as they arrive: decompression runs beside the
//! extraction's writes (or the listing's printing), and at most [`BLOCKS_IN_FLIGHT`] blocks
//! are held, whatever the size of the archive. Concatenated gzip members (pigz, BGZF), bzip2
//! streams (pbzip2, lbzip2) and xz streams read as one stream, as `gzip -dc` reads them.

pub use crate::engine::codec::kind::Codec;
use crate::tar::format::{decode_entry, Decoded, HeaderError, BLOCK};
use std::io::{self, BufRead, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A decoder of the whole of `input`, every member, stream or frame one after the other;
/// the bzip2 decoder counts its streams into `counts`.
fn decoder(
    codec: Codec,
    input: std::fs::File,
    counts: &Arc<StreamCounts>,
) -> io::Result<Box<dyn Read + Send>> {
    // Big reads of the compressed file: few system calls, and the decoders take what
    // they need from the buffer.
    let input = io::BufReader::with_capacity(1 << 20, input);
    Ok(match codec {
        Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Codec::Bzip2 => Box::new(Bzip2Streams::new(Box::new(input), counts.clone())),
        Codec::Xz => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(input)),
        Codec::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
    })
}

/// bzip2 streams one after the other, as `bzip2 -d` reads them: bytes after a whole stream
/// that do not start another one are the end (bzip2: "trailing garbage after EOF ignored").
/// They are dbz2's table and footer after the streams of `tar -c -j`, read front to back when
/// that table is damaged; damage inside a stream is still found by its CRCs, and a stream
/// cut short by the end of the file is an error.
struct Bzip2Streams {
    /// The decoder of the current stream; `None` at the end.
    stream: Option<bzip2::bufread::BzDecoder<Box<dyn io::BufRead + Send>>>,
    /// Streams decoded and bytes after the last one, for [`TarStream::decompression_error`].
    counts: Arc<StreamCounts>,
}

/// What a bzip2 read found of the file's layout, once it ended: the streams that decoded
/// whole and the bytes after the last of them (dbz2's table and footer in an archive of
/// `tar -c -j`). mfu-rs's archives are several streams then that table; several streams and
/// fewer bytes after them than any table of as many streams is an archive cut where its
/// table began.
#[derive(Default)]
struct StreamCounts {
    /// bzip2 streams that ended (their end marker and CRC read).
    streams: AtomicU64,
    /// Bytes after the last stream.
    trailing: AtomicU64,
}

impl Bzip2Streams {
    fn new(input: Box<dyn io::BufRead + Send>, counts: Arc<StreamCounts>) -> Bzip2Streams {
        Bzip2Streams {
            stream: Some(bzip2::bufread::BzDecoder::new(input)),
            counts,
        }
    }
}

impl Read for Bzip2Streams {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                return Ok(0);
            };
            let n = stream.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // The stream ended: what follows starts another one, or is the end. Its first
            // bytes are taken to look at them and given back in front of the rest.
            let mut input = self.stream.take().expect("a stream").into_inner();
            self.counts.streams.fetch_add(1, Ordering::Relaxed);
            let mut head = Vec::with_capacity(4);
            while head.len() < 4 {
                let got = input.fill_buf()?;
                if got.is_empty() {
                    break;
                }
                let n = got.len().min(4 - head.len());
                head.extend_from_slice(&got[..n]);
                input.consume(n);
            }
            if head.len() == 4 && head.starts_with(b"BZh") && (b'1'..=b'9').contains(&head[3]) {
                let again: Box<dyn io::BufRead + Send> =
                    Box::new(io::Cursor::new(head).chain(input));
                self.stream = Some(bzip2::bufread::BzDecoder::new(again));
            } else {
                // The end: what follows is counted (a dbz2 table is a few KiB).
                let rest = io::copy(&mut input, &mut io::sink())?;
                self.counts
                    .trailing
                    .store(head.len() as u64 + rest, Ordering::Relaxed);
            }
        }
    }
}

/// Bytes of decompressed tar stream per block handed over by the decoder thread.
pub const STREAM_BLOCK: usize = 1 << 20;
/// Bytes asked of the decoder per read (see the decoder thread).
const DECODER_READ: usize = 32 << 10;
/// Blocks decompressed ahead of the reader, at most: the memory of a serial read is about
/// this many [`STREAM_BLOCK`]s, whatever the archive's size.
pub const BLOCKS_IN_FLIGHT: usize = 8;

/// The decoder thread and the blocks it sends.
struct Pipeline {
    blocks: Option<Receiver<io::Result<Vec<u8>>>>,
    /// What the bzip2 decoder found of the file's layout (nothing for the other codecs).
    counts: Arc<StreamCounts>,
    quit: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Pipeline {
    /// Start decompressing `file` as `codec` on a thread of its own.
    fn start(codec: Codec, file: std::fs::File) -> io::Result<Pipeline> {
        let counts = Arc::new(StreamCounts::default());
        let mut decoder = decoder(codec, file, &counts)?;
        let (send, blocks) = sync_channel(BLOCKS_IN_FLIGHT);
        let quit = Arc::new(AtomicBool::new(false));
        let stop = quit.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{}-decoder", codec.name()))
            .spawn(move || loop {
                let mut block = vec![0u8; STREAM_BLOCK];
                let mut filled = 0;
                let mut failed = None;
                while filled < STREAM_BLOCK {
                    // Small reads: a decoder that meets damage drops what it decoded in the
                    // call that failed, so little is lost before the damage.
                    let to = (filled + DECODER_READ).min(STREAM_BLOCK);
                    match decoder.read(&mut block[filled..to]) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                block.truncate(filled);
                // What decompressed before an error is handed over first: the entries
                // before the damage are extracted, as GNU tar does.
                let end = failed.is_some() || filled < STREAM_BLOCK;
                if filled > 0 && send.send(Ok(block)).is_err() {
                    return;
                }
                if let Some(e) = failed {
                    let _ = send.send(Err(e));
                }
                if end || stop.load(Ordering::Relaxed) {
                    return;
                }
            })?;
        Ok(Pipeline {
            blocks: Some(blocks),
            counts,
            quit,
            thread: Some(thread),
        })
    }

    /// The next block; `None` at the end of the stream.
    fn next(&mut self) -> Option<io::Result<Vec<u8>>> {
        self.blocks.as_ref()?.recv().ok()
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // The thread ends at its next block: told to, or finding nobody to send to.
        self.quit.store(true, Ordering::Relaxed);
        self.blocks = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The decompressed tar stream of a serial archive, read front to back: headers decoded as
/// they arrive, file data handed out in the blocks it came in.
pub struct TarStream {
    pipe: Pipeline,
    /// Decompressed bytes held; `buf[head]` is stream byte `at`.
    buf: Vec<u8>,
    head: usize,
    at: u64,
    /// The decoder is done (at the end, or after `error`).
    done: bool,
    /// Why decompression stopped early, kept to be said again to every later read.
    error: Option<(io::ErrorKind, String)>,
    /// Offset of the next entry's first header block.
    next: u64,
    /// The stream starts with mfu-rs's mark ([`crate::tar::format::mfu_marked`]), known once the
    /// first entry was read: it must end with its end-of-archive blocks.
    marked: bool,
    /// The tar stream ended where an entry would start, without end-of-archive blocks.
    unterminated: bool,
    /// The tar stream ended one block after an end-of-archive block, without the second.
    lone_end: bool,
    /// The compression format, to tell its layout's missing end.
    codec: Codec,
    /// The file has mfu-rs's layout of frames without its end (found by
    /// [`crate::tar::archive::Archive::open`]): what is missing, said when the stream is marked.
    unended: Option<String>,
}

impl TarStream {
    /// Start reading `file` (an archive in one `codec` stream).
    pub fn open(codec: Codec, file: std::fs::File) -> io::Result<TarStream> {
        Ok(TarStream {
            pipe: Pipeline::start(codec, file)?,
            buf: Vec::new(),
            head: 0,
            at: 0,
            done: false,
            error: None,
            next: 0,
            marked: false,
            unterminated: false,
            lone_end: false,
            codec,
            unended: None,
        })
    }

    /// Take `unended` ([`crate::tar::archive::Archive::unended`]): the file has mfu-rs's layout
    /// of frames without the end that layout always has, which
    /// [`TarStream::decompression_error`] says of a stream with mfu-rs's mark.
    pub fn expecting_end(mut self, unended: Option<&str>) -> TarStream {
        self.unended = unended.map(str::to_owned);
        self
    }

    /// What is missing at the end of the file, when it has mfu-rs's layout of frames (known
    /// at open, or for bzip2 once read: several streams and fewer bytes after them than the
    /// dbz2 table of as many streams) without its end.
    fn missing_end(&self) -> Option<String> {
        if let Some(u) = &self.unended {
            return Some(u.clone());
        }
        let counts = &self.pipe.counts;
        let streams = counts.streams.load(Ordering::Relaxed);
        let trailing = counts.trailing.load(Ordering::Relaxed);
        let table = streams * crate::engine::codec::dbz2::ENTRY_LEN
            + crate::engine::codec::dbz2::FOOTER_LEN;
        (self.codec == Codec::Bzip2 && streams > 1 && trailing < table).then(|| {
            format!(
                "{streams} bzip2 streams and {trailing} bytes after them, not their dbz2 table \
                 ({table} bytes)"
            )
        })
    }

    /// Bytes held from `at` on.
    fn held(&self) -> usize {
        self.buf.len() - self.head
    }

    fn failure(&self) -> Option<io::Error> {
        self.error
            .as_ref()
            .map(|(kind, what)| io::Error::new(*kind, what.clone()))
    }

    /// Take the next block from the decoder into the buffer; false at the end of the stream
    /// or after a decompression error (kept in `error`).
    fn pull(&mut self) -> bool {
        if self.done {
            return false;
        }
        match self.pipe.next() {
            Some(Ok(block)) => {
                if self.head == self.buf.len() {
                    // All used: the block becomes the buffer, no copy.
                    self.buf = block;
                    self.head = 0;
                } else {
                    self.buf.drain(..self.head);
                    self.head = 0;
                    self.buf.extend_from_slice(&block);
                }
                true
            }
            Some(Err(e)) => {
                self.error = Some((e.kind(), format!("decompress: {e}")));
                self.done = true;
                false
            }
            None => {
                self.done = true;
                false
            }
        }
    }

    /// Drop the stream's bytes before `to` (at or after the bytes read so far), pulling and
    /// dropping blocks as needed. An error when the stream ends before `to`.
    fn skip_to(&mut self, to: u64) -> io::Result<()> {
        while self.at < to {
            if self.held() == 0 && !self.pull() {
                return Err(self.failure().unwrap_or_else(cut_short));
            }
            let n = (to - self.at).min(self.held() as u64) as usize;
            self.head += n;
            self.at += n as u64;
        }
        Ok(())
    }

    /// `len` bytes at `off` (at or after the bytes dropped so far), fewer at the end of the
    /// stream; a decompression error if one stopped it before.
    fn read_at(&mut self, off: u64, len: usize) -> io::Result<Vec<u8>> {
        self.skip_to(off).or_else(|e| match self.failure() {
            Some(e) => Err(e),
            None if e.kind() == io::ErrorKind::UnexpectedEof => Ok(()),
            None => Err(e),
        })?;
        if self.at < off {
            return Ok(Vec::new());
        }
        let from = (off - self.at) as usize;
        while self.held() < from + len && self.pull() {}
        if self.held() < from + len {
            if let Some(e) = self.failure() {
                return Err(e);
            }
        }
        let a = self.head + from.min(self.held());
        let b = self.head + (from + len).min(self.held());
        Ok(self.buf[a..b].to_vec())
    }

    /// The next entry (its header decoded, extensions applied), or `None` at the end of the
    /// archive: its end-of-archive block, or the end of the stream where an entry would start
    /// (GNU tar accepts both). The data of the entry before that was not taken is skipped.
    pub fn next_entry(&mut self) -> Result<Option<Decoded>, HeaderError> {
        let pos = self.next;
        if pos == 0 {
            // Nothing of the stream was dropped yet: its first header is still here.
            let head = self
                .read_at(0, crate::tar::format::MARK_HEAD)
                .map_err(|source| HeaderError::Io { offset: 0, source })?;
            self.marked = crate::tar::format::mfu_marked(&head);
        }
        let first = self.read_at(pos, 1).map_err(|source| HeaderError::Io {
            offset: pos,
            source,
        })?;
        if first.is_empty() {
            self.unterminated = true;
            return Ok(None);
        }
        let decoded = decode_entry(&mut |off, len| self.read_at(off, len), pos)?;
        if decoded.is_none() && self.marked {
            // mfu-rs ends its archives with two zero blocks: one alone was cut after it.
            let second = self.read_at(pos + BLOCK, BLOCK as usize);
            self.lone_end = second.is_ok_and(|b| b.len() < BLOCK as usize);
        }
        if let Some(d) = &decoded {
            self.next = d.next;
            // The data starts at d.data: nothing before it is needed again.
            self.skip_to(d.data).map_err(|source| HeaderError::Io {
                offset: d.data,
                source,
            })?;
        }
        Ok(decoded)
    }

    /// Up to `max` bytes of the stream from the current position (the entry's data), as
    /// much as one block holds; an error when the stream ends first or does not decompress.
    pub fn take(&mut self, max: usize) -> io::Result<&[u8]> {
        if self.held() == 0 && !self.pull() {
            return Err(self.failure().unwrap_or_else(cut_short));
        }
        let n = max.min(self.held());
        let from = self.head;
        self.head += n;
        self.at += n as u64;
        Ok(&self.buf[from..from + n])
    }

    /// Read the rest of the stream (after the end-of-archive block) to its end, and say
    /// whether it ended with a decompression error: a gzip member's CRC-32 and length, bzip2's
    /// and xz's checks and zstd's checksum are only verified at the end of what they cover,
    /// which can lie after the last entry (GNU tar, through gzip, reports such damage too).
    /// An archive of mfu-rs ([`crate::tar::format::MFU_MARK`]) whose stream ended where an entry
    /// would start, without its end-of-archive blocks, is truncated (cut at a frame boundary
    /// that fell between entries): that is an error too. Other tools' archives may end so
    /// (GNU tar accepts them). So is a marked archive whose tar stream is whole in a file of
    /// mfu-rs's layout of frames cut where its index began ([`TarStream::expecting_end`];
    /// for bzip2, several streams not followed by their dbz2 table).
    pub fn decompression_error(&mut self) -> Option<io::Error> {
        while self.pull() {
            self.head = self.buf.len();
        }
        self.failure()
            .or_else(|| {
                (self.marked && self.lone_end).then(|| {
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "archive is truncated: its tar stream ends one block after byte {}, \
                             missing the second of its end-of-archive blocks (an mfu-rs archive \
                             ends with two); the entries before the cut were read",
                            self.next
                        ),
                    )
                })
            })
            .or_else(|| {
                (self.marked && self.unterminated).then(|| {
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "archive is truncated: its tar stream ends at byte {} where an entry \
                         would start, missing its end (an mfu-rs archive ends with its index \
                         member and end-of-archive blocks); the entries before the cut were read",
                            self.next
                        ),
                    )
                })
            })
            .or_else(|| {
                // The tar stream is whole but the file was cut where the index of its
                // frames began: an mfu-rs archive always has one, so something is missing.
                let what = self.missing_end().filter(|_| self.marked)?;
                Some(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "archive is truncated: it was cut where its end begins, missing its \
                         end (seek table / end member / dbz2 table): {what}; the entries \
                         before the cut were read"
                    ),
                ))
            })
    }
}

/// A barrier that waits without spinning: while rank 0 reads a serial archive the other ranks
/// sleep between tests of a non-blocking barrier, instead of busy-polling in MPI's blocking
/// one and taking cores from the decoder and the writes. Collective.
pub fn wait_quietly(comm: &dyn steal::Comm) {
    let mut barrier = comm.ibarrier();
    while !barrier.test() {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// The error of a stream that ends inside an entry.
fn cut_short() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "truncated archive: the compressed stream ends inside an entry",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::codec::kind::MAGIC_LEN;
    use crate::tar::format::{round_up, Header, Kind};
    use std::io::{Seek, Write};

    /// The bytes of file `i` of [`tar_of`]: noise, so that compressed streams are about as
    /// long as the data and a cut lands where the data does.
    fn bytes_of(i: usize, size: usize) -> Vec<u8> {
        crate::engine::test_rng::noise(0x9E37_79B9_7F4A_7C15u64 ^ i as u64, size)
    }

    /// A tar stream of `files` (name, size), file `i` holding [`bytes_of`]`(i, size)`.
    fn tar_of(files: &[(&str, usize)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, (name, size)) in files.iter().enumerate() {
            Header {
                path: name.as_bytes().to_vec(),
                kind: Kind::File,
                mode: 0o644,
                uid: 0,
                gid: 0,
                uname: Vec::new(),
                gname: Vec::new(),
                size: *size as u64,
                mtime: 1,
                mtime_nsec: 0,
                link: Vec::new(),
                dev_major: 0,
                dev_minor: 0,
                xattrs: Vec::new(),
                projid: Default::default(),
            }
            .encode(&mut out);
            out.extend_from_slice(&bytes_of(i, *size));
            out.resize(out.len() + (round_up(*size as u64) as usize - size), 0);
        }
        out.resize(out.len() + 1024, 0);
        out
    }

    fn file_of(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f.rewind().unwrap();
        f
    }

    /// (name, data) of each entry read.
    type Named = Vec<(Vec<u8>, Vec<u8>)>;

    /// Every entry of the stream with its data, and the error that ended it, if any.
    fn read_all(mut s: TarStream) -> (Named, Option<String>) {
        read_all_from(&mut s)
    }

    /// [`read_all`] of a stream the caller keeps.
    fn read_all_from(s: &mut TarStream) -> (Named, Option<String>) {
        let mut out = Vec::new();
        loop {
            let d = match s.next_entry() {
                Ok(Some(d)) => d,
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e.to_string())),
            };
            let mut data = Vec::new();
            while (data.len() as u64) < d.header.size {
                match s.take((d.header.size - data.len() as u64) as usize) {
                    Ok(b) => data.extend_from_slice(b),
                    Err(e) => return (out, Some(e.to_string())),
                }
            }
            out.push((d.header.path, data));
        }
    }

    #[test]
    fn concatenated_gzip_members_read_as_one_stream_across_blocks() {
        // Files larger than a block of the pipeline, and a header that straddles two blocks.
        let files = [
            ("a", 3 << 20),
            ("b", STREAM_BLOCK - 700),
            ("c", 10),
            ("d", 0),
        ];
        let tar = tar_of(&files);
        let mut gz = Vec::new();
        // Two members cut in the middle of a file, as pigz or BGZF would.
        for part in [&tar[..1_000_000], &tar[1_000_000..]] {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(part).unwrap();
            gz.extend_from_slice(&e.finish().unwrap());
        }
        assert_eq!(Codec::of_magic(&gz[..MAGIC_LEN]), Some(Codec::Gzip));
        let (got, err) = read_all(TarStream::open(Codec::Gzip, file_of(&gz)).unwrap());
        assert_eq!(err, None);
        assert_eq!(got.len(), files.len());
        for (i, ((name, size), (gname, data))) in files.iter().zip(&got).enumerate() {
            assert_eq!(name.as_bytes(), &gname[..]);
            assert!(*data == bytes_of(i, *size), "{name}");
        }
    }

    /// bzip2 streams one after the other read as one stream, and bytes after the last that
    /// start no other stream (dbz2's table) end it, as `bzip2 -d` ignores them; a stream cut
    /// short or damaged is still an error.
    #[test]
    fn bzip2_streams_end_at_trailing_bytes_and_not_at_damage() {
        let tar = tar_of(&[("a", 300_000), ("b", 70_000), ("c", 10)]);
        let mut bz = Vec::new();
        for part in tar.chunks(100_000) {
            let mut e = bzip2::write::BzEncoder::new(Vec::new(), Default::default());
            e.write_all(part).unwrap();
            bz.extend_from_slice(&e.finish().unwrap());
        }
        let whole = bz.len();
        // Trailing bytes as dbz2 writes them, one of them "BZh" without a level digit.
        bz.extend_from_slice(b"BZh\0\0\0\0\0\0\0\x10table and footer");
        let mut s = TarStream::open(Codec::Bzip2, file_of(&bz)).unwrap();
        let (got, err) = read_all_from(&mut s);
        assert_eq!((got.len(), err), (3, None));
        assert!(got[0].1 == bytes_of(0, 300_000));
        let end = s.decompression_error().map(|e| e.to_string());
        assert_eq!(
            end, None,
            "the bytes after the last stream are not an error"
        );
        // Cut at its end (the stream's end marker and CRC) or damaged: an error, at the
        // latest when the rest of the stream is read after the last entry.
        let mut flipped = bz.clone();
        flipped[whole / 2] ^= 0x08;
        for (what, bytes) in [("cut", &bz[..whole - 6]), ("flipped", &flipped[..])] {
            let mut s = TarStream::open(Codec::Bzip2, file_of(bytes)).unwrap();
            let (_, err) = read_all_from(&mut s);
            assert!(
                err.is_some() || s.decompression_error().is_some(),
                "{what}: bzip2's end and CRCs are checked"
            );
        }
    }

    #[test]
    fn a_cut_stream_gives_the_entries_before_the_cut_then_an_error() {
        let files = [("a", 1000), ("b", 2 << 20), ("c", 10)];
        let tar = tar_of(&files);
        for codec in [Codec::Gzip, Codec::Bzip2, Codec::Xz, Codec::Zstd] {
            let whole: Vec<u8> = match codec {
                Codec::Gzip => {
                    let mut e = flate2::write::GzEncoder::new(Vec::new(), Default::default());
                    e.write_all(&tar).unwrap();
                    e.finish().unwrap()
                }
                Codec::Bzip2 => {
                    let mut e = bzip2::write::BzEncoder::new(Vec::new(), Default::default());
                    e.write_all(&tar).unwrap();
                    e.finish().unwrap()
                }
                Codec::Xz => {
                    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
                    e.write_all(&tar).unwrap();
                    e.finish().unwrap()
                }
                Codec::Zstd => zstd::stream::encode_all(&tar[..], 1).unwrap(),
            };
            assert_eq!(Codec::of_magic(&whole), Some(codec));
            let (got, err) = read_all(TarStream::open(codec, file_of(&whole)).unwrap());
            assert_eq!((got.len(), err), (3, None), "{codec:?}");
            let cut = &whole[..whole.len() * 3 / 4];
            let (got, err) = read_all(TarStream::open(codec, file_of(cut)).unwrap());
            assert!(
                err.is_some(),
                "{codec:?}: a cut stream must end in an error"
            );
            assert!(
                !got.is_empty() && got.len() < 3,
                "{codec:?}: {} entries",
                got.len()
            );
            assert_eq!(got[0].1, bytes_of(0, 1000), "{codec:?}");
        }
    }
}

//! One bzip2 stream in memory (a dbz2 block), and the serial decoding of plain `bzip2` files.

use bzip2::{Action, Compress, Compression, Decompress, Status};
use std::io::{self, BufRead, Read, Write};

/// bzip2's default work factor (effort before the fallback sort on repetitive input).
const WORK_FACTOR: u32 = 30;

/// Compress `input` into one complete bzip2 stream with bzip2 blocks of `level` x 100 kB.
pub fn compress_block(input: &[u8], level: u32) -> Result<Vec<u8>, String> {
    let mut enc = Compress::new(Compression::new(level), WORK_FACTOR);
    // bzip2's bound: 1% + 600 bytes more than the input.
    let mut out = Vec::with_capacity(input.len() + input.len() / 100 + 600);
    loop {
        let consumed = enc.total_in() as usize;
        match enc.compress_vec(&input[consumed..], &mut out, Action::Finish) {
            Ok(Status::StreamEnd) => return Ok(out),
            Ok(_) => out.reserve(out.capacity().max(4096)),
            Err(e) => return Err(format!("bzip2 compression failed: {e}")),
        }
    }
}

/// Decompress `input`, which must be exactly one bzip2 stream of exactly `expected` bytes.
pub fn decompress_block(input: &[u8], expected: usize) -> Result<Vec<u8>, String> {
    let mut dec = Decompress::new(false);
    // One byte of room beyond `expected` shows a stream that is too long. The room grows with
    // what the stream really holds (a damaged table or footer can claim up to 1 GiB per block).
    let limit = expected + 1;
    let mut out = Vec::with_capacity(limit.min(1 << 20));
    loop {
        if out.len() == out.capacity() {
            out.reserve_exact((limit - out.len()).min(out.capacity().max(1 << 20)));
        }
        let consumed = dec.total_in() as usize;
        let before = out.len();
        let status = dec
            .decompress_vec(&input[consumed..], &mut out)
            .map_err(|e| match e {
                bzip2::Error::DataMagic => "not a bzip2 stream (bad magic)".to_string(),
                _ => "data integrity error (damaged bzip2 stream)".to_string(),
            })?;
        if out.len() > expected {
            return Err(format!(
                "stream holds more than the {expected} bytes of its block"
            ));
        }
        if status == Status::StreamEnd {
            if out.len() != expected {
                return Err(format!(
                    "stream holds {} bytes, its block {expected}",
                    out.len()
                ));
            }
            if dec.total_in() as usize != input.len() {
                return Err("bytes after the end of the stream".to_string());
            }
            return Ok(out);
        }
        let stalled = out.len() == before && dec.total_in() as usize == consumed;
        if stalled || (dec.total_in() as usize == input.len() && out.len() < out.capacity()) {
            return Err("stream ends early (truncated)".to_string());
        }
    }
}

/// What went wrong decoding a plain bzip2 file.
#[derive(Debug)]
pub enum SerialError {
    /// The file does not start with a bzip2 stream.
    NotBzip2,
    /// Reading, decoding or writing failed after `at` bytes of output.
    Failed {
        /// Bytes written before the failure.
        at: u64,
        /// What failed.
        message: String,
    },
}

/// What a serial decode found.
#[derive(Debug, Default)]
pub struct SerialReport {
    /// Bytes written.
    pub bytes: u64,
    /// Streams decoded.
    pub streams: u64,
    /// Bytes after the last stream that were not a stream (like bunzip2, ignored with a warning).
    pub trailing_garbage: bool,
}

/// Decode every concatenated stream of `input` into `output`, as `bunzip2` does: after a stream,
/// anything that does not start with `BZh` is trailing garbage and ends the decoding.
/// Stops with an error saying so when `stop` is set (a signal).
pub fn decode_all<R: BufRead, W: Write>(
    mut input: R,
    output: &mut W,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<SerialReport, SerialError> {
    let mut report = SerialReport::default();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let head = input.fill_buf().map_err(|e| SerialError::Failed {
            at: report.bytes,
            message: format!("read: {e}"),
        })?;
        if head.is_empty() {
            return match report.streams {
                0 => Err(SerialError::NotBzip2),
                _ => Ok(report),
            };
        }
        if !head.starts_with(b"BZh") {
            if report.streams == 0 {
                return Err(SerialError::NotBzip2);
            }
            report.trailing_garbage = true;
            return Ok(report);
        }
        let mut dec = bzip2::bufread::BzDecoder::new(input);
        loop {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(SerialError::Failed {
                    at: report.bytes,
                    message: "interrupted by a signal".to_string(),
                });
            }
            let n = match dec.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if report.streams == 0 && report.bytes == 0 && is_magic_error(&e) => {
                    return Err(SerialError::NotBzip2)
                }
                Err(e) => {
                    return Err(SerialError::Failed {
                        at: report.bytes,
                        message: format!("stream {}: {}", report.streams + 1, describe(&e)),
                    })
                }
            };
            output
                .write_all(&buf[..n])
                .map_err(|e| SerialError::Failed {
                    at: report.bytes,
                    message: format!("write: {e}"),
                })?;
            report.bytes += n as u64;
        }
        report.streams += 1;
        input = dec.into_inner();
    }
}

fn is_magic_error(e: &io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<bzip2::Error>())
        .is_some_and(|b| *b == bzip2::Error::DataMagic)
}

fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => "stream ends early (truncated)".to_string(),
        io::ErrorKind::InvalidInput => "data integrity error (damaged bzip2 stream)".to_string(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_round_trip_and_damage() {
        let data: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let z = compress_block(&data, 1).unwrap();
        assert!(z.starts_with(b"BZh1"));
        assert_eq!(decompress_block(&z, data.len()).unwrap(), data);
        assert!(decompress_block(&z, data.len() - 1).is_err());
        assert!(decompress_block(&z, data.len() + 1).is_err());
        assert!(decompress_block(&z[..z.len() - 5], data.len()).is_err());
        let mut bad = z.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        assert!(decompress_block(&bad, data.len()).is_err());
        let empty = compress_block(b"", 9).unwrap();
        assert_eq!(decompress_block(&empty, 0).unwrap(), b"");
    }

    #[test]
    fn serial_decodes_concatenated_streams_and_ignores_garbage() {
        let mut file = compress_block(b"hello ", 9).unwrap();
        file.extend(compress_block(b"world", 1).unwrap());
        file.extend([0u8; 40]);
        let mut out = Vec::new();
        let r = decode_all(&file[..], &mut out, &Default::default()).unwrap();
        assert_eq!(out, b"hello world");
        assert_eq!(r.streams, 2);
        assert!(r.trailing_garbage);
        assert!(matches!(
            decode_all(
                &b"not bzip2 at all"[..],
                &mut Vec::new(),
                &Default::default()
            ),
            Err(SerialError::NotBzip2)
        ));
        let cut = &file[..10];
        assert!(matches!(
            decode_all(cut, &mut Vec::new(), &Default::default()),
            Err(SerialError::Failed { .. })
        ));
    }
}

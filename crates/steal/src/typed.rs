//! Typed rank messages: one way to send a value between ranks of one program.
//!
//! A message is any type that derives serde's `Serialize` and `Deserialize`, encoded with
//! [postcard](https://docs.rs/postcard) (varint lengths and integers, no field names, no
//! framing). The collectives ([`CommExt::bcast_from`], [`CommExt::bcast_with`],
//! [`CommExt::all_gather`], [`CommExt::gather_to`], [`CommExt::agree`]) and the point-to-point
//! [`CommExt::send_value`] with [`decode`] are the whole family; nothing else in mfu-rs encodes a
//! message by hand.
//!
//! Byte strings (paths are bytes, never `String`) travel as one length and a copy: mark a
//! `Vec<u8>` field `#[serde(with = "serde_bytes")]`, a list of them [`byte_list`]. Without it
//! serde writes a `Vec<u8>` one element at a time (the same bytes on the wire, slower).
//!
//! Many values to chosen ranks (records to the rank that owns them): append each to the buffer
//! of its rank with [`encode_into`], one `comm.alltoallv`, then read each buffer with [`each`]
//! (and [`sent`]: the bytes came from this program). A work-queue item is any type that derives
//! both traits (`queue::WorkItem` is implemented for it).
//!
//! [`decode`] returns a `Result`: garbage or truncated bytes give [`DecodeError`], never a
//! panic. Inside a collective the bytes come from another rank of the same program, so bytes
//! that do not decode are a bug; the collectives panic with a message naming the type.
//!
//! ```
//! use steal::{local, Comm, CommExt};
//! let out = local::run(3, |comm: &dyn Comm| {
//!     let name: Vec<u8> = comm.bcast_with(0, || b"/scratch/a\xff".to_vec());
//!     let ranks: Vec<u64> = comm.all_gather(&(comm.rank() as u64));
//!     (name, ranks)
//! });
//! assert_eq!(out[2], (b"/scratch/a\xff".to_vec(), vec![0, 1, 2]));
//! ```
//!
//! [`CommExt::bcast_from`]: crate::CommExt::bcast_from
//! [`CommExt::bcast_with`]: crate::CommExt::bcast_with
//! [`CommExt::all_gather`]: crate::CommExt::all_gather
//! [`CommExt::gather_to`]: crate::CommExt::gather_to
//! [`CommExt::agree`]: crate::CommExt::agree
//! [`CommExt::send_value`]: crate::CommExt::send_value

use crate::comm::{Comm, CommExt, Tag};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Bytes that are not the postcard encoding of the type asked for.
#[derive(Debug, thiserror::Error)]
#[error("malformed {type_name} message ({len} bytes): {reason}")]
pub struct DecodeError {
    /// The type that was asked for (`std::any::type_name`).
    pub type_name: &'static str,
    /// Length of the message, in bytes.
    pub len: usize,
    /// What did not fit.
    pub reason: String,
}

/// The encoding of `value`, appended to `out`.
///
/// Panics if serde cannot encode the type in postcard (a sequence of unknown length, e.g. a
/// `#[serde(flatten)]` field): a property of the type, found by its first round-trip test.
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    let buf = std::mem::take(out);
    *out = postcard::to_extend(value, buf).unwrap_or_else(|e| {
        panic!(
            "{} cannot be sent between ranks: {e}",
            std::any::type_name::<T>()
        )
    });
}

/// The encoding of `value` (see [`encode_into`]).
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(value, &mut out);
    out
}

/// The value encoded in all of `bytes`: trailing bytes are an error too. The value may borrow
/// from `bytes` (a `&[u8]` field marked `serde_bytes`).
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, DecodeError> {
    match decode_prefix(bytes)? {
        (v, []) => Ok(v),
        (_, rest) => Err(DecodeError {
            type_name: std::any::type_name::<T>(),
            len: bytes.len(),
            reason: format!("{} bytes left over", rest.len()),
        }),
    }
}

/// The value encoded at the start of `bytes`, and the bytes after it (for a stream of values
/// written one after another with [`encode_into`]).
pub fn decode_prefix<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
) -> Result<(T, &'a [u8]), DecodeError> {
    postcard::take_from_bytes(bytes).map_err(|e| DecodeError {
        type_name: std::any::type_name::<T>(),
        len: bytes.len(),
        reason: e.to_string(),
    })
}

/// The values of a stream written with [`encode_into`], one after another, in order; after
/// an error, nothing more.
pub fn each<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
) -> impl Iterator<Item = Result<T, DecodeError>> + 'a {
    let mut rest = Some(bytes);
    std::iter::from_fn(move || {
        let now = rest.take().filter(|r| !r.is_empty())?;
        Some(decode_prefix(now).map(|(v, after)| {
            rest = Some(after);
            v
        }))
    })
}

/// The value of bytes another rank of this program encoded: a failure is a bug in the
/// program, so this panics, naming the type.
pub fn sent<T>(decoded: Result<T, DecodeError>) -> T {
    decoded.unwrap_or_else(|e| panic!("rank message: {e}"))
}

/// [`decode`] of bytes another rank sent (see [`sent`]).
pub(crate) fn expect<T: DeserializeOwned>(bytes: &[u8]) -> T {
    sent(decode(bytes))
}

/// `#[serde(with = "steal::typed::byte_list")]` for a `Vec<Vec<u8>>`: each byte string as one
/// length and a copy (see [`serde_bytes`], which does it for one `Vec<u8>`).
pub mod byte_list {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialize `list` as a sequence of byte strings.
    pub fn serialize<S: Serializer>(list: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(list.iter().map(|b| serde_bytes::Bytes::new(b)))
    }

    /// Deserialize what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        let list = Vec::<serde_bytes::ByteBuf>::deserialize(d)?;
        Ok(list
            .into_iter()
            .map(serde_bytes::ByteBuf::into_vec)
            .collect())
    }
}

/// Byte strings (paths) as one message: `comm.all_gather(&ByteStrings(paths))`. Each string
/// travels as one length and a copy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteStrings(#[serde(with = "byte_list")] pub Vec<Vec<u8>>);

/// `#[serde(with = "steal::typed::byte_pairs")]` for a `Vec<(Vec<u8>, T)>` (a path or a name
/// with its value): each byte string as one length and a copy.
pub mod byte_pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    /// Serialize `pairs` as a sequence of (byte string, value).
    pub fn serialize<S: Serializer, T: Serialize>(
        pairs: &[(Vec<u8>, T)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(pairs.iter().map(|(b, v)| (Bytes::new(b), v)))
    }

    /// Deserialize what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Vec<(Vec<u8>, T)>, D::Error> {
        let pairs = Vec::<(ByteBuf, T)>::deserialize(d)?;
        Ok(pairs.into_iter().map(|(b, v)| (b.into_vec(), v)).collect())
    }
}

/// The typed collectives; [`CommExt`] forwards to these.
pub(crate) fn bcast_from<C, T>(comm: &C, root: usize, value: &T) -> T
where
    C: Comm + ?Sized,
    T: Serialize + DeserializeOwned,
{
    let mut bytes = if comm.rank() == root {
        encode(value)
    } else {
        Vec::new()
    };
    comm.bcast(root, &mut bytes);
    expect(&bytes)
}

pub(crate) fn bcast_with<C, T>(comm: &C, root: usize, produce: impl FnOnce() -> T) -> T
where
    C: Comm + ?Sized,
    T: Serialize + DeserializeOwned,
{
    let own = (comm.rank() == root).then(produce);
    let mut bytes = own.as_ref().map(encode).unwrap_or_default();
    comm.bcast(root, &mut bytes);
    match own {
        Some(v) => v,
        None => expect(&bytes),
    }
}

pub(crate) fn all_gather<C, T>(comm: &C, value: &T) -> Vec<T>
where
    C: Comm + ?Sized,
    T: Serialize + DeserializeOwned,
{
    comm.allgatherv(&encode(value))
        .iter()
        .map(|b| expect(b))
        .collect()
}

pub(crate) fn gather_to<C, T>(comm: &C, root: usize, value: &T) -> Option<Vec<T>>
where
    C: Comm + ?Sized,
    T: Serialize + DeserializeOwned,
{
    // An all-to-all where only the root's column is non-empty: the root alone receives.
    let mut sends = vec![Vec::new(); comm.size()];
    sends[root] = encode(value);
    let got = comm.alltoallv(sends);
    (comm.rank() == root).then(|| got.iter().map(|b| expect(b)).collect())
}

pub(crate) fn agree<C, T, E>(comm: &C, local: Result<T, E>) -> Result<T, E>
where
    C: Comm + ?Sized,
    E: Serialize + DeserializeOwned,
{
    if !comm.any(local.is_err()) {
        return local;
    }
    let mine = match &local {
        Err(e) => encode(&Some(e)),
        Ok(_) => encode(&None::<&E>),
    };
    let all = comm.allgatherv(&mine);
    let first = all
        .iter()
        .position(|b| !matches!(b.as_slice(), [0]))
        .expect("a rank reported a failure");
    match local {
        Err(e) if first == comm.rank() => Err(e),
        _ => Err(expect::<Option<E>>(&all[first]).expect("the first failed rank sent its error")),
    }
}

pub(crate) fn send_value<C, T>(comm: &C, dest: usize, tag: Tag, value: &T)
where
    C: Comm + ?Sized,
    T: Serialize + ?Sized,
{
    comm.send(dest, tag, encode(value));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local;
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Sample {
        #[serde(with = "serde_bytes")]
        path: Vec<u8>,
        #[serde(with = "byte_list")]
        names: Vec<Vec<u8>>,
        #[serde(with = "byte_pairs")]
        owners: Vec<(Vec<u8>, u32)>,
        size: u64,
        mode: Option<u32>,
        kind: Kind,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    enum Kind {
        File,
        Link {
            #[serde(with = "serde_bytes")]
            target: Vec<u8>,
        },
        Error(String),
    }

    fn sample(i: u64) -> Sample {
        Sample {
            path: format!("/a b/|\n{i}")
                .into_bytes()
                .into_iter()
                .chain([0xff])
                .collect(),
            names: vec![b"x".to_vec(), Vec::new(), vec![0xfe; 300]],
            owners: vec![(b"r\xfft".to_vec(), 0), (Vec::new(), u32::MAX)],
            size: u64::MAX - i,
            mode: (i % 2 == 0).then_some(0o644),
            kind: match i % 3 {
                0 => Kind::File,
                1 => Kind::Link {
                    target: b"../t\xff".to_vec(),
                },
                _ => Kind::Error("é".into()),
            },
        }
    }

    #[test]
    fn values_round_trip() {
        for i in 0..6 {
            let s = sample(i);
            assert_eq!(decode::<Sample>(&encode(&s)).unwrap(), s);
        }
        let mut stream = Vec::new();
        encode_into(&sample(1), &mut stream);
        encode_into(&7u64, &mut stream);
        let (a, rest) = decode_prefix::<Sample>(&stream).unwrap();
        assert_eq!(a, sample(1));
        assert_eq!(decode::<u64>(rest).unwrap(), 7);
        let strings = ByteStrings(vec![b"/a\n".to_vec(), Vec::new()]);
        assert_eq!(decode::<ByteStrings>(&encode(&strings)).unwrap(), strings);
        // A stream of borrowed values.
        let mut stream = Vec::new();
        for p in [&b"a|b"[..], b"", b"\n\xff"] {
            encode_into(&(serde_bytes::Bytes::new(p), 3u8), &mut stream);
        }
        let back: Vec<(&[u8], u8)> = each::<(&serde_bytes::Bytes, u8)>(&stream)
            .map(|r| r.map(|(b, v)| (&b[..], v)).unwrap())
            .collect();
        assert_eq!(back, [(&b"a|b"[..], 3), (b"", 3), (b"\n\xff", 3)]);
        let cut = each::<(&serde_bytes::Bytes, u8)>(&stream[..stream.len() - 1]);
        assert_eq!(
            cut.map(|r| r.is_ok()).collect::<Vec<_>>(),
            [true, true, false]
        );
    }

    #[test]
    fn byte_strings_travel_as_one_length_and_a_copy() {
        let s = sample(0);
        let bytes = encode(&s);
        // The path's bytes appear verbatim, after a one-byte varint length.
        let at = bytes
            .windows(s.path.len())
            .position(|w| w == s.path)
            .unwrap();
        assert_eq!(at, 1);
        assert_eq!(bytes[0] as usize, s.path.len());
    }

    #[test]
    fn garbage_and_truncated_bytes_are_errors_not_panics() {
        let whole = encode(&sample(1));
        for n in 0..whole.len() {
            assert!(decode::<Sample>(&whole[..n]).is_err(), "truncated at {n}");
        }
        let mut longer = whole.clone();
        longer.push(0);
        let e = decode::<Sample>(&longer).unwrap_err();
        assert!(e.to_string().contains("Sample"), "{e}");
        assert!(e.to_string().contains("1 bytes left over"), "{e}");
        let mut rng = SmallRng::seed_from_u64(32);
        for _ in 0..20_000 {
            let n = rng.random_range(0..64);
            let junk: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            // Any outcome but a panic (or a giant allocation) is fine.
            let _ = decode::<Sample>(&junk);
            let _ = decode::<Vec<Vec<u8>>>(&junk);
            let _ = decode::<(u64, String, Option<i64>)>(&junk);
            let mut flipped = whole.clone();
            let at = rng.random_range(0..flipped.len());
            flipped[at] = rng.random();
            let _ = decode::<Sample>(&flipped);
        }
        // A length of 2^63 in a varint: refused, not allocated.
        let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(decode::<Vec<u8>>(&huge).is_err());
        assert!(decode::<Vec<u64>>(&huge).is_err());
    }

    #[test]
    fn collectives_at_1_3_and_4_ranks() {
        for n in [1, 3, 4] {
            let out = local::run(n, |comm: &dyn Comm| {
                let r = comm.rank() as u64;
                let root = comm.size() - 1;
                let from = comm.bcast_from(root, &sample(r));
                let with = comm.bcast_with(0, || sample(100 + r));
                let all = comm.all_gather(&sample(r));
                let gathered = comm.gather_to(root, &(r, b"p\n".to_vec()));
                (from, with, all, gathered)
            });
            for (r, (from, with, all, gathered)) in out.into_iter().enumerate() {
                assert_eq!(from, sample(n as u64 - 1));
                assert_eq!(with, sample(100));
                assert_eq!(all, (0..n as u64).map(sample).collect::<Vec<_>>());
                if r == n - 1 {
                    let want: Vec<_> = (0..n as u64).map(|i| (i, b"p\n".to_vec())).collect();
                    assert_eq!(gathered, Some(want));
                } else {
                    assert_eq!(gathered, None);
                }
            }
        }
    }

    #[test]
    fn agree_gives_every_rank_the_first_failure_or_its_own_ok() {
        for n in [1, 3, 4] {
            let ok = local::run(n, |comm: &dyn Comm| {
                comm.agree(Ok::<_, String>(comm.rank()))
            });
            assert_eq!(ok, (0..n).map(Ok).collect::<Vec<_>>());
            let failed = local::run(n, |comm: &dyn Comm| {
                let r = comm.rank();
                let local = if r % 2 == 1 || n == 1 {
                    Err(format!("rank {r}"))
                } else {
                    Ok(r)
                };
                comm.agree(local)
            });
            let first = if n == 1 { "rank 0" } else { "rank 1" };
            assert_eq!(failed, vec![Err(first.to_string()); n]);
        }
    }

    #[test]
    fn point_to_point_values() {
        let out = local::run(3, |comm: &dyn Comm| {
            let next = (comm.rank() + 1) % comm.size();
            comm.send_value(next, 1000, &sample(comm.rank() as u64));
            comm.flush_sends();
            loop {
                if let Some((src, _, bytes)) = comm.try_recv(Some(1000)) {
                    return (src, decode::<Sample>(&bytes).unwrap());
                }
                comm.park(
                    std::time::Duration::from_millis(50),
                    std::time::Duration::from_millis(1),
                );
            }
        });
        for (r, (src, s)) in out.into_iter().enumerate() {
            let prev = (r + 2) % 3;
            assert_eq!((src, s), (prev, sample(prev as u64)));
        }
    }

    #[test]
    #[should_panic(expected = "Sample")]
    fn a_collective_that_receives_garbage_names_the_type() {
        let _ = expect::<Sample>(&[1, 2, 3]);
    }
}

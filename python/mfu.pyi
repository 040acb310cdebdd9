"""mfu-rs from Python: the distributed file list and the data-management tools.

Run a script plainly (one rank) or under a launcher (`mpirun -np N python script.py`: one rank
per process). Importing the module starts the runtime: under a launcher MPI is initialised, or
the MPI that mpi4py initialised is used (and left for mpi4py to finalise). Calls that make or
change a list, and the tool functions, are collective: every rank makes them, in the same order.
"""

import os
from typing import Any, Callable, Iterable, Iterator, Literal, Optional, Union

__version__: str

Path = Union[str, bytes, os.PathLike]
Paths = Union[Path, Iterable[Path]]
Report = dict[str, Any]

TYPE_UNKNOWN: int
TYPE_FILE: int
TYPE_DIR: int
TYPE_LINK: int
TYPE_FIFO: int
TYPE_SOCKET: int
TYPE_BLOCK: int
TYPE_CHAR: int

class Error(Exception):
    """A usage or setup error (nothing was done), or a list operation that failed. The message
    names the path and the operation; `path` and `operation` hold them when known."""

    path: Optional[str]
    operation: Optional[str]

def rank() -> int:
    """This process's rank in the job (0 without a launcher)."""

def size() -> int:
    """The number of ranks in the job (1 without a launcher)."""

def barrier() -> None:
    """Wait until every rank calls it. Collective."""

def allgather(obj: Any) -> list[Any]:
    """Every rank's picklable `obj`, as a list indexed by rank. Collective."""

def mpi_built() -> bool:
    """Whether this build links MPI."""

class Entry:
    """One entry of a list (a copy). Metadata attributes are None without metadata
    (`stat=False`, text lists); a v4 list has no link count or inode (0)."""

    @property
    def name(self) -> str:
        """The path, decoded as os.fsdecode does (surrogateescape)."""
    @property
    def name_bytes(self) -> bytes:
        """The path as the file system holds it."""
    @property
    def type(self) -> int:
        """One of the TYPE_* constants."""
    @property
    def mode(self) -> Optional[int]: ...
    @property
    def uid(self) -> Optional[int]: ...
    @property
    def gid(self) -> Optional[int]: ...
    @property
    def size(self) -> Optional[int]:
        """Bytes."""
    @property
    def atime(self) -> Optional[float]:
        """Seconds since the epoch."""
    @property
    def mtime(self) -> Optional[float]:
        """Seconds since the epoch."""
    @property
    def ctime(self) -> Optional[float]:
        """Seconds since the epoch."""
    @property
    def atime_ns(self) -> Optional[int]:
        """Nanoseconds since the epoch."""
    @property
    def mtime_ns(self) -> Optional[int]:
        """Nanoseconds since the epoch."""
    @property
    def ctime_ns(self) -> Optional[int]:
        """Nanoseconds since the epoch."""
    @property
    def nlink(self) -> Optional[int]: ...
    @property
    def inode(self) -> Optional[int]: ...
    def __fspath__(self) -> str: ...

class FList:
    """A distributed list of entries: each rank holds its part."""

    def __init__(
        self,
        paths: Optional[Paths] = None,
        stat: bool = True,
        *,
        dereference: bool = False,
        no_atime: bool = False,
        allow_incomplete: bool = False,
    ) -> None:
        """Walk `paths` (None: an empty list). Raises Error when a path cannot be read, unless
        `allow_incomplete`. Collective."""
    @staticmethod
    def read(path: Path) -> "FList":
        """Read a list file (cache v4/v3, `path|T` text, plain or NUL-separated). Collective."""
    def __len__(self) -> int:
        """Entries over all ranks."""
    @property
    def local_count(self) -> int:
        """Entries on this rank."""
    @property
    def offset(self) -> int:
        """Global index of this rank's first entry."""
    @property
    def stat(self) -> bool:
        """Whether entries carry metadata."""
    @property
    def walk_errors(self) -> int:
        """Paths the walk could not read (allow_incomplete=True)."""
    def __iter__(self) -> Iterator[Entry]:
        """This rank's entries."""
    def __getitem__(self, i: int) -> Entry:
        """This rank's i-th entry."""
    def subset(self, predicate: Callable[[Entry], Any]) -> "FList":
        """Entries for which predicate(entry) is true: Python, serial per rank (with the GIL).
        Collective."""
    def filter(
        self,
        *,
        type: Optional[str] = None,
        name: Optional[Path] = None,
        path: Optional[Path] = None,
        regex: Optional[str] = None,
        size: Optional[str] = None,
        uid: Union[int, str, None] = None,
        gid: Union[int, str, None] = None,
        user: Union[int, str, None] = None,
        group: Union[int, str, None] = None,
        atime: Union[int, str, None] = None,
        mtime: Union[int, str, None] = None,
        ctime: Union[int, str, None] = None,
        amin: Union[int, str, None] = None,
        mmin: Union[int, str, None] = None,
        cmin: Union[int, str, None] = None,
        newer: Optional[Path] = None,
    ) -> "FList":
        """Entries passing every test (mfu-rs find's, GNU find's semantics), in Rust, in
        parallel. Collective."""
    def sort(self, keys: Union[str, list[str]] = "name") -> None:
        """Sort the whole list in place: name, user, group, uid, gid, atime, mtime, ctime,
        size; `-` before a key sorts descending. Collective."""
    def summarize(self) -> dict[str, int]:
        """total, files, dirs, links, others, bytes, max_path_len over all ranks. Collective."""
    def write(self, path: Path, format: Optional[Literal["v4", "text"]] = None) -> None:
        """Write the whole list (v4 for a stat list by default, else text). Collective."""

def cp(
    sources: Paths,
    dest: Path,
    *,
    preserve: bool = False,
    dereference: bool = False,
    sparse: bool = False,
    exclude: Optional[list[str]] = None,
    include: Optional[list[str]] = None,
) -> Report:
    """Copy, as mfu-rs cp (dcp). Collective."""

def sync(
    src: Path,
    dest: Path,
    *,
    dryrun: bool = False,
    delete: bool = False,
    contents: bool = False,
    dereference: bool = False,
    link_dest: Optional[Path] = None,
    exclude: Optional[list[str]] = None,
    include: Optional[list[str]] = None,
) -> Report:
    """Make dest like src, as mfu-rs sync (dsync). Collective."""

def rm(
    targets: Union[Paths, FList],
    *,
    dryrun: bool = False,
    match: Optional[str] = None,
    exclude: Optional[str] = None,
    name: bool = False,
    aggressive: bool = False,
    traceless: bool = False,
    one_file_system: bool = False,
    output: Optional[Path] = None,
    tmpdir: Optional[Path] = None,
) -> Report:
    """Remove paths (with what is below them) or exactly an FList's entries, as mfu-rs rm
    (drm). An FList is handed over in memory; `tmpdir` is accepted for older scripts and no
    longer used. Collective."""

def tar_create(
    archive: Path,
    paths: Paths,
    *,
    chdir: Optional[Path] = None,
    zstd: bool = False,
    zstd_level: int = 3,
    xattrs: bool = False,
    exclude: Optional[list[str]] = None,
    include: Optional[list[str]] = None,
) -> Report:
    """Create an archive, as mfu-rs tar -c (dtar). Collective."""

def tar_extract(
    archive: Path,
    dest: Optional[Path] = None,
    *,
    preserve_owner: bool = False,
    preserve_perms: bool = False,
    xattrs: bool = False,
) -> Report:
    """Extract an archive into dest, as mfu-rs tar -x (dtar). Collective."""

def cmp(src: Path, dest: Path, *, lite: bool = False) -> Report:
    """Compare two trees, as mfu-rs cmp (dcmp); status 1 when they differ. Collective."""

def find(
    targets: Union[Paths, FList],
    *,
    output: Optional[Path] = None,
    text: bool = False,
    maxdepth: Optional[int] = None,
    tmpdir: Optional[Path] = None,
    **tests: Any,
) -> Report:
    """Search, as mfu-rs find (dfind), with FList.filter's tests; `matches` (rank 0) holds
    what matched when no `output` is given. An FList is handed over in memory; `tmpdir` is
    accepted for older scripts and no longer used. Collective."""

class _PfaWriter:
    """An aggregate being written by every rank (`mfu.pfa.create`): this rank's streams, kept
    until `close()` writes them all."""

    def append(self, name: Union[str, bytes], data: bytes, meta: Optional[bytes] = None) -> None:
        """Append `data` to this rank's stream `name`, beginning it if new (`meta`, bytes kept
        in the index, is taken when the stream is begun)."""
    def names(self) -> list[bytes]:
        """This rank's stream names so far, in the order they were begun."""
    def close(self) -> Report:
        """Write every rank's streams and complete the aggregate. Collective. `version`,
        `streams`, `logical_bytes`, `bytes_written`, `chunks_written`, `chunks_reused`,
        `direct_io`; a name two ranks wrote, or any failure, raises mfu.Error (nothing written)."""
    def __enter__(self) -> "_PfaWriter": ...
    def __exit__(self, *exc: Any) -> bool: ...

class _PfaIndex:
    """A complete aggregate opened for reading (`mfu.pfa.open`; not collective)."""

    latest: int
    def versions(self) -> list[int]:
        """The version numbers, oldest first."""
    def streams(self, version: Optional[int] = None) -> list[dict[str, Any]]:
        """The streams of `version` (default: the latest) by name: `name`, `meta` (bytes),
        `size`, `chunks`."""
    def read(self, name: Union[str, bytes], version: Optional[int] = None) -> bytes:
        """The whole stream, every chunk checked against its checksum."""

class _PfaModule:
    """`mfu.pfa` (also `import mfu.pfa`): aggregates of many named streams in one shared file."""

    Writer: type
    Index: type
    def create(
        self,
        path: Path,
        *,
        new_version: bool = False,
        chunk_size: Optional[int] = None,
        direct_io: bool = False,
    ) -> _PfaWriter:
        """Begin writing the aggregate at `path` on every rank (nothing written before
        `close()`); `new_version=True` adds a version storing only changed chunks."""
    def open(self, path: Path) -> _PfaIndex:
        """Open a complete aggregate (a cut or damaged one raises mfu.Error naming it)."""

pfa: _PfaModule

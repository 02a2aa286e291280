"""Crash-safe file writes: the one atomic writer of stateseer.

A file is written to a temporary file in the same directory, flushed and ``fsync``'ed,
moved over the target with :func:`os.replace` (atomic on POSIX and Windows), and the
directory is ``fsync``'ed so that the rename itself survives a crash. A reader therefore
sees the old file or the new one, never half of one.

Examples
--------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> atomic_write_text(d / "a.json", '{"ok": true}').read_text()
'{"ok": true}'
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_save_npy", "atomic_save_npy_rows", "atomic_save_npz", "atomic_write",
           "atomic_write_bytes", "atomic_write_text", "fsync_dir", "fsync_tree", "swap_dir"]


def _file_mode() -> int:
    """The mode ``open()`` would give a new file under the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _file_mode()


def fsync_dir(path: str | Path) -> None:
    """Flush a directory entry to disk (best effort: a no-op where directories cannot be
    opened, e.g. on Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], Any]) -> Path:
    """Call ``write(fh)`` on a temporary binary file, then move it to ``path`` atomically.

    Parameters
    ----------
    path : str or Path
        The target; its parent directories are created.
    write : callable
        Receives the open binary file; whatever it writes becomes the file.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _FILE_MODE)  # mkstemp makes 0600; a run's files are as any other file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda fh: fh.write(data))


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_save_npy(path: str | Path, array: Any) -> Path:
    """``np.save`` to ``path`` atomically (no pickles: object arrays are refused)."""
    import numpy as np

    return atomic_write(path, lambda fh: np.save(fh, np.asarray(array), allow_pickle=False))


def atomic_save_npy_rows(path: str | Path, array: Any, dtype: Any = None,
                         block_bytes: int = 64 << 20) -> Path:
    """``np.save(path, np.asarray(array, dtype))`` atomically, a block of rows at a time:
    a memory-mapped ``array`` of any size is converted and written with one block in
    memory (``np.asarray`` of a float64 map converted to float32 held it whole). The file
    is always in C order (rows contiguous, as every reader of a run reads them), even for
    a Fortran-ordered ``array``.

    Parameters
    ----------
    path : str or Path
    array : array-like of shape (n, ...)
        Rows are read in blocks (a memory map is read from disk block by block).
    dtype : dtype, optional
        The saved dtype (default: the array's).
    block_bytes : int
        About how many bytes of saved rows a block holds (at least one row).
    """
    import numpy as np

    fmt = np.lib.format
    dt = np.dtype(dtype if dtype is not None else array.dtype)
    if getattr(array, "ndim", 0) == 0 or dt.hasobject:
        return atomic_save_npy(path, np.asarray(array, dt))
    row_bytes = dt.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
    rows = max(1, block_bytes // max(row_bytes, 1))

    def write(fh: IO[bytes]) -> None:
        header = fmt.header_data_from_array_1_0(np.empty((0, *array.shape[1:]), dt))
        header["shape"] = tuple(int(n) for n in array.shape)
        fmt.write_array_header_1_0(fh, header)
        for start in range(0, int(array.shape[0]), rows):
            fh.write(np.ascontiguousarray(array[start:start + rows], dt).data)

    return atomic_write(path, write)


def atomic_save_npz(path: str | Path, **arrays: Any) -> Path:
    """``np.savez`` of ``arrays`` to ``path`` atomically."""
    import numpy as np

    return atomic_write(path, lambda fh: np.savez(fh, **arrays))


def fsync_tree(path: str | Path) -> None:
    """``fsync`` every file and directory under ``path`` (and ``path`` itself), so that a
    directory written with ordinary writes is on disk before it is swapped in."""
    path = Path(path)
    for root, _dirs, files in os.walk(path, topdown=False):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(root)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` in one atomic step (Linux ``renameat2`` with
    ``RENAME_EXCHANGE``); False where the system or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # no libc symbol (musl before 1.2.?, old glibc)
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False  # this file system cannot exchange: fall back to two renames
    raise OSError(err, os.strerror(err), str(a))


def swap_dir(new: str | Path, target: str | Path) -> Path:
    """Replace the directory ``target`` by the complete directory ``new``, crash-safely.

    ``new`` is flushed (:func:`fsync_tree`), then the two names are exchanged in one
    atomic step (Linux ``renameat2(RENAME_EXCHANGE)``), the parent directory is flushed,
    and only then is the old content (now under ``new``'s name) deleted. A crash at any
    point leaves ``target`` holding the old directory or the new one, whole; a leftover
    ``new`` is garbage for the next writer to remove. Without an atomic exchange (other
    systems, some network file systems) the old directory is renamed aside first and the
    new one renamed in: a crash between the two renames leaves no ``target`` (the old
    one survives as ``TARGET.old``).

    Parameters
    ----------
    new, target : str or Path
        Sibling paths on one file system; ``target`` need not exist. A ``target`` that is
        a symbolic link is replaced by the directory (resolve it first to write into what
        it points to).

    Returns
    -------
    Path
        ``target``.
    """
    new, target = Path(new), Path(target)
    aside = target.with_name(target.name + ".old")  # left by a crash of the fallback below
    fsync_tree(new)
    if not target.exists():
        os.rename(new, target)
        fsync_dir(target.parent)
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside)
        return target
    if _exchange(new, target):
        fsync_dir(target.parent)
        if new.is_symlink():  # target was a link: the link goes, not what it pointed to
            new.unlink()
        else:
            shutil.rmtree(new)
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside)
        return target
    if aside.exists():
        shutil.rmtree(aside)
    os.rename(target, aside)
    os.rename(new, target)
    fsync_dir(target.parent)
    shutil.rmtree(aside)
    return target

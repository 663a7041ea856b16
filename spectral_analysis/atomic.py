"""Atomic file writes: a file appears whole under its name or not at all, with the permissions a plain
``open(path, "w")`` would give it (``0o666`` less the umask; ``tempfile`` alone leaves ``0o600``, which
hides results and checkpoints from the other users of a shared folder). And the one writer's lock
(:func:`exclusive_lock`), and the bounded reader of the text files the toolkit keeps
(:func:`read_text_file`)."""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_target(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; on a clean exit it replaces ``path`` (parent folders
    are made), on an exception it is removed and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(path: str | Path, text: str) -> None:
    """``text`` written to ``path`` atomically (:func:`atomic_target`)."""
    with atomic_target(path) as tmp:
        tmp.write_text(text)


def exclusive_lock(lock_file: str | Path, busy: str) -> IO[str]:
    """An exclusive ``flock`` on ``lock_file`` (made if missing), held until the returned file is closed
    or the process ends, even by ``kill -9``, so a lock is never orphaned; the holder's pid is written
    in it. A second holder gets ``ValueError`` with ``busy`` formatted with that pid (``{pid}``)."""
    lock_file = Path(lock_file)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_file, "a+")  # noqa: SIM115 (held open while the lock is held)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise ValueError(busy.format(pid=holder)) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


MAX_TEXT_BYTES = 1024 ** 3  # a text file the toolkit reads (a catalog, a run's log, a kept row) is smaller


def read_text_file(path: str | Path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The text of ``path``, a regular file of at most ``limit`` bytes: a FIFO, a device or a folder is
    refused (reading one would hang or never end), as is a file larger than the limit; ``ValueError``
    naming ``what`` it should have been."""
    path = Path(path)
    try:
        status = os.stat(path)
    except OSError as error:
        raise ValueError(f"cannot read {what} {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(status.st_mode):
        raise ValueError(f"{what} {path} is not a regular file (a FIFO, a device or a folder)")
    if status.st_size > limit:
        raise ValueError(f"{what} {path} is {status.st_size} bytes, more than the {limit} read")
    try:
        with open(path, "rb") as handle:
            return handle.read(limit + 1).decode()
    except UnicodeDecodeError:
        raise ValueError(f"{what} {path} is not a text file") from None
    except OSError as error:
        raise ValueError(f"cannot read {what} {path}: {error.strerror or error}") from None

"""One exclusive lock per file path, held across threads (threading) and processes (flock)."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_guard = threading.Lock()
_thread_locks: dict[str, threading.Lock] = {}


@contextmanager
def exclusive(lock_file: Path, waiting: Callable[[], None] | None = None, interval: float = 0.1) -> Iterator[None]:
    """Block until no other thread or process holds ``lock_file``; the file is removed on release.

    A waiter that wakes up on a lock file its holder already removed tries again on the
    current one, so removing it never lets two holders in at once. ``waiting``, if given, is
    called every ``interval`` seconds while another holder has it (to report its progress).
    """
    with _guard:
        thread_lock = _thread_locks.setdefault(str(lock_file), threading.Lock())
    while not thread_lock.acquire(timeout=interval if waiting else -1):
        if waiting:
            waiting()
    try:
        while True:
            f = open(lock_file, "a+b")  # noqa: SIM115 - closed below, after the unlink
            try:
                _flock(f.fileno(), waiting, interval)
            except BaseException:
                f.close()
                raise
            try:
                current = os.stat(lock_file).st_ino == os.fstat(f.fileno()).st_ino
            except FileNotFoundError:
                current = False
            if current:
                break
            f.close()
        try:
            yield
        finally:
            lock_file.unlink(missing_ok=True)
            f.close()
    finally:
        thread_lock.release()


def _flock(fd: int, waiting: Callable[[], None] | None, interval: float) -> None:
    if waiting is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            waiting()
            time.sleep(interval)


def _try_lock(lock_file: Path, *, remove: bool) -> bool | None:
    """Take ``lock_file`` without waiting: None if there is no file, True if someone holds it,
    False if it was free (and, with ``remove``, removed while we held it)."""
    try:
        f = open(lock_file, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return None
    with f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        if remove:
            lock_file.unlink(missing_ok=True)
        return False


def is_locked(lock_file: Path) -> bool:
    """Whether some thread or process holds ``lock_file`` right now (a prune asks before removing)."""
    return _try_lock(lock_file, remove=False) is True


def remove_unless_locked(lock_file: Path) -> bool:
    """Remove a lock file nobody holds (one left by a killed process); False if it is held.

    It is removed while we hold it, as ``exclusive`` removes it, so a waiter that gets it next
    sees a stale inode and tries again on a fresh file.
    """
    return _try_lock(lock_file, remove=True) is False

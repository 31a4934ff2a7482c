"""Blob downloads as Ollama does them (server/download.go): ranged parts in parallel, resumable, shared.

A blob of N bytes is fetched in up to 16 parts of 100 MB to 1 GB, each by its own connection with
an HTTP Range, into ``blobs/sha256-<hex>-partial`` (a sparse file of the final size). The progress
of part ``i`` is kept in ``sha256-<hex>-partial-<i>`` as Ollama writes it (``{"N", "Offset",
"Size", "Completed"}``), so a pull that was cut, killed or cancelled resumes where it stopped, and
Ollama and cllm can each resume the other's. A part that fails is retried from where it stopped;
a full disk or a refused request ends the download at once.

The whole file's sha256 is checked before it is renamed to ``sha256-<hex>``; a mismatch removes
it (it must be downloaded again). Two pulls of one blob share one download: in this process
through ``_active`` (both see its progress), across processes through a lock file beside it (the
second reports the first one's progress from its part files, then finds the blob there). When
every pull waiting on a download has gone, the download stops, leaving its parts to resume.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from ..config import proxied
from ..errors import PullError, RequestCanceled
from .blobs import sha256_file
from .locking import exclusive
from .store import ModelStore

log = logging.getLogger("cllm.store")

Report = Callable[[dict[str, Any]], None]

NUM_PARTS = 16
MIN_PART_SIZE = 100 * 1000**2
MAX_PART_SIZE = 1000 * 1000**2
MAX_RETRIES = 6
RETRY_BASE_S = 0.5  # waits 0.5, 1, 2, 4, 8, 16 s between tries of a part (Ollama: 1 s to 32 s)
PROGRESS_INTERVAL_S = 0.1
CHECKPOINT_BYTES = 64 << 20  # a part's progress is saved (data synced first) at least this often
STALL_TIMEOUT_S = 30.0  # no byte for this long: the part is tried again (Ollama's downloadStallTimeout)
_CHUNK = 1 << 20
_PART_NAME = re.compile(r"sha256-[0-9a-f]{64}-partial-(\d+)")


class DigestMismatch(PullError):
    """The downloaded bytes are not the blob the manifest names (Ollama's errDigestMismatch text)."""

    def __init__(self, want: str, got: str) -> None:
        super().__init__(f"digest mismatch, file must be downloaded again: want {want}, got {got}")


class _Retry(Exception):
    """A part attempt that failed in a way trying again may fix."""


def progress_event(hex_digest: str, total: int, completed: int) -> dict[str, Any]:
    """Ollama's ``pulling <12 hex>`` status; ``completed`` is omitted while 0 (omitempty)."""
    event: dict[str, Any] = {"status": f"pulling {hex_digest[:12]}", "digest": f"sha256:{hex_digest}", "total": total}
    if completed:
        event["completed"] = completed
    return event


def human_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


@dataclass
class Part:
    n: int
    offset: int
    size: int
    completed: int = 0

    def to_json(self) -> bytes:
        return orjson.dumps({"N": self.n, "Offset": self.offset, "Size": self.size, "Completed": self.completed})

    @property
    def remaining(self) -> int:
        return self.size - self.completed


def plan_parts(total: int) -> list[Part]:
    """Ollama's split: total/16 bytes a part, but no less than 100 MB and no more than 1 GB."""
    size = min(max(total // NUM_PARTS, MIN_PART_SIZE), MAX_PART_SIZE)
    parts: list[Part] = []
    offset = 0
    while offset < total:
        parts.append(Part(len(parts), offset, min(size, total - offset)))
        offset += parts[-1].size
    return parts


class _Files:
    """The partial file, its part files and its lock, for one digest."""

    def __init__(self, store: ModelStore, hex_digest: str) -> None:
        self.partial = store.download_path(f"sha256:{hex_digest}")
        self.lock = self.partial.with_name(self.partial.name + ".lock")
        self.hex = hex_digest

    def part_path(self, n: int) -> Path:
        return self.partial.with_name(f"{self.partial.name}-{n}")

    def part_paths(self) -> list[Path]:
        prefix = self.partial.name + "-"
        return [p for p in self.partial.parent.glob(prefix + "*") if _PART_NAME.fullmatch(p.name)]

    def load(self, total: int) -> list[Part] | None:
        """The saved parts if they describe ``total`` bytes and the partial file is there; else None."""
        paths = self.part_paths()
        if not paths:
            return None
        parts: list[Part] = []
        try:
            for path in paths:
                obj = orjson.loads(path.read_bytes())
                parts.append(Part(int(obj["N"]), int(obj["Offset"]), int(obj["Size"]), int(obj["Completed"])))
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        parts.sort(key=lambda p: p.offset)
        offset = 0
        for i, part in enumerate(parts):
            if part.n != i or part.offset != offset or part.size <= 0 or not 0 <= part.completed <= part.size:
                return None
            offset += part.size
        if offset != total:
            return None
        try:
            if self.partial.stat().st_size != total:
                return None
        except FileNotFoundError:
            return None
        return parts

    def save(self, part: Part) -> None:
        path = self.part_path(part.n)
        tmp = path.with_name(f".tmp-{path.name}")
        tmp.write_bytes(part.to_json())
        os.replace(tmp, path)

    def discard(self) -> None:
        for path in self.part_paths():
            path.unlink(missing_ok=True)
        self.partial.unlink(missing_ok=True)

    def completed_on_disk(self) -> int:
        """What another process's download of this blob has written so far (from its part files)."""
        done = 0
        for path in self.part_paths():
            with contextlib.suppress(OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                done += int(orjson.loads(path.read_bytes())["Completed"])
        return done


class Transfer:
    """One blob being downloaded in this process; every pull that needs it waits on it."""

    def __init__(self, store: ModelStore, hex_digest: str, total: int) -> None:
        self.store = store
        self.hex = hex_digest
        self.total = total
        self.files = _Files(store, hex_digest)
        self.done = threading.Event()
        self.cancel = threading.Event()
        self.error: BaseException | None = None
        self._completed = 0
        self._lock = threading.Lock()
        self._refs = 0

    @property
    def completed(self) -> int:
        return self._completed

    def _add(self, n: int) -> None:
        with self._lock:
            self._completed += n

    def acquire(self) -> None:
        with self._lock:
            self._refs += 1

    def release(self) -> None:
        with self._lock:
            self._refs -= 1
            if self._refs <= 0 and not self.done.is_set():
                self.cancel.set()

    def start(self, url: str, headers: dict[str, str]) -> None:
        threading.Thread(target=self._run, args=(url, headers), name=f"cllm-pull-{self.hex[:12]}", daemon=True).start()

    # -- the download thread ---------------------------------------------------------------

    def _run(self, url: str, headers: dict[str, str]) -> None:
        try:
            self.files.partial.parent.mkdir(parents=True, exist_ok=True)
            with exclusive(self.files.lock, waiting=self._peek):
                if self.cancel.is_set():
                    raise RequestCanceled()
                if self.store.has_blob(f"sha256:{self.hex}"):  # another process finished it
                    self._completed = self.total
                    return
                self._download(url, headers)
        except BaseException as exc:
            self.error = exc
        finally:
            with _active_lock:
                if _active.get(self.hex) is self:
                    del _active[self.hex]
            self.done.set()

    def _peek(self) -> None:
        self._completed = self.files.completed_on_disk()
        if self.cancel.is_set():
            raise RequestCanceled()

    def _download(self, url: str, headers: dict[str, str]) -> None:
        files = self.files
        parts = files.load(self.total)
        if parts is None:
            files.discard()
            parts = plan_parts(self.total)
            files.partial.touch()
            for part in parts:
                files.save(part)
        self._completed = sum(p.completed for p in parts)
        todo = [p for p in parts if p.remaining]
        _check_space(files.partial.parent, sum(p.remaining for p in todo), self.hex)
        if todo:
            log.info("downloading %s in %d %s part(s)", self.hex[:12], len(parts), human_bytes(parts[0].size))
        fd = os.open(files.partial, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != self.total:
                os.ftruncate(fd, self.total)
            self._fetch_parts(fd, todo, url, headers)
            os.fsync(fd)
        finally:
            os.close(fd)
        got = sha256_file(files.partial)
        if got != self.hex:
            files.discard()
            raise DigestMismatch(f"sha256:{self.hex}", f"sha256:{got}")
        self.store.adopt_blob(files.partial, f"sha256:{self.hex}")
        for path in files.part_paths():
            path.unlink(missing_ok=True)

    def _fetch_parts(self, fd: int, todo: list[Part], url: str, headers: dict[str, str]) -> None:
        if not todo:
            return
        stop = threading.Event()
        errors: list[BaseException] = []
        timeout = httpx.Timeout(STALL_TIMEOUT_S, connect=10.0)
        limits = httpx.Limits(max_connections=NUM_PARTS, max_keepalive_connections=NUM_PARTS)
        with (
            httpx.Client(timeout=timeout, limits=limits, follow_redirects=True, trust_env=proxied(url)) as client,
            ThreadPoolExecutor(max_workers=min(NUM_PARTS, len(todo)), thread_name_prefix="cllm-part") as pool,
        ):

            def work(part: Part) -> None:
                try:
                    self._fetch_part(client, fd, part, url, headers, stop)
                except BaseException as exc:
                    errors.append(exc)
                    stop.set()

            for part in todo:
                pool.submit(work, part)
        if self.cancel.is_set():
            raise RequestCanceled()
        if errors:
            raise next((e for e in errors if not isinstance(e, RequestCanceled)), errors[0])

    def _fetch_part(
        self, client: httpx.Client, fd: int, part: Part, url: str, headers: dict[str, str], stop: threading.Event
    ) -> None:
        last: BaseException | None = None
        for attempt in range(MAX_RETRIES + 1):
            if attempt:
                delay = RETRY_BASE_S * 2 ** (attempt - 1)
                log.info(
                    "%s part %d attempt %d failed: %s, retrying in %.1fs",
                    self.hex[:12],
                    part.n,
                    attempt,
                    last,
                    delay,
                )
                if self.cancel.wait(delay) or stop.is_set():
                    raise RequestCanceled()
            try:
                self._stream_part(client, fd, part, url, headers, stop)
                return
            except _Retry as exc:
                last = exc.__cause__ or exc
            finally:
                with contextlib.suppress(OSError):
                    os.fdatasync(fd)
                self.files.save(part)
        raise PullError(f"max retries exceeded: {_describe(last)}; pull again to resume")

    def _stream_part(
        self, client: httpx.Client, fd: int, part: Part, url: str, headers: dict[str, str], stop: threading.Event
    ) -> None:
        start = part.offset + part.completed
        end = part.offset + part.size - 1
        since_checkpoint = 0
        try:
            with client.stream("GET", url, headers={**headers, "Range": f"bytes={start}-{end}"}) as response:
                if response.status_code == 200:
                    skip = start  # the server ignored Range: read past what we have
                elif response.status_code == 206:
                    skip = 0
                else:
                    response.read()
                    message = f"{response.status_code}: {' '.join(response.text.split())[:300]}"
                    if response.status_code >= 500 or response.status_code in (408, 429):
                        raise _Retry(message)
                    raise PullError(f"download of {self.hex[:12]} failed: {message}")
                for chunk in response.iter_bytes():  # as it arrives: a chunk size would hold back bytes a cut loses
                    if self.cancel.is_set() or stop.is_set():
                        raise RequestCanceled()
                    if skip:
                        cut = min(skip, len(chunk))
                        chunk, skip = chunk[cut:], skip - cut
                    chunk = chunk[: part.remaining]
                    view = memoryview(chunk)
                    while view:  # counted as written, so a failed write (full disk) resumes right there
                        n = os.pwrite(fd, view, part.offset + part.completed)
                        view = view[n:]
                        part.completed += n
                        since_checkpoint += n
                        self._add(n)
                    if since_checkpoint >= CHECKPOINT_BYTES:
                        os.fdatasync(fd)
                        self.files.save(part)
                        since_checkpoint = 0
                    if not part.remaining:
                        return
        except httpx.HTTPError as exc:
            raise _Retry(str(exc)) from exc
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise PullError(
                    f"no space left on device for {self.hex[:12]} ({human_bytes(self.total - self.completed)} "
                    "still to download): free some space and pull again to resume"
                ) from exc
            raise
        if part.remaining:
            raise _Retry(f"connection closed with {part.remaining} bytes of part {part.n} still to come")


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    return " ".join((str(exc) or type(exc).__name__).split())


def _check_space(directory: Path, needed: int, hex_digest: str) -> None:
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise PullError(
            f"not enough disk space for {hex_digest[:12]}: {human_bytes(needed)} to download, {human_bytes(free)} free"
        )


_active: dict[str, Transfer] = {}
_active_lock = threading.Lock()


def _join(
    hex_digest: str, new: Callable[[], Transfer] | None = None, url: str = "", headers: dict[str, str] | None = None
) -> Transfer | None:
    """The running download of ``hex_digest``, now also ours; or a new one (when ``new`` is given).

    A download that is stopping (its last waiter left) is waited out, then replaced.
    """
    while True:
        with _active_lock:
            transfer = _active.get(hex_digest)
            if transfer is not None and not transfer.cancel.is_set():
                transfer.acquire()
                return transfer
            if transfer is None:
                if new is None:
                    return None
                transfer = _active[hex_digest] = new()
                transfer.acquire()
                transfer.start(url, headers or {})
                return transfer
        transfer.done.wait()


def download_blob(
    store: ModelStore,
    hex_digest: str,
    size: int,
    report: Report,
    locate: Callable[[], tuple[str, dict[str, str]]],
) -> bool:
    """Make the blob ``hex_digest`` present, downloading it unless it is; True if it already was.

    ``locate`` says where its bytes are (URL and headers); it is only called when this process
    starts the download. Progress goes to ``report`` every 0.1 s as Ollama's status; a ``report``
    that raises leaves the download (it stops when nobody waits for it any more).
    """
    digest = f"sha256:{hex_digest}"
    if store.has_blob(digest):
        store.touch_blob(digest)
        report(progress_event(hex_digest, size, size))
        return True
    transfer = _join(hex_digest)
    if transfer is None:
        url, headers = locate()
        transfer = _join(hex_digest, lambda: Transfer(store, hex_digest, size), url, headers)
    assert transfer is not None
    try:
        report(progress_event(hex_digest, size, transfer.completed))
        last = time.monotonic()
        while not transfer.done.wait(PROGRESS_INTERVAL_S):
            now = time.monotonic()
            if now - last >= PROGRESS_INTERVAL_S:
                last = now
                report(progress_event(hex_digest, size, transfer.completed))
        if transfer.error is None:
            report(progress_event(hex_digest, size, size))
    finally:
        transfer.release()
    if transfer.error is not None:
        raise transfer.error
    return False

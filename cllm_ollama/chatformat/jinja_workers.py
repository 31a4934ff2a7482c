"""Jinja chat templates rendered in worker processes, so that a template that never ends can be stopped.

A GGUF's chat template is a program: ``range`` is capped by the sandbox, but nested loops, macro
recursion, ``'x' * 10**10`` or a ``format`` width run in Python or C code that no check inside the
server's process can interrupt, and a thread cannot be killed. A worker process can: past the
request's deadline, or once its client has left, the worker is killed and a fresh one takes its
place at the next request. Each worker also runs under a memory limit.

A request holds one worker for all of its renders (``RenderPool.session``): the template and the
messages go over once, then each render names the messages to keep (dropped-turn fitting).
Messages travel as length-prefixed JSON over the worker's stdin and stdout.

A long render takes the turns of every long render (``render_budget``): between its turns the
worker pauses itself, on its server's word (``_PAUSE``, with the time its next turn starts) and for
``MAX_PAUSE_S`` at most, so that looping templates leave the cores to llama.cpp's threads and no
pause outlasts its server. Stopping a worker from outside (SIGSTOP) left it stopped forever when
its server died between the stop and the continue.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from ..errors import CllmError, InvalidRequest
from .jinja import render_chat
from .render_budget import TURN_S, PromptTooLong, RenderBudget

# Rendering is CPU work next to llama.cpp's threads: a couple of processes serve hundreds of renders
# a second, and each idle one costs ~20 MB. One model renders on all but one of them
# (``render_queue``): the last starts only when a second model renders beside it.
WORKERS = 3
# Address space a worker may use: a template cannot take the server's memory with it.
WORKER_MEMORY_BYTES = 2 * 1024**3
_POLL_S = 0.05  # how often a waiting render looks at its budget
# The server's word to a worker to pause: ignored by default, so that a word reaching a worker
# before it listens (a Python process starting) does nothing. None where there is no such signal
# (Windows): renders there do not pause.
_PAUSE: signal.Signals | None = getattr(signal, "SIGURG", None)
_UNTIL = struct.Struct("<d")  # when the paused render's next turn starts (``time.monotonic``)
# The longest pause: far longer than a wait for a turn among a few long renders, short enough
# that no worker is held by a word it misread.
MAX_PAUSE_S = 0.5
_ORPHAN_CHECK_S = 1.0  # how often a worker looks whether its server is still there
_HEADER = struct.Struct("<Q")
log = logging.getLogger("cllm.api")
_WORKER_MAIN = "from cllm_ollama.chatformat.jinja_workers import serve; serve({}, {})"


def _encode(obj: object) -> bytes:
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return _HEADER.pack(len(data)) + data


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def _read_message(stream: IO[bytes]) -> Any:
    (size,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    return json.loads(_read_exact(stream, size).decode("utf-8", "surrogatepass"))


class _Worker:
    """One rendering process; ``dead`` once it was killed or found gone."""

    def __init__(self) -> None:
        # The pauses' times go over a pipe of their own, never waited on by the server.
        until_r, self._until = os.pipe()
        os.set_blocking(self._until, False)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_MAIN.format(until_r, os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                bufsize=0,
                pass_fds=(until_r,),
            )
        except BaseException:
            os.close(self._until)
            raise
        finally:
            os.close(until_r)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self.poller = select.poll()
        self.poller.register(self.stdout.fileno(), select.POLLIN)
        self.dead = False

    def send(self, obj: object) -> None:
        data = memoryview(_encode(obj))
        try:
            while data:
                data = data[self.stdin.write(data) or 0 :]
        except OSError as exc:
            self.kill()
            raise CllmError(f"template: renderer exited ({self.proc.returncode})") from exc

    def receive(self, budget: RenderBudget) -> Any:
        """The worker's answer, waiting no longer than the budget allows. Past its turn, the
        render's worker pauses until the next (``pause``)."""
        try:
            while not self.poller.poll(min(TURN_S, budget.remaining()) * 1000):
                budget.check()
                if budget.turn_over():
                    self.pause(budget)
            return _read_message(self.stdout)
        except BaseException as exc:
            self.kill()
            if isinstance(exc, EOFError):
                raise CllmError(f"template: renderer exited ({self.proc.returncode})") from exc
            why = exc.message if isinstance(exc, CllmError) else type(exc).__name__
            log.warning("render worker %d killed: %s", self.proc.pid, why)
            raise

    def pause(self, budget: RenderBudget) -> None:
        """Wait for the render's next turn, the worker paused until then (``_pause_until``)."""
        budget.wait_turn(self._tell_pause)

    def _tell_pause(self, until: float) -> None:
        if _PAUSE is None:
            return
        try:
            os.write(self._until, _UNTIL.pack(until))
        except OSError:  # full: it has not read thousands of pauses (stuck in C code); or it is gone
            return
        self.proc.send_signal(_PAUSE)

    def kill(self) -> None:
        self.dead = True
        self.proc.kill()
        self.proc.wait()
        self.stdin.close()
        self.stdout.close()
        if self._until >= 0:  # once: the number may name another file after
            os.close(self._until)
            self._until = -1


class RenderSession:
    """Renders of one conversation on one worker."""

    def __init__(self, worker: _Worker, budget: RenderBudget) -> None:
        self._worker = worker
        self._budget = budget

    def render(self, keep: Sequence[int] | None = None) -> str:
        """The prompt for the messages at ``keep`` (all of them if None)."""
        self._budget.check()
        self._worker.send({"op": "render", "keep": None if keep is None else list(keep)})
        reply = self._worker.receive(self._budget)
        if "text" in reply:
            return str(reply["text"])
        if reply.get("too_long"):
            raise PromptTooLong(self._budget.max_chars)
        if reply["status"] == 400:
            raise InvalidRequest(reply["error"])
        raise CllmError(reply["error"], reply["status"])


class RenderPool:
    """Up to ``size`` worker processes, started on first use and replaced when killed."""

    def __init__(self, size: int = WORKERS) -> None:
        self._size = size
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self.busy = 0  # sessions holding a worker
        # Counts ``close`` calls: a worker taken before the last one is stopped when given back.
        self._closes = 0

    @contextmanager
    def session(
        self, template: str, messages: list[dict[str, Any]], budget: RenderBudget, **variables: Any
    ) -> Iterator[RenderSession]:
        """Hold a worker loaded with ``template``, ``messages`` and the other template ``variables``."""
        while not self._slots.acquire(timeout=_POLL_S):
            budget.check()
        try:
            worker = self._take()
            with self._lock:
                self.busy += 1
                closes = self._closes
            try:
                worker.send(
                    {
                        "op": "load",
                        "template": template,
                        "messages": messages,
                        "variables": variables,
                        "max_chars": budget.max_chars,
                    }
                )
                yield RenderSession(worker, budget)
            finally:
                with self._lock:
                    self.busy -= 1
                    keep = not worker.dead and closes == self._closes
                    if keep:
                        self._idle.append(worker)
                if not keep and not worker.dead:  # the pool was closed while it rendered
                    worker.kill()
        finally:
            self._slots.release()

    def _take(self) -> _Worker:
        """An idle worker, and a spare started behind it while another session could still come: a
        worker takes a while to start (a Python process), and a render should not wait for one."""
        with self._lock:
            worker = None
            while self._idle and worker is None:
                worker = self._idle.pop()
                if worker.proc.poll() is not None:
                    worker.kill()
                    worker = None
            spare = not self._idle and self.busy + 1 < self._size
        if spare:
            started = _Worker()
            with self._lock:
                self._idle.append(started)
        return worker or _Worker()

    def pids(self) -> list[int]:
        """The idle workers' process ids: what ``close`` stops now."""
        with self._lock:
            return [worker.proc.pid for worker in self._idle]

    def close(self) -> None:
        """Stop the idle workers now, and the busy ones as their sessions end. The pool stays
        usable: a later session starts fresh workers."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._closes += 1
        for worker in idle:
            worker.kill()


# The server's workers, shared by every model's renders; the app's lifespan closes them
# (``close_workers``) when the server stops.
POOL = RenderPool()


def close_workers() -> None:
    """Stop the shared pool's workers: its owner, the app's lifespan, calls this at shutdown, so that
    no render worker outlives the server that started it (nor idles on between test apps)."""
    POOL.close()


def _pause_until(until_fd: int) -> None:
    """The worker's pause between turns, on its server's word: until the time last written (one it
    reads late may have passed, and pauses nothing), for MAX_PAUSE_S at most."""
    data = b""
    try:
        while chunk := os.read(until_fd, 4096):
            data += chunk
    except BlockingIOError:
        pass
    if len(data) >= _UNTIL.size:  # each time is written whole (less than PIPE_BUF)
        (until,) = _UNTIL.unpack_from(data, len(data) - _UNTIL.size)
        time.sleep(min(MAX_PAUSE_S, max(0.0, until - time.monotonic())))


def _exit_when_orphaned(server: int) -> None:
    """End the worker once its server is gone: a render that loops would never read the end of
    its stdin."""
    while os.getppid() == server:
        time.sleep(_ORPHAN_CHECK_S)
    os._exit(1)


def serve(until_fd: int, server: int) -> None:
    """A worker's main loop: render until stdin closes (the server exited). ``server`` is the
    server's pid as it started the worker: a server that died while the worker was still importing
    has left it to another parent already, so ``getppid`` here would watch the wrong one."""
    # Ctrl-C reaches the whole process group: the server decides when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.set_blocking(until_fd, False)
    if _PAUSE is not None:
        signal.signal(_PAUSE, lambda signum, frame: _pause_until(until_fd))
    threading.Thread(target=_exit_when_orphaned, args=(server,), daemon=True).start()
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = WORKER_MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(hard, WORKER_MEMORY_BYTES)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError):  # no such limit here (Windows, some macOS)
        pass
    # Our replies own stdout; anything else a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    loaded: dict[str, Any] = {}
    while True:
        try:
            request = _read_message(stdin)
        except EOFError:
            return
        if request["op"] == "load":
            loaded = request
            continue
        messages = loaded["messages"]
        if request["keep"] is not None:
            messages = [messages[i] for i in request["keep"]]
        reply: dict[str, Any]
        try:
            text = render_chat(loaded["template"], messages, max_chars=loaded["max_chars"], **loaded["variables"])
            reply = {"text": text}
        except PromptTooLong as exc:
            reply = {"too_long": True, "error": exc.message, "status": exc.status_code}
        except CllmError as exc:
            reply = {"error": exc.message, "status": exc.status_code}
        out.write(_encode(reply))
        out.flush()

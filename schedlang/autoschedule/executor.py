"""LocalExecutor: a concurrent.futures.Executor over long-lived worker processes.

Each worker is a fresh interpreter running schedlang's own entry point (worker.py): a
forked child would inherit the parent's OpenMP runtime, which deadlocks it, and
multiprocessing's spawned child would import the user's main script again. Each call
has a build timeout and, once the worker announces its timed run (phase("run")), a run timeout: a worker that crashes
or hangs is killed, its call fails with WorkerError or TimeoutError, and a fresh worker
takes its place. Timed runs hold one lock, so two candidates never time at once
(parallel loops of two kernels on the same cores would slow each other several times
over); builds overlap. A worker is retired after MAX_CALLS_PER_WORKER calls and a fresh
one started: each LLVM build keeps a few KB that llvmlite cannot free (jit.py), and large
builds fragment the heap, so a long search would otherwise grow its workers without bound.
"""
from __future__ import annotations

import atexit
import concurrent.futures as cf
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from multiprocessing import spawn as mp_spawn
from multiprocessing.connection import Connection
from typing import Callable

BUILD_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 10.0
# ~4 KB kept per build (target/llvm/jit.py) times 200 calls, plus fragmentation, for a restart
# (about half a second of imports) every 200 candidates.
MAX_CALLS_PER_WORKER = 200

_CONN = None     # in a worker process: the pipe to the parent
# Elsewhere (a Dask task, see dask_measure.py): a per-thread hook phase() calls.
_HOOK = threading.local()


class WorkerError(RuntimeError):
    """A measurement worker process died (crashed, killed, or exited) during a call."""


def phase(name: str) -> None:
    """Called inside a measured function: the build is done and the timed part starts.
    In a LocalExecutor worker it waits for the timing lock and switches to the run
    timeout; in a Dask task it takes the machine's timing lock; elsewhere it does nothing."""
    if _CONN is not None:
        _CONN.send(("phase", name))
        _CONN.recv()
        return
    hook = getattr(_HOOK, "phase", None)
    if hook is not None:
        hook(name)


def worker_loop(conn) -> None:
    """A worker: runs (fn, args, kwargs) calls from the parent until told to stop."""
    global _CONN
    _CONN = conn
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's to handle
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        except Exception as err:  # noqa: BLE001 - a call that does not unpickle here fails alone
            conn.send(("error", WorkerError(f"the worker process could not load the call: "
                                            f"{type(err).__name__}: {err}{MAIN_HINT}")))
            continue
        if msg is None:
            return
        fn, args, kwargs = msg
        try:
            reply = ("result", fn(*args, **kwargs))
        except BaseException as err:  # noqa: BLE001 - every failure goes back to the parent
            reply = ("error", err)
        try:
            conn.send(reply)
        except (BrokenPipeError, ConnectionError):    # the parent gave up on this call (timeout)
            return
        except Exception as err:     # an unpicklable result or exception
            conn.send(("error", RuntimeError(f"{type(err).__name__}: {err} (sending {reply[0]} "
                                             f"{type(reply[1]).__name__}: {reply[1]!r})")))


MAIN_HINT = (" (a worker never imports the script run as __main__: define functions and classes "
             "sent to workers in a module)")


class WorkerProcess:
    """A worker process running schedlang's own entry point (worker.py says why not
    multiprocessing's spawn), with multiprocessing.Process's is_alive, join, kill and
    exitcode; `conn` is the parent's end of its pipe. Workers still running when the
    parent exits are killed (as multiprocessing's daemon processes are)."""

    def __init__(self):
        ours, theirs = socket.socketpair()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        # -c rather than -m: found through `root` even under -I or a PYTHONPATH of the user's
        boot = f"import sys; sys.path.insert(0, {root!r}); from schedlang.autoschedule.worker import main; main(sys.argv)"
        flags = subprocess._args_from_interpreter_flags()     # -X, -W, -O: as multiprocessing passes them
        try:
            self.popen = subprocess.Popen([mp_spawn.get_executable(), *flags, "-c", boot, str(theirs.fileno())],
                                          pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, close_fds=True)
        finally:
            theirs.close()
        _LIVE.add(self)
        self.conn = Connection(ours.detach())
        self.conn.send(list(sys.path))

    @property
    def exitcode(self):
        return self.popen.poll()

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def join(self, timeout=None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()


_LIVE: "weakref.WeakSet[WorkerProcess]" = weakref.WeakSet()


@atexit.register
def _kill_live_workers() -> None:
    for proc in list(_LIVE):
        proc.kill()


class _Slot:
    """One worker process and the thread in the parent that feeds it calls."""

    def __init__(self, owner: "LocalExecutor"):
        self.owner = owner
        self.proc = None
        self.conn = None
        self.calls = 0            # calls the current worker process has served
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _start(self) -> None:
        self.calls = 0
        self.proc = WorkerProcess()
        self.conn = self.proc.conn

    def kill(self) -> None:
        proc, conn = self.proc, self.conn
        self.proc = self.conn = None
        if proc is not None:
            proc.kill()
            proc.join()
            conn.close()
        self.owner.replaced += 1

    def stop(self) -> None:
        proc, conn = self.proc, self.conn
        self.proc = self.conn = None
        if proc is None:
            return
        try:
            conn.send(None)
            proc.join(5)
        except OSError:
            pass
        if proc.is_alive():
            proc.kill()
            proc.join()
        conn.close()

    def _loop(self) -> None:
        while True:
            item = self.owner._queue.get()
            if item is None:
                self.stop()
                return
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                self._call(future, fn, args, kwargs)
            except BaseException as err:  # noqa: BLE001 - never leave a future pending
                if not future.done():
                    future.set_exception(err)
            if self.proc is not None and self.calls >= self.owner.max_calls_per_worker:
                self.stop()               # retire it: the next call starts a fresh process
                self.owner.retired += 1

    def _call(self, future: cf.Future, fn, args, kwargs) -> None:
        if self.proc is None:
            self._start()
        if getattr(fn, "__module__", None) == "__main__":
            future.set_exception(WorkerError(f"cannot measure with {getattr(fn, '__qualname__', fn)!r}, "
                                             f"a function of the script run as __main__{MAIN_HINT}"))
            return
        self.calls += 1
        try:
            self.conn.send((fn, args, kwargs))
        except (OSError, EOFError):
            self.kill()
            future.set_exception(WorkerError("could not send the call to the worker process"))
            return
        where, deadline, locked = "build", time.monotonic() + self.owner.build_timeout, False
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    ready = left > 0 and self.conn.poll(left)
                    msg = self.conn.recv() if ready else None
                except (EOFError, OSError):
                    self.proc.join(1)
                    code = self.proc.exitcode
                    self.kill()
                    future.set_exception(WorkerError(f"the worker process died during the {where} "
                                                     f"(exit code {code})"))
                    return
                if msg is None:
                    limit = self.owner.build_timeout if where == "build" else self.owner.run_timeout
                    self.kill()
                    future.set_exception(TimeoutError(f"the {where} took longer than {limit:g} s "
                                                      "(the worker was replaced)"))
                    return
                kind, value = msg
                if kind == "phase":
                    if not locked:
                        self.owner._run_lock.acquire()
                        locked = True
                    where, deadline = value, time.monotonic() + self.owner.run_timeout
                    self.conn.send("go")
                elif kind == "result":
                    future.set_result(value)
                    return
                else:
                    future.set_exception(value)
                    return
        finally:
            if locked:
                self.owner._run_lock.release()


class LocalExecutor(cf.Executor):
    """Long-lived worker processes with per-call build and run timeouts. context: "spawn" or
    "forkserver", accepted for compatibility; either way a worker is a fresh interpreter
    that never imports the caller's main script (WorkerProcess)."""

    def __init__(self, workers: int = 1, build_timeout: float = BUILD_TIMEOUT_S,
                 run_timeout: float = RUN_TIMEOUT_S, context: str = "spawn",
                 max_calls_per_worker: int = MAX_CALLS_PER_WORKER):
        if context not in ("spawn", "forkserver"):
            raise ValueError(f"LocalExecutor: context must be 'spawn' or 'forkserver', got {context!r} "
                             "(a forked worker deadlocks in the parent's OpenMP runtime)")
        if workers < 1:
            raise ValueError(f"LocalExecutor: workers must be at least 1, got {workers}")
        if isinstance(max_calls_per_worker, bool) or not isinstance(max_calls_per_worker, int) \
                or max_calls_per_worker < 1:
            raise ValueError(f"LocalExecutor: max_calls_per_worker must be a positive integer, "
                             f"got {max_calls_per_worker!r}")
        self.max_calls_per_worker = max_calls_per_worker
        self.build_timeout = float(build_timeout)
        self.run_timeout = float(run_timeout)
        self.replaced = 0         # workers killed after a crash or a timeout
        self.retired = 0          # workers stopped after max_calls_per_worker calls
        self._queue: "queue.Queue" = queue.Queue()
        self._run_lock = threading.Lock()
        self._shutdown = False
        self._slots = [_Slot(self) for _ in range(workers)]

    def submit(self, fn: Callable, /, *args, **kwargs) -> cf.Future:
        if self._shutdown:
            raise RuntimeError("cannot submit to a LocalExecutor after shutdown()")
        future: cf.Future = cf.Future()
        self._queue.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in self._slots:
            self._queue.put(None)
        if wait:
            for slot in self._slots:
                slot.thread.join()

    def kill_workers(self) -> None:
        """Kill the worker processes now (after Ctrl-C): their calls fail, nothing waits."""
        for slot in self._slots:
            proc = slot.proc
            if proc is not None:
                proc.kill()

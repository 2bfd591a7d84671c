"""Run an untrusted program (an LLM-written policy-search candidate)
confined: what a user can rely on, and what they cannot (docs/policy-search.md,
"What a candidate program can do").

:func:`run_confined` runs ``argv`` in a fresh, private working folder (the
only files in it are the ``files`` given), with:

* an environment from an allow-list (:data:`ENV_ALLOWED`; ``HOME`` and
  ``TMPDIR`` point at the working folder): no API key, token or cloud
  credential of the evaluator's environment reaches the program;
* resource limits set in the child before it starts (``setrlimit``): CPU
  seconds, address space, open files, the size of a file it writes, no core
  dumps, and, where the kernel enforces it (not for root), processes;
* a supervisor process between the evaluator and the program. Where the
  kernel allows it (Linux, as root or with user namespaces), the program
  runs in a PID namespace of its own whose first process waits for it: when
  that process exits, the kernel kills every process left in the namespace,
  however it detached, and no process inside can signal one outside (the
  supervisor included). Otherwise the supervisor is a child subreaper
  (``prctl(PR_SET_CHILD_SUBREAPER)``), so a grandchild that leaves the
  program's process group or session (``setsid``) is still its descendant,
  and it kills every descendant still alive when the program ends or its
  wall-clock timeout passes; elsewhere it kills the program's process group.
  The program gets ``SIGKILL`` if its parent dies (``PR_SET_PDEATHSIG``).
* bounded output: at most ``max_stdout`` bytes of stdout are kept (more is an
  error) and the last ``max_stderr`` bytes of stderr.

None of this is a sandbox against reading or writing files: the program
runs as the evaluator's user and can open any file that user can. For
that, run the evaluator as a user of its own, in a container or a VM.

This module imports only the standard library: it is also the supervisor's
script (``python -s -P confine.py --supervise CONFIG``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

# The only variables of the evaluator's environment a candidate sees.
ENV_ALLOWED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")

# The longest timeout or CPU limit (about 11.6 days): above it waits and
# setrlimit overflow.
_MAX_SECONDS = 1e6

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


class SupervisorError(RuntimeError):
    """The supervisor ended without reporting: killed (by the program: it
    runs as the same user) or crashed. The program's processes die with it
    (``PR_SET_PDEATHSIG``, and the PID namespace where there is one)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of a confined program (``setrlimit``).

    * ``cpu_s``: CPU seconds (``RLIMIT_CPU``: ``SIGXCPU`` at the limit,
      ``SIGKILL`` a second later); None: the wall-clock timeout, rounded up.
    * ``memory_bytes``: address space (``RLIMIT_AS``), default 1 GiB.
    * ``open_files``: file descriptors (``RLIMIT_NOFILE``), default 64.
    * ``file_bytes``: the largest file it may write (``RLIMIT_FSIZE``),
      default 16 MiB.
    * ``processes``: ``RLIMIT_NPROC`` counts every process and thread of the
      *user*, so the limit is set to this many more than the user runs when
      the program starts (default 32). The kernel does not enforce it for
      root; the supervisor's kill still applies.
    * ``pid_namespace``: run the program in a PID namespace of its own where
      the kernel allows it (Linux: root, or user namespaces enabled), so
      that every process it leaves dies with the namespace and none can
      signal a process outside it. False: the subreaper alone.
    """

    cpu_s: float | None = None
    memory_bytes: int = 1 << 30
    open_files: int = 64
    file_bytes: int = 16 << 20
    processes: int = 32
    pid_namespace: bool = True


@dataclass
class Confined:
    """What a confined program did: ``returncode`` (negative: the signal
    that ended it), ``stdout`` (at most ``max_stdout`` bytes), ``stderr``
    (its last ``max_stderr`` bytes), ``timed_out`` (killed at the wall-clock
    timeout), ``stdout_overflow`` (printed more than ``max_stdout``),
    ``killed`` (descendants still alive at the end, killed), ``wall_s``."""

    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    stdout_overflow: bool = False
    killed: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    namespace: bool = False  # ran in a PID namespace of its own

    def reason(self) -> str | None:
        """Why it failed, in one line (None: it exited 0 within its limits)."""
        if self.timed_out:
            return "timed out"
        if self.stdout_overflow:
            return f"printed more than {len(self.stdout)} bytes"
        rc = self.returncode
        if rc == 0:
            return None
        if rc == -signal.SIGXCPU:
            return "killed at its CPU time limit"
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            return f"killed by {name}"
        return f"exited with status {rc}"


def run_confined(argv: Sequence[str], files: Mapping[str, bytes] = {}, *, timeout_s: float | None = 60,
                 limits: Limits = Limits(), max_stdout: int = 1 << 20, max_stderr: int = 64 << 10) -> Confined:
    """Run ``argv`` confined (the module docstring) in a fresh working
    folder holding ``files`` (relative name -> bytes), removed afterwards.
    ``timeout_s`` is the wall-clock limit (None: the CPU limit alone bounds
    it, and ``limits.cpu_s`` must be given)."""
    if timeout_s is None and limits.cpu_s is None:
        raise ValueError("run_confined: give timeout_s or limits.cpu_s")
    for name, v in (("timeout_s", timeout_s), ("limits.cpu_s", limits.cpu_s)):
        if v is not None and not 0 < v <= _MAX_SECONDS:
            raise ValueError(f"run_confined: {name} {v!r}: seconds in (0, {_MAX_SECONDS:g}]")
    root = tempfile.mkdtemp(prefix="blis-candidate-")
    try:
        work = os.path.join(root, "work")
        os.mkdir(work, 0o700)
        for name, data in files.items():
            path = os.path.normpath(os.path.join(work, name))
            if os.path.isabs(name) or not path.startswith(work + os.sep):
                raise ValueError(f"{name!r}: not a relative path inside the working folder")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        env = {k: os.environ[k] for k in ENV_ALLOWED if k in os.environ}
        env.setdefault("PATH", os.defpath)
        env.update(HOME=work, TMPDIR=work, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
        cpu = limits.cpu_s if limits.cpu_s is not None else timeout_s
        cfg = {"argv": list(argv), "cwd": work, "env": env, "timeout_s": timeout_s,
               "cpu_s": max(1, math.ceil(cpu)), "memory_bytes": limits.memory_bytes,
               "open_files": limits.open_files, "file_bytes": limits.file_bytes, "processes": limits.processes,
               "pid_namespace": limits.pid_namespace}
        return _run_supervisor(cfg, max_stdout, max_stderr)
    finally:
        _remove_tree(root)


def _remove_tree(root: str) -> None:
    # A program may leave folders without write permission: allow them first.
    for d, dirs, _ in os.walk(root):
        for name in dirs:
            try:
                os.chmod(os.path.join(d, name), 0o700, follow_symlinks=False)
            except (OSError, NotImplementedError):
                pass
    shutil.rmtree(root, ignore_errors=True)


def _run_supervisor(cfg: dict, max_stdout: int, max_stderr: int) -> Confined:
    start = time.monotonic()
    status_r, status_w = os.pipe()
    cfg = dict(cfg, status_fd=status_w)
    # -s: no user site; -P: not this folder on sys.path (only the stdlib is used).
    sup = [sys.executable, "-s", "-P", os.path.abspath(__file__), "--supervise", json.dumps(cfg)]
    try:
        p = subprocess.Popen(sup, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             pass_fds=(status_w,), start_new_session=True, env=cfg["env"], cwd=cfg["cwd"])
    finally:
        os.close(status_w)
    out = _Reader(p.stdout, max_stdout, keep="head")
    err = _Reader(p.stderr, max_stderr, keep="tail")
    notes: list[str] = []
    try:
        # The supervisor enforces the timeout; this wait only guards it.
        guard = None if cfg["timeout_s"] is None else cfg["timeout_s"] + 30
        try:
            p.wait(timeout=guard)
        except subprocess.TimeoutExpired:
            notes.append("the supervisor outlived its timeout and was stopped")
            _stop(p)
    except BaseException:  # Ctrl-C: the supervisor kills the program's tree, then exits
        _stop(p)
        raise
    finally:
        with os.fdopen(status_r, "rb") as f:
            status_text = f.read(1 << 16)
    out.join(5)
    err.join(5)
    try:
        status = json.loads(status_text)
    except ValueError:
        status = None
    if status is None:
        tail = err.data().decode("utf-8", "replace").strip().splitlines()[-1:]
        raise SupervisorError(f"status {p.returncode}" + (f": {tail[0]}" if tail else ""))
    return Confined(status["returncode"], out.data(), err.data(), status["timed_out"], out.overflow,
                    status["killed"], time.monotonic() - start, notes + status.get("notes", []),
                    status.get("namespace", False))


def _stop(p: subprocess.Popen) -> None:
    """SIGTERM (the supervisor kills its descendants and exits), then
    SIGKILL after 2 s."""
    try:
        p.terminate()
        p.wait(2)
    except subprocess.TimeoutExpired:
        _killpg(p.pid)
        p.wait()


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Reader:
    """Drains a pipe in a thread, keeping its first (``head``) or last
    (``tail``) ``limit`` bytes, so a program cannot fill memory."""

    def __init__(self, pipe, limit: int, keep: str):
        self.pipe, self.limit, self.keep = pipe, limit, keep
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                b = self.pipe.read1(1 << 16) if hasattr(self.pipe, "read1") else self.pipe.read(1 << 16)
                if not b:
                    return
                if self.keep == "head":
                    room = self.limit - self.size
                    if len(b) > room:
                        self.overflow = True
                        b = b[:max(room, 0)]
                    if b:
                        self.chunks.append(b)
                        self.size += len(b)
                else:
                    self.chunks.append(b)
                    self.size += len(b)
                    while self.size - len(self.chunks[0]) >= self.limit:
                        self.size -= len(self.chunks.pop(0))
        except (OSError, ValueError):
            return

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():  # a descendant we could not kill holds the pipe
            try:
                self.pipe.close()
            except OSError:
                pass

    def data(self) -> bytes:
        b = b"".join(self.chunks)
        return b[-self.limit:] if self.keep == "tail" else b


# ---------------------------------------------------------------------------
# The supervisor (a process of its own, between the evaluator and the program)


def _libc_prctl():
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError, ImportError):
        return None


def _proc_files(name: str):
    """(pid, text of /proc/PID/``name``) for every process still there."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/{name}", "rb") as f:
                    yield int(entry), f.read().decode("ascii", "replace")
            except OSError:
                continue


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process (Linux /proc)."""
    table = {}
    for pid, stat in _proc_files("stat"):
        rest = stat.rsplit(")", 1)[-1].split()
        if len(rest) >= 2:
            table[pid] = (int(rest[1]), rest[0])
    return table


def _descendants(root: int) -> list[int]:
    """Live (not zombie) descendants of ``root``, from /proc."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if table.get(pid, (0, "Z"))[1] not in ("Z", "X"):
            out.append(pid)
        todo += children.get(pid, ())
    return out


def _user_tasks() -> int:
    """Processes and threads of this real user (what RLIMIT_NPROC counts)."""
    uid, n = os.getuid(), 0
    for _, text in _proc_files("status"):
        owner, threads = None, 1
        for line in text.splitlines():
            if line.startswith("Uid:"):
                owner = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        if owner == uid:
            n += threads
    return n


class _Stop(Exception):
    pass


_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000


def _enter_pid_namespace() -> bool:
    """Make this process's next child the first process (PID 1) of a new
    PID namespace (Linux ``unshare``: for root ``CLONE_NEWPID``, for
    another user with a user namespace of its own mapping only its uid and
    gid). When that process exits, the kernel kills every process left in
    the namespace. False where it is not allowed (another OS, a container
    without the right, user namespaces disabled)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()
        if os.geteuid() == 0:
            return libc.unshare(_CLONE_NEWPID) == 0
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID) != 0:
            return False
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            try:
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
            except OSError:
                pass
        return True
    except (OSError, AttributeError):
        return False


def _supervise(cfg: dict) -> int:
    import resource

    status_fd = cfg["status_fd"]
    prctl = _libc_prctl() if sys.platform.startswith("linux") else None
    subreaper = bool(prctl) and prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    have_proc = os.path.isdir("/proc/self")
    notes: list[str] = []
    nproc = None
    if os.geteuid() != 0 and have_proc and hasattr(resource, "RLIMIT_NPROC"):
        nproc = _user_tasks() + int(cfg["processes"])

    def preexec():
        os.setpgid(0, 0)
        if prctl:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu_s"], cfg["cpu_s"] + 1))
        resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_bytes"], cfg["memory_bytes"]))
        resource.setrlimit(resource.RLIMIT_NOFILE, (cfg["open_files"], cfg["open_files"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_bytes"], cfg["file_bytes"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    def run_program() -> tuple[int, bool]:
        """Start the program, wait for it up to the timeout, kill its
        process group; its exit status and whether it timed out."""
        try:
            child = subprocess.Popen(cfg["argv"], cwd=cfg["cwd"], env=cfg["env"], stdin=subprocess.DEVNULL,
                                     preexec_fn=preexec, close_fds=True)
        except OSError as e:
            sys.stderr.write(f"cannot start {cfg['argv'][0]}: {e}\n")
            return 127, False
        timed_out = False
        try:
            child.wait(timeout=cfg["timeout_s"])
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return child.wait(), timed_out

    def on_term(signum, frame):
        raise _Stop()

    rc, timed_out, killed = -signal.SIGKILL, False, 0
    namespace = cfg["pid_namespace"] and _enter_pid_namespace()
    if namespace:
        # The namespace's first process runs the program and reports; when it
        # exits, the kernel kills whatever the program left in the namespace.
        # The program cannot kill it (the kernel ignores signals a namespace's
        # own processes send its first one), and it dies with this supervisor.
        r, w = os.pipe()
        init = os.fork()
        if init == 0:
            try:
                os.close(r)
                if prctl:
                    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                os.write(w, json.dumps(run_program()).encode())
            finally:
                os._exit(0)
        os.close(w)
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        try:
            guard = None if cfg["timeout_s"] is None else time.monotonic() + cfg["timeout_s"] + 10
            while os.waitpid(init, os.WNOHANG) == (0, 0):
                if guard is not None and time.monotonic() > guard:
                    notes.append("the namespace's first process outlived its timeout and was killed")
                    os.kill(init, signal.SIGKILL)
                    os.waitpid(init, 0)
                    break
                time.sleep(0.005)
        except _Stop:
            notes.append("stopped by a signal")
            os.kill(init, signal.SIGKILL)
            os.waitpid(init, 0)
        with os.fdopen(r, "rb") as f:
            report = f.read()
        if report:
            rc, timed_out = json.loads(report)
        killed = _kill_all(None, have_proc)
    else:
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        try:
            rc, timed_out = run_program()
        except _Stop:
            notes.append("stopped by a signal")
        finally:
            killed = _kill_all(None, have_proc)
        if not subreaper:
            notes.append("no PID namespace or subreaper: only the program's process group was killed")
    os.write(status_fd, json.dumps({"returncode": rc, "timed_out": timed_out, "killed": killed,
                                    "namespace": namespace, "notes": notes}).encode())
    os.close(status_fd)
    return 0


def _kill_all(child: int | None, have_proc: bool) -> int:
    """Kill the program's process group and every descendant of this
    process; reap them. Returns how many were alive."""
    killed = set()
    if child is not None:
        try:
            os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for _ in range(1000):
        alive = _descendants(os.getpid()) if have_proc else []
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                if pid != child:
                    killed.add(pid)
            except ProcessLookupError:
                pass
        _reap(child)
        if not alive:
            break
        time.sleep(0.005)
    return len(killed)


def _reap(keep: int | None) -> None:
    """Reap every exited child except ``keep`` (the program, waited on by
    subprocess)."""
    try:
        for pid in [p for p in _children_pids() if p != keep]:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
    except OSError:
        pass


def _children_pids() -> list[int]:
    me = os.getpid()
    try:
        return [pid for pid, (ppid, _) in _proc_table().items() if ppid == me]
    except OSError:
        return []


if __name__ == "__main__" and sys.argv[1:2] == ["--supervise"]:
    sys.exit(_supervise(json.loads(sys.argv[2])))

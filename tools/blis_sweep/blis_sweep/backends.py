"""Where blis runs: one interface, two backends.

A :class:`Job` is one invocation of the blis binary: its arguments, input
files written to a scratch directory of its own (``{tmp}`` in an argument
stands for that directory), and the files to read back from it. A backend
runs jobs and yields their :class:`JobResult` as each ends:

* :class:`LocalBackend` (the default): a pool of local processes, at most
  ``workers`` blis processes at once.
* :class:`RayBackend`: one Ray task per job (``num_cpus`` each), on a local
  Ray cluster or an existing one (``address="auto"`` inside ``ray job
  submit``, or ``ray://HOST:10001``).

A sweep's shards are jobs (``blis sweep ... --shard I/N``, rows on stdout);
so is a policy-search adapter's evaluation of a candidate, e.g.::

    Job(args=("run", "--config", "exp.yaml", "--policy-config", "{tmp}/candidate.yaml"),
        files={"candidate.yaml": candidate_yaml.encode()})

whose ``stdout`` is blis run's JSON report. Jobs run in the worker's working
directory (the driver's on this machine; Ray's ``working_dir`` on a
cluster), so relative paths in the arguments name the same files there.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Protocol, Sequence


@dataclass(frozen=True)
class Job:
    """One run of the blis binary.

    ``args`` follow the binary's name; ``{tmp}`` in an argument is replaced
    by the job's scratch directory, where ``files`` (name → bytes) are
    written before it starts and from which ``outputs`` (names) are read
    after it ends. ``timeout_s`` kills a job that runs longer.
    """

    args: tuple[str, ...]
    files: Mapping[str, bytes] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    timeout_s: float | None = None


@dataclass(frozen=True)
class JobResult:
    """What a job gave: its exit status (-9 when its timeout killed it),
    stdout, stderr, and the outputs it wrote (a name it did not write is
    absent)."""

    returncode: int
    stdout: bytes
    stderr: bytes
    outputs: dict[str, bytes]
    timed_out: bool = False


def execute(job: Job, blis: str) -> JobResult:
    """Run ``job`` with the binary ``blis`` here; the body of every backend."""
    tmp = tempfile.mkdtemp(prefix="blis-job-")
    try:
        for name, data in job.files.items():
            path = _inside(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        args = [blis] + [a.replace("{tmp}", tmp) for a in job.args]
        timed_out = False
        try:
            p = subprocess.run(args, capture_output=True, timeout=job.timeout_s, stdin=subprocess.DEVNULL)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, out, err, timed_out = -9, e.stdout or b"", e.stderr or b"", True
        outputs = {}
        for name in job.outputs:
            path = _inside(tmp, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    outputs[name] = f.read()
        return JobResult(code, out, err, outputs, timed_out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _inside(tmp: str, name: str) -> str:
    path = os.path.normpath(os.path.join(tmp, name))
    if os.path.isabs(name) or not path.startswith(tmp + os.sep):
        raise ValueError(f"job file {name!r} is not a relative path inside the job's directory")
    return path


class Backend(Protocol):
    """Runs jobs: ``map`` yields ``(index, result)`` for each job as it ends,
    in completion order; ``slots`` is how many run at once; ``close`` frees
    what the backend started."""

    slots: int

    def map(self, jobs: Sequence[Job]) -> Iterator[tuple[int, JobResult]]: ...

    def close(self) -> None: ...


def find_blis(blis: str | None = None) -> str:
    """The blis binary: ``blis`` itself when it is a path, else the one on
    PATH (an absolute path either way)."""
    name = blis or "blis"
    if os.sep in name:
        if not os.access(name, os.X_OK):
            raise FileNotFoundError(f"{name}: not an executable (build it with `go build -o {name} ./cmd/blis`)")
        return os.path.abspath(name)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not on PATH (build it with `go build -o blis ./cmd/blis`, or pass its path)")
    return found


class LocalBackend:
    """A pool of local processes: at most ``workers`` (default: the CPUs)
    blis processes at once, each job in its own."""

    def __init__(self, blis: str | None = None, workers: int | None = None):
        self.blis = find_blis(blis)
        self.slots = workers or os.cpu_count() or 1
        self._pool = concurrent.futures.ThreadPoolExecutor(self.slots)

    def map(self, jobs: Sequence[Job]) -> Iterator[tuple[int, JobResult]]:
        futures = {self._pool.submit(execute, job, self.blis): i for i, job in enumerate(jobs)}
        try:
            for fut in concurrent.futures.as_completed(futures):
                yield futures[fut], fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RayBackend:
    """One Ray task per job, ``num_cpus`` CPUs each.

    ``address`` is the cluster to join (``"auto"``: the one this process runs
    in, as under ``ray job submit``; ``ray://HOST:10001`` for a client); None
    starts a local cluster with ``init_kwargs`` (tests use
    ``num_cpus=2, include_dashboard=False``; Ray's local mode no longer
    exists). A cluster this backend started is shut down by ``close``.

    ``blis`` names the binary on the workers (a path in the working
    directory, or a name on their PATH); with ``ship_binary`` the driver's
    own binary is put in Ray's object store once and written on each node
    that runs a job (same OS and architecture), so the workers need none.
    """

    def __init__(self, blis: str | None = None, address: str | None = None, num_cpus: float = 1,
                 ship_binary: bool = False, init_kwargs: Mapping | None = None):
        import ray  # the optional extra: pip install -r requirements-ray.lock

        self._ray = ray
        self._owner = False
        if not ray.is_initialized():
            kwargs = dict(init_kwargs or {})
            kwargs.setdefault("log_to_driver", False)
            if address is not None:
                kwargs["address"] = address
            ray.init(**kwargs)
            self._owner = address is None
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 1) // num_cpus))
        self._binary = None
        if ship_binary:
            path = find_blis(blis)
            with open(path, "rb") as f:
                data = f.read()
            self._binary = (hashlib.sha256(data).hexdigest()[:16], ray.put(data))
            self.blis = path
        else:
            self.blis = blis or "blis"
        self._task = ray.remote(num_cpus=num_cpus, max_retries=1)(_ray_task)

    def map(self, jobs: Sequence[Job]) -> Iterator[tuple[int, JobResult]]:
        ray = self._ray
        pending = {}
        for i, job in enumerate(jobs):
            # The binary's ref goes in a list, so that Ray does not fetch it
            # for a task whose node has it already.
            ref = self._task.remote(job, self.blis, self._binary[0] if self._binary else None,
                                    [self._binary[1]] if self._binary else None)
            pending[ref] = i
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    yield pending.pop(ref), ray.get(ref)
        finally:
            for ref in pending:
                ray.cancel(ref)

    def close(self) -> None:
        if self._owner and self._ray.is_initialized():
            self._ray.shutdown()
            self._owner = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _ray_task(job: Job, blis: str, digest: str | None, binary_ref) -> JobResult:
    """A Ray task: write the shipped binary on this node once, run the job."""
    if digest is not None:
        path = os.path.join(tempfile.gettempdir(), f"blis-{digest}")
        if not os.access(path, os.X_OK):
            import ray

            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(ray.get(binary_ref[0]))
            os.chmod(tmp, 0o755)
            os.replace(tmp, path)
        blis = path
    return execute(job, blis)

"""The Python sweep driver and policy search under hostile input
(docs/hardening.md, round 4): each test fails without its fix.

- error texts: linear to clean, clipped before they reach the LLM;
- a Python candidate runs confined: a fresh working folder, an
  allow-listed environment, CPU, memory, open-file and output limits, and
  no process it starts outlives it (a grandchild that leaves its session
  included);
- a YAML candidate cannot name a file;
- a relative program path is read from the working directory;
- the driver checks --out and --plot, and the sweep's grid, before any
  shard runs or a Ray cluster starts, and names the user's path;
- the GEPA command cannot fail quietly: a refused experiment stops it before
  any LLM call, with the fix; an LLM that never answers ends it with exit
  status 1 and one line per failed call, not tracebacks; each failed
  candidate is one line as it happens; --dry-run scores bundles without
  an LLM.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import REPO, SMALL

yaml = pytest.importorskip("yaml")

from blis_sweep import JobResult, LocalBackend, run_sweep  # noqa: E402
from blis_sweep.search import CandidateError, PolicyEvaluator, load_program  # noqa: E402
from blis_sweep.search.confine import Limits, run_confined  # noqa: E402
from blis_sweep.search.core import ERROR_MAX_CHARS, _clean_error  # noqa: E402

ARGS = ["--num-instances", "2"]


@contextmanager
def deadline(seconds: int):
    """Fail (rather than hang) when the block runs past ``seconds``: a guard
    against a hang, far above the fixed code's time, not a speed target."""

    def expired(signum, frame):
        raise AssertionError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------------------
# Error texts


@pytest.mark.parametrize("size", [100_000, 1_000_000])
def test_clean_error_is_linear_and_clipped(size):
    # One long word without spaces: the old pattern (\S* before the job
    # folder) re-scanned it from each position: 10 s at 100 KB, minutes at 1 MB.
    huge = "x" * size
    stderr = f"note: starting\nblis: --policy-config: /tmp/blis-job-ab_12/candidate.yaml:3: routing.type: " \
             f"routing policy \"{huge}\" is not a template\n".encode()
    with deadline(10):
        err = _clean_error(stderr)
    assert len(err) <= ERROR_MAX_CHARS
    assert err.startswith("note: starting\nblis: --policy-config: candidate: routing.type: routing policy \"xxx")
    assert err.endswith("xxx\" is not a template")
    assert "characters clipped" in err and "blis-job-" not in err
    # A flood of lines keeps the last five.
    many = b"".join(f"line {i}\n".encode() for i in range(100_000))
    with deadline(10):
        assert _clean_error(many) == "\n".join(f"line {i}" for i in range(99_995, 100_000))


class _Canned:
    """A backend whose every job fails with the same stderr."""

    slots = 1

    def __init__(self, stderr: bytes):
        self.stderr = stderr

    def map(self, jobs):
        for i, _ in enumerate(jobs):
            yield i, JobResult(1, b"", self.stderr, {})

    def close(self):
        pass


def test_the_llm_gets_a_clipped_error():
    ev = PolicyEvaluator(backend=_Canned(b"blis: " + b"y" * 2_000_000 + b"\n"))
    with deadline(10):
        o = ev.evaluate({"routing": "least-loaded"}, ["mixed-slo"])[0]
    assert o.score == 0 and len(o.error) <= ERROR_MAX_CHARS
    assert len(o.feedback()) < ERROR_MAX_CHARS + 100
    # A huge candidate is refused before it is parsed (PyYAML takes 45 s on
    # 1.5 MB); the error does not quote it.
    with deadline(10):
        o = ev.evaluate({"routing": "{type: weighted, params: [" + "1, " * 500_000 + "]}"}, ["mixed-slo"])[0]
    assert o.error == "invalid candidate: routing: 1500028 characters; a candidate is at most 16384"


# ---------------------------------------------------------------------------
# A Python candidate runs confined


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def _escaper(pidfile: Path, then: str) -> str:
    """A program whose grandchild leaves its session (setsid, a second fork)
    and sleeps for a minute; the program waits for it to start, then runs
    ``then``. The grandchild writes its pid as this machine sees it
    (/proc/self: the program may run in a PID namespace of its own)."""
    return f"""
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open({str(pidfile)!r}, "w") as f:
            f.write(os.readlink("/proc/self"))
        time.sleep(60)
    os._exit(0)
while not os.path.exists({str(pidfile)!r}):
    time.sleep(0.01)
time.sleep(0.05)
{then}
"""


# The program kills the processes above it (its PID namespace's first
# process, if any, and the supervisor), found through /proc, then stays. In
# a PID namespace those pids name nothing it can reach.
_KILL_SUPERVISOR = """
def ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
me = int(os.readlink("/proc/self"))
up = [ppid(me)]
up.append(ppid(up[0]))
for pid in reversed(up):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
time.sleep(60)
"""


@pytest.mark.parametrize("namespace, ending", [(True, "exits"), (True, "times out"), (True, "kills its supervisor"),
                                               (False, "exits"), (False, "times out")])
def test_no_process_of_a_candidate_survives_it(tmp_path, namespace, ending):
    """With a PID namespace (where the kernel allows one) and with the
    subreaper alone (elsewhere): a grandchild that left the program's
    session dies with the program."""
    limits = Limits(pid_namespace=namespace)
    pidfile = tmp_path / "grandchild.pid"
    prog = tmp_path / "p.py"
    then = {"exits": "print('routing: {type: least-loaded}')", "times out": "time.sleep(60)",
            "kills its supervisor": _KILL_SUPERVISOR}[ending]
    prog.write_text(_escaper(pidfile, then))
    start = time.monotonic()
    with deadline(30):
        if ending == "exits":
            assert load_program(str(prog), 20, limits) == "routing:\n  type: least-loaded\n"
        elif ending == "times out":
            with pytest.raises(CandidateError, match="timed out: the program ran longer than 1.5 s and was killed"):
                load_program(str(prog), 1.5, limits)
        else:  # in a PID namespace it cannot reach them (it times out); else the supervisor dies
            with pytest.raises(CandidateError, match="timed out: the program ran longer than 1.5 s|the program's supervisor was killed"):
                load_program(str(prog), 1.5, limits)
    assert time.monotonic() - start < 15
    pid = int(pidfile.read_text())
    for _ in range(100):
        if _gone(pid):
            break
        time.sleep(0.02)
    assert _gone(pid), f"the grandchild {pid} outlived the candidate"


def test_candidate_environment_and_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    (tmp_path / "neighbour.txt").write_text("the program's own folder")
    prog = (b"import os, json\n"
            b"print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd(), 'files': os.listdir('.')}))\n")
    res = run_confined([sys.executable, "-s", "program.py"], {"program.py": prog}, timeout_s=20)
    assert res.reason() is None, res.stderr
    import json

    seen = json.loads(res.stdout)
    assert "sk-secret" not in res.stdout.decode() and "aws-secret" not in res.stdout.decode()
    assert set(seen["env"]) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "TMPDIR", "PYTHONHASHSEED",
                                "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING"}
    assert seen["files"] == ["program.py"] and seen["env"]["HOME"] == seen["cwd"]
    assert not os.path.exists(seen["cwd"])  # removed afterwards


@pytest.mark.parametrize("code, limits, reason", [
    ("while True: pass", Limits(cpu_s=1), "killed at its CPU time limit"),
    ("x = bytearray(3 << 30)", Limits(), "exited with status 1"),
    ("fs = [open(f'f{i}', 'w') for i in range(200)]", Limits(), "exited with status 1"),
    ("open('big', 'wb').write(b'0' * (20 << 20))", Limits(), "exited with status 1"),
    ("import sys; sys.stdout.write('x' * (3 << 20))", Limits(), "printed more than 1048576 bytes"),
])
def test_candidate_resource_limits(code, limits, reason):
    with deadline(30):
        res = run_confined([sys.executable, "-s", "-c", code], timeout_s=20, limits=limits)
    assert res.reason() == reason, (res.reason(), res.stderr[-300:])
    assert not res.timed_out and res.wall_s < 15
    if "bytearray" in code:
        assert b"MemoryError" in res.stderr
    if "open(f" in code:
        assert b"Too many open files" in res.stderr
    if "big" in code:  # Python ignores SIGXFSZ: the write fails
        assert b"File too large" in res.stderr


def test_relative_program_path(tmp_path, monkeypatch):
    (tmp_path / "cand").mkdir()
    (tmp_path / "cand" / "p.py").write_text("print('routing: {type: least-loaded}')\n")
    (tmp_path / "cand" / "p.yaml").write_text("routing: {type: round-robin}\n")
    monkeypatch.chdir(tmp_path)
    assert load_program("cand/p.py", 20) == "routing:\n  type: least-loaded\n"
    assert load_program("cand/p.yaml") == "routing:\n  type: round-robin\n"
    with pytest.raises(CandidateError, match="cannot read the program"):
        load_program("cand/none.py", 20)


def test_yaml_candidates_cannot_name_files(blis, tmp_path):
    """A candidate is policy sections: no key of a policy file names a file,
    and the keys that do in an experiment (workload, run outputs,
    deployment) are refused, so nothing is read or written."""
    evil = tmp_path / "evil.jsonl"
    ev = PolicyEvaluator(args=ARGS, horizon_s=5, backend=LocalBackend(blis, workers=2))
    try:
        for cand, msg in [
            ({"run": f"{{outputs: {{decision_trace: {evil}}}}}"}, 'unknown key "run"'),
            ({"workload": f"{{spec_file: {tmp_path}/w.yaml}}"}, 'unknown key "workload"'),
            ({"deployment": "{pools: []}"}, 'unknown key "deployment"'),
            ({"routing": f"{{type: weighted, params: {{file: {evil}}}}}"}, "file"),
            ({"routing": "!!python/object/apply:os.system ['touch /tmp/blis-pwned']"}, "not valid YAML"),
        ]:
            o = ev.evaluate(cand, ["mixed-slo"])[0]
            assert o.score == 0 and msg in o.error, (cand, o.error)
        assert not evil.exists() and not os.path.exists("/tmp/blis-pwned")
    finally:
        ev.close()


# ---------------------------------------------------------------------------
# The sweep driver


class _Unused:
    slots = 2

    def map(self, jobs):
        raise AssertionError("a shard ran before the outputs were checked")

    def close(self):
        pass


def test_outputs_checked_before_any_shard(blis, tmp_path):
    for kw, msg in [({"out": "nodir/t.parquet"}, "--out nodir/t.parquet: its folder nodir does not exist"),
                    ({"out": str(tmp_path)}, "a table is .csv or .parquet"),
                    ({"out": str(tmp_path / "t.txt")}, "a table is .csv or .parquet"),
                    ({"plot": ["--plot", "nodir/f.png"]}, "--plot nodir/f.png: its folder nodir does not exist"),
                    ({"plot": ["--plot", str(tmp_path / "f.gif")]}, "a figure is .png, .svg or .pdf")]:
        with pytest.raises(ValueError, match=msg.replace(".", r"\.")):
            run_sweep(SMALL, _Unused(), blis=blis, progress=None, **kw)
    # An error found while writing names the user's file, not a temporary one.
    fig = tmp_path / "f.svg"
    with pytest.raises(Exception) as e:
        run_sweep(SMALL, LocalBackend(blis, workers=2), blis=blis, progress=None,
                  plot=["--plot", str(fig), "--plot-metric", "nosuch_metric"])
    assert str(fig) in str(e.value) and "blis-sweep-" not in str(e.value) and "merged.csv" not in str(e.value)


def test_table_into_a_fifo(blis, tmp_path):
    fifo = tmp_path / "table.csv"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = run_sweep(SMALL, LocalBackend(blis, workers=2), out=str(fifo), blis=blis, progress=None)
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # not replaced by a regular file
    assert got == [res.table]


def test_ray_driver_checks_the_grid_before_ray_starts(blis, tmp_path, monkeypatch, capsys):
    from blis_sweep import cli

    def no_ray(*a, **k):
        raise AssertionError("Ray started before the sweep was checked")

    monkeypatch.setattr(cli, "RayBackend", no_ray)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--backend", "ray", "--blis", blis, "--", "--config", SMALL[1], "--grid", "grid.yaml"]) == 1
    assert "--grid: open grid.yaml: no such file or directory" in capsys.readouterr().err
    assert cli.main(["--backend", "ray", "--blis", blis, "--out", "nodir/t.parquet", "--", *SMALL]) == 1
    assert "--out nodir/t.parquet: its folder nodir does not exist" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# The GEPA command cannot fail quietly


@pytest.fixture()
def printed_experiment(blis, tmp_path):
    """An experiment file as `blis run --print-config` writes it: it has a
    synthetic workload of its own."""
    exp = tmp_path / "exp.yaml"
    p = subprocess.run([blis, "run", "--num-instances", "2", "--print-config"], capture_output=True, check=True)
    exp.write_bytes(p.stdout)
    return exp


def _main(argv, **kw):
    pytest.importorskip("gepa")
    from blis_sweep.search.__main__ import main

    return main(argv, **kw)


def _lm_never_called(prompt):
    raise AssertionError("the LLM was called")


def test_gepa_refuses_a_printed_experiment_up_front(blis, tmp_path, printed_experiment, capsys):
    seed = tmp_path / "seed.yaml"
    seed.write_text("routing: {type: least-loaded}\n")
    start = time.monotonic()
    assert _main(["gepa", "--policy", str(seed), "--workload", "mixed-slo", "--experiment", str(printed_experiment),
                  "--model", "m", "--blis", blis], reflection_lm=_lm_never_called) == 1
    assert time.monotonic() - start < 10
    err = capsys.readouterr().err
    lines = [i + 1 for i, ln in enumerate(printed_experiment.read_text().splitlines()) if ln.startswith("  synthetic:")]
    assert "workload.synthetic cannot be combined with --scenario" in err
    assert f"Delete workload.synthetic (lines {lines[0]}-" in err and str(printed_experiment) in err
    # Without --workload, the experiment's own workload is searched on
    # (objective fitness: a synthetic workload has no SLO targets).
    assert _main(["gepa", "--policy", str(seed), "--experiment", str(printed_experiment), "--objective", "fitness",
                  "--fitness-weights", "throughput:1,p99_ttft:1", "--horizon", "10", "--dry-run", "--blis", blis]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:2] == [str(seed), "experiment"]


def test_gepa_exits_when_the_llm_never_answers(blis, tmp_path, capsys):
    openai = pytest.importorskip("openai")
    calls = []

    def unreachable(prompt):  # what the OpenAI client raises after its retries
        calls.append(prompt)
        raise openai.APIConnectionError(request=None)

    seed = tmp_path / "seed.yaml"
    seed.write_text("routing: {type: always-busiest}\n")
    assert _main(["gepa", "--policy", str(seed), "--workload", "bursty-traffic", "--blis-arg=--num-instances=2",
                  "--horizon", "20", "--seeds", "1", "--max-metric-calls", "40", "--model", "m", "--api-base",
                  "http://127.0.0.1:9/v1", "--blis", blis, "--out", str(tmp_path / "best.yaml")],
                 reflection_lm=unreachable) == 1
    cap = capsys.readouterr()
    assert "gepa: stopped: the reflection LM at http://127.0.0.1:9/v1 never answered: APIConnectionError" in cap.err
    assert "Traceback" not in cap.err and cap.out == ""
    assert len(calls) <= 2  # stopped at once, not after 40 metric calls
    assert not (tmp_path / "best.yaml").exists()


def test_gepa_shows_each_failed_candidate_as_it_happens(blis, tmp_path, capsys):
    seed = tmp_path / "seed.yaml"
    seed.write_text("routing: {type: always-busiest}\n")

    def bogus(prompt):
        return "```\n{type: bogus-router}\n```"

    best = tmp_path / "best.yaml"
    assert _main(["gepa", "--policy", str(seed), "--workload", "bursty-traffic", "--blis-arg=--num-instances=2",
                  "--horizon", "20", "--seeds", "1", "--max-metric-calls", "3", "--model", "m", "--blis", blis,
                  "--out", str(best)], reflection_lm=bogus) == 0
    assert yaml.safe_load(best.read_text()) == {"routing": {"type": "always-busiest"}}  # no better candidate
    err = capsys.readouterr().err
    assert 'gepa: candidate 1 on bursty-traffic scores 0: blis: --policy-config: candidate: routing.type: ' \
           'routing policy "bogus-router" is not a template' in err


def test_gepa_seed_that_fails_stops_before_the_llm(blis, tmp_path, capsys):
    seed = tmp_path / "seed.yaml"
    seed.write_text("routing: {type: nosuch}\n")
    assert _main(["gepa", "--policy", str(seed), "--workload", "mixed-slo", "--model", "m", "--blis", blis],
                 reflection_lm=_lm_never_called) == 1
    err = capsys.readouterr().err
    assert f"the seed bundle {seed} fails on 1 of 1 workload" in err and '"nosuch" is not a template' in err


def test_gepa_dry_run(blis, tmp_path, capsys):
    seed = tmp_path / "seed.yaml"
    seed.write_text("routing: {type: always-busiest}\n")
    py = tmp_path / "cand.py"
    py.write_text("print('routing: {type: least-loaded}')\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("routing: {type: nosuch}\n")
    base = ["gepa", "--policy", str(seed), "--workload", "mixed-slo", "--workload", "bursty-traffic",
            "--blis-arg=--num-instances=2", "--horizon", "20", "--seeds", "1", "--blis", blis, "--dry-run"]
    assert _main(base + ["--candidate", str(py)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["bundle", "workload", "score", "error"] and len(out) == 5
    scores = {(ln.split()[0], ln.split()[1]): float(ln.split()[2]) for ln in out[1:]}
    assert scores[(str(py), "bursty-traffic")] > scores[(str(seed), "bursty-traffic")] + 0.2
    assert _main(base + ["--candidate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert '"nosuch" is not a template' in out


def test_docs_dry_run_runs_as_written(blis, monkeypatch, capsys):
    """docs/policy-search.md's --dry-run command, run as written from the
    repository's root, prints the table the page shows."""
    import re
    import shlex

    doc = (REPO / "docs" / "policy-search.md").read_text()
    section = doc[doc.index("## Try it without an LLM"):]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    (_, command), (_, table) = blocks[0], blocks[1]
    # The block first activates the virtualenv and sets PYTHONPATH (this
    # test runs in both already); the command is the line that starts
    # with python, and its continuations.
    command = command[command.index("python -m blis_sweep.search"):]
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "blis_sweep.search"]
    argv = [blis if a == "./blis" else a for a in argv[3:]]
    monkeypatch.chdir(REPO)
    assert _main(argv) == 0
    assert capsys.readouterr().out == table

"""`schedlang tune` end to end: a small model tuned with a few trials writes its log and prints
a line per round, the per-task table (weights from the repeated kernel) and the model's
latency, and its tuned result matches eager PyTorch; bad options are one line on stderr with
exit status 2. The tuning runs through cli.main in this process (a process would import torch
again; test_cli's compile run and the usage error below run `python -m schedlang` as a user does)."""
import json

from schedlang.autoschedule.search import SearchPolicy
from schedlang.torch import tune
from tests.test_cli import run_main, schedlang, write

# The search's effort per round is not what is tested here (tests/autoschedule's): a round of the
# default policy lowers ~160 candidates (two generations of 32, 4 x 32 children of the elites) to
# pick one; this one lowers a few dozen.
SMALL_SEARCH = SearchPolicy(population=8, generations=1, local_breadth=1)

MODEL = """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

        def forward(self, x):
            x = self.c(x)
            for _ in range(2):
                x = torch.relu(self.a(x))       # one kernel, run twice: the ReLU is its epilogue
            return self.b(x)
"""


def test_tune_writes_the_log_and_prints_the_table(tmp_path, capsys, monkeypatch):
    real = tune.tune_program
    monkeypatch.setattr(tune, "tune_program", lambda *args, **kw: real(*args, **{"policy": SMALL_SEARCH, **kw}))
    path = write(tmp_path, "net.py", MODEL)
    log = tmp_path / "net.jsonl"
    rc, out, err = run_main(capsys, monkeypatch, "tune", path, "--model", "Net", "--shape", "2,16", "--trials", "4",
                            "--per-round", "1", "--log", str(log))
    assert rc == 0, out + err
    lines = out.splitlines()
    assert sum(line.startswith("tune: round ") for line in lines) == 4
    head = next(k for k, line in enumerate(lines) if line.split()[:3] == ["id", "kernel", "weight"])
    rows = [line.split() for line in lines[head + 2:] if line.split() and line.split()[0].isdigit()]
    weights = sorted(int(r[3]) for r in rows)       # id, kind, name, weight, trials, ...
    assert weights == [1, 1, 2] and sum(int(r[4]) for r in rows) == 4
    assert all(r[-1].endswith("x") for r in rows)
    assert "estimated model latency" in out and "measured model latency" in out
    assert "inside the model" in out               # the in-model check's line (--in-model, 7 rounds)
    assert "run: matches eager PyTorch" in out
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    defaults = [r for r in recs if r.get("sketch") == "default" and "final" not in r]
    assert len({r["workload"] for r in recs}) == 3 and len(defaults) == 3


def test_tune_usage_errors(tmp_path, capsys, monkeypatch):
    path = write(tmp_path, "net.py", MODEL)
    rc, _, err = schedlang("tune", path, "--shape", "2,16", "--log", str(tmp_path / "x.jsonl"))
    assert rc == 2 and "--trials" in err and "Traceback" not in err
    # the other two in this process (the one above shows that a process exits the same way)
    rc, _, err = run_main(capsys, monkeypatch, "tune", path, "--shape", "2,16", "--trials", "4",
                          "--log", str(tmp_path / "x.jsonl"), "--strategy", "greedy")
    assert rc == 2 and "greedy" in err
    rc, _, err = run_main(capsys, monkeypatch, "tune", path, "--shape", "2,16", "--trials", "0",
                          "--log", str(tmp_path / "x.jsonl"))
    assert rc == 2 and "--trials" in err and len(err.strip().splitlines()) == 1


def test_tune_revalidate_retimes_the_chosen_records_at_the_targets_threads(tmp_path, capsys, monkeypatch):
    """--revalidate --threads 2: no search; the log's record of a kernel (here its plain loops,
    logged at one thread as if fastest) timed beside today's default at 2 threads, the winner
    logged for 2 threads, the table printed, and the model built with the log matches torch."""
    import schedlang.torch as sl_torch
    from schedlang.autoschedule import records
    path = write(tmp_path, "net.py", MODEL)
    log = tmp_path / "net.jsonl"
    rc, _, err = run_main(capsys, monkeypatch, "tune", path, "--model", "Net", "--shape", "2,16", "--revalidate",
                          "--log", str(log))
    assert rc == 2 and "no tuning log" in err
    import torch
    from schedlang.cli import load_file
    net = load_file(path).Net().eval()
    cm = sl_torch.compile(net, (torch.randn(2, 16),), target="llvm")
    kt = tune.extract_tasks(cm.program, cm.target)[0]
    plain = json.loads(kt.task.schedule().to_json())
    records.append(str(log), [records.make_record(kt.workload_key, str(kt.task.target), plain, "plain", [1e-9], None,
                                                  kt.task.flops, sketch="tile:t0", threads=1)])
    rc, out, err = run_main(capsys, monkeypatch, "tune", path, "--model", "Net", "--shape", "2,16", "--revalidate",
                            "--threads", "2", "--log", str(log))
    assert rc == 0, out + err
    assert "weighted (sum of weight x time" in out and "run: matches eager PyTorch" in out
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["revalidated"]["threads"] == 2 and last["threads"] == 2 and last["workload"] == kt.workload_key
    assert last["sketch"] in ("default", "tile:t0")

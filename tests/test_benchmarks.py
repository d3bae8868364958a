"""The auto-scheduler benchmark's smoke run: every workload is tuned, checked against its
reference (the script asserts) and timed beside its peers, at tiny sizes."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow      # six workloads tuned and timed beside torch (about 45 s): the benchmark script's check
def test_tune_benchmark_quick_run(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "tune.py"), "--quick",
                           "--log-dir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "FMA" in out and "GFLOP/s" in out
    for title in ("GEMM float32 64^3, gemm64, target llvm:", "gemm64-64", "conv2d float32",
                  "conv2d 3x3 as Winograd F(4x4)", "Row softmax", "SiluAndMul"):
        assert title in out, title
    assert out.count("schedlang auto_schedule") == 6
    assert "schedlang hand Winograd (F4)" in out
    assert "schedlang hand (tutorial)" in out and "oneDNN prepacked" in out     # the peers the issue names
    assert (tmp_path / "conv2d.jsonl").stat().st_size > 0


@pytest.mark.slow      # one workload tuned for a one-thread target, timed by CPU time (about 10 s)
def test_tune_benchmark_times_by_cpu_time_at_one_thread(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "tune.py"), "--quick", "--cpu-time",
                           "--only", "gemm1024-64", "--target", "llvm -num-cores=1", "--log-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gemm64-64, target llvm -num-cores=1:" in proc.stdout
    assert "CPU time at one thread" in proc.stdout


@pytest.mark.slow      # every zoo model compiled tiny in a fresh process, checked against eager (about a minute)
def test_compile_benchmark_quick_run():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "compile.py"), "--quick",
                           "--models", "resnet18,bert,llama"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "Warm build of the tutorial GEMM (128^3" in out
    for stage in ("infer_regions", "vectorize_loops", "llvm.opt", "jit"):     # the per-stage table
        assert f"  {stage} " in out, stage
    for model in ("resnet18", "bert", "llama"):     # each compiled and checked against eager (the child asserts)
        assert any(line.startswith(model) for line in out.splitlines()), model


@pytest.mark.slow      # two tiny models compiled and exported, timed beside eager and ONNX Runtime (under a minute)
def test_models_benchmark_quick_run():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "models.py"), "--quick"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "ISA flags" in out and "threads" in out
    rows, work = {}, {}
    for line in out.splitlines():            # the latency table, then the work table: the same row titles
        if line.strip().startswith(("resnet18 (tiny)", "llama (tiny)")):
            (work if line.split()[0] in rows else rows)[line.split()[0]] = line.split()
    assert set(rows) == set(work) == {"resnet18", "llama"}, out
    assert rows["llama"][-2] == "0", "the tiny Llama runs an op in torch"
    assert "FMA peak:" in out and "Work: GFLOP per forward" in out
    for name, cells in work.items():         # model, (tiny), GFLOP, floor ms, eager's % of peak, ...
        assert float(cells[2]) > 0 and float(cells[3]) > 0 and cells[5] == "%", (name, cells)
        assert float(rows[name][2]) > float(cells[3]), "eager faster than the FMA peak allows"
    if importlib.util.find_spec("onnxruntime") is not None:     # the bench and dev extras install it
        assert "dynamo export" in out or "legacy export" in out
    assert "schedlang first call in a fresh process" in out and " s " in out.split("warm disk cache")[-1]


@pytest.mark.slow      # the tiny ResNet-18 tuned with one trial per kernel task, then timed (a minute or two)
def test_models_benchmark_tunes_and_fills_the_tuned_column(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "models.py"), "--quick", "--only",
                           "resnet18", "--no-onnx", "--no-first-call", "--tune", "12", "--tune-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = next(line.split() for line in proc.stdout.splitlines() if line.strip().startswith("resnet18 (tiny)"))
    float(row[6])                           # model, (tiny), eager, compile, ort, schedlang, schedlang tuned
    assert "tuned 12 trials over" in proc.stdout
    log = tmp_path / "tune-resnet18-tiny.jsonl"
    assert log.is_file()
    # the log alone, as the lead's quiet run reads one (a 2-thread compile of records timed at any count)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "models.py"), "--quick", "--only",
                           "resnet18", "--no-onnx", "--no-first-call", "--threads", "2", "--tuned-log", str(log)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = next(line.split() for line in proc.stdout.splitlines() if line.strip().startswith("resnet18 (tiny)"))
    float(row[6])
    note = next(line for line in proc.stdout.splitlines() if line.strip().startswith("schedlang tuned"))
    tasks = note.split("log: ")[1].split()
    assert tasks[0] == tasks[4] and int(tasks[0]) > 0 and "searched candidates, measured" in note, note


@pytest.mark.slow      # the tiny BERT tuned with a few trials at one thread, then revalidated at two (about a minute)
def test_tune_whole_tunes_then_revalidates_at_the_targets_threads(tmp_path):
    log = tmp_path / "bert-tiny.jsonl"
    script = os.path.join(ROOT, "benchmarks", "tune_whole.py")
    proc = subprocess.run([sys.executable, script, "--model", "bert", "--size", "tiny", "--trials", "8",
                           "--timeout", "120", "--log", str(log)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert recs and all(r["threads"] == 1 for r in recs)         # timed at the target's one thread
    proc = subprocess.run([sys.executable, script, "--model", "bert", "--size", "tiny", "--revalidate", "--threads",
                           "2", "--rounds", "1", "--log", str(log)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "revalidated at 2 thread(s)" in proc.stdout and "weighted (sum of weight x time" in proc.stdout
    new = [json.loads(line) for line in log.read_text().splitlines()][len(recs):]
    timed = [line for line in proc.stdout.splitlines() if line.startswith("revalidate: task") and " ms, " in line]
    assert len(new) == len(timed) and all(r["revalidated"]["threads"] == 2 == r["threads"] for r in new)


@pytest.mark.slow      # the tiny ResNet-18's tasks extracted (its lowering) and two strategies simulated (about 10 s)
def test_task_scheduler_benchmark_quick_run():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "task_scheduler.py"), "--quick",
                           "--seeds", "2"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line[:4].strip() in ("0", "1")]
    assert [r[1] for r in rows] == ["gradient", "round-robin"] * 2
    for r in rows:     # each run's final estimate is below the default schedules' (the simulated search gains)
        assert float(r[3]) < float(r[2]), r
    assert "mean trials to 95 %: gradient" in proc.stdout


@pytest.mark.slow      # one small Linear checked and timed beside torch, numpy and ONNX Runtime (about 15 s)
def test_gemm_one_thread_ort_column():
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed (the bench and dev extras install it)")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gemm_one_thread.py"), "--ort",
                           "--shapes", "20x40x72", "--rounds", "2", "--round-ms", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(line.split() for line in lines if "M x K x N" in line)
    row = next(line for line in lines if line.split()[:1] == ["20x40x72"])
    assert header.index("ort") == header.index("numpy") + 1, proc.stdout
    assert row.count("%") == 5, row        # linear, kernel, torch, numpy, ort (no hand kernel: not a square)


@pytest.mark.slow      # tiny MobileNetV2 compiled, its kernels timed by kind beside ONNX Runtime's nodes (under a minute)
def test_mobilenet_kinds_benchmark_tiny_run():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "mobilenet_kinds.py"), "--size", "tiny",
                           "--rounds", "1"], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "whole: schedlang" in out and "kernels per forward" in out
    rows = {line.split()[0]: line for line in out.splitlines()[3:] if line.strip()}
    for kind in ("dw", "1x1", "classifier", "sum"):       # depthwise, 1x1 expansions/projections, the linear
        assert kind in rows, kind


@pytest.mark.slow      # tiny MobileNetV2 compiled, its forward timed with the kernels and stubbed, both call paths
def test_call_overhead_benchmark_tiny_run():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "call_overhead.py"), "--size", "tiny",
                           "--models", "mobilenet_v2", "--rounds", "1", "--calls", "2", "--profile"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("mobilenet_v2")]
    assert [r[1] for r in rows] == ["checked", "prepared"], proc.stdout
    for _, _, forward, kernels, python in rows:
        assert float(forward) > 0 and float(python) > 0 and abs(float(kernels) + float(python) - float(forward)) < 2e-3
    # each path's cProfile listing (top functions by own time: which of ours appear depends on the CPU's timing)
    sections = proc.stdout.split("## cProfile, mobilenet_v2, ")[1:]
    assert [s.split(",")[0] for s in sections] == ["checked", "prepared"], proc.stdout
    for section in sections:
        assert "function calls" in section and os.path.join("schedlang", "torch") in section, section


@pytest.mark.slow      # twenty-two single-op modules compiled, checked against eager and timed beside it (under a minute)
def test_op_sweep_benchmark_quick_run():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "op_sweep.py"), "--quick"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()[2:] if line.strip()]
    assert len(rows) == 22 and {r[0] for r in rows} >= {"conv_t2d_4x4_s2", "conv3d_3x3x3", "bicubic_x2"}, proc.stdout
    for name, _, sl_ms, torch_ms, ratio, fallbacks in rows:
        assert float(sl_ms) > 0 and float(torch_ms) > 0 and fallbacks == "none", (name, fallbacks)

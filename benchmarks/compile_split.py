"""ResNet-50's one part built in this process as one LLVM module and split (target/llvm/split.py),
alternating: wall, process CPU and main-thread CPU of each build; for a split build, the CPU
time of rendering each module (main thread) and of its O3 pipeline (worker thread), and the
LLVM half's time on two idle cores that these give (render, O3 overlapped; then link, JIT).

    taskset -c 0,1 python benchmarks/compile_split.py [rounds]
"""
import os, sys, time, statistics, threading
os.environ["SCHEDLANG_KERNEL_CACHE"] = "0"
import torch
import schedlang as sl
from schedlang.torch import capture, zoo
from schedlang.torch.lower import lower_graph
from schedlang.torch.schedules import default_schedule
from schedlang.torch.gc_pause import gc_paused
from schedlang.target.llvm import backend, split

target = sl.Target.create("llvm")
module, inputs = zoo.build("resnet50", "full")
with torch.no_grad():
    graph = capture(module, inputs)
program = lower_graph(graph, target, warn=False)
part = program.parts[0]
ins, outs = [t for _, t in part.inputs], [t for _, t in part.outputs]

log = []
real_opt, real_render, real_link, real_cm = backend.optimize, backend.render_llvm_split, backend.link_modules, backend.CompiledModule
def opt(*a, **k):
    c = time.thread_time(); r = real_opt(*a, **k); log.append(("o", time.thread_time() - c)); return r
def render(*a, **k):
    a = list(a); emit = a[5]; last = [time.thread_time()]
    def e(text):
        now = time.thread_time(); log.append(("r", now - last[0])); emit(text); last[0] = time.thread_time()
    a[5] = e
    r = real_render(*a, **k); log.append(("r", time.thread_time() - last[0])); return r
def link(*a):
    c = time.thread_time(); r = real_link(*a); log.append(("l", time.thread_time() - c)); return r
def cm(*a):
    c = time.thread_time(); r = real_cm(*a); log.append(("j", time.thread_time() - c)); return r
backend.optimize, backend.render_llvm_split, backend.link_modules, backend.CompiledModule = opt, render, link, cm

def ideal(log):
    """The LLVM half serial and overlapped on two idle cores, from the logged CPU times."""
    r = [t for k, t in log if k == "r"]; o = [t for k, t in log if k == "o"]
    l = sum(t for k, t in log if k == "l"); j = sum(t for k, t in log if k == "j")
    t_main, end = 0.0, 0.0
    for i, oi in enumerate(o):
        t_main += r[i]
        end = max(t_main, end) + oi
    t_main += sum(r[len(o):])
    return dict(render=sum(r), o3=sum(o), link=l, jit=j, serial=sum(r) + sum(o) + l + j,
                overlapped=max(end, t_main) + l + j, modules=len(o))

res = {"one": [], "split": []}
n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
with torch.no_grad(), gc_paused():
    for rnd in range(n):
        for mode in (("one", "split") if rnd % 2 == 0 else ("split", "one")):
            split.MIN_KERNELS = 10**9 if mode == "one" else 16
            s = default_schedule(outs, target)
            log.clear()
            w, c, tt = time.perf_counter(), time.process_time(), time.thread_time()
            mod = sl.build(s, ins + outs, target=target, cache=False)
            w, c, tt = time.perf_counter() - w, time.process_time() - c, time.thread_time() - tt
            info = ideal(log) if mode == "split" else {}
            res[mode].append((w, c, tt))
            print(f"{mode:5s} wall {w:6.2f}  process cpu {c:5.2f}  main thread cpu {tt:5.2f}  "
                  + "  ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items()), flush=True)
for mode, v in res.items():
    print(mode, "median wall %.2f cpu %.2f main %.2f" % tuple(statistics.median(x[i] for x in v) for i in range(3)))

"""ResNet-50's one part built in this process as one LLVM module, split (target/llvm/split.py),
and split with its Kernel IR lowered by this process and a forked child (kernel/forked.py),
alternating: wall, process CPU and main-thread CPU of each build; for a split build, the CPU
time of rendering each module (main thread) and of its O3 pipeline (worker thread), and the
LLVM half's time on two idle cores that these give (render, O3 overlapped; then link, JIT);
for a forked build, the CPU time of this process's share of the nests, of the child's
(its whole CPU time), and of loading the child's results. "ideal" is the whole build on two
idle cores from those CPU times: the main thread's CPU less the LLVM half and this
process's share, plus the two shares overlapped (the longer, then the loading), plus the
LLVM half overlapped.

    taskset -c 0,1 python benchmarks/compile_split.py [rounds] [modes, default one,split,forked] [model]

(another zoo model's first part with a third argument, e.g. mobilenet_v2)
"""
import os, sys, time, statistics, threading, resource
os.environ["SCHEDLANG_KERNEL_CACHE"] = "0"
import torch
import schedlang as sl
from schedlang.torch import capture, zoo
from schedlang.torch.lower import lower_graph
from schedlang.torch.schedules import default_schedule
from schedlang.torch.gc_pause import gc_paused
from schedlang.target.llvm import backend, split
from schedlang.kernel import forked, lower as kernel_lower

target = sl.Target.create("llvm")
module, inputs = zoo.build(sys.argv[3] if len(sys.argv) > 3 else "resnet50", "full")
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
real_map, real_load = kernel_lower.map_forked, forked._Receiver.load
def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN); return r.ru_utime + r.ru_stime
def map_forked(*a):
    c, ch = time.thread_time(), children_cpu()
    r = real_map(*a)
    log.append(("fp", time.thread_time() - c)); log.append(("fc", children_cpu() - ch)); return r
def load(self):
    c = time.thread_time(); r = real_load(self); log.append(("fl", time.thread_time() - c)); return r
kernel_lower.map_forked, forked._Receiver.load = map_forked, load

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

def shares(log):
    """This process's share of the nests (with the loading of the child's), the child's, the loading."""
    return tuple(sum(t for k, t in log if k == key) for key in ("fp", "fc", "fl"))

modes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["one", "split", "forked"]
res = {m: [] for m in modes}
n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
with torch.no_grad(), gc_paused():
    for rnd in range(n):
        for mode in (modes if rnd % 2 == 0 else modes[::-1]):
            split.MIN_KERNELS = 10**9 if mode == "one" else 16
            os.environ["SCHEDLANG_BUILD_THREADS"] = "2" if mode == "forked" else "1"
            s = default_schedule(outs, target)
            log.clear()
            w, c, tt, ch = time.perf_counter(), time.process_time(), time.thread_time(), children_cpu()
            mod = sl.build(s, ins + outs, target=target, cache=False)
            w, c, tt, ch = time.perf_counter() - w, time.process_time() - c, time.thread_time() - tt, children_cpu() - ch
            info = ideal(log) if mode != "one" else {}
            fp, fc, fl = shares(log)
            if info:
                info["ideal"] = (tt - info["render"] - info["link"] - info["jit"] - fp
                                 + max(fp - fl, fc) + fl + info["overlapped"])
            res[mode].append((w, c + ch, tt, info.get("ideal", 0.0)))
            print(f"{mode:6s} wall {w:6.2f}  cpu (with children) {c + ch:5.2f}  main thread cpu {tt:5.2f}  "
                  f"share here {fp:.2f} child {fc:.2f} loading {fl:.2f}  "
                  + "  ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items()), flush=True)
for mode, v in res.items():
    print(mode, "median wall %.2f cpu %.2f main %.2f ideal 2-core %.2f" % tuple(statistics.median(x[i] for x in v) for i in range(4)))

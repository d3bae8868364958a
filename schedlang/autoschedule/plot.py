"""sl.plot_tuning: the tuning curve (best throughput against trials) of a log, as a PNG."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from . import records
from .api import existing_log
from .task import as_task


def _throughput(rec) -> Optional[float]:
    if rec["error"] or not rec.get("median_s"):
        return None
    return rec["gflops"] if rec.get("gflops") else 1.0 / rec["median_s"]


def tuning_curves(log: str, outputs=None, target=None) -> Dict[Tuple[str, str], List[Optional[float]]]:
    """(workload key, target) -> the best throughput after each trial, in log order (GFLOP/s;
    the final comparison's records are not trials and are left out;
    calls per second for a program without arithmetic; None until one succeeds). With
    outputs, only that program's workload on target."""
    log = existing_log(log, "tuning_curves")
    key = tgt = None
    if outputs is not None:
        task = as_task(outputs, target, "tuning_curves")
        key, tgt = task.workload_key, str(task.target)
    curves: Dict[Tuple[str, str], List[Optional[float]]] = {}
    for rec in records.load(log, key, tgt):
        if "final" in rec:      # a candidate timed again when its search ended: not a trial
            continue
        curve = curves.setdefault((rec["workload"], rec["target"]), [])
        best = curve[-1] if curve else None
        y = _throughput(rec)
        curve.append(y if y is not None and (best is None or y > best) else best)
    return curves


def plot_tuning(log: str, path: str = "curve.png", outputs=None, target=None):
    """Write the tuning curve of every workload in log (or of the program computing outputs)
    to path (PNG): the best throughput against trials, one line per workload and target.
    Needs matplotlib (`pip install 'schedlang[plot]'`); returns the matplotlib Figure."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError as err:
        raise ImportError("sl.plot_tuning needs matplotlib: pip install 'schedlang[plot]' "
                          f"(or pip install matplotlib) ({err})") from err
    curves = tuning_curves(log, outputs, target)
    if not curves:
        raise ValueError(f"plot_tuning: {log} holds no tuning records"
                         + (" of this workload" if outputs is not None else ""))
    fig = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(fig)          # no pyplot: no global figure state, no display needed
    ax = fig.add_subplot()
    gflops = False
    for (key, tgt), curve in curves.items():
        recs_have_flops = any(r.get("gflops") for r in records.load(log, key, tgt))
        gflops = gflops or recs_have_flops
        ax.plot(range(1, len(curve) + 1), [float("nan") if y is None else y for y in curve],
                marker="." if len(curve) <= 100 else None, label=f"{key[:12]} ({tgt.split()[0]}, {len(curve)} trials)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOP/s" if gflops else "best calls per second")
    ax.set_title(f"tuning curve of {log}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return fig

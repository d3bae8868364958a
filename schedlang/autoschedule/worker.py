"""The entry point of a measurement worker process (executor.WorkerProcess starts
`python -c "...; from schedlang.autoschedule.worker import main; main(sys.argv)" FD`,
or run it as `python -m schedlang.autoschedule.worker FD`).

LocalExecutor starts its workers this way rather than through multiprocessing's spawn,
whose child imports the parent's main module again: a search script without
`if __name__ == "__main__":` (as TVM's tutorials are written) would then run its whole
body, a search of its own included, in every worker. This entry point imports schedlang
only; the parent sends its sys.path first (so measure functions in the user's modules
import as they do in the parent), then calls (executor.worker_loop).
"""
from __future__ import annotations

import sys
from multiprocessing.connection import Connection


def main(argv) -> None:
    conn = Connection(int(argv[1]))
    sys.path[:] = conn.recv()
    from schedlang.autoschedule.executor import worker_loop
    worker_loop(conn)


if __name__ == "__main__":
    main(sys.argv)

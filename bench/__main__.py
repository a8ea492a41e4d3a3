"""Run every benchmark: `python -m bench [NAME ...]` (NAME matches bench_NAME.py)."""

import importlib
import pkgutil
import sys
import time
from pathlib import Path

from iez.heap import keep_freed_memory


def main(argv: list[str]) -> int:
    # As every iez process (iez.cli.main), so what a bench times here, and its baseline, run
    # with the heap the controller has; bench_alloc also times glibc's defaults.
    keep_freed_memory()
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    if argv:
        names = [n for n in names if n.removeprefix("bench_") in argv]
    failed = 0
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        t0 = time.perf_counter()
        try:
            importlib.import_module(f"bench.{name}").main()
        except Exception as e:  # a broken benchmark must not hide the others
            failed += 1
            print(f"{name}: FAILED: {type(e).__name__}: {e}", flush=True)
        print(f"({name} took {time.perf_counter() - t0:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

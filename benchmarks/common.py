"""Shared by the benchmarks: Spark masters each in a child process (one SparkContext per
process), results passed back as a JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

TAG = "RESULTS "


def report(results: list[dict]) -> None:
    """In a worker: hand the results to the parent."""
    print(TAG + json.dumps(results), flush=True)


def run_workers(module: str, masters: tuple[str, ...], *args: str) -> list[dict]:
    """Run ``python -m module --worker MASTER *args`` for each master; echo its progress
    lines and collect its results."""
    results: list[dict] = []
    for master in masters:
        proc = subprocess.run([sys.executable, "-m", module, "--worker", master, *args],
                              capture_output=True, text=True, env=dict(os.environ))
        for line in proc.stdout.splitlines():
            if line.startswith(TAG):
                results += json.loads(line[len(TAG):])
            else:
                print(line, flush=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(proc.returncode)
    return results


def peak_memory_mb() -> float:
    """The most resident memory this process or any finished child (the Spark workers this
    benchmark ran, with their JVMs) held, in MB."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024

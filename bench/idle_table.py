#!/usr/bin/env python3
"""The table of bench/idle.md from bench/idle-raw.jsonl (idle.sh).

One row per broker and fetch wait, in the order idle.sh runs them: the
median and the range over the row's runs of the host's CPU (all cores, over
the timed window) and of the real broker's JVM's share of it, Redis
commands per second, and the wake-ups summed over the runs.
"""
import json
import statistics
import sys


def spread(values, spec):
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    return (f"{format(statistics.median(values), spec)} "
            f"({format(min(values), spec)}–{format(max(values), spec)})")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/idle-raw.jsonl"
    rows = {}
    for line in open(path):
        if line.strip():
            run = json.loads(line)
            rows.setdefault(run["label"], []).append(run)
    print("| broker, fetch wait | runs | host CPU, % of all cores: median (range) "
          "| of it the real broker's JVM | Redis commands / s | wake-ups (all runs) "
          "| violations |")
    print("|---|---|---|---|---|---|---|")
    for label, runs in rows.items():
        wakes = {}
        for r in runs:
            for k, v in r["wakeups"].items():
                wakes[k] = wakes.get(k, 0) + v
        wake = ", ".join(f"{k} {v}" for k, v in sorted(wakes.items())) or "none"
        print(f"| {label} | {len(runs)} "
              f"| {spread([r.get('host_cpu_percent') for r in runs], '.1f')} "
              f"| {spread([r.get('broker_cpu_percent') for r in runs], '.1f')} "
              f"| {spread([r['redis_commands'] / r['config']['seconds'] for r in runs], '.0f')} "
              f"| {wake} | {sum(r['violations'] for r in runs)} |")


if __name__ == "__main__":
    main()

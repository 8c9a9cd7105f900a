#!/usr/bin/env python3
"""The table of bench/targeted.md from bench/targeted-raw.jsonl (targeted.sh).

Each row: one broker, hold and fan-out; medians over the row's runs (the
bench's --repeat) of acquisitions/s, the parked cross-process hand-off
(the next holder, in another process, had parked on the lock: with many
locks, the plain hand-off gap also counts the time a lock sat free), the
share of all published events each process received (mean over processes),
the host's CPU, and the wake-up causes summed over the runs.
"""
import json
import statistics
import sys


def median(runs, get):
    values = [v for v in (get(r) for r in runs) if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/targeted-raw.jsonl"
    rows = [json.loads(line) for line in open(path) if line.strip()]
    print("| broker | hold | fan-out | runs | acq/s | viol. | parked cross-process p50 / p99 (ms) | hand-offs | received / published | host CPU | wake-ups |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        runs = row.get("runs") or [row]
        cfg = runs[0]["config"]
        wake = {}
        for r in runs:
            for k, v in (r.get("wakeups") or {}).items():
                wake[k] = wake.get(k, 0) + v
        p50 = median(runs, lambda r: r["parked_cross_process_handoff_us"].get("p50"))
        p99 = median(runs, lambda r: r["parked_cross_process_handoff_us"].get("p99"))
        n = median(runs, lambda r: r["parked_cross_process_handoff_us"].get("count"))
        share = median(runs, lambda r: (r.get("events") or {}).get("consumed_share_mean"))
        print("| {} | {} ms | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |".format(
            row.get("broker", "?"), cfg["hold_ms"], row.get("label", cfg.get("fan_out")),
            len(runs),
            fmt(median(runs, lambda r: r.get("acquisitions_per_second")), ".0f"),
            row.get("violations", 0),
            fmt(p50 / 1000 if p50 is not None else None, ".2f"),
            fmt(p99 / 1000 if p99 is not None else None, ".2f"),
            fmt(n, ".0f"),
            fmt(share, ".1%"),
            fmt(median(runs, lambda r: r.get("host_cpu_percent")), ".0f") + "%",
            ", ".join(f"{k} {v}" for k, v in sorted(wake.items()))))


if __name__ == "__main__":
    main()

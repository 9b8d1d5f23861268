#!/usr/bin/env python3
"""Where a kernel's warps wait, per SASS instruction, from ncu's source page as CSV.

    ncu --import R.ncu-rep --page source --csv --print-source sass > src.csv
    python3 bench/ncu_source_top.py src.csv [N]

Prints the total of each sampling column, then the N instructions (default 40) with the most
warp-stall samples (all samples, not-issued samples, executions, address, SASS), then the samples
by opcode. Why: the full CSV of a GEMM kernel is megabytes, too large to come back from the device
(bench/RESULTS.md v43); this summary is a few kilobytes. Columns are found by name, so a different
ncu version's header still works; if none is found, the header is printed instead.
"""
import csv
import sys
from collections import defaultdict


def find(header, *words):
    """index of the first column whose name contains every word (case-insensitive), or -1"""
    for i, name in enumerate(header):
        low = name.lower()
        if all(w.lower() in low for w in words):
            return i
    return -1


def number(text):
    try:
        return float(text.replace(",", "")) if text.strip() else 0.0
    except ValueError:
        return 0.0


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip())
        return 2
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(sys.argv[1], newline="", errors="replace") as f:
        rows = [r for r in csv.reader(f) if r]
    # the header: the first row with an address and a source column (ncu may print lines before it)
    start = next((i for i, r in enumerate(rows) if find(r, "address") >= 0 and find(r, "source") >= 0), -1)
    if start < 0:
        print("no source-page header found; first rows:")
        for r in rows[:3]:
            print(r)
        return 1
    header, body = rows[start], rows[start + 1 :]
    c_addr, c_src = find(header, "address"), find(header, "source")
    c_all = find(header, "stall sampling", "all")
    c_not = find(header, "stall sampling", "not")
    c_exec = find(header, "instructions executed")
    if c_all < 0:
        print("no 'Warp Stall Sampling (All Samples)' column; header:", header)
        return 1
    lines = []
    for r in body:
        if len(r) <= max(c_addr, c_src, c_all):
            continue
        lines.append((number(r[c_all]), number(r[c_not]) if c_not >= 0 else 0.0,
                      number(r[c_exec]) if c_exec >= 0 else 0.0, r[c_addr], r[c_src].strip()))
    total = sum(x[0] for x in lines) or 1.0
    print(f"instructions {len(lines)}, stall samples {total:.0f} (all), "
          f"{sum(x[1] for x in lines):.0f} (not issued), executed {sum(x[2] for x in lines):.0f}")
    print(f"{'samples':>9} {'%':>6} {'not-iss':>8} {'executed':>11}  address  SASS")
    for s, n, e, a, src in sorted(lines, key=lambda x: -x[0])[:top]:
        print(f"{s:9.0f} {100 * s / total:6.2f} {n:8.0f} {e:11.0f}  {a:>7}  {src[:90]}")
    by_op = defaultdict(float)
    for s, _, _, _, src in lines:
        words = [w for w in src.split() if not w.startswith("@")]
        by_op[words[0] if words else "?"] += s
    print("by opcode:", ", ".join(f"{op} {100 * s / total:.1f}%" for op, s in
                                  sorted(by_op.items(), key=lambda x: -x[1])[:15]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The command line as tables (issue 31): every row of `iccs run` and `iccs bench` (their own
`--rows` listing) answers --help with exit 0 and a text that names each of its options; refuses a
flag it does not take and a value it does not allow with exit 2 and one line that names the
program, the flag and what is allowed; the README's command table names exactly the rows; and the
demo refuses `--runs 12abc`. Nothing is started: every check stops at the argument reader.

usage: cli_rows.py ICCS_CLI README.md
"""
import re
import subprocess
import sys

CLI, README = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def run(args):
    p = subprocess.run([CLI] + args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def rows(cmd):
    rc, out, err = run([cmd, "--rows"])
    check(rc == 0, f"{cmd} --rows exits 0 ({rc}: {err.strip()})")
    table = []
    for line in out.splitlines():
        parts = line.split("\t")
        opts = [tuple(o.split("=", 1)) for o in parts[2:]]
        table.append((parts[0], parts[1], opts))
    return table


def one_line(err):
    return len([l for l in err.splitlines() if l.strip()]) == 1


def check_rows(cmd, table):
    groups_checked = set()  # an option of a group (+NAME) is the same code for every row: refused once
    for name, level, opts in table:
        typed = "./no-such-program" if name == "PATH" else name  # PATH: any name with a '/'
        who = f"{cmd} {name}"
        rc, out, err = run([cmd, typed, "--help"])
        check(rc == 0, f"{who} --help exits 0 (got {rc}: {err.strip()})")
        for opt, _ in opts:
            opt = opt.lstrip("+")
            check(re.search(re.escape(opt) + r"\b", out) is not None, f"{who} --help mentions {opt}")
        rc, out, err = run([cmd, typed, "--no-such-flag"])
        check(rc == 2 and one_line(err) and name in err and "--no-such-flag" in err and "takes:" in err,
              f"{who} --no-such-flag: exit 2, one line naming it and what it takes (got {rc}: {err.strip()!r})")
        refused = [(o, bad) for o, bad in opts if bad and not (o.startswith("+") and o in groups_checked)]
        check(any(bad and not o.startswith("+") for o, bad in opts), f"{who} has an option of its own with a value it refuses")
        groups_checked.update(o for o, _ in refused if o.startswith("+"))
        refused = [(o.lstrip("+"), bad) for o, bad in refused]
        # Every option with a known refused value: exit 2, one line, the flag and what is allowed.
        for opt, bad in refused:
            rc, out, err = run([cmd, typed, opt, bad])
            check(rc == 2 and one_line(err) and name in err and opt in err and "allowed" in err,
                  f"{who} {opt} {bad}: exit 2, one line naming the flag and what is allowed "
                  f"(got {rc}: {err.strip()!r})")


run_rows = rows("run")
bench_rows = rows("bench")
check(len(run_rows) > 20 and len(bench_rows) >= 6, f"rows listed: {len(run_rows)} run, {len(bench_rows)} bench")
check_rows("run", run_rows)
check_rows("bench", bench_rows)

# The README's command table: every `./iccs run A\|B ...` and `./iccs bench A ...` line names rows,
# and every row is named by one.
documented = {"run": set(), "bench": set()}
for line in open(README, encoding="utf-8"):
    if not line.startswith("| `./iccs "):
        continue
    m = re.match(r"\| `\./iccs (run|bench) ([^ `]+)", line)
    if not m or m.group(2) == "...":
        continue
    for name in m.group(2).split("\\|"):
        documented[m.group(1)].add(name)
for cmd, table in (("run", run_rows), ("bench", bench_rows)):
    names = {n for n, _, _ in table}
    check(documented[cmd] - names == set(), f"README documents only rows of {cmd}: extra {sorted(documented[cmd] - names)}")
    check(names - documented[cmd] == set(), f"README documents every row of {cmd}: missing {sorted(names - documented[cmd])}")

# The demo's numbers are read whole.
rc, out, err = run(["demo", "--runs", "12abc"])
check(rc == 2 and one_line(err) and "--runs" in err and "allowed" in err,
      f"demo --runs 12abc: exit 2, one line (got {rc}: {err.strip()!r})")
rc, out, err = run(["demo", "--help"])
check(rc == 0 and "--runs" in out and "--app" in out, "demo --help names --runs and --app")

if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print(f"PASS: {len(run_rows)} run rows and {len(bench_rows)} bench rows: help, unknown flags and refused values; "
      "README table = rows; demo --runs 12abc refused")

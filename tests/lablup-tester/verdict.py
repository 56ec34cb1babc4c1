"""One spec's verdict from its `backend.ai test run-test` output: prints
`RESULT<TAB>first cause` (PASS, FAIL, TIMEOUT or NORESULT).

Usage: verdict.py LOG WORKDIR RC
"""

import json
import re
import sys
from pathlib import Path

LINE = re.compile(r"(✓|❌) '(.*)' (?:completed in|failed after) ([\d.]+) seconds")
DUMP = re.compile(r"Exception details written to (\S+)")


def cause_of(dump: Path) -> str:
    d = json.loads(dump.read_text())
    tb = d["traceback"].rstrip().splitlines()
    # The raising line of the suite's own code (the assertion or the client call).
    where = ""
    for i, line in enumerate(tb):
        m = re.match(r'\s*File ".*/ai/backend/(test/.*)", line (\d+), in (\S+)', line)
        if m:
            where = f"{m.group(1)}:{m.group(2)} ({m.group(3)})"
    # Python prints a chain oldest first: the first exception line is the root cause, the
    # last one what ended the spec (often a clean-up call failing after it).
    excs = [l for l in tb if re.match(r"^[\w.]+(Error|Exception|Success|Group)\b", l)]
    last = excs[0] if excs else (tb[-1] if tb else d["exception_name"])
    if excs and excs[-1] != excs[0]:
        last += " ; then: " + excs[-1]
    sub = f" [{d['sub_name']}]" if d.get("sub_name") else ""
    return f"stage {d['stage']}{sub}: {last} @ {where}"


def main() -> None:
    log, work, rc = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    text = re.sub(r"\x1b\[\d+m", "", log.read_text(errors="replace"))
    tops = []
    for m in LINE.finditer(text):
        name = m.group(2)
        if " - " not in name:
            tops.append(m.group(1) == "✓")
    dumps = DUMP.findall(text)
    cause = ""
    if dumps:
        try:
            cause = cause_of(work / dumps[0])
        except Exception as e:  # a missing or unreadable dump
            cause = f"(no dump: {e})"
    if rc in (124, 137):
        result = "TIMEOUT"
        if not cause:
            started = [l for l in text.splitlines() if "'" in l]
            cause = "timed out; last line: " + (started[-1].strip() if started else "")
    elif tops and all(tops):
        result = "PASS"
    elif tops:
        result = "FAIL"
    else:
        result = "NORESULT"
        tail = [l for l in text.splitlines() if l.strip()]
        cause = cause or ("rc %d; " % rc) + (tail[-1] if tail else "")
    if len(tops) > 1:
        cause = f"{sum(tops)}/{len(tops)} sub-tests passed; {cause}"
    cause = cause.replace("\n", " ").replace("\t", " ")
    print(f"{result}\t{cause}")


if __name__ == "__main__":
    main()

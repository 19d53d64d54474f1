#!/usr/bin/env python3
"""Summarizes a `bazel test --build_event_json_file=F` run as one closing line:

    N passed, N failed[, N skipped]

Counts individual test cases from each test target's test.xml (found through
the Build Event Protocol file, so stale XML from older runs never counts).
A target that did not build, timed out or crashed without a failing case in
its XML counts as one failed case. Also prints the totals of the lines of
the form `conformance <suite>: P passed, F failed, S skipped` that tests
printed (added up over the shards of a sharded suite).
Exit status 0 when nothing failed, else 1.
"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from urllib.parse import unquote, urlparse


def count_cases(path):
    passed = failed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            failed += 1
        elif ("skipped" in tags or case.get("status") == "notrun"
              or case.get("result") in ("skipped", "suppressed")):
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def file_of(uri):
    return unquote(urlparse(uri).path)


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    targets, results, summaries = set(), {}, {}
    with open(argv[1], encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            ev = json.loads(line)
            eid = ev.get("id", {})
            if "targetConfigured" in eid:
                conf = ev.get("configured", {})
                if conf.get("targetKind", "").endswith("_test rule") or "testSize" in conf:
                    targets.add(eid["targetConfigured"]["label"])
            elif "testResult" in eid:
                tid = eid["testResult"]
                key = (tid["label"], tid.get("run", 1), tid.get("shard", 1))
                attempt = tid.get("attempt", 1)
                tr = ev.get("testResult", {})
                outs = {o.get("name"): file_of(o["uri"])
                        for o in tr.get("testActionOutput", []) if "uri" in o}
                if key not in results or attempt >= results[key][0]:
                    results[key] = (attempt, tr.get("status", "NO_STATUS"), outs)
            elif "testSummary" in eid:
                summaries[eid["testSummary"]["label"]] = ev.get(
                    "testSummary", {}).get("overallStatus", "NO_STATUS")

    passed = failed = skipped = 0
    suite_lines = []
    for label in sorted(targets | {k[0] for k in results}):
        runs = [v for k, v in sorted(results.items()) if k[0] == label]
        if not runs:
            print(f"{label}: did not run ({summaries.get(label, 'NO_STATUS')})")
            failed += 1
            continue
        for _, status, outs in runs:
            p = f_ = s = 0
            xml = outs.get("test.xml")
            try:
                if xml:
                    p, f_, s = count_cases(xml)
            except (OSError, ET.ParseError) as e:
                print(f"{label}: unreadable test.xml ({e})")
            log = outs.get("test.log")
            if log and os.path.exists(log):
                with open(log, encoding="utf-8", errors="replace") as lf:
                    suite_lines += [l.rstrip() for l in lf
                                    if re.match(r"^conformance [\w-]+( \(\w+\))?: ", l)]
            if status not in ("PASSED", "FLAKY") and f_ == 0:
                f_ = 1
            if status in ("PASSED", "FLAKY") and p + f_ + s == 0:
                p = 1
            if f_:
                print(f"{label}: {status} ({f_} failed case(s))")
            passed, failed, skipped = passed + p, failed + f_, skipped + s
    # A sharded suite prints one line per shard: add them up per suite.
    totals = {}
    for l in suite_lines:
        m = re.match(r"^(conformance [\w-]+(?: \(\w+\))?): (\d+) passed, (\d+) failed, (\d+) skipped", l)
        if not m:
            continue
        t = totals.setdefault(m.group(1), [0, 0, 0])
        for i in range(3):
            t[i] += int(m.group(i + 2))
    for name, (p_, f_, s_) in totals.items():
        print(f"{name}: {p_} passed, {f_} failed, {s_} skipped")
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""python tests/gpu_machine/judge_catalogue.py OUT.jsonl ASSIGNMENT [EXERCISE ...]: judge the reference
(REFERENCE_TIMES times, default 1) and every catalogued answer of ASSIGNMENT (its EXERCISEs only, if
named) as tests/test_checks_catalogue.py does (the judge here, the answer in a student's process of its
own), one JSON line per answer with what the catalogue expects: SEEN_ON_A_GPU answers must fail where
CUDA is usable. autograder/samples/judging.py imports nothing of nbgrader's (a GPU machine may have no Jupyter)."""
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.getcwd())
from autograder import samples  # noqa: E402
from autograder.samples.judging import Judge  # noqa: E402

out_path, assignment, *only = sys.argv[1:]
judge = Judge()

elsewhere = ({(a, e, label) for cases in samples.SERIALISED.values() for a, e, label in cases}
             | set(samples.DECIDED_ALONE))
catalogue = samples.catalogue(assignment)
person = getattr(catalogue, "TO_A_PERSON", {})
cases = []
exercises = only or sorted({*catalogue.WRONG, *catalogue.ALTERNATIVE})
for exercise in exercises:
    for _ in range(int(os.environ.get("REFERENCE_TIMES", "1"))):
        cases.append((exercise, "ref", None, "pass"))
    for label, code in catalogue.ALTERNATIVE.get(exercise, {}).items():
        cases.append((exercise, label, code, "pass"))
    for label, code in catalogue.WRONG.get(exercise, {}).items():
        if (assignment, exercise, label) not in elsewhere:
            cases.append((exercise, label, code, "person" if label in person.get(exercise, ()) else "fail"))
    for label, code in getattr(catalogue, "SEEN_ON_A_GPU", {}).get(exercise, {}).items():
        cases.append((exercise, label, code, "fail" if torch.cuda.is_available() else "pass"))

with open(out_path, "a") as out:
    for exercise, label, code, expect in cases:
        start = time.time()
        try:
            outcomes = judge(assignment, exercise, code, until_failure=(expect != "pass"))
            states = [("PASS" if o.passed else "UNDECIDED" if o.undecided else "FAIL", o.description,
                       (o.message or "")[:400]) for o in outcomes]
        except Exception:
            states = [("ERROR", "driver", traceback.format_exc()[-800:])]
        kinds = {s for s, _, _ in states}
        if expect == "pass":
            verdict = "ok" if kinds <= {"PASS"} else ("undecided" if kinds <= {"PASS", "UNDECIDED"} else "BAD")
        elif expect == "person":
            verdict = "ok" if kinds - {"PASS"} else "BAD"
        else:
            verdict = "ok" if "FAIL" in kinds else ("undecided" if "UNDECIDED" in kinds else "BAD")
        record = dict(assignment=assignment, exercise=exercise, label=label, expect=expect, verdict=verdict,
                      seconds=round(time.time() - start, 2),
                      outcomes=[s for s in states if s[0] != "PASS"] or len(states))
        out.write(json.dumps(record) + "\n")
        out.flush()
        print(f"{verdict:9} {assignment} {exercise}: {label} ({record['seconds']} s)", flush=True)
judge.stop()
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("nbgrader", "jupyter_client", "IPython", "sqlalchemy"))
if leaked:
    print("imported beyond what a GPU machine without Jupyter has:", leaked)

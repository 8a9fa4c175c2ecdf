"""Which check fails each catalogued wrong answer soonest: tests/catalogue_hints.json.

tests/test_checks_catalogue.py shows a wrong answer failing by running only that check, and every
check until one fails where it no longer does (a changed check, a new answer). The checks a wrong
answer passes before the one that fails it cost about a quarter of the catalogue's judging of wrong
answers: 414 answers took 224 s judged one after another on an idle machine, their failing checks
alone 170 s. Run it again after changing checks or adding wrong answers (about 8 minutes on 2
cores, nothing else running):

    python tests/catalogue_hints.py [assignment ...]
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HINTS = Path(__file__).with_name("catalogue_hints.json")


def load():
    """{assignment: {exercise: {label: check name}}}, empty where the file is missing."""
    try:
        return json.loads(HINTS.read_text())
    except FileNotFoundError:
        return {}


def main(assignments):
    from conftest import Judge
    from test_checks_catalogue import _GRADED_ELSEWHERE

    from autograder import course, samples
    hints = load()
    for assignment in assignments or course.assignments():
        found, judge = {}, Judge()
        try:
            for exercise, answers in samples.catalogue(assignment).WRONG.items():
                for label, code in answers.items():
                    if (assignment, exercise, label) in _GRADED_ELSEWHERE:
                        continue
                    failed = [o for o in judge(assignment, exercise, code) if not o.passed and not o.undecided]
                    if failed:
                        found.setdefault(exercise, {})[label] = min(failed, key=lambda o: o.seconds).check
                    else:
                        print(f"{assignment} {exercise}: '{label}' failed no check this time", file=sys.stderr)
        finally:
            judge.stop()
        hints[assignment] = found
        HINTS.write_text(json.dumps(hints, indent=1, sort_keys=True) + "\n")
        print(assignment, sum(len(v) for v in found.values()), "hints")


if __name__ == "__main__":
    main(sys.argv[1:])

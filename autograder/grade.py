"""`grade`: autograde every submission in submitted/, in parallel, into the gradebook.

Each submission is graded by nbgrader's own `autograde` with the preprocessors
set in nbgrader_config.py (autograder/pipeline/preprocessors.py). A hidden check that
cannot decide (a timing check on a machine too busy to show a speedup) never
passes: its submission is graded again alone after the parallel batch, and if
it still cannot decide, the cell scores zero and the submission is listed in
reports/manual_review.csv for a person to look at.
"""
import contextlib
import csv
import json
import os
import shutil
from pathlib import Path

from . import course
from .gradebook import hand_overrides, roster, scores
from .pipeline import jobs, warm
from .pipeline.mend import MENDED
from .pipeline.verify import UNDECIDED


def undecided_cells(pairs, work=None):
    """{(assignment, student): [test cells whose checks could not decide]}."""
    found = {}
    base = (work or course.Course()).autograded
    for assignment, student in pairs:
        path = base / student / assignment / f"{assignment}.ipynb"
        try:
            cells = json.loads(path.read_text())["cells"]
        except (OSError, ValueError, KeyError):
            continue
        # Test cells only, where the judge appends the mark (pipeline/preprocessors.py renames
        # one that the notebook's own code raised).
        names = [c["metadata"]["nbgrader"]["grade_id"] for c in cells
                 if c.get("metadata", {}).get("nbgrader", {}).get("grade")
                 and not c["metadata"]["nbgrader"].get("solution")
                 and any(o.get("ename") == UNDECIDED for o in c.get("outputs", []))]
        if names:
            found[(assignment, student)] = names
    return found


def mended_submissions(pairs, work=None):
    """{(assignment, student): [what grading mended first]} (pipeline/mend.py: copied, split, pasted-in
    or stripped graded cells), read from the graded notebooks."""
    found = {}
    base = (work or course.Course()).autograded
    for assignment, student in pairs:
        try:
            said = json.loads((base / student / assignment / f"{assignment}.ipynb").read_text())["metadata"].get(MENDED)
        except (OSError, ValueError, KeyError, AttributeError):
            continue
        if said:
            found[(assignment, student)] = said
    return found


def autograde(pairs, n_jobs=None, work=None, scheduler=None, regraded=None):
    """Grade (assignment, student) pairs in parallel (here, or on a Dask cluster's workers),
    then the undecided ones again, alone, on this machine.

    Returns (JobResults, {pair: undecided cells}) after the second pass; `regraded`, a list if
    given, receives the pairs the second pass graded again. Both passes on this machine fork
    from one pair of zygotes (pipeline/warm.py).
    """
    on_cluster = scheduler or os.environ.get("COURSE_SCHEDULER")
    with contextlib.nullcontext() if on_cluster else warm.kept():
        results = {(r.assignment, r.student): r
                   for r in jobs.run_all("autograde", pairs, n_jobs=n_jobs, desc="autograde", work=work,
                                         scheduler=scheduler)}
        unsure = undecided_cells(pairs, work)
        if unsure:
            print(f"grade: {len(unsure)} submission(s) had a check that could not decide; "
                  "grading them again, one at a time")
            if regraded is not None:
                regraded.extend(unsure)
            for r in jobs.run_all("autograde", list(unsure), desc="regrade alone", work=work, alone=True):
                results[(r.assignment, r.student)] = r
            unsure = undecided_cells(list(unsure), work)
    graded = [pair for pair, r in results.items() if r.ok]
    _write_review_list(unsure, pairs, work, hand_overrides(graded, work))
    _drop_stale_feedback([r for r in results.values() if not r.ok], work)
    return sorted(results.values(), key=lambda r: (r.assignment, r.student)), unsure


def _drop_stale_feedback(failed, work):
    """Remove the feedback of submissions whose grading failed now: it is an earlier submission's
    (a resubmission that fails keeps its old scores in the gradebook, which `report` marks as not
    graded), and `feedback` writes none for them."""
    feedback = (work or course.Course()).feedback
    for result in failed:
        shutil.rmtree(feedback / result.student / result.assignment, ignore_errors=True)


REVIEW_FIELDS = ["student", "assignment", "cell", "why"]


def _write_review_list(unsure, graded, work, overrides=()):
    """reports/manual_review.csv: the cells a person must look at, for every submission graded
    so far. The rows of the submissions graded now (`graded` pairs) are replaced by `unsure` and
    `overrides` (gradebook.hand_overrides: a score entered by hand earlier that still counts over
    this autograde, as on a resubmission); those of others stay (grading another assignment, or
    one student again, erased them)."""
    reports = (work or course.Course()).reports
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / "manual_review.csv"
    graded = set(graded)
    kept = []
    if path.is_file():
        with open(path, newline="") as old:
            kept = [row for row in csv.DictReader(old)
                    if (row.get("assignment"), row.get("student")) not in graded]
    rows = kept + [{"student": student, "assignment": assignment, "cell": cell,
                    "why": "a hidden check could not decide, twice: grade it again on a quiet machine "
                           f"(python -m autograder grade {assignment} --students {student}), or enter the "
                           "cell's score in formgrader"}
                   for (assignment, student), cells in unsure.items() for cell in cells]
    rows += [{"student": o["student"], "assignment": o["assignment"], "cell": o["cell"],
              "why": f"a score entered by hand ({o['manual_score']:g}) counts, not this autograde's "
                     f"({o['auto_score']:g}): keep or change it in formgrader"} for o in overrides]
    rows.sort(key=lambda r: (r["assignment"], r["student"], r["cell"]))
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="") as out:  # whole or not at all: replaced in one step
        writer = csv.DictWriter(out, fieldnames=REVIEW_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(partial, path)


def grade(assignments=None, students=None, n_jobs=None, scheduler=None, left_out=None):
    """Grade the submissions asked for; (JobResults, {pair: undecided cells}, {pair: notebooks
    found} of the submissions whose notebook is misnamed). `left_out`, a list if given, receives
    the other submissions this run leaves out, each said why up front: an assignment folder
    whose name is none of the course's, a notebook too large to read safely, an assignment that
    has no hidden checks yet."""
    submitted = course.Course().submitted
    left_out = [] if left_out is None else left_out
    unworkable = []
    pairs = jobs.submitted_pairs(assignments, students, unworkable=unworkable)
    for folder in unworkable:
        print(f"grade: not graded: {jobs.shown(folder)} (whitespace in its name: a student id or assignment name "
              f"must be one word; rename it, e.g. mv {jobs.shown(folder)} "
              f"{jobs.shown(folder.with_name('_'.join(folder.name.split())))}, then grade it again)")
        student_folder = folder.parent == submitted
        left_out.append(("*" if student_folder else folder.name, folder.name if student_folder else folder.parent.name))
    for path, hint, missing in jobs.stray_notebooks(assignments, students, submitted):
        print(f"grade: not graded: {jobs.shown(path)} ({hint})")
        if missing:  # a submission that is not graded: the exit status says so
            left_out.append((path.stem, path.parent.name))
    if not pairs:
        why = jobs.empty_selection(assignments, students, submitted)
        if why.startswith("nothing in"):
            why += " (run `python -m autograder samples` or collect submissions first)"
        raise SystemExit(f"grade: {why}; nothing graded")
    missing = jobs.lacking(pairs, assignments, students)
    if missing:
        print(f"grade: {jobs.lacking_text(missing, submitted)}: not graded")
    known_to_gradebook = set(roster()["assignments"])
    foreign = _not_the_courses(pairs, known_to_gradebook)
    for assignment, names in sorted(foreign.items()):
        print(f"grade: not graded: {_folders(submitted, assignment, names)} ({assignment} is not an assignment "
              "of this course)")
        print(f"       {_rename_hint(assignment, names, submitted)}")
        left_out.extend((assignment, student) for student in names)
    pairs = [pair for pair in pairs if pair[0] not in foreign]
    wrong_names = jobs.misnamed(pairs)
    for (assignment, student), names in sorted(wrong_names.items()):
        found = f"found {', '.join(map(repr, names))}" if names else "found no notebook"
        print(f"  {student:<20} {assignment:<28} not graded: no {assignment}.ipynb in "
              f"submitted/{student}/{assignment}/ ({found}); rename it as the release named it, then grade again")
    pairs = [pair for pair in pairs if pair not in wrong_names]
    for (assignment, student), size in sorted(jobs.oversized(pairs).items()):
        path = submitted / student / assignment / f"{assignment}.ipynb"
        print(f"  {student:<20} {assignment:<28} not graded: its notebook {jobs.too_large(size, path)}")
        left_out.append((assignment, student))
    pairs = [pair for pair in pairs if pair not in left_out]
    # A draft from `author new` has no autograder/checks/<a>.py yet: every submission would fail,
    # each with a LookupError deep in its log.
    for assignment, why in sorted(without_checks({a for a, _ in pairs}).items()):
        those = [pair for pair in pairs if pair[0] == assignment]
        print(f"grade: {assignment} cannot be graded yet: {why}; its {len(those)} submission(s) are left out "
              "until then")
        left_out.extend(those)
    pairs = [pair for pair in pairs if pair not in left_out]
    if not pairs:
        raise SystemExit("grade: no submission to grade (see above)")
    # nbgrader grades only an assignment its gradebook knows, which `release` records; without it
    # every submission failed with a log line about the database.
    unknown = sorted({assignment for assignment, _ in pairs} - known_to_gradebook)
    if unknown:
        raise SystemExit(f"grade: {', '.join(unknown)} not in the gradebook yet: run `python -m autograder "
                         f"release {' '.join(unknown)}` first (it records each assignment and its graded cells)")
    results, unsure = autograde(pairs, n_jobs=n_jobs, scheduler=scheduler)
    return results, unsure, wrong_names


def _not_the_courses(pairs, known_to_gradebook=()):
    """{assignment folder name: [students]} of the folders in `pairs` named after no assignment of
    the course (source/) nor of its gradebook: a typo, as 01_process_threads."""
    known = set(course.assignments()) | set(known_to_gradebook)
    found = {}
    for assignment, student in pairs:
        if assignment not in known:
            found.setdefault(assignment, []).append(student)
    return found


def _folders(submitted, assignment, students):
    if len(students) == 1:
        return f"{submitted / students[0] / assignment}/"
    return f"{assignment}/ of {', '.join(students)} in {submitted}/"


def _rename_hint(assignment, students, submitted=None):
    """What to rename, and the command to run then: the folder to the closest assignment (else
    to the one its notebook is named after), and a notebook inside named as the folder was."""
    import difflib
    folders = [submitted / student / assignment for student in students] if submitted is not None else []
    close = difflib.get_close_matches(assignment, course.assignments(), n=1)
    if not close:  # assignment1/ holding 01_processes_threads.ipynb
        named = sorted({p.stem for f in folders for p in f.glob("*.ipynb")} & set(course.assignments()))
        close = named[:1] if len(named) == 1 else []
    them = "it" if len(students) == 1 else "each"
    if close:
        inside = any((f / f"{assignment}.ipynb").is_file() for f in folders)
        notebook = f" and the notebook {assignment}.ipynb in it to {close[0]}.ipynb" if inside else ""
        return (f"rename {them} to {close[0]}{notebook}, then run: python -m autograder grade {close[0]} "
                f"--students {' '.join(students)}")
    return (f"rename {them} to the assignment it holds (one of {', '.join(course.assignments())}), then grade "
            f"{' '.join(students)} again")


def without_checks(assignments):
    """{assignment: why it cannot be graded} of those of the course's `assignments` whose exercises
    have no hidden checks: autograder/checks/<a>.py missing (a draft from `author new`), or an
    exercise that no checks file has checks for."""
    from . import hidden, notebooks
    found = {}
    for assignment in sorted(set(assignments) & set(course.assignments())):
        path = hidden.CHECKS_DIR / f"{assignment}.py"
        shown = path.relative_to(course.ROOT) if path.is_relative_to(course.ROOT) else path
        if not path.is_file():
            found[assignment] = f"it has no hidden checks file yet ({shown} is missing)"
            continue
        exercises = notebooks.answer_cells(notebooks.read(course.source_notebook(assignment)))
        unchecked = [e for e in exercises if e not in hidden.exercise_index()]
        if unchecked:
            found[assignment] = f"no hidden checks for {', '.join(unchecked)} (add them to {shown})"
    return found


def main(args):
    # args.students: None when --students was not given (every student); never [] from the
    # command line (cli.py refuses an empty --students).
    left_out = []
    try:
        results, unsure, wrong_names = grade(args.assignments or None, args.students, args.jobs,
                                             getattr(args, "scheduler", None), left_out=left_out)
    except (jobs.SubmissionsError, jobs.ClusterUnreachable) as err:
        raise SystemExit(f"grade: {err}") from None
    failed = [r for r in results if not r.ok]
    # The scores of this run's submissions only: the gradebook holds every one ever graded.
    graded = {(r.student, r.assignment): r for r in results}
    table = {(row["student"], row["assignment"]): row
             for row in scores(sorted({r.assignment for r in results}))
             if (row["student"], row["assignment"]) in graded}
    for (student, assignment), result in sorted(graded.items()):
        row = table.get((student, assignment))
        if not result.ok or row is None:
            why = jobs.failure_reason(result.log) if not result.ok else None
            print(f"  {student:<20} {assignment:<28} not graded: {why + '; ' if why else ''}see {result.log}")
            continue
        late = f"  (late: {row['raw_score']:g} less a penalty of {row['late_penalty']:g})" if row["late_penalty"] else ""
        print(f"  {student:<20} {assignment:<28} {row['score']:6.1f} / {row['max_score']:g}{late}")
    print(f"grade: {len(results) - len(failed)} of {len(results)} submissions graded in this run"
          + (f"; failed: {', '.join(f'{r.student}/{r.assignment}' for r in failed)}" if failed else ""))
    if wrong_names:
        print(f"grade: {len(wrong_names)} submission(s) left out, their notebook not named as the release "
              f"named it: {', '.join(f'{s}/{a}' for a, s in sorted(wrong_names))}")
    if left_out:
        print(f"grade: {len(left_out)} more submission(s) left out (see above): "
              f"{', '.join(f'{s}/{a}' for a, s in sorted(left_out))}")
    if unsure:
        print(f"grade: {len(unsure)} submission(s) need a person (a check could not decide, twice; grade them "
              f"again when the machine is quiet, or enter the cells' scores in formgrader): "
              f"{course.Course().reports / 'manual_review.csv'}")
    mended = mended_submissions([(r.assignment, r.student) for r in results if r.ok])
    if mended:
        print(f"grade: {len(mended)} submission(s) had graded cells copied, split, pasted in or altered, and were "
              f"mended before grading (each one's feedback page and log say how): "
              f"{', '.join(f'{s}/{a}' for a, s in sorted(mended))}")
    kept = hand_overrides([(r.assignment, r.student) for r in results if r.ok])
    if kept:
        print(f"grade: {len(kept)} cell(s) keep a score entered by hand over this autograde "
              f"(an earlier manual grade): {course.Course().reports / 'manual_review.csv'}")
    return 1 if failed or wrong_names or left_out else 0

"""`report`: grade tables for the LMS and plots of how the class did."""
import csv
from collections import defaultdict

from . import course, gradebook
from .gradebook import after_penalty, cell_scores, late_penalties


def _write_csv(path, rows, fields):
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def exercise_table(rows):
    """{(student, assignment, exercise): [score, max]} summed over an exercise's test cells."""
    table = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        entry = table[(row["student"], row["assignment"], row["exercise"])]
        entry[0] += row["score"]
        entry[1] += row["max_score"]
    return table


def what_happened(student, assignment, work, by_hand=()):
    """{exercise: what happened in its test cells} of a graded submission, as its feedback's results
    table says it (passed, not answered, which check failed): read from the autograded notebook;
    `by_hand`: the test cells a person has scored since."""
    import json

    import nbformat
    from nbformat.v4.rwbase import rejoin_lines

    from .gradebook import _exercise_of
    from .pipeline.feedback_page import rows

    path = work.autograded / student / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        return {}
    said = defaultdict(list)
    exercises = course.contract().get(assignment, [])
    # Read without nbformat's schema validation: 2 ms a notebook instead of 19 (a class of 300 has 3,600).
    try:
        found = rows(rejoin_lines(nbformat.from_dict(json.loads(path.read_text()))), by_hand)
    except (OSError, ValueError, AttributeError, KeyError, TypeError):  # not a notebook we can read: say nothing
        return {}
    for grade_id, _, _, status in found:
        # Without the page's symbols (✓ ✗ ⏳): a spreadsheet that guesses the file's encoding garbles them.
        said[_exercise_of(grade_id, exercises)].append(status.removeprefix("✓ ").removeprefix("✗ ").removeprefix("⏳ "))
    return {exercise: "; ".join(statuses) for exercise, statuses in said.items()}


def course_order(assignment, exercise):
    """Sort key: assignments in order, and an assignment's exercises as its notebook asks for them
    (the contract's order), not alphabetically (an instructor reads the table beside the notebook)."""
    order = course.contract().get(assignment, [])
    return assignment, order.index(exercise) if exercise in order else len(order), exercise


def plot_points(table, path, waiting=()):
    """Heat map: points per exercise (columns) and student (rows), as a fraction of the maximum;
    `waiting`: the (student, assignment, exercise) whose score waits for a person, hatched (red
    alone would read as failed)."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch, Rectangle

    students = sorted({k[0] for k in table})
    exercises = sorted({(k[1], k[2]) for k in table}, key=lambda k: course_order(*k))
    grid = np.full((len(students), len(exercises)), np.nan)
    for (student, assignment, exercise), (score, top) in table.items():
        grid[students.index(student), exercises.index((assignment, exercise))] = score / top if top else np.nan
    width = max(6, 0.35 * len(exercises) + 2)
    # room for the title and the rotated exercise names, whatever the number of students (one
    # student's map was 1.45 inches high: its title cut off, its labels a few pixels)
    fig, ax = plt.subplots(figsize=(width, 2.4 + 0.45 * len(students)))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(exercises)), [f"{a[:2]}·{e}" for a, e in exercises], rotation=75, fontsize=7)
    ax.set_yticks(range(len(students)), students, fontsize=8)
    ax.set_title("Points per exercise (fraction of the maximum)")
    for student, assignment, exercise in waiting:
        if student in students and (assignment, exercise) in exercises:
            ax.add_patch(Rectangle((exercises.index((assignment, exercise)) - 0.5, students.index(student) - 0.5),
                                   1, 1, fill=False, hatch="///", edgecolor="black", linewidth=0))
    legend = [Patch(facecolor="white", edgecolor="grey", label="not handed in")]
    if waiting:
        legend.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="waits for a person"))
    fig.legend(handles=legend, loc="lower left", ncol=2, fontsize=7, frameon=False)  # under the names
    fig.colorbar(image, ax=ax, fraction=0.02, pad=0.01)
    fig.tight_layout(rect=(0, 0.25 / fig.get_figheight(), 1, 1))  # a quarter inch for the legend
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_summary(table, totals, path):
    """Pass rate per exercise and the histogram of total scores (percent)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    by_exercise = defaultdict(list)
    for (student, assignment, exercise), (score, top) in table.items():
        by_exercise[(assignment, exercise)].append(score >= top > 0)
    keys = sorted(by_exercise, key=lambda k: course_order(*k))
    rates = [100 * sum(v) / len(v) for v in (by_exercise[k] for k in keys)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(8, 0.3 * len(keys) + 4), 4),
                                      gridspec_kw={"width_ratios": [3, 1]})
    left.bar(range(len(keys)), rates, color="tab:blue")
    left.set_xticks(range(len(keys)), [f"{a[:2]}·{e}" for a, e in keys], rotation=75, fontsize=7)
    left.set_ylabel("students with full marks (%)")
    left.set_ylim(0, 100)
    left.set_title("Pass rate per exercise")
    percents = [100 * t["score"] / t["max_score"] for t in totals if t["max_score"]]
    right.hist(percents, bins=range(0, 101, 10), color="tab:green", edgecolor="white")
    right.set_xlabel("score (%)")
    right.yaxis.set_major_locator(MaxNLocator(integer=True))  # students are counted in whole numbers
    right.set_ylabel("submissions")
    right.set_title("Scores")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def out_dir_for(assignments, work=None):
    """Where `report` writes: reports/, or for a filter that leaves some of the gradebook's
    assignments out, reports/<a1>+<a2>+.../ (sorted), so that a partial table never replaces
    the class-wide one."""
    work = work or course.Course()
    wanted = set(assignments or ())
    if not wanted or set(gradebook.roster(work)["assignments"]) <= wanted:
        return work.reports
    return work.reports / "+".join(sorted(wanted))


def not_graded(assignments=None, work=None, with_samples=False):
    """[(student, assignment)] of the submissions (within the filter, and of the students the
    tables are of) that are not graded: grading failed (NOT_GRADED) or their folders are gone (GONE)."""
    work = work or course.Course()
    names = gradebook.roster(work)
    left_out = set(left_out_samples(names["students"], with_samples))
    return [(s, a) for s, a in names["submissions"]
            if s not in left_out and (not assignments or a in assignments)
            and gradebook.status(s, a, work) != gradebook.GRADED]


def left_out_samples(students, with_samples=False):
    """The sample students (samples.STUDENTS: the course's own test submissions, which `bin/main`
    grades into the class's gradebook) that the class tables leave out: all of them once the
    gradebook holds anyone else, so that grades_lms.csv never brings them into an LMS; none
    when they are all there is (the main job on a fresh clone), or when asked for."""
    from .samples import STUDENTS

    samples = [s for s in students if s in STUDENTS]
    return [] if with_samples or len(samples) == len(students) else samples


def review_rows(work):
    """(the rows of reports/manual_review.csv for cells no check could decide, those for scores
    entered by hand over the autograde): the two kinds grade._write_review_list writes."""
    review = work.reports / "manual_review.csv"
    if not review.is_file():
        return [], []
    with review.open(newline="") as f:
        rows = list(csv.DictReader(f))
    by_hand = [r for r in rows if (r.get("why") or "").startswith("a score entered by hand")]
    return [r for r in rows if r not in by_hand], by_hand


def waiting_for_a_person(work):
    """{(student, assignment): [test cells]} that no check could decide and no person has scored yet."""
    undecided, _ = review_rows(work)
    scored = gradebook.scored_by_hand({(r["assignment"], r["student"]) for r in undecided}, work)
    waiting = defaultdict(list)
    for r in undecided:
        if r["cell"] not in scored.get((r["assignment"], r["student"]), {}):
            waiting[(r["student"], r["assignment"])].append(r["cell"])
    return dict(waiting)


def write(assignments=None, out_dir=None, work=None, with_samples=False):
    """The grade tables and plots of `work` (a course.Course; default: this one) into out_dir
    (default: out_dir_for(assignments)), without the sample students (left_out_samples)."""
    work = work or course.Course()
    out_dir = out_dir or out_dir_for(assignments, work)
    names = gradebook.roster(work)
    left_out = set(left_out_samples(names["students"], with_samples))
    names = {"assignments": names["assignments"],
             "students": [s for s in names["students"] if s not in left_out],
             "submissions": [(s, a) for s, a in names["submissions"] if s not in left_out]}
    within = [a for a in names["assignments"] if not assignments or a in assignments]
    submissions = [(s, a) for s, a in names["submissions"] if a in within]
    if not submissions:
        raise SystemExit("report: the gradebook holds no graded submission yet (run `grade` first)")
    status = {key: gradebook.status(*key, work) for key in submissions}
    failed = [key for key in submissions if status[key] != gradebook.GRADED]
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = cell_scores(within, work)
    maxima = defaultdict(float)
    for row in rows:
        maxima[(row["student"], row["assignment"])] += row["max_score"]
    # A submission whose grading failed has grade rows (zeros, or an earlier submission's scores):
    # its points are no one's, so only grades.csv lists it, with its status.
    table = exercise_table([r for r in rows if status.get((r["student"], r["assignment"])) == gradebook.GRADED])
    pairs = {(s, a) for s, a, _ in table}
    hand = gradebook.scored_by_hand([(a, s) for s, a in pairs], work)
    happened = {(s, a): what_happened(s, a, work, hand.get((a, s), {})) for s, a in pairs}
    exercise_rows = [{"student": s, "assignment": a, "exercise": e, "score": v[0], "max_score": v[1],
                      "what_happened": happened[(s, a)].get(e, "")}
                     for (s, a, e), v in sorted(table.items(), key=lambda kv: (kv[0][0], course_order(*kv[0][1:])))]
    totals = {key: {"raw_score": 0.0, "max_score": maxima[key]} for key in submissions
              if status[key] == gradebook.GRADED}
    for row in exercise_rows:
        totals[(row["student"], row["assignment"])]["raw_score"] += row["score"]
    # A late submission's penalty (COURSE_LATE_PENALTY) comes off its total, as in its feedback;
    # the exercise table keeps the points the cells earned.
    penalties = late_penalties(within, work)
    for key, total in totals.items():
        total["late_penalty"] = penalties.get(key, 0.0)
        total["score"] = after_penalty(total["raw_score"], total["late_penalty"])
    blank = {"score": "", "raw_score": "", "late_penalty": ""}
    late = gradebook.lateness(within, work)
    waiting = waiting_for_a_person(work)
    grade_rows = [{"student": s, "assignment": a, "max_score": maxima[(s, a)],
                   **totals.get((s, a), blank), "seconds_late": late.get((s, a), ""),
                   "status": (f"{status[(s, a)]}; {len(waiting[(s, a)])} test cell(s) wait for a person "
                              "(manual_review.csv): the score is not final" if (s, a) in waiting else status[(s, a)])}
                  for s, a in submissions]
    # One line per student of the gradebook, one column per assignment: what an LMS imports.
    # Blank: no graded submission, or one whose score waits for a person; the total adds the others.
    lms = []
    for student in names["students"]:
        line = {"student": student}
        for a in within:
            line[a] = totals[(student, a)]["score"] if (student, a) in totals and (student, a) not in waiting else ""
        line["total"] = sum(v for k, v in line.items() if k in within and v != "")
        lms.append(line)
    paths = {
        "exercise scores": out_dir / "scores_by_exercise.csv",
        "grades (one row per submission)": out_dir / "grades.csv",
        "grades for the LMS": out_dir / "grades_lms.csv",
        "points per exercise and student": out_dir / "points_per_exercise.png",
        "pass rates and score histogram": out_dir / "summary.png",
    }
    _write_csv(paths["exercise scores"], exercise_rows,
               ["student", "assignment", "exercise", "score", "max_score", "what_happened"])
    _write_csv(paths["grades (one row per submission)"], grade_rows,
               ["student", "assignment", "score", "max_score", "raw_score", "late_penalty", "seconds_late", "status"])
    _write_csv(paths["grades for the LMS"], lms, ["student", *within, "total"])
    if len(failed) == len(submissions):
        # Nothing to plot; the tables above are written all the same (every row not graded), so
        # that an earlier run's, which read as current, are never left to be uploaded.
        for what in ("points per exercise and student", "pass rates and score histogram"):
            paths.pop(what).unlink(missing_ok=True)
        raise SystemExit("report: no submission could be graded (grading failed for "
                         + ", ".join(f"{s}/{a}" for s, a in failed) + "; see reports/logs/); "
                         f"{paths['grades (one row per submission)']} says so for each, and "
                         f"{paths['grades for the LMS'].name} has them blank")
    exercises = {a: course.contract().get(a, []) for a in within}
    plot_points(table, paths["points per exercise and student"],
                {(st, a, gradebook._exercise_of(cell, exercises[a]))
                 for (st, a), cells in waiting.items() if a in exercises for cell in cells})
    plot_summary(table, list(totals.values()), paths["pass rates and score histogram"])
    return paths


def main(args):
    assignments = args.assignments or None
    with_samples = getattr(args, "with_samples", False)
    for what, path in write(assignments, with_samples=with_samples).items():
        print(f"report: {what}: {path}")
    left_out = left_out_samples(gradebook.roster(course.Course())["students"], with_samples)
    if left_out:
        print(f"report: the sample students ({', '.join(left_out)}: the course's own test submissions) are "
              "left out of these tables; --with-samples keeps them")
    work = course.Course()
    unfinished = not_graded(assignments, with_samples=with_samples)
    gone = [(s, a) for s, a in unfinished if gradebook.status(s, a, work) == gradebook.GONE]
    failed = [key for key in unfinished if key not in gone]
    if failed:
        print(f"report: {len(failed)} submission(s) could not be graded (grading failed; blank in grades_lms.csv; "
              f"each one's log in reports/logs/ says why: a notebook that cannot be read is the student's to hand in "
              f"again, then grade it again): {', '.join(f'{s}/{a}' for s, a in failed)}")
    if gone:
        names = sorted({a for _, a in gone})
        print(f"report: {len(gone)} submission(s) in the gradebook are gone from submitted/ (blank in "
              f"grades_lms.csv): {', '.join(f'{s}/{a}' for s, a in gone)}. If the assignment was taken out "
              "of the course, take it out of the gradebook too: "
              + "; ".join(f"nbgrader db assignment remove {a} --force" for a in names))
    late = [key for key in gradebook.lateness(assignments, work)
            if key[0] not in left_out and key not in unfinished]
    if late:
        print(f"report: {len(late)} submission(s) were handed in after their due date (grades.csv: "
              "seconds_late, and late_penalty, the points it cost under COURSE_LATE_PENALTY when graded): "
              + ", ".join(f"{s}/{a}" for s, a in sorted(late)))
    review = work.reports / "manual_review.csv"
    if review.is_file():
        # Two kinds of row (grade._write_review_list): a cell no check could decide (0 until a
        # person grades it), and a score entered by hand earlier that counts over this autograde.
        undecided, by_hand = review_rows(work)
        waiting = waiting_for_a_person(work)
        settled = len(undecided) - sum(map(len, waiting.values()))
        if waiting:
            print(f"report: {sum(map(len, waiting.values()))} test cell(s) need a person (a hidden check could not "
                  f"decide twice; scored 0 until then, and the submission's score is left blank in "
                  f"grades_lms.csv; grade the submission again on a quiet machine, or enter the cell's score "
                  f"in formgrader): {review}")
        if settled:
            print(f"report: {settled} test cell(s) that no check could decide were scored by a person since "
                  "(those scores count in these tables)")
        if by_hand:
            print(f"report: {len(by_hand)} test cell(s) keep a score entered by hand over the autograde "
                  f"(it counts in these tables; keep or change it in formgrader): {review}")
    return 0

"""What a feedback page shows beyond nbgrader's own: a results table on top, outputs that fit the page.

nbgrader's feedback page lists its test cells as "Test cell (Score: 0.0 / 3.0)", with no name and
no reason, and shows a failed cell like a passed one: a student had to scroll through every cell
to find where the points went. `FeedbackSummary` (a feedback preprocessor, after GetGrades) puts a
table in a new first cell, read from the graded cells' outputs, and says what grading
does not run (the teaching demos) and whose machine the set-up cell describes. The cell also holds
the page's own style (PAGE_CSS): an output's long lines wrap instead of running off the page (an
assert's message, with its advice at the end, was cut at 1200 pixels), and errors are marked in
red, and nbgrader's list of unnamed test cells above the notebook is hidden (the table says the same
with names and reasons; a late penalty's line stays). (A preprocessor cannot add the style to the
page's header: the template's own CSS preprocessor runs after the configured ones and replaces
what they put there.)

Every text taken from an output (an exception's name and message can be the student's own) is
written as character references, so nothing in it can become markup, and the table carries
MathJax's tex2jax_ignore class, so nothing in it is typeset as math (the page decodes the
references before MathJax reads the text).
"""
import re

from nbformat.v4 import new_markdown_cell
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution

from .mend import MENDED
from .verify import UNDECIDED

PAGE_CSS = ("<style>div.output_area pre { white-space: pre-wrap; word-break: normal; overflow-wrap: anywhere; } "
            "div.output_error pre { border-left: 4px solid #c9302c; padding-left: 0.6em; } "
            "table.course-results th, table.course-results td { padding: 3px 14px 3px 0; vertical-align: top; } "
            "tr.course-failed td:last-child { color: #a94442; } tr.course-passed td:last-child { color: #3c763d; } "
            # nbgrader's list of unnamed "Test cell (Score: ...)" entries: the table says it with names
            # and reasons; a late penalty stays.
            "#toc li:not(.late-penalty) { display: none; }"
            "</style>")
SHOWN = 160  # characters of a failure's first line in the table (the cell below has all of it)
_COUNT = re.compile(r"^\S+: (\d+ of \d+) hidden checks failed", re.M)


def escaped(text):
    """`text` with every character but letters, digits, spaces and _ as a character reference (the
    table is one HTML block: markdown does not read inside it, so _ makes no emphasis)."""
    return "".join(c if c.isalnum() and c.isascii() or c in " _" else f"&#{ord(c)};" for c in text)


def _errors(cell):
    return [o for o in (cell.get("outputs", []) if cell is not None else []) if o.get("output_type") == "error"]


UNDECIDED_SAID = "⏳ a hidden check could not decide: a person will look at it (score to follow)"
SETTLED_SAID = "a hidden check could not decide: a person graded it"


def status(cell, answer=None, by_hand=False):
    """What happened in a graded test cell, in a few words (plain text); `answer`: its answer cell;
    `by_hand`: whether a person has entered its score."""
    errors = _errors(cell)
    if not errors:
        return "✓ passed"
    first = errors[0]
    name, value = str(first.get("ename", "")), str(first.get("evalue", ""))
    if name == UNDECIDED or any(o.get("ename") == UNDECIDED for o in errors):
        return SETTLED_SAID if by_hand else UNDECIDED_SAID
    if name == "NotImplementedError" or any(o.get("ename") == "NotImplementedError" for o in _errors(answer)):
        return "not answered: the answer cell still raises NotImplementedError"
    if name == "HiddenCheckFailed":
        counts = _COUNT.findall(value) or _COUNT.findall(_text(cell))
        first = next((line.strip()[2:] for line in value.split("\n") if line.strip().startswith("✗ ")), "")
        return ("✗ hidden checks failed" + (f" ({', '.join(counts)})" if counts else "")
                + (f": {_cut(first)}" if first else ""))
    line = _cut(next((part.strip() for part in value.split("\n") if part.strip()), ""))
    found = " (and hidden checks failed: the cell says what they found)" if any(
        o.get("ename") == "HiddenCheckFailed" for o in errors[1:]) else ""
    return f"✗ {name}{': ' + line if line else ''}{found}"


def _cut(line):
    return line if len(line) <= SHOWN else line[:SHOWN - 1] + "…"


def _text(cell):
    """The cell's printed output (its verdict line for the hidden block among it)."""
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def rows(nb, by_hand=()):
    """[(grade_id, score, points, status)] of the notebook's graded test cells, in order; `by_hand`:
    the grade_ids a person has scored."""
    found, answers = [], {}
    for cell in nb.cells:
        if cell.cell_type == "code" and is_solution(cell):
            answers[cell.metadata.nbgrader.get("grade_id")] = cell
        if cell.cell_type != "code" or not is_grade(cell) or is_solution(cell):
            continue
        meta = cell.metadata.nbgrader
        grade_id = str(meta.get("grade_id", ""))
        found.append((grade_id, float(meta.get("score") or 0), float(meta.get("points") or 0),
                      status(cell, answers.get(grade_id.removeprefix("test_")), grade_id in by_hand)))
    return found


def table(found, mended=()):
    """The summary's markdown (an HTML table), every text from the notebook escaped; `mended`: what
    grading mended in the notebook first (autograder/pipeline/mend.py), in plain words."""
    lines = ["### Your results, exercise by exercise", "", PAGE_CSS, ""]
    if mended:
        lines += ["<p>Before grading, your notebook was mended:</p>",
                  "<ul class=\"tex2jax_ignore\">" + "".join(f"<li>{escaped(line)}</li>" for line in mended)
                  + "</ul>", ""]
    # tex2jax_ignore: MathJax leaves the table alone (a $ in a student's message is no math).
    lines.append("<table class=\"course-results tex2jax_ignore\"><tr><th>exercise</th><th>points</th>"
                 "<th>what happened</th></tr>")
    for grade_id, score, points, said in found:
        name = grade_id.removeprefix("test_")
        # The anchor nbgrader's page gives a graded cell is its grade_id (a course name, checked).
        link = (f'<a href="#{grade_id}">{escaped(name)}</a>' if re.fullmatch(r"\w+", grade_id)
                else escaped(name))
        kind = "passed" if said.startswith("✓") else "failed" if said.startswith("✗") else "other"
        lines.append(f'<tr class="course-{kind}"><td>{link}</td><td>{score:g} / {points:g}</td>'
                     f"<td>{escaped(said)}</td></tr>")
    lines += ["</table>", "",
              "A test cell earns its points only when every check in it passes, visible and hidden. "
              "Grading skips the teaching demos (cells tagged `demo`), so they show no output below, "
              "and what the set-up cell prints describes the grading machine, not yours."]
    return "\n".join(lines)


class FeedbackSummary(NbGraderPreprocessor):
    """Put the results table in a new first cell: right under nbgrader's list of cells, above the
    notebook's title and introduction (below them, it began past a laptop's first screen)."""

    def preprocess(self, nb, resources):
        found = rows(nb, _scored_by_hand(resources))
        for cell in nb.cells:
            # nbgrader's own comment on an answer left as released, which read as the teacher's silence.
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if is_solution(cell) and meta.get("comment") == "No response.":
                meta["comment"] = UNANSWERED
        mended = nb.metadata.get(MENDED)
        if found:
            nb.cells.insert(0, new_markdown_cell(table(found, [str(line) for line in mended]
                                                         if isinstance(mended, list) else ())))
        return nb, resources


def _scored_by_hand(resources):
    """The cells of this submission a person scored (the gradebook's manual scores)."""
    from ..gradebook import scored_by_hand

    meta = resources.get("nbgrader", {})
    key = (meta.get("assignment"), meta.get("student"))
    try:
        return scored_by_hand([key], db_url=meta.get("db_url")).get(key, {}) if None not in key else {}
    except Exception as err:  # noqa: BLE001 (the page says "score to follow" rather than fail to be written)
        import logging
        logging.getLogger(__name__).warning("could not read the scores entered by hand: %s", err)
        return {}


UNANSWERED = "Not answered: this cell is as it was handed out."


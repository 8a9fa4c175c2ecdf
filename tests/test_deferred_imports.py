"""jsonschema's IRI parser is built when an IRI is checked, not in every process that reads a
notebook (autograder/deferred_imports.py); an IRI check still gives the real answers."""
import importlib.util
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None,
                                reason="rfc3987_syntax is not installed: nothing to defer")

PROBE = """
import json, sys
{first}
import nbformat, nbgrader.api
nb = nbformat.read({notebook!r}, as_version=4)
nbformat.validate(nb)
built_on_import = "rfc3987_syntax.syntax_helpers" in sys.modules
from jsonschema import Draft7Validator, FormatChecker
iri = Draft7Validator({{"type": "string", "format": "iri"}}, format_checker=FormatChecker())
print(json.dumps({{"built_on_import": built_on_import,
                  "valid": iri.is_valid("https://example.org/r\\u00e9sum\\u00e9?q=1#top"),
                  "invalid": iri.is_valid("no scheme, spaces: not an IRI"),
                  "real_after_use": type(sys.modules["rfc3987_syntax"]).__name__ == "module"}}))
"""


def _probe(first):
    from autograder import course
    notebook = str(course.source_notebook("01_processes_threads"))
    done = subprocess.run([sys.executable, "-c", PROBE.format(first=first, notebook=notebook)],
                          capture_output=True, text=True, cwd=course.ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("first", ["from autograder import notebooks", "from autograder import cli"])
def test_reading_notebooks_builds_no_iri_parser_and_iri_checks_still_work(first):
    seen = _probe(first)
    assert seen == {"built_on_import": False, "valid": True, "invalid": False, "real_after_use": True}


def test_without_the_deferral_the_parser_is_built_on_import():
    """The probe can see the difference: imported first, jsonschema builds it."""
    seen = _probe("import jsonschema\nfrom autograder import notebooks")
    assert seen["built_on_import"] is True
    assert (seen["valid"], seen["invalid"]) == (True, False)

"""Start-up costs paid only where needed, with the same results.

- jsonschema's IRI parser is built when an IRI is checked, not in every process
  that reads a notebook (autograder/deferred_imports.py); an IRI check still
  gives the real answers.
- A new gradebook is made without starting `alembic` (autograder/gradebook.py),
  at the same schema revision as nbgrader's own.
"""
import importlib.util
import json
import subprocess
import sys

import pytest

needs_iri_module = pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None,
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


@needs_iri_module
@pytest.mark.parametrize("first", ["from autograder import notebooks", "from autograder import cli"])
def test_reading_notebooks_builds_no_iri_parser_and_iri_checks_still_work(first):
    seen = _probe(first)
    assert seen == {"built_on_import": False, "valid": True, "invalid": False, "real_after_use": True}


@needs_iri_module
def test_without_the_deferral_the_parser_is_built_on_import():
    """The probe can see the difference: imported first, jsonschema builds it."""
    seen = _probe("import jsonschema\nfrom autograder import notebooks")
    assert seen["built_on_import"] is True
    assert (seen["valid"], seen["invalid"]) == (True, False)


def test_a_new_gradebook_needs_no_alembic_process(tmp_path, monkeypatch):
    import nbgrader.api
    from nbgrader.dbutil import _temp_alembic_ini
    from sqlalchemy import create_engine, text

    from autograder import course, gradebook

    with _temp_alembic_ini("sqlite:///unused.db") as ini:  # nbgrader's own way to the revision
        heads = subprocess.run(["alembic", "-c", ini, "heads"], capture_output=True, text=True, check=True)
    nbgrader_revision = heads.stdout.split()[0]

    def no_alembic():
        raise AssertionError("nbgrader started alembic for a gradebook the course made")
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", no_alembic)
    work = course.Course(workdir=tmp_path / "work")
    work.api()
    gradebook.add_students(["ada", "alan"], work=work)  # nbgrader's Gradebook opens it and writes
    gradebook.create(work.db_url)  # a second time: nothing to do
    engine = create_engine(work.db_url)
    with engine.connect() as db:
        assert db.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [nbgrader_revision]
        assert sorted(db.execute(text("SELECT id FROM student")).scalars()) == ["ada", "alan"]
    engine.dispose()



def test_a_gradebook_made_by_another_process_meanwhile_is_taken_as_it_is(tmp_path, monkeypatch):
    """Grading workers start side by side: two may find the gradebook empty, and the second to
    write finds the tables made. Here the other process wins while this one reads the revision."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import create_engine, text

    from autograder import gradebook

    db_url = f"sqlite:///{tmp_path}/gradebook.db"
    real_head = ScriptDirectory.get_current_head
    raced = []

    def head_after_the_other_process_made_it(self):
        if not raced:
            raced.append(True)
            gradebook.create(db_url)  # the other process, all the way through
        return real_head(self)
    monkeypatch.setattr(ScriptDirectory, "get_current_head", head_after_the_other_process_made_it)
    gradebook.create(db_url)
    assert raced
    engine = create_engine(db_url)
    with engine.connect() as db:
        assert len(db.execute(text("SELECT version_num FROM alembic_version")).all()) == 1
    engine.dispose()


def test_a_gradebook_is_made_whole_or_not_at_all(tmp_path, monkeypatch):
    """Another process never finds the tables without the revision, and a failure half-way
    leaves no table behind (SQLite's driver would commit each CREATE TABLE at once)."""
    from nbgrader.api import Base
    from sqlalchemy import create_engine, inspect

    from autograder import gradebook

    db_url = f"sqlite:///{tmp_path}/gradebook.db"
    other = create_engine(db_url)
    seen = []
    make_tables = Base.metadata.create_all

    def made_then_failed(*args, **kwargs):
        make_tables(*args, **kwargs)
        seen.append(inspect(other).get_table_names())
        raise RuntimeError("the grading process died here")
    monkeypatch.setattr(Base.metadata, "create_all", made_then_failed)
    with pytest.raises(RuntimeError):
        gradebook.create(db_url)
    assert seen == [[]], f"another process saw {seen} before the revision was written"
    assert inspect(other).get_table_names() == [], "a failed creation left tables behind"
    monkeypatch.setattr(Base.metadata, "create_all", make_tables)
    gradebook.create(db_url)
    assert "alembic_version" in inspect(other).get_table_names()
    other.dispose()

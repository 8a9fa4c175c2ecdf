"""Imports that cost a second of CPU and are rarely used, made when first used.

jsonschema, which nbformat imports to validate notebooks, imports
`rfc3987_syntax` when it is installed (jupyter-events asks for it), and that
module builds an Earley parser of RFC 3987 as it is imported: about 1 s of CPU
in every process that reads a notebook (a grading worker, each of the course's
commands, each test process), to check the "iri" format, which no notebook
schema uses. `defer_iri_parser()`, called before jsonschema is imported, puts a
stand-in in its place whose functions import the real module on their first
call, so a schema that does check an IRI still gets the real check.
"""
import importlib
import importlib.util
import sys
import types

IRI_MODULE = "rfc3987_syntax"


class _OnFirstUse(types.ModuleType):
    """`rfc3987_syntax` until something uses it; then the real module, everywhere."""

    def _real(self):
        if sys.modules.get(IRI_MODULE) is self:
            sys.modules.pop(IRI_MODULE, None)  # pop: two threads may get here at once
        try:
            real = importlib.import_module(IRI_MODULE)
        except BaseException:
            sys.modules.setdefault(IRI_MODULE, self)
            raise
        return real

    def is_valid_syntax(self, term, value):
        return self._real().is_valid_syntax(term, value)

    def parse(self, term, value):
        return self._real().parse(term, value)

    def __getattr__(self, name):  # anything else: the real module's
        if name.startswith("__"):  # the import system's questions (`__path__`...): not a use
            raise AttributeError(name)
        return getattr(self._real(), name)


def defer_iri_parser():
    """Put the stand-in in place, unless jsonschema or the module itself is already imported
    (then it is too late, or not needed) or the module is not installed (nothing to defer)."""
    if IRI_MODULE in sys.modules or "jsonschema" in sys.modules:
        return
    spec = importlib.util.find_spec(IRI_MODULE)
    if spec is None:
        return
    stand_in = _OnFirstUse(IRI_MODULE)
    stand_in.__spec__ = spec  # where the real one is, for whoever looks it up
    sys.modules[IRI_MODULE] = stand_in

"""nbgrader preprocessors used by `python -m autograder grade` (see nbgrader_config.py)."""
import time

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from nbgrader.utils import is_grade
from traitlets import Integer


def _error_output(ename, evalue):
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"{ename}: {evalue}"])


class ResilientExecute(Execute):
    """Execute that survives a dead or unresponsive kernel and bounds the whole notebook.

    Plain nbgrader errors the entire submission (0 points) when the kernel dies
    (`os._exit`, a segfault, out of memory) or ignores an interrupt. Here the
    cells that ran keep their outputs, hence their scores; every later cell gets
    an error output that says what happened, so it scores zero and the feedback
    explains why.
    """

    notebook_timeout = Integer(
        900, help="Wall-clock limit in seconds for a whole notebook; later cells are not run."
    ).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._stopped_because = None
        self._started = time.monotonic()
        try:
            return super().preprocess(nb, resources, km)
        except (DeadKernelError, RuntimeError) as err:
            # Raised while shutting down a kernel that already died: the cells
            # have been processed, so the notebook is complete as it is.
            if self._stopped_because is None:
                raise
            self.log.warning("kernel could not be shut down cleanly: %s", err)
            return self.nb, self.resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._stopped_because is None and time.monotonic() - self._started > self.notebook_timeout:
            self._stopped_because = (
                f"the notebook ran longer than its {self.notebook_timeout} s limit")
        if self._stopped_because is not None:
            cell.outputs = [_error_output("NotRun", f"not run: {self._stopped_because}")]
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError as err:
            self._stopped_because = f"the kernel died while running cell {index} ({err})"
        except CellTimeoutError:
            self._stopped_because = (
                f"cell {index} did not stop within {self.timeout} s, even when interrupted")
        self.log.warning("grading stops early: %s", self._stopped_because)
        cell.outputs = list(cell.get("outputs", [])) + [
            _error_output("KernelStopped", self._stopped_because)]
        return cell, resources


class StderrToStdout(NbGraderPreprocessor):
    """Turn stderr in test cells into stdout, so that only errors cost points.

    nbgrader gives zero to a test cell with any stderr output; a warning from a
    worker process or a progress bar would then fail a correct answer. The text
    stays visible in the feedback.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_grade(cell):
            for output in cell.outputs:
                if output.output_type == "stream" and output.name == "stderr":
                    output.name = "stdout"
        return cell, resources

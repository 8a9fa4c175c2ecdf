"""The student's experience in a real browser: JupyterLab with nbgrader's extensions.

Headless Chromium (Debian's package, installed here with apt-get when missing),
driven by Playwright, opens the first assignment of the student folder
(`python -m autograder student`) in JupyterLab, runs every cell like a student
walking down the notebook, checks that a matplotlib plot rendered, clicks
nbgrader's Validate button and checks that it reports every unanswered
exercise, and saves a screenshot to course/img/jupyterlab.png.

Deselect with `-m "not browser"`.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from autograder import course, notebooks, student

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

# The README's screenshot is refreshed only on request (COURSE_UPDATE_SCREENSHOT=1),
# so that a test run leaves the working tree clean.
README_SCREENSHOT = course.ROOT / "course" / "img" / "jupyterlab.png"
SCREENSHOT = README_SCREENSHOT if os.environ.get("COURSE_UPDATE_SCREENSHOT") == "1" else None


@pytest.fixture(scope="module")
def lab(tmp_path_factory, port_factory):
    """JupyterLab on localhost serving a fresh student folder; stopped afterwards."""
    tmp = tmp_path_factory.mktemp("browser")
    bundle = student.build(tmp / "student")
    port, token = port_factory(), os.urandom(16).hex()
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "PYTHONPATH")}
    env.update({
        # What the student's bin/lab sets: the folder itself on PYTHONPATH, nothing of the instructor's.
        "PYTHONPATH": str(bundle),
        "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
        # The course's jupyter_config/ (as bin/lab uses it); a clean user config and state.
        "JUPYTER_CONFIG_PATH": str(course.ROOT / "jupyter_config"),
        "JUPYTER_CONFIG_DIR": str(tmp / "user-config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        # The kernels are stopped with a signal: what their pools and forkservers made in the temp
        # folder stays there (pymp-*), so they get one of their own, short enough for the
        # forkserver's socket path (AF_UNIX: 108 bytes).
        "TMPDIR": tempfile.mkdtemp(prefix="course-test-"),
    })
    # No "get notified about Jupyter news?" toast (and no fetch of it: the network is closed).
    notification = tmp / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    log = open(tmp / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={bundle}", "--ServerApp.port_retries=0",
         "--LabApp.expose_app_in_browser=True", *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=bundle, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, f"JupyterLab exited:\n{(tmp / 'jupyterlab.log').read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "JupyterLab did not answer within 90 s"
            time.sleep(0.5)
        yield {"base": base, "token": token, "bundle": bundle, "tmp": tmp, "log": tmp / "jupyterlab.log"}
    finally:
        _stop(server)
        log.close()
        shutil.rmtree(env["TMPDIR"], ignore_errors=True)


def _stop(server):
    """Stop the server and the kernels it started (its whole process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            pass
        try:
            server.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            continue


def test_nbgrader_server_extensions_answer(lab):
    """The formgrader, assignment list, course list and validate handlers are loaded."""
    for path in ("formgrader", "assignments?course_id=", "courses", "nbgrader_version?version=0"):
        with urllib.request.urlopen(f"{lab['base']}/{path}{'&' if '?' in path else '?'}token={lab['token']}",
                                    timeout=30) as reply:
            assert reply.status == 200, path


JS_CELLS = "() => window.jupyterapp.shell.currentWidget.content.widgets.length"
JS_IDLE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle';
}"""
JS_SELECT = """(i) => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  notebook.activeCellIndex = i;
  notebook.mode = 'command';
  notebook.node.focus();
}"""
JS_CELL_DONE = """(i) => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cell = panel.content.widgets[i];
  if (cell.model.type !== 'code') return true;
  return cell.model.executionCount !== null && panel.sessionContext.session.kernel.status === 'idle';
}"""
JS_CELL_TYPE = "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.type"


def test_student_runs_notebook_and_validates(lab, chromium):
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is missing: bin/test installs requirements.txt")
    assignment = course.assignments()[0]
    release_nb = notebooks.read(course.release_notebook(assignment))
    n_tests = len(notebooks.test_cells(release_nb))
    url = f"{lab['base']}/lab/tree/{assignment}/{assignment}.ipynb?token={lab['token']}"
    started = time.monotonic()
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(lab["tmp"] / "chromium-profile"), executable_path=str(chromium["path"]), headless=True,
            args=chromium["flags"], viewport={"width": 1440, "height": 900})
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(url)
            page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell")
            page.wait_for_function(JS_IDLE, timeout=90_000)
            # nbgrader's Validate button sits in the notebook toolbar.
            validate = page.locator(".jp-NotebookPanel-toolbar .validate-button")
            validate.wait_for()
            # The Nbgrader menu of the lab extension, and its Create Assignment sidebar.
            page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
            for item in ("Assignment List", "Course List", "Formgrader"):
                page.locator(".lm-Menu-itemLabel", has_text=item).first.wait_for()
            page.keyboard.press("Escape")
            page.locator(".lm-TabBar-tab[title='Create Assignment'], .lm-TabBar-tab:has-text('Create Assignment')").first.wait_for()

            # Run every cell in order, waiting for each, as a student does with Shift+Enter
            # (Run All would stop at the first unanswered exercise).
            page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
            n_cells = page.evaluate(JS_CELLS)
            for i in range(n_cells):
                page.evaluate(JS_SELECT, i)
                page.keyboard.press("Control+Enter")
                page.wait_for_function(JS_CELL_DONE, arg=i, timeout=120_000)
            ran = time.monotonic() - started

            # A matplotlib plot rendered as an <img> output.
            plot = page.locator(".jp-OutputArea-output img[src^='data:image/png']").first
            plot.wait_for()
            assert plot.evaluate("img => img.naturalWidth") > 100
            # Each unanswered exercise's test cell shows the NotImplementedError.
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                                  has_text="NotImplementedError")
            assert errors.count() >= 1

            # The screenshot for the README: the notebook scrolled to its first plot.
            plot.scroll_into_view_if_needed()
            page.evaluate("img => img.scrollIntoView({block: 'center'})", plot.element_handle())
            shot = SCREENSHOT or lab["tmp"] / "jupyterlab.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000, "the screenshot is empty"

            # The student-facing self-check: Validate saves, re-runs the notebook in a fresh
            # kernel and lists the failing test cells.
            validate.click()
            message = page.locator("#validation-message")
            message.wait_for(timeout=240_000)
            assert "validation-failed" in (message.get_attribute("class") or "")
            failed = message.get_by_text("The following cell failed:")
            assert failed.count() == n_tests, f"Validate listed {failed.count()} failing cells, expected {n_tests}"
            assert "NotImplementedError" in message.inner_text()
            page.screenshot(path=str(lab["tmp"] / "validate.png"))
        finally:
            browser.close()
    print(f"\nbrowser: ran {n_cells} cells in {ran:.0f} s; whole flow {time.monotonic() - started:.0f} s")

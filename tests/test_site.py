"""The course website (`python -m autograder site`), read in a real browser.

The site is built from two light assignments (the CI budget; without
arguments the command builds every assignment), served on a free localhost
port, and opened in headless Chromium (Debian's package, installed by the
`chromium` fixture when missing) driven by Playwright. From the home page the
test follows the navigation to the syllabus, each assignment and the
instructor guide; it checks that each assignment shows its exercises blank and
a rendered plot, and that no page shows a reference solution, a hidden test or
the hidden checks. It saves a screenshot of the first assignment
(course/img/site.png with COURSE_UPDATE_SCREENSHOT=1, else a temp file).

Deselect with `-m "not browser"`.
"""
import functools
import http.server
import os
import threading

import pytest

from autograder import course, site

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
# Two assignments whose teaching cells draw plots and are cheap to run (CPU seconds measured: 01 18.5, 02 7.6, 03 5.9).
SITE_ASSIGNMENTS = ("02_gil", "03_race_conditions")
README_SCREENSHOT = course.ROOT / "course" / "img" / "site.png"
SCREENSHOT = README_SCREENSHOT if os.environ.get("COURSE_UPDATE_SCREENSHOT") == "1" else None


@pytest.fixture(scope="module")
def served_site(tmp_path_factory, course_tools):
    out = tmp_path_factory.mktemp("site")
    built = course_tools.cli("site", *SITE_ASSIGNMENTS, "--out", str(out), workdir=out)
    html = out / "html"
    assert (html / "index.html").is_file(), built.stdout
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", course_tools.free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"base": f"http://127.0.0.1:{server.server_address[1]}", "html": html, "tmp": out,
               "log": built.stdout}
    finally:
        server.shutdown()
        server.server_close()


def test_build_leaves_no_grading_material(served_site):
    """The builder's own scan (also run at every build) finds nothing, and it had something
    to look for."""
    assert all(site.secrets(a) for a in SITE_ASSIGNMENTS)
    assert site.leaks(served_site["html"], SITE_ASSIGNMENTS) == []


def test_site_in_a_browser(served_site, chromium):
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is missing: bin/test installs requirements.txt")
    secrets = {a: site.secrets(a) for a in SITE_ASSIGNMENTS}
    all_secrets = [line for lines in secrets.values() for line in lines]
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium["path"]), headless=True, args=chromium["flags"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(30_000)
            page.goto(f"{served_site['base']}/index.html")
            assert "Parallel Computing in Python and PyTorch" in page.title()
            nav = page.locator("nav.bd-docs-nav")
            titles = {}
            for target in ("syllabus", *(f"assignments/{a}" for a in SITE_ASSIGNMENTS), "instructor_guide", "measurements"):
                link = nav.locator(f"a[href$='{target}.html']").first
                titles[target] = link.inner_text().strip()
                assert titles[target], f"no navigation entry for {target}"
            shot = None
            for target, title in titles.items():
                page.goto(f"{served_site['base']}/index.html")
                page.locator("nav.bd-docs-nav").get_by_role("link", name=title, exact=True).first.click()
                page.wait_for_url(f"**/{target}.html")
                text = " ".join(page.locator("article").inner_text().split())
                shown = [line for line in all_secrets if " ".join(line.split()) in text]
                assert not shown, f"{target} shows grading material: {shown[:3]}"
                if not target.startswith("assignments/"):
                    continue
                for marker in site.FORBIDDEN:
                    assert marker not in text, f"{target} shows {marker!r}"
                # Exercises blank, teaching cells executed: a plot rendered by the browser.
                assert "YOUR CODE HERE" in text, f"{target} shows no blank exercise"
                plot = page.locator("article .cell_output img").first
                plot.wait_for()
                plot.scroll_into_view_if_needed()
                page.wait_for_function("img => img.complete && img.naturalWidth > 100", arg=plot.element_handle())
                if shot is None:
                    page.evaluate("img => img.scrollIntoView({block: 'center'})", plot.element_handle())
                    shot = SCREENSHOT or served_site["tmp"] / "site.png"
                    shot.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(shot))
            assert shot is not None and shot.stat().st_size > 10_000, "no screenshot of an assignment page"
            # The guide's links to the measurements page are links of the site, not to a .md file.
            page.goto(f"{served_site['base']}/instructor_guide.html")
            assert page.locator("article a[href*='measurements.html']").count() >= 1, \
                "the guide's link to the measurements does not lead to the site's page"
        finally:
            browser.close()


def test_every_figure_an_assignment_page_shows_is_there(served_site):
    """Each <img> of an assignment page (its diagrams, its plots) names a file the site has (the
    diagrams were linked two folders above the page's source, where the site had none)."""
    import re
    from urllib.parse import unquote

    shown = 0
    for page in (served_site["html"] / "assignments").glob("*.html"):
        for src in re.findall(r'<img[^>]*\ssrc="([^"]+)"', page.read_text()):
            if src.startswith("data:") or "://" in src:
                continue
            shown += 1
            assert (page.parent / unquote(src)).is_file(), f"{page.name} shows {src}, which the site lacks"
    assert shown, "no figure found on the assignment pages"

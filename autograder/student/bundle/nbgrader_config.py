"""nbgrader settings for self-checks (bin/validate and the Validate button)."""
c = get_config()  # noqa: F821
# Cells of this course may take a while on a 2-core laptop: allow 3 minutes each.
c.Execute.timeout = 180
# Validate runs the notebook as grading does: without the teaching demos (cells tagged "demo":
# measurements and plots that grade nothing). The student runs those; a self-check that
# passes only because a demo ran first would fail when graded.
c.Execute.skip_cells_with_tag = "demo"

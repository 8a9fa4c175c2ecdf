"""nbgrader settings for self-checks (bin/validate and the Validate button)."""
c = get_config()  # noqa: F821
# Cells of this course may take a while on a 2-core laptop: allow 3 minutes each.
c.Execute.timeout = 180

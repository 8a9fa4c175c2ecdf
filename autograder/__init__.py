"""The instructor's side of the course: release, grade, feedback, report.

Never shipped to students. `python -m autograder --help` is the map of the code:
one module (or package) per verb of the CLI, and `checks/<assignment>.py`
holding the hidden checks of each assignment.
"""

"""Hidden checks, one module per assignment (`<assignment>.py`), written as pytest tests.

A check's first parameter names the exercise it grades. See autograder/hidden.py
for how they run inside a grading kernel and conftest.py for how pytest runs
them against the reference solutions.
"""

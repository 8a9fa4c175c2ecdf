"""Worker functions for the 05 notebook, in a module beside it.

A process started with `spawn` or `forkserver` receives a task as "call the
function <module>.<name> with these arguments" and must import that module.
Functions typed into the notebook live in the kernel's __main__, which such a
process cannot import; functions in this file can be imported by name.
"""
from math import sqrt


def square(x):
    """The first example task: x squared."""
    return x * x


def add3(a, b, c):
    """A task with three arguments, for starmap."""
    return a + b + c


def sqrt_of_square(i):
    return sqrt(i ** 2)

"""Worker functions for the 05 notebook, in a module beside it.

A process started with `spawn` or `forkserver` receives a task as "call the
function <module>.<name> with these arguments" and must import that module.
Functions typed into the notebook live in the kernel's __main__, which such a
process cannot import; functions in this file can be imported by name.
"""


def square(x):
    """The first example task: x squared."""
    return x * x


def box_volume(length, width, height):
    """A task with three arguments, for starmap: the volume of a box."""
    return length * width * height

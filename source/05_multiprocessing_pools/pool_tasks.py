"""Worker functions for the 05 notebook, in a module beside it.

A process started with `spawn` or `forkserver` receives a task as "call the
function <module>.<name> with these arguments" and must import that module.
Functions typed into the notebook live in the kernel's __main__, which such a
process cannot import; functions in this file can be imported by name.
"""


def collatz_steps(n):
    """The first example task: how many steps the Collatz rule (halve an even number, take an odd
    one to 3n + 1) needs to bring n down to 1."""
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def box_volume(length, width, height):
    """A task with three arguments, for starmap: the volume of a box."""
    return length * width * height

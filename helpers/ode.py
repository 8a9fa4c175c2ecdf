"""The ODE data generation of assignment 05: one trajectory, and the serial reference.

Each trajectory solves dx/dt = -x t - x^2 + sin(x) for a 10-dimensional x with
SciPy's RK45 stepper, from t = 0 to t = 10, starting from uniform random x0.
A trajectory is an array of shape (steps + 1, 1 + dim): column 0 is the time,
the other columns the state; row 0 is the starting point.
"""
import numpy as np
from scipy import integrate

DIM = 10
T_END = 10.0


def rhs(t, x):
    """The right-hand side of the ODE."""
    return -x * t - x ** 2 + np.sin(x)


def solve(x0, t_end=T_END):
    """Integrate from x0 with RK45, keeping every accepted step."""
    solver = integrate.RK45(rhs, t0=0.0, y0=np.asarray(x0, dtype=float), t_bound=t_end)
    rows = [np.concatenate(([solver.t], solver.y))]
    while solver.status == "running":
        solver.step()
        rows.append(np.concatenate(([solver.t], solver.y)))
    if solver.status == "failed":
        raise RuntimeError("RK45 failed")
    return np.array(rows)


def trajectory(seed, dim=DIM):
    """One trajectory whose starting point is drawn from np.random.default_rng(seed).random(dim)."""
    return solve(np.random.default_rng(seed).random(dim))


def serial_trajectories(n, seed):
    """The serial reference: n trajectories, trajectory i seeded by SeedSequence(seed).spawn(n)[i].

    Seeding each trajectory from its own child of one SeedSequence makes the
    data independent of how the trajectories are later shared among workers.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [trajectory(child) for child in np.random.SeedSequence(seed).spawn(n)]

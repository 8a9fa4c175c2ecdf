"""CPU work that cannot be skipped, for code that must run outside the student's process.

A time-lock puzzle (Rivest, Shamir and Wagner, 1996): base ** (2 ** t) mod n
takes t squarings, one after another, for whoever does not know the factors of
n; the judge, which made n from two primes it keeps, checks an answer with one
short exponentiation (Euler: the exponent 2 ** t can be reduced mod (p-1)(q-1)).
helpers.workers.solve_puzzle is the solver the checks hand to workers.

What it proves: an answer to a puzzle that costs c CPU seconds cost c seconds
wherever it was computed. When the judge reads from /proc that the student's
own process spent much less than the puzzles' total while a call ran
(_support.caller_cpu), the work was done in other processes, whatever the
student's code reports about where. The primes live only in the judge's memory.
"""
import math
import random
import secrets
import time
from dataclasses import dataclass

_MODULUS_BITS = 512
_SMALL_PRIMES = [p for p in range(3, 2000) if all(p % d for d in range(2, int(p ** 0.5) + 1))]
_key = []   # [(n, phi)] once per judge process
_rate = []  # [squarings per CPU second], once per judge process


@dataclass(frozen=True)
class Puzzle:
    task: tuple    # (base, modulus, squarings): what helpers.workers.solve_puzzle takes
    answer: int    # what it returns
    seconds: float  # the least CPU time it takes here

    def solved_by(self, value):
        return type(value) is int and value == self.answer


def make(cpu_seconds):
    """A fresh puzzle that takes at least about `cpu_seconds` of CPU to solve on this machine."""
    n, phi = _modulus()
    squarings = max(1, round(cpu_seconds * _squarings_per_second()))
    while True:
        base = secrets.randbelow(n - 3) + 2
        if math.gcd(base, n) == 1:  # always, but for a chance of about 2 ** -255
            break
    answer = pow(base, pow(2, squarings, phi), n)
    return Puzzle((base, n, squarings), answer, squarings / _squarings_per_second())


def _modulus():
    if not _key:
        p, q = _prime(_MODULUS_BITS // 2), _prime(_MODULUS_BITS // 2)
        while q == p:
            q = _prime(_MODULUS_BITS // 2)
        _key.append((p * q, (p - 1) * (q - 1)))
    return _key[0]


def _prime(bits):
    """A random prime of `bits` bits. Miller-Rabin with 40 random bases: a composite passes with
    probability below 4 ** -40 (about 1e-24); the puzzle's answer would then be wrong."""
    while True:
        candidate = secrets.randbits(bits) | (1 << (bits - 1)) | 1
        if all(candidate % p for p in _SMALL_PRIMES) and _miller_rabin(candidate, 40):
            return candidate


def _miller_rabin(n, rounds):
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(rounds):
        x = pow(random.randrange(2, n - 1), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _squarings_per_second():
    """The fastest of three timings of 20,000 squarings on this thread's CPU clock: a puzzle sized
    by it takes at least its nominal time on this machine."""
    if not _rate:
        n, _ = _modulus()
        value, best = 3, math.inf
        for _ in range(3):
            start = time.thread_time()
            for _ in range(20_000):
                value = value * value % n
            best = min(best, time.thread_time() - start)
        _rate.append(20_000 / max(best, 1e-6))
    return _rate[0]

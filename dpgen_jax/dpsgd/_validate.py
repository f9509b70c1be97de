"""Argument checks shared by the engine; every message names the argument and the range."""

from __future__ import annotations

import math


def check_sample_rate(sample_rate: float, name: str = "sample_rate") -> float:
    q = float(sample_rate)
    if not (0.0 < q <= 1.0) or math.isnan(q):
        raise ValueError(f"Expected {name}={sample_rate!r} in (0, 1].")
    return q


def check_num_records(num_records: int, name: str = "num_records") -> int:
    if isinstance(num_records, bool) or int(num_records) != num_records or num_records < 1:
        raise ValueError(f"Expected {name}={num_records!r} to be a positive integer.")
    return int(num_records)


def check_clip_norm(clip_norm: float, name: str = "clip_norm") -> float:
    c = float(clip_norm)
    if not (c > 0.0) or math.isinf(c) or math.isnan(c):
        raise ValueError(f"Expected {name}={clip_norm!r} to be a finite number > 0.")
    return c


def check_noise_multiplier(noise_multiplier: float, name: str = "noise_multiplier") -> float:
    s = float(noise_multiplier)
    if not (s >= 0.0) or math.isinf(s) or math.isnan(s):
        raise ValueError(f"Expected {name}={noise_multiplier!r} to be a finite number >= 0.")
    return s


def check_steps(steps: int, name: str = "steps") -> int:
    if isinstance(steps, bool) or int(steps) != steps or steps < 0:
        raise ValueError(f"Expected {name}={steps!r} to be an integer >= 0.")
    return int(steps)


def check_choice(value: str, choices: tuple[str, ...], name: str) -> str:
    if value not in choices:
        raise ValueError(f"Expected {name}={value!r} to be one of {choices}.")
    return value

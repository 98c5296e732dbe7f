"""Next-fire computations per second over 10,000 mixed schedules.

What the dispatcher does per due job: compile the job's schedule and ask for the next instant.
Prints the figures; not a timed test. Usage: python scripts/bench_schedule.py [--schedules N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import datetime, timedelta

from jobsched.core.spec import Schedule
from jobsched.core.tz import UTC
from jobsched.schedule.engine import CompiledSchedule, compile_schedule

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Australia/Sydney",
    "Asia/Kolkata",
    "America/Los_Angeles",
    "Europe/London",
    "Asia/Tokyo",
    "America/Sao_Paulo",
]


def random_schedule(rng: random.Random) -> dict[str, object]:
    kind = rng.choice(["cron", "cron", "aws", "rate", "macro", "hash", "calendar", "blackout"])
    zone = rng.choice(ZONES)
    minute, hour = rng.randrange(60), rng.randrange(24)
    expression = {
        "cron": rng.choice(
            [
                f"{minute} {hour} * * *",
                f"*/{rng.choice([5, 10, 15, 30])} * * * *",
                f"{minute} * * * 1-5",
            ]
        ),
        "aws": rng.choice(
            [
                f"cron({minute} {hour} ? * MON-FRI *)",
                f"cron(0 {hour} L * ? *)",
                f"cron({minute} {hour} ? * 2#1 *)",
            ]
        ),
        "rate": rng.choice(["rate(1 minute)", "rate(5 minutes)", "rate(15 minutes)", "rate(2 hours)"]),
        "macro": rng.choice(["@hourly", "@daily", "@weekly", "@monthly"]),
        "hash": rng.choice(["H H * * *", "H/15 * * * *", "H H(0-5) * * 1-5"]),
        "calendar": f"{minute} {hour} * * *",
        "blackout": f"{minute} * * * *",
    }[kind]
    spec: dict[str, object] = {"expression": expression, "timezone": zone}
    if kind == "rate":
        spec["start_at"] = "2026-01-01T00:00:00Z"
    if kind == "calendar":
        spec["calendar"] = {
            "skip_holidays": rng.choice(["US", "DE", "GB", "AU"]),
            "business_days_only": True,
        }
    if kind == "blackout":
        spec["blackouts"] = [{"cron": "0 22 * * FRI", "duration": "4h", "action": rng.choice(["skip", "defer"])}]
    if rng.random() < 0.2:
        spec["jitter"] = "5m"
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    specs = [Schedule.model_validate(random_schedule(rng)) for _ in range(args.schedules)]
    start = datetime(2027, 3, 1, tzinfo=UTC)
    afters = [start + timedelta(seconds=rng.randrange(366 * 86400)) for _ in specs]

    # Compile + next fire: what a dispatcher tick does per due job. The first round starts with empty caches.
    cold_rates = []
    for _ in range(args.rounds):
        began = time.perf_counter()
        for index, spec in enumerate(specs):
            compile_schedule(spec, hash_key=f"team/job-{index}").next_fires(afters[index], 1)
        cold_rates.append(len(specs) / (time.perf_counter() - began))

    # Warm: compiled once, then next fire; and a dispatcher's due-window query.
    compiled: list[CompiledSchedule] = [
        compile_schedule(spec, hash_key=f"team/job-{index}") for index, spec in enumerate(specs)
    ]
    warm_rates = []
    for _ in range(args.rounds):
        began = time.perf_counter()
        for index, schedule in enumerate(compiled):
            schedule.next_fires(afters[index], 1)
        warm_rates.append(len(specs) / (time.perf_counter() - began))

    print(f"schedules={len(specs)} (cron, AWS cron, rate, macros, H, calendars, blackouts; 10 zones)")
    print(f"first_round_per_second={cold_rates[0]:.0f}  (compile + next instant, empty parse caches)")
    print(f"compile_and_next_per_second={statistics.median(cold_rates):.0f}  (median of {args.rounds} rounds)")
    print(f"next_fire_per_second={statistics.median(warm_rates):.0f}  (compiled schedules, next instant only)")
    print(f"microseconds_per_schedule={1e6 / statistics.median(cold_rates):.0f}")


if __name__ == "__main__":
    main()

"""A month of the examples' chargeback: each scheduled example job (``examples/jobs``) run through January 2027 on
the real dispatcher and worker over the memory stores (the ``jobsched test`` harness, targets stubbed to succeed,
each attempt and DAG run metered as deployed), then priced by team and job with the one price table.

The stubs report no usage of their own, so the targets' share is $0 here: what the teams' own functions, tasks and
machines cost depends on them (a Lambda's billed time, a task's size), and the chargeback adds it as they report it.

Run: ``python -m scripts.examples_chargeback`` (a few seconds).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from jobsched.cli.harness import Harness, JobTest
from jobsched.core.prices import US_EAST_1
from jobsched.pipeline.usage import DagRunUsage
from jobsched.planning.chargeback import chargeback
from jobsched.registry.jobfile import find_job_files, load_job_file

ROOT = Path(__file__).resolve().parents[1]
MONTH = "2027-01"
WINDOW = {"from": "2027-01-01T00:00:00Z", "to": "2027-02-01T00:00:00Z"}


def main() -> None:
    lines = []
    skipped: list[str] = []
    for path in find_job_files([ROOT / "examples" / "jobs"]):
        spec = load_job_file(path)
        if spec.schedule is None:
            continue
        tasks = spec.dag.tasks if spec.dag is not None else []
        if spec.wait_conditions() or any(task.map is not None and task.map.mode == "distributed" for task in tasks):
            skipped.append(f"{spec.key}: it reads from S3 (a wait for data, or a distributed map's inventory)")
            continue
        # Every task answers a little of everything: a map's items, an extract's rows and files.
        answer = {"output": {"items": ["a", "b"], "rows": 10, "files": ["s3://lake/x.csv"]}}
        names = [task.name for task in spec.dag.tasks] if spec.dag is not None else ["target"]
        stubs = dict.fromkeys(names, answer)
        test = JobTest.model_validate({"job": path.name, "window": WINDOW, "stubs": stubs, "expect": {}})
        harness = Harness(spec, test)
        harness.worker.usage = harness.jobs  # as deployed: every attempt metered
        harness.runs.lifecycle.subscribe(DagRunUsage(harness.jobs, harness.clock))
        harness.run()
        bill = chargeback(harness.jobs, spec.team, MONTH, by="job", prices=US_EAST_1)
        lines += [(spec.team, line) for line in bill.lines]
        assert harness.jobs.usage_between(spec.team, date(2027, 1, 1), date(2027, 1, 31)), spec.key
    print(f"the examples' chargeback for {MONTH} ({US_EAST_1.label}; the stubbed targets' own cost left out):")
    total = 0.0
    for team, line in sorted(lines, key=lambda item: (-item[1].total, item[1].key)):
        total += line.total
        print(f"  {team:10} {line.key:36} {line.runs:6,} runs {line.attempts:6,} attempts  ${line.total:.4f}")
    for reason in skipped:
        print(f"  not run here: {reason}")
    print(f"examples_chargeback_usd={total:.4f}")


if __name__ == "__main__":
    main()

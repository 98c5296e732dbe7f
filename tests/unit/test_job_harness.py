"""#49: `jobsched test` runs job files' tests with no stack and no AWS: the examples' own tests pass as typed (a
subprocess from the repo root, as a team's CI runs them), a wrong expectation fails with what was expected and what
happened, --stub answers a task from a file, and a malformed test is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from jobsched.cli.harness import JobTest, run_test_file
from tests.readme import ROOT, jobsched


def test_the_examples_own_tests_pass_as_typed() -> None:
    done = jobsched("test", "examples/tests")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASS") == 5 and "5 passed, 0 failed" in done.stderr


def test_a_wrong_expectation_fails_saying_what_happened(tmp_path: Path) -> None:
    wrong = yaml.safe_load((ROOT / "examples/tests/nightly-etl.test.yaml").read_text())
    wrong["job"] = str(ROOT / "examples/jobs/nightly-etl.yaml")
    wrong["expect"] = {"fires": ["2027-07-05T08:00:00Z"], "tasks": {"load": "FAILED"}}
    (tmp_path / "wrong.test.yaml").write_text(yaml.safe_dump(wrong))
    done = jobsched("test", str(tmp_path))
    assert done.returncode == 1
    assert (
        'fires: expected ["2027-07-05T08:00:00Z"], got ["2027-07-02T08:00:00Z", "2027-07-06T08:00:00Z"]' in done.stdout
    )
    assert 'tasks[load]: expected ["FAILED"], got ["SUCCEEDED"]' in done.stdout


def test_a_stub_from_a_file_answers_a_task(tmp_path: Path) -> None:
    empty = tmp_path / "empty-extract.json"
    empty.write_text(json.dumps({"rows": 0, "files": []}))
    done = jobsched("test", "examples/tests/nightly-etl.test.yaml", "--stub", f"extract={empty}", "--format", "json")
    assert done.returncode == 1  # the stub makes the extract's check fail: the test's expectations do not hold
    [outcome] = json.loads(done.stdout)
    assert outcome["observed"]["tasks"]["extract"] == ["FAILED"] and outcome["observed"]["statuses"] == {"FAILED": 2}


def test_a_malformed_test_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "bad.test.yaml").write_text("job: nowhere.yaml\nwindow: {from: 2027-01-01T00:00:00Z}\nexpect: {}\n")
    done = jobsched("test", str(tmp_path))
    assert done.returncode == 2 and "bad.test.yaml" in done.stderr


def test_a_job_that_keeps_failing_retries_then_pages_and_a_triggered_job_runs_with_its_payload(tmp_path: Path) -> None:
    job = {
        "name": "flaky",
        "team": "ops",
        "target": {"type": "lambda", "function": "f", "payload": {"day": "today"}},
        "retry": {"max_attempts": 2, "backoff": {"initial": "1m", "jitter": "none"}},
    }
    (tmp_path / "flaky.yaml").write_text(yaml.safe_dump(job))
    test = {
        "job": "flaky.yaml",
        "window": {"from": "2027-01-04T09:00:00Z", "to": "2027-01-04T12:00:00Z"},
        "triggers": [{"at": "2027-01-04T09:30:00Z", "payload": {"day": "2027-01-03"}}],
        "stubs": {"target": {"fail": "database down"}},
        "expect": {"statuses": {"FAILED": 1}, "payloads": {"target": {"day": "2027-01-03"}}, "pages": 1},
    }
    path = tmp_path / "flaky.test.yaml"
    path.write_text(yaml.safe_dump(test))
    JobTest.model_validate(test)
    outcome = run_test_file(path)
    assert outcome.passed, outcome.failures
    assert list(outcome.observed.attempts.values()) == [2] and outcome.observed.fires == []  # triggered, not fired

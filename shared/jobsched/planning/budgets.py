"""Budgets watched: every team's month-to-date bill (``planning.chargeback``) against its budget (``core.budgets``),
from the heartbeat checker every ``CHECK_EVERY`` minutes. A warning pages (the budget's escalation, or the
deployment's topic; a job's own budget, the job's); a hard threshold pauses the team's non-critical jobs (or the
job) with the reason, each pause in the job's history, and pages. A platform admin resumes what a budget paused
(``resume_budget_paused``): exactly the jobs still paused by it.

Order: act, then record the month's state (a conditional write). A crash between repeats the act at the next check:
a pause of a paused job changes nothing, and the page's event id (team, month, threshold) makes the escalation handler
count it once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from jobsched.core.budgets import Budget, BudgetState, Crossing, budget_subject, crossings
from jobsched.core.prices import PriceTable
from jobsched.core.runs import instant_text
from jobsched.paging.escalation_events import EscalationEvent
from jobsched.planning.chargeback import chargeback
from jobsched.ports import BudgetsPort, RegistryPort, UsagePort
from jobsched.registry.jobs import pause_job, resume_job
from jobsched.schedule.company import CompanySettings

log = logging.getLogger(__name__)
PRINCIPAL = "jobsched:budget"
REASON_PREFIX = "budget: "
CHECK_EVERY = 15  # minutes between two checks of the budgets (the heartbeat ticks each minute)
MAX_TEAM_JOBS = 2000
PAGE = 500


class BudgetJobs(RegistryPort, BudgetsPort, UsagePort, Protocol):
    """The jobs store as budgets use it."""


@dataclass
class BudgetWatch:
    jobs: BudgetJobs
    publish: Callable[[EscalationEvent], None]  # to the escalation queue (``Alerts.publish``)
    prices: PriceTable

    def due(self, now: datetime) -> bool:
        return now.minute % CHECK_EVERY == 0

    def check_all(self, now: datetime) -> list[Crossing]:
        crossed: list[Crossing] = []
        for team, document in sorted(self.jobs.budgets().items()):
            try:
                crossed += self.check(team, Budget.model_validate(document), now)
            except Exception:  # one team's bad month stops no other team's check
                log.exception("budget check failed", extra={"team": team})
        return crossed

    def check(self, team: str, budget: Budget, now: datetime) -> list[Crossing]:
        month = now.strftime("%Y-%m")
        bill = chargeback(self.jobs, team, month, by="job", prices=self.prices)
        values, version = self.jobs.budget_state(team, month)
        state = BudgetState.from_values(values, version) if values else BudgetState(month)
        found = crossings(team, budget, state, bill.total, {line.key: line.total for line in bill.lines})
        for crossing in found:
            paused = self._pause(team, crossing, month, now) if crossing.hard else []
            state.paused = sorted({*state.paused, *paused})
            self.publish(self._event(team, crossing, month, now, paused))
            if crossing.subject == team:
                state.warned = state.warned if crossing.hard else sorted({*state.warned, crossing.fraction})
                state.hard = state.hard or crossing.hard
            elif crossing.hard:
                state.job_hard = sorted({*state.job_hard, crossing.subject})
            else:
                state.job_warned[crossing.subject] = sorted({*state.job_warned.get(crossing.subject, []),
                                                             crossing.fraction})  # fmt: skip
        if found and not self.jobs.put_budget_state(team, month, state.as_values(), expected_version=version):
            log.info("budget state written by another check", extra={"team": team})
        return found

    def _pause(self, team: str, crossing: Crossing, month: str, now: datetime) -> list[str]:
        """The team's non-critical jobs (or the job itself, whatever its tier), paused with the reason."""
        reason = REASON_PREFIX + crossing.message(month) + "; an admin resumes: jobsched admin budget --resume"
        targets = [crossing.subject] if crossing.subject != team else self._team_jobs(team, critical=False)
        paused = []
        for job in targets:
            current = self.jobs.get(job)
            if current is None or current.state == "PAUSED":
                continue
            pause_job(self.jobs, job, now=now, principal=PRINCIPAL, reason=reason[:500])
            paused.append(job)
        return paused

    def _team_jobs(self, team: str, *, critical: bool) -> list[str]:
        found: list[str] = []
        after: str | None = None
        while len(found) < MAX_TEAM_JOBS:
            keys, after = self.jobs.team_page(team, limit=PAGE, after_name=after)
            stored = self.jobs.get_many(keys) if keys else {}
            found += [key for key in keys if key in stored and (stored[key].spec.tier == "critical") == critical]
            if after is None:
                break
        return found

    def _event(self, team: str, crossing: Crossing, month: str, now: datetime, paused: list[str]) -> EscalationEvent:
        job = crossing.subject if crossing.subject != team else None
        message = crossing.message(month)
        if crossing.hard:
            spared = "" if job else "; critical jobs keep running"
            message += f"; paused {len(paused)} job(s){spared}"
        return EscalationEvent(
            kind="budget_exceeded" if crossing.hard else "budget_warning",
            subject=job or budget_subject(team),
            occurred_at=instant_text(now),
            team=team,
            job=job,
            run_id=f"{month}:{crossing.fraction}",  # the event id: one page a threshold a month
            error=message,
        )

    def resume(self, team: str, *, principal: str, now: datetime) -> list[str]:
        """Resume exactly the team's jobs a budget paused and that are still paused by it."""
        resumed = []
        company = CompanySettings.read(self.jobs)  # once for every job it resumes
        for critical in (False, True):  # a job's own budget may have paused a critical job
            for job in self._team_jobs(team, critical=critical):
                stored = self.jobs.get(job)
                if (
                    stored is not None
                    and stored.state == "PAUSED"
                    and (stored.paused_reason or "").startswith(REASON_PREFIX)
                ):
                    resume_job(self.jobs, job, now=now, principal=principal, company=company)
                    resumed.append(job)
        return resumed

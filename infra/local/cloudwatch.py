"""CloudWatch alarms evaluated locally (#14): the template's own alarm definitions over datapoints the
local runtime records, so `make run` shows which alarm would page, and why, without an AWS account.

What is evaluated as CloudWatch does: the statistic over each period (Sum, Average, Minimum, Maximum,
SampleCount, pNN), the comparison with the threshold, ``EvaluationPeriods`` and ``DatapointsToAlarm``
(M of N), ``TreatMissingData`` (breaching, notBreaching, ignore, missing) and metric math with the
operators and ``IF`` the burn-rate alarms use. ``time_scale`` shrinks every period (60: a 5-minute period
lasts 5 s) so alarms can be exercised in seconds. Pure: time comes in as an argument.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

State = Literal["OK", "ALARM", "INSUFFICIENT_DATA"]
MetricKey = tuple[str, str, frozenset[tuple[str, str]]]  # namespace, name, dimensions


def metric_key(namespace: str, name: str, dimensions: Mapping[str, str]) -> MetricKey:
    return namespace, name, frozenset(dimensions.items())


@dataclass(frozen=True)
class MetricQuery:
    id: str
    key: MetricKey | None = None  # a metric, or
    stat: str = "Sum"
    period: float = 300.0
    expression: str | None = None  # metric math over other queries' ids
    returns: bool = True


@dataclass(frozen=True)
class AlarmSpec:
    name: str
    queries: tuple[MetricQuery, ...]
    threshold: float
    comparison: str
    evaluation_periods: int
    datapoints_to_alarm: int
    treat_missing: str = "missing"
    period: float = 300.0  # of the returned series
    actions: tuple[str, ...] = ()


@dataclass
class AlarmStatus:
    state: State = "INSUFFICIENT_DATA"
    reason: str = "not evaluated yet"
    changed_at: float = 0.0


COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": operator.gt,
    "GreaterThanOrEqualToThreshold": operator.ge,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}


def statistic(name: str, values: list[float]) -> float | None:
    if not values:
        return None
    if name == "Sum":
        return math.fsum(values)
    if name == "Average":
        return math.fsum(values) / len(values)
    if name == "Minimum":
        return min(values)
    if name == "Maximum":
        return max(values)
    if name == "SampleCount":
        return float(len(values))
    if name.lower().startswith("p"):
        ordered = sorted(values)
        rank = max(1, math.ceil(float(name[1:]) / 100 * len(ordered)))
        return ordered[min(rank, len(ordered)) - 1]
    raise ValueError(f"statistic {name} is not supported locally")


@dataclass
class Datapoints:
    """Values per metric with their timestamps (seconds)."""

    series: dict[MetricKey, list[tuple[float, float]]] = field(default_factory=dict)

    def put(self, key: MetricKey, value: float, at: float) -> None:
        self.series.setdefault(key, []).append((at, value))

    def window(self, key: MetricKey, start: float, end: float) -> list[float]:
        return [value for at, value in self.series.get(key, ()) if start <= at < end]

    def forget_before(self, at: float) -> None:
        for key, points in self.series.items():
            self.series[key] = [(t, v) for t, v in points if t >= at]


_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def evaluate_expression(expression: str, values: Mapping[str, float | None]) -> float | None:
    """Metric math with + - * /, comparisons, IF(condition, then, else) and FILL(id, value); None when an
    input is missing, as CloudWatch gives no datapoint where a series has none (FILL supplies one)."""
    tree = ast.parse(expression.replace("IF(", "IF_(").replace("AND", "and").replace("OR", "or"), mode="eval")
    result = _MetricMath(expression, values).walk(tree.body)
    return None if result is None else float(result)


@dataclass(frozen=True)
class _MetricMath:
    expression: str
    values: Mapping[str, float | None]

    def walk(self, node: ast.AST) -> Any:
        handlers: dict[type, Callable[[Any], Any]] = {
            ast.Constant: self._constant,
            ast.Name: self._name,
            ast.BinOp: self._binary,
            ast.Compare: self._compare,
            ast.Call: self._call,
        }
        handler = handlers.get(type(node))
        if handler is None:
            raise self._unsupported(node)
        return handler(node)

    def _unsupported(self, node: ast.AST) -> ValueError:
        return ValueError(f"metric math not supported locally: {ast.dump(node)[:80]}")

    def _constant(self, node: ast.Constant) -> float:
        if not isinstance(node.value, int | float):
            raise self._unsupported(node)
        return float(node.value)

    def _name(self, node: ast.Name) -> float | None:
        if node.id not in self.values:
            raise ValueError(f"unknown id {node.id} in {self.expression}")
        return self.values[node.id]

    def _binary(self, node: ast.BinOp) -> Any:
        if type(node.op) not in _OPERATORS:
            raise self._unsupported(node)
        left, right = self.walk(node.left), self.walk(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
            return None
        return _OPERATORS[type(node.op)](left, right)

    def _compare(self, node: ast.Compare) -> float | None:
        if len(node.ops) != 1 or type(node.ops[0]) not in _OPERATORS:
            raise self._unsupported(node)
        left, right = self.walk(node.left), self.walk(node.comparators[0])
        if left is None or right is None:
            return None
        return 1.0 if _OPERATORS[type(node.ops[0])](left, right) else 0.0

    def _call(self, node: ast.Call) -> Any:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name == "FILL":
            series, filler = node.args
            value = self.walk(series)
            return self.walk(filler) if value is None else value
        if name == "IF_":
            condition, then, otherwise = node.args
            chosen = self.walk(condition)
            if chosen is None:
                return None
            return self.walk(then) if chosen else self.walk(otherwise)
        raise self._unsupported(node)


def period_value(alarm: AlarmSpec, data: Datapoints, end: float, scale: float) -> float | None:
    """The alarm's returned value for the period ending at ``end`` (None: missing data)."""
    values: dict[str, float | None] = {}
    for query in alarm.queries:
        if query.key is not None:
            span = query.period / scale
            values[query.id] = statistic(query.stat, data.window(query.key, end - span, end))
    for query in alarm.queries:
        if query.expression is not None:
            values[query.id] = evaluate_expression(query.expression, values)
    returned = [q for q in alarm.queries if q.returns]
    return values[returned[0].id] if returned else None


def evaluate(
    alarm: AlarmSpec, data: Datapoints, now: float, scale: float = 1.0, *, since: float | None = None
) -> tuple[State, str]:
    """The state the alarm is in at ``now``, and why (CloudWatch's M-of-N over the last N periods). ``since``: when
    the alarm was created; a period that began before it is not judged (a new alarm is INSUFFICIENT_DATA until it
    has a whole period to look at, so a healthy stack does not start in ALARM on data it could not have sent)."""
    span = alarm.period / scale
    last_end = math.floor(now / span) * span
    ends = [last_end - i * span for i in range(alarm.evaluation_periods)]
    ends = [end for end in ends if since is None or end - span >= since]
    if not ends:
        return "INSUFFICIENT_DATA", "no whole period since the alarm was created"
    periods = [period_value(alarm, data, end, scale) for end in ends]
    compare = COMPARISONS[alarm.comparison]
    breaching = 0
    present = [p for p in periods if p is not None]
    for value in periods:
        if value is None:
            if alarm.treat_missing == "breaching":
                breaching += 1
            continue
        if compare(value, alarm.threshold):
            breaching += 1
    shown = ", ".join("missing" if p is None else f"{p:g}" for p in periods)
    if breaching >= alarm.datapoints_to_alarm:
        return "ALARM", f"{breaching} of the last {len(periods)} periods breaching ({shown}) vs {alarm.threshold:g}"
    if not present and alarm.treat_missing in ("missing", "ignore"):
        return "INSUFFICIENT_DATA", f"no data in the last {len(periods)} periods"
    return "OK", f"{breaching} of the last {len(periods)} periods breaching ({shown}) vs {alarm.threshold:g}"


def alarms_from_template(template: Mapping[str, Any], resolve: Callable[[Any], str]) -> list[AlarmSpec]:
    """Every AWS::CloudWatch::Alarm of a synthesized template; ``resolve`` turns a Ref/GetAtt/Join into
    the deployed name (the local deployment knows them)."""
    found = []
    for logical, resource in template.get("Resources", {}).items():
        if resource.get("Type") != "AWS::CloudWatch::Alarm":
            continue
        props = resource["Properties"]
        if "MetricName" in props:
            dimensions = {d["Name"]: resolve(d["Value"]) for d in props.get("Dimensions", [])}
            period = float(props.get("Period", 300))
            queries: tuple[MetricQuery, ...] = (
                MetricQuery(
                    id="m",
                    key=metric_key(props["Namespace"], props["MetricName"], dimensions),
                    stat=props.get("Statistic") or props.get("ExtendedStatistic") or "Average",
                    period=period,
                ),
            )
        else:
            queries = tuple(_query(q, resolve) for q in props["Metrics"])
            period = max((q.period for q in queries if q.key is not None), default=300.0)
            period = float(next((q.get("Period") for q in props["Metrics"] if q.get("Period")), period))
        datapoints = int(props.get("DatapointsToAlarm") or props["EvaluationPeriods"])
        found.append(
            AlarmSpec(
                name=resolve(props.get("AlarmName") or logical),
                queries=queries,
                threshold=float(props["Threshold"]),
                comparison=props["ComparisonOperator"],
                evaluation_periods=int(props["EvaluationPeriods"]),
                datapoints_to_alarm=datapoints,
                treat_missing=props.get("TreatMissingData", "missing"),
                period=period,
                actions=tuple(resolve(action) for action in props.get("AlarmActions", [])),
            )
        )
    return found


def _query(query: Mapping[str, Any], resolve: Callable[[Any], str]) -> MetricQuery:
    if "MetricStat" in query:
        stat = query["MetricStat"]
        metric = stat["Metric"]
        dimensions = {d["Name"]: resolve(d["Value"]) for d in metric.get("Dimensions", [])}
        return MetricQuery(
            id=query["Id"],
            key=metric_key(metric["Namespace"], metric["MetricName"], dimensions),
            stat=stat["Stat"],
            period=float(stat["Period"]),
            returns=bool(query.get("ReturnData", True)),
        )
    return MetricQuery(id=query["Id"], expression=query["Expression"], returns=bool(query.get("ReturnData", True)))


@dataclass
class AlarmBoard:
    """The local alarms and their states; ``evaluate`` returns the transitions since the last call."""

    alarms: list[AlarmSpec]
    scale: float = 1.0
    status: dict[str, AlarmStatus] = field(default_factory=dict)
    created: float | None = None  # when the alarms were created (the stack started): earlier periods are not judged

    def evaluate(self, data: Datapoints, now: float) -> list[tuple[AlarmSpec, State, str]]:
        changed = []
        for alarm in self.alarms:
            state, reason = evaluate(alarm, data, now, self.scale, since=self.created)
            current = self.status.setdefault(alarm.name, AlarmStatus(changed_at=now))
            current.reason = reason
            if state != current.state:
                current.state, current.changed_at = state, now
                changed.append((alarm, state, reason))
        return changed

    def rows(self) -> Iterable[dict[str, Any]]:
        for alarm in self.alarms:
            current = self.status.get(alarm.name, AlarmStatus())
            yield {"alarm": alarm.name, "state": current.state, "since": current.changed_at, "reason": current.reason}

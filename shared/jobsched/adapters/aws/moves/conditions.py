"""What a condition expression says of an item that is not there, so a tombstone can be made to read as absent.

While tables move, a key deleted from the new table keeps a tombstone there (so its old item is never copied back).
A write over a tombstone must then pass or fail as it would over no item: ``over_tombstone`` rewrites its condition
``C`` into ``(tombstone AND C-of-nothing) OR (NOT tombstone AND C)``, where ``C-of-nothing`` is a constant found
here by evaluating ``C`` with every attribute missing (DynamoDB: a function of a missing path is false, except
``attribute_not_exists``; a comparison with one is false).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from typing import Any

from jobsched.adapters.aws.dynamo import from_item

_TOKEN = re.compile(
    r"\s*(?:(?P<op><>|<=|>=|=|<|>)|(?P<punct>[(),])|(?P<value>:[A-Za-z0-9_]+)"
    r"|(?P<word>[#A-Za-z_][#A-Za-z0-9_]*(?:\.[#A-Za-z_][#A-Za-z0-9_]*|\[\d+\])*))"
)
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_FUNCTIONS = {"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains", "size"}


class UndecidedCondition(ValueError):
    """A condition whose value on a missing item this module does not decide (none of jobsched's adapters write one)."""


def _tokens(expression: str) -> Iterator[tuple[str, str]]:
    position = 0
    expression = expression.rstrip()
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if not match or match.end() == position:
            raise UndecidedCondition(f"cannot read {expression[position:]!r} in {expression!r}")
        kind = match.lastgroup or ""
        yield kind, match.group(kind)
        position = match.end()


class _Parser:
    """Recursive descent over DynamoDB's condition grammar: OR < AND < NOT < comparison / BETWEEN / IN / function."""

    def __init__(self, expression: str, values: dict[str, Any]) -> None:
        self.tokens = list(_tokens(expression))
        self.at = 0
        self.values = values
        self.expression = expression

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def take(self, text: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token[0] == "end" or (text is not None and token[1].upper() != text):
            raise UndecidedCondition(f"expected {text or 'more'} at {token[1]!r} in {self.expression!r}")
        self.at += 1
        return token

    def is_keyword(self, word: str) -> bool:
        kind, text = self.peek()
        return kind == "word" and text.upper() == word

    def parse(self) -> bool:
        result = self.disjunction()
        if self.peek()[0] != "end":
            raise UndecidedCondition(f"unexpected {self.peek()[1]!r} in {self.expression!r}")
        return result

    def disjunction(self) -> bool:
        result = self.conjunction()
        while self.is_keyword("OR"):
            self.take()
            right = self.conjunction()
            result = result or right
        return result

    def conjunction(self) -> bool:
        result = self.negation()
        while self.is_keyword("AND"):
            self.take()
            right = self.negation()
            result = result and right
        return result

    def negation(self) -> bool:
        if self.is_keyword("NOT"):
            self.take()
            return not self.negation()
        return self.predicate()

    def predicate(self) -> bool:
        kind, text = self.peek()
        if kind == "punct" and text == "(":
            self.take()
            result = self.disjunction()
            self.take(")")
            return result
        if kind == "word" and text in _FUNCTIONS and text != "size":
            self.take()
            self.take("(")
            self.operand()
            while self.peek()[1] == ",":
                self.take()
                self.operand()
            self.take(")")
            return text == "attribute_not_exists"
        left = self.operand()
        if self.is_keyword("BETWEEN"):
            self.take()
            low = self.operand()
            self.take("AND")
            high = self.operand()
            return None not in (left, low, high) and low <= left <= high
        if self.is_keyword("IN"):
            self.take()
            self.take("(")
            options = [self.operand()]
            while self.peek()[1] == ",":
                self.take()
                options.append(self.operand())
            self.take(")")
            return left is not None and left in options
        kind, comparison = self.take()
        if kind != "op":
            raise UndecidedCondition(f"expected a comparison at {comparison!r} in {self.expression!r}")
        right = self.operand()
        if comparison == "<>" and (left is None or right is None):
            # Whether `missing <> :v` holds is not what jobsched relies on anywhere: refuse rather than guess.
            raise UndecidedCondition(f"'<>' with a missing attribute in {self.expression!r}")
        if left is None or right is None:
            return False
        return bool(_COMPARE[comparison](left, right))

    def operand(self) -> Any:
        """A value's plain value; None for a path (missing on an absent item) or size() of one."""
        kind, text = self.take()
        if kind == "value":
            if text not in self.values:
                raise UndecidedCondition(f"{text} has no value in {self.expression!r}")
            return from_item({"v": self.values[text]})["v"]
        if kind == "word" and text == "size":
            self.take("(")
            self.operand()
            self.take(")")
            return None
        if kind == "word":
            return None
        raise UndecidedCondition(f"expected an operand at {text!r} in {self.expression!r}")


def holds_for_absent_item(condition: str, values: dict[str, Any] | None = None) -> bool:
    """``condition``'s value on an item that does not exist (``values``: the request's typed values)."""
    return _Parser(condition, values or {}).parse()


def grouped(expression: str) -> str:
    """``expression`` in parentheses, unless it already is one group (DynamoDB refuses redundant parentheses)."""
    text = expression.strip()
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for position, character in enumerate(text):
            depth += {"(": 1, ")": -1}.get(character, 0)
            if depth == 0 and position < len(text) - 1:
                break
        else:
            return text
    return f"({text})"


def over_tombstone(condition: str | None, values: dict[str, Any] | None, tombstone_name: str) -> str | None:
    """``condition`` such that a tombstone (an item with ``tombstone_name``) answers as no item would."""
    if condition is None:
        return None
    if holds_for_absent_item(condition, values):
        return f"attribute_exists({tombstone_name}) OR {grouped(condition)}"
    return f"attribute_not_exists({tombstone_name}) AND {grouped(condition)}"

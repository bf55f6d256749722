"""A fast path for the commonest CEL constraints, evaluated in Python; the CEL library decides everything else.

The CEL binding converts values between Python and Rust and copies a list on every read of it, so
`plan.selected_ids.all(i, i in ctx.pool)` over a 100-id pool costs tens of microseconds, most of a draft's
verification. The same expression evaluated on the Python values directly costs about a microsecond.

The fast path must never change a verdict, so it is narrow: it parses a small subset of CEL (member access, `size`,
`in`, comparisons, `!`, `&&`, `||`, `all` and `exists` over lists, int, string, bool and null literals) and evaluates
it only on plain JSON values (ints within int64, doubles, strings, bools, null, lists, maps with string keys). Wherever
CEL could do something it does not model — an error (a missing key, a type mismatch), a double compared, a map
iterated — it gives up (`Unsure`) and the library evaluates the expression as before. An expression outside the
subset is never tried (`compile_fast` returns None). tests/unit/verifier/test_verifier_cel_fast.py checks it against the
library on generated expressions and values.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Deeper expressions are left to the library (bounds the recursion of both the parser and the evaluation).
MAX_DEPTH = 32
_TOKEN = re.compile(
    r"\s*(?:(?P<int>\d+)(?![\w.])|(?P<string>'[^'\\\n]*'|\"[^\"\\\n]*\")"
    r"|(?P<name>[A-Za-z_]\w*)|(?P<op>&&|\|\||==|!=|<=|>=|[<>!().,\[\]]))"
)
RELATIONS = {"==", "!=", "<", "<=", ">", ">=", "in"}
DRAFT_NAMES = ("answer", "plan", "text")

# An evaluator takes the variables by name and returns the value; it raises Unsure where CEL might differ.
Evaluator = Callable[[dict], object]


class Unsure(Exception):
    """The fast path cannot be sure to give CEL's result: the library decides."""


class Unsupported(Exception):
    """The expression is outside the subset."""


@lru_cache(maxsize=1024)
def compile_fast(expression: str) -> Evaluator | None:
    """An evaluator for `expression`, or None when it is outside the subset."""
    try:
        tokens = tokenize(expression)
        parser = Parser(tokens)
        evaluator = parser.expression(0)
        if parser.position != len(tokens):
            raise Unsupported("trailing tokens")
    except Unsupported:
        return None
    return evaluator


def evaluate(evaluator: Evaluator, variables: dict) -> bool | None:
    """CEL's bool result, or None when the library must decide."""
    try:
        result = evaluator(variables)
    except (Unsure, RecursionError):
        return None
    return result if isinstance(result, bool) else None


def plain(value: object, budget: int = 10_000) -> bool:
    """Whether `value` holds only values the fast path models exactly (within `budget` nodes)."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > budget:
            return False
        kind = type(item)
        if kind is int:
            if not INT64_MIN <= item <= INT64_MAX:
                return False
        elif kind is list:
            stack.extend(item)
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            stack.extend(item.values())
        elif kind not in (str, bool, float, type(None)):
            return False  # subclasses, anything else (a double converts exactly; comparing one is Unsure)
    return True


def tokenize(expression: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    text = expression.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise Unsupported(f"no token at {position}")
        kind = match.lastgroup
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class Parser:
    """Recursive descent over CEL's precedence: || < && < relations (incl. `in`) < ! < member access."""

    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens = tokens
        self.position = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, value: str | None = None, kind: str | None = None) -> str:
        token = self.peek()
        if token is None or (value is not None and token[1] != value) or (kind is not None and token[0] != kind):
            raise Unsupported(f"expected {value or kind}")
        self.position += 1
        return token[1]

    def at(self, value: str) -> bool:
        token = self.peek()
        return token is not None and token[1] == value and token[0] in ("op", "name")

    def expression(self, depth: int) -> Evaluator:
        if depth > MAX_DEPTH:
            raise Unsupported("too deep")
        left = self.conjunction(depth + 1)
        while self.at("||"):
            self.take("||")
            left = either(left, self.conjunction(depth + 1))
        return left

    def conjunction(self, depth: int) -> Evaluator:
        left = self.relation(depth)
        while self.at("&&"):
            self.take("&&")
            left = both(left, self.relation(depth))
        return left

    def relation(self, depth: int) -> Evaluator:
        left = self.unary(depth)
        while (token := self.peek()) is not None and token[1] in RELATIONS and token[0] in ("op", "name"):
            self.position += 1
            left = compare(token[1], left, self.unary(depth))
        return left

    def unary(self, depth: int) -> Evaluator:
        if self.at("!"):
            self.take("!")
            return negation(self.unary(depth + 1))
        return self.member(depth)

    def member(self, depth: int) -> Evaluator:
        value = self.primary(depth)
        while self.at("."):
            self.take(".")
            name = self.take(kind="name")
            if not self.at("("):
                value = select(value, name)
                continue
            self.take("(")
            if name == "size":
                self.take(")")
                value = size(value)
            elif name in ("all", "exists"):
                variable = self.take(kind="name")
                self.take(",")
                predicate = self.expression(depth + 1)
                self.take(")")
                value = comprehension(name, value, variable, predicate)
            else:
                raise Unsupported(f"method {name}")
        return value

    def primary(self, depth: int) -> Evaluator:
        kind, text = self.peek() or (None, None)
        if kind is None:
            raise Unsupported("end of expression")
        self.position += 1
        if kind == "int":
            number = int(text)
            if number > INT64_MAX:
                raise Unsupported("int literal out of range")
            return lambda variables: number
        if kind == "string":
            string = text[1:-1]
            return lambda variables: string
        if kind == "name":
            if text in ("true", "false"):
                literal = text == "true"
                return lambda variables: literal
            if text == "null":
                return lambda variables: None
            if text == "size" and self.at("("):
                self.take("(")
                argument = self.expression(depth + 1)
                self.take(")")
                return size(argument)
            if self.at("(") or text in RELATIONS:
                raise Unsupported(f"function {text}")
            return variable(text)
        if text == "(":
            inner = self.expression(depth + 1)
            self.take(")")
            return inner
        if text == "[":
            items = []
            while not self.at("]"):
                items.append(self.expression(depth + 1))
                if not self.at("]"):
                    self.take(",")
            self.take("]")
            return lambda variables: [item(variables) for item in items]
        raise Unsupported(f"token {text}")


def variable(name: str) -> Evaluator:
    def read(variables: dict):
        if name not in variables:
            raise Unsure(f"undeclared {name}")  # the library raises its own message
        return variables[name]

    return read


def select(target: Evaluator, field: str) -> Evaluator:
    def read(variables: dict):
        value = target(variables)
        if type(value) is not dict or field not in value:
            raise Unsure("not a map with that key")
        return value[field]

    return read


def size(target: Evaluator) -> Evaluator:
    def measure(variables: dict):
        value = target(variables)
        if type(value) is str:
            return len(value) if value.isascii() else utf8_length(value)
        if type(value) not in (list, dict):
            raise Unsure("no size")
        return len(value)

    return measure


def utf8_length(value: str) -> int:
    """The binding's size() of a string: its UTF-8 bytes (the CEL spec says code points; the verdicts are the
    binding's)."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no string the binding could hold
        raise Unsure("not UTF-8") from None


def scalar_kind(value: object) -> type:
    kind = type(value)
    if kind not in (int, str, bool, type(None)):
        raise Unsure("not a scalar")
    return kind


def compare(operator: str, left: Evaluator, right: Evaluator) -> Evaluator:
    if operator == "in":
        # The types in the list last searched: a request's context list (ctx.pool) is searched for every id of
        # every draft, and it never changes (nothing mutates a compiled context or a parsed answer).
        last = [(None, frozenset())]  # one tuple, replaced whole: threads never see half of one

        def contains(variables: dict):
            needle, haystack = left(variables), right(variables)
            kind = scalar_kind(needle)
            if type(haystack) is dict:
                if kind is not str:
                    raise Unsure("map key of another type")
                return needle in haystack
            if type(haystack) is not list:
                raise Unsure("not a list")
            searched, kinds = last[0]
            if searched is not haystack:
                kinds = frozenset(map(type, haystack))
                last[0] = (haystack, kinds)
            if haystack and kinds != {kind}:
                raise Unsure("a list of mixed or other types")
            return needle in haystack

        return contains

    def relate(variables: dict):
        a, b = left(variables), right(variables)
        kind = scalar_kind(a)
        if scalar_kind(b) is not kind:
            raise Unsure("operands of different types")
        if operator == "==":
            return a == b
        if operator == "!=":
            return a != b
        if kind not in (int, str):
            raise Unsure("no ordering")
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[operator]

    return relate


def negation(operand: Evaluator) -> Evaluator:
    def negate(variables: dict):
        value = operand(variables)
        if type(value) is not bool:
            raise Unsure("not a bool")
        return not value

    return negate


def both(left: Evaluator, right: Evaluator) -> Evaluator:
    return short_circuit(left, right, deciding=False)


def either(left: Evaluator, right: Evaluator) -> Evaluator:
    return short_circuit(left, right, deciding=True)


def short_circuit(left: Evaluator, right: Evaluator, deciding: bool) -> Evaluator:
    """`&&` (False decides) or `||` (True decides): the left operand alone decides when it is `deciding`; otherwise
    both must be bools and the right one is the value."""

    def logical(variables: dict):
        a = left(variables)
        if a is deciding:
            return deciding
        b = right(variables)
        if a is not (not deciding) or type(b) is not bool:
            raise Unsure("not bools")
        return b

    return logical


def comprehension(kind: str, target: Evaluator, name: str, predicate: Evaluator) -> Evaluator:
    if name in ("true", "false", "null") or name in RELATIONS:
        raise Unsupported("reserved name")

    def run(variables: dict):
        items = target(variables)
        if type(items) is not list:
            raise Unsure("not a list")  # a map iterates its keys, in an order of its own
        scope = dict(variables)
        results = []
        for item in items:
            scope[name] = item
            result = predicate(scope)
            if type(result) is not bool:
                raise Unsure("not a bool")
            results.append(result)
        return all(results) if kind == "all" else any(results)

    return run

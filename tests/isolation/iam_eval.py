"""An offline evaluator of IAM policies, for exactly the constructs memlane's documents use.

A test tool, never shipped: it lets the isolation suite check the policy documents in
``infra/iam/`` against named attacks without an AWS account. It follows AWS's documented
evaluation logic for what it supports and refuses everything else (``UnsupportedPolicy``), so a
construct it does not understand can never be silently judged.

Supported:

- ``Version`` ``2012-10-17`` (policy variables are substituted; under ``2008-10-17`` they are
  literal text, as in AWS).
- ``Effect`` Allow / Deny: an explicit deny beats any allow; no matching allow is an implicit deny.
- ``Action`` (string or list): ``service:action``, case-insensitive, ``*`` and ``?`` wildcards.
- ``Resource`` (string or list): ARN patterns with ``*`` and ``?``, case-sensitive. A wildcard stays
  inside its colon-separated segment, except a ``*`` that ends a segment, which may run on past
  colons (the documented rule). A statement without ``Resource`` is allowed only beside a
  ``Principal`` (a trust policy: the resource is the role itself). ``NotResource``: the statement
  applies to every resource but those (same patterns).
- ``Principal``: ``"*"`` or ``{"AWS": arn | [arn, ...]}``, matched exactly against the caller, except
  an account (``arn:<partition>:iam::<account>:root`` or the bare 12-digit id), which stands for every
  principal of that account (the account delegates to its identity policies, as in AWS).
- Policy variables ``${key}`` in Resource and condition values, for ``aws:PrincipalTag/<tag>``
  and any single-valued context key; ``${*}``, ``${?}``, ``${$}`` for the literal characters.
  A variable whose key is absent (or multivalued) resolves to nothing: a Resource holding it
  matches nothing, and a condition value holding it matches nothing — AWS calls such a
  statement invalid, and it grants nothing. A condition left with no usable value is false,
  whatever its operator.
- Condition operators ``StringEquals``, ``StringLike``, ``ArnEquals``, ``ArnLike``, their
  ``ForAllValues:`` and ``ForAnyValue:`` forms, and ``Null``. The two ARN operators are the same in AWS:
  the six colon-separated parts are compared one by one, each with ``*`` and ``?`` wildcards that stay
  inside their part (the last part, the resource, is everything after the fifth colon). Several operators, and several keys under one operator,
  are ANDed; several values for one key are ORed.
  * A single-valued operator on an absent key is false; on a multivalued key it is refused
    (``UnsupportedPolicy``): AWS's documents say to use a set operator there.
  * ``ForAllValues`` is TRUE when the key is absent or has no values (the known gap);
    otherwise every request value must match some policy value.
  * ``ForAnyValue`` is false when the key is absent or empty; otherwise some request value
    must match some policy value.
  * ``Null: "true"`` holds when the key is absent, ``"false"`` when it is present. A
    multivalued key with no values counts as absent (AWS leaves such a key out of the
    request context).
- Condition key names are case-insensitive; values are compared case-sensitively.
- ``aws:PrincipalArn`` is the request's ``principal`` unless the context gives it (for a role
  session, AWS sets it to the role's ARN, which is what the tests pass as the principal).
- Session tags are checked as STS checks them (key 1-128, value 0-256 characters of letters,
  spaces, digits and ``_ . : / = + - @``; keys unique ignoring case): a ``Request`` carrying a
  tag STS would refuse raises ``InvalidSessionTag``, because no such session can exist.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Union

ContextValue = Union[str, Sequence[str]]

POLICY_VERSION = "2012-10-17"
_STATEMENT_KEYS = {"Sid", "Effect", "Action", "Resource", "NotResource", "Condition", "Principal"}
_SET_PREFIXES = ("ForAllValues:", "ForAnyValue:")
_STRING_OPERATORS = {"StringEquals", "StringLike", "ArnEquals", "ArnLike"}
_ACCOUNT_ROOT = re.compile(r"^arn:[\w-]+:iam::(\d{12}):root$")
_ACCOUNT_ID = re.compile(r"^\d{12}$")
_CALLER_ACCOUNT = re.compile(r"^arn:[\w-]+:(?:iam|sts)::(\d{12}):")
_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_LITERAL_VARIABLES = {"*": "*", "?": "?", "$": "$"}
_TAG_PUNCTUATION = set("_.:/=+-@")
PRINCIPAL_TAG = "aws:principaltag/"
REQUEST_TAG = "aws:requesttag/"


class UnsupportedPolicy(ValueError):
    """The document uses a construct this evaluator does not implement."""


class InvalidSessionTag(ValueError):
    """STS would refuse this session tag, so no request can carry it."""


class Decision(str, Enum):
    ALLOW = "Allow"
    EXPLICIT_DENY = "ExplicitDeny"
    IMPLICIT_DENY = "ImplicitDeny"


@dataclass(frozen=True)
class Request:
    """One authorization question: may `principal` (with its session tags) do `action` on `resource`?

    `context` holds the request's condition keys, e.g. ``{"dynamodb:LeadingKeys": ["s#a#t"]}``;
    a key that is not there is absent from the request. A list value is a multivalued key.
    """

    action: str
    resource: str
    principal_tags: Mapping[str, str] = field(default_factory=dict)
    context: Mapping[str, ContextValue] = field(default_factory=dict)
    principal: str | None = None

    def __post_init__(self) -> None:
        check_session_tags(self.principal_tags)
        check_session_tags({k[len(REQUEST_TAG):]: v for k, v in self.context.items()
                            if k.lower().startswith(REQUEST_TAG) and isinstance(v, str)})


# -- public API -------------------------------------------------------------------------------


def evaluate(policy: Mapping[str, Any], request: Request) -> Decision:
    """The decision of one policy document for one request."""
    allowed = False
    substitute = _substitutes(policy)
    for statement in _statements(policy):
        if not _statement_applies(statement, request, substitute):
            continue
        if statement["Effect"] == "Deny":
            return Decision.EXPLICIT_DENY  # nothing can override it
        allowed = True
    return Decision.ALLOW if allowed else Decision.IMPLICIT_DENY


def is_allowed(policy: Mapping[str, Any], request: Request) -> bool:
    return evaluate(policy, request) is Decision.ALLOW


def evaluate_all(policy: Mapping[str, Any], requests: Sequence[Request]) -> Decision:
    """All-or-nothing, as for a transaction authorized item by item: allowed only if every request is.

    An explicit deny of any part wins over an implicit one.
    """
    if not requests:
        raise ValueError("no requests to evaluate")
    decisions = [evaluate(policy, r) for r in requests]
    if Decision.EXPLICIT_DENY in decisions:
        return Decision.EXPLICIT_DENY
    if Decision.IMPLICIT_DENY in decisions:
        return Decision.IMPLICIT_DENY
    return Decision.ALLOW


def load_policy(path: str | Path, **placeholders: str) -> dict[str, Any]:
    """Read a policy document, filling template placeholders such as ``${TableArn}``.

    Only the named placeholders are replaced; IAM's own variables (``${aws:...}``, which always
    have a colon) are left for evaluation. A placeholder left unfilled is an error, so a document
    cannot grow a new placeholder unnoticed.
    """
    text = Path(path).read_text(encoding="utf-8")
    for name, value in placeholders.items():
        text = text.replace("${" + name + "}", value)
    leftover = sorted({m for m in _VARIABLE.findall(text) if ":" not in m and m not in _LITERAL_VARIABLES})
    if leftover:
        raise ValueError(f"{path}: placeholders not filled: {', '.join(leftover)}")
    return json.loads(text)


def placeholders(path: str | Path) -> set[str]:
    """The template placeholders of a document (``${Name}`` without a colon)."""
    text = Path(path).read_text(encoding="utf-8")
    return {m for m in _VARIABLE.findall(text) if ":" not in m and m not in _LITERAL_VARIABLES}


def check_session_tags(tags: Mapping[str, str]) -> None:
    """Raise InvalidSessionTag for a tag STS's AssumeRole would refuse."""
    seen: set[str] = set()
    for key, value in tags.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 128 or not _tag_text(key):
            raise InvalidSessionTag(f"session tag key {key!r} is not allowed by STS")
        if not isinstance(value, str) or len(value) > 256 or not _tag_text(value):
            raise InvalidSessionTag(f"session tag value {value!r} (key {key!r}) is not allowed by STS")
        if key.lower() in seen:
            raise InvalidSessionTag(f"session tag key {key!r} is repeated (keys are unique ignoring case)")
        seen.add(key.lower())


def is_valid_tag_value(value: str) -> bool:
    return isinstance(value, str) and len(value) <= 256 and _tag_text(value)


# -- statements -------------------------------------------------------------------------------


def _statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    unknown = set(policy) - {"Version", "Id", "Statement"}
    if unknown:
        raise UnsupportedPolicy(f"policy elements not supported: {sorted(unknown)}")
    statements = policy.get("Statement")
    if isinstance(statements, Mapping):
        statements = [statements]
    if not isinstance(statements, list) or not statements:
        raise UnsupportedPolicy("Statement must be a statement or a non-empty list of them")
    for statement in statements:
        unknown = set(statement) - _STATEMENT_KEYS
        if unknown:
            raise UnsupportedPolicy(f"statement elements not supported: {sorted(unknown)}")
        if statement.get("Effect") not in ("Allow", "Deny"):
            raise UnsupportedPolicy(f"Effect must be Allow or Deny, not {statement.get('Effect')!r}")
        if "Action" not in statement:
            raise UnsupportedPolicy("a statement needs an Action")
        if "Resource" in statement and "NotResource" in statement:
            raise UnsupportedPolicy("a statement has Resource or NotResource, not both")
        if "Resource" not in statement and "NotResource" not in statement and "Principal" not in statement:
            raise UnsupportedPolicy("a statement needs a Resource (or, in a trust policy, a Principal)")
    return statements


def _substitutes(policy: Mapping[str, Any]) -> bool:
    version = policy.get("Version", "2008-10-17")
    if version not in (POLICY_VERSION, "2008-10-17"):
        raise UnsupportedPolicy(f"unknown policy Version {version!r}")
    return version == POLICY_VERSION


def _statement_applies(statement: Mapping[str, Any], request: Request, substitute: bool) -> bool:
    if "Principal" in statement and not _principal_matches(statement["Principal"], request.principal):
        return False
    if not any(_action_matches(p, request.action) for p in _as_list(statement["Action"])):
        return False
    if "Resource" in statement and not any(
        _resource_matches(p, request, substitute) for p in _as_list(statement["Resource"])
    ):
        return False
    if "NotResource" in statement and any(
        _resource_matches(p, request, substitute) for p in _as_list(statement["NotResource"])
    ):
        return False
    condition = statement.get("Condition", {})
    if not isinstance(condition, Mapping):
        raise UnsupportedPolicy("Condition must be an object")
    for operator, block in condition.items():
        if not isinstance(block, Mapping) or not block:
            raise UnsupportedPolicy(f"{operator}: needs an object of condition keys")
        for key, values in block.items():
            if not _condition_holds(operator, key, _as_list(values), request, substitute):
                return False
    return True


def _principal_matches(principal: Any, caller: str | None) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, Mapping) or set(principal) != {"AWS"}:
        raise UnsupportedPolicy(f"Principal {principal!r}: only '*' or {{'AWS': ...}} is supported")
    return any(p == "*" or p == caller or _account_matches(p, caller) for p in _as_list(principal["AWS"]))


def _account_matches(pattern: str, caller: str | None) -> bool:
    """An account principal (its root ARN or its id) stands for every principal of the account."""
    account = _ACCOUNT_ROOT.match(pattern) or _ACCOUNT_ID.match(pattern)
    if account is None or caller is None:
        return False
    caller_account = _CALLER_ACCOUNT.match(caller)
    wanted = account.group(1) if account.re is _ACCOUNT_ROOT else pattern
    return caller_account is not None and caller_account.group(1) == wanted


def _action_matches(pattern: str, action: str) -> bool:
    if not isinstance(pattern, str) or (pattern != "*" and ":" not in pattern):
        raise UnsupportedPolicy(f"Action {pattern!r} must be '*' or 'service:action'")
    return _glob(pattern.lower(), crosses_colons=True).fullmatch(action.lower()) is not None


def _resource_matches(pattern: str, request: Request, substitute: bool) -> bool:
    parts = _resolve(pattern, request, substitute)
    if parts is None:
        return False  # an unresolved variable matches no resource
    return _arn_regex(parts).fullmatch(request.resource) is not None


# -- conditions -------------------------------------------------------------------------------


def _condition_holds(operator: str, key: str, policy_values: list[Any], request: Request,
                     substitute: bool) -> bool:
    set_operator, base = None, operator
    for prefix in _SET_PREFIXES:
        if operator.startswith(prefix):
            set_operator, base = prefix[:-1], operator[len(prefix):]
    if base.endswith("IfExists"):
        raise UnsupportedPolicy(f"{operator}: ...IfExists is not supported")
    present = _context_value(request, key)

    if base == "Null":
        if set_operator:
            raise UnsupportedPolicy(f"{operator}: Null takes no set operator")
        if len(policy_values) != 1:
            raise UnsupportedPolicy(f"Null on {key}: exactly one value, true or false")
        expect_absent = _bool(policy_values[0], operator)
        absent = present is None or (isinstance(present, list) and not present)
        return absent == expect_absent

    if base not in _STRING_OPERATORS:
        raise UnsupportedPolicy(f"condition operator {operator!r} is not supported")
    matchers = _matchers(base, policy_values, request, substitute)
    if not matchers:
        return False  # every value held an unresolvable variable

    def matches(value: str) -> bool:
        return any(m(value) for m in matchers)

    if set_operator is None:
        if present is None:
            return False
        if isinstance(present, list):
            raise UnsupportedPolicy(f"{operator} on multivalued key {key}: use ForAllValues or ForAnyValue")
        return matches(present)
    values = [] if present is None else ([present] if isinstance(present, str) else present)
    if set_operator == "ForAllValues":
        return all(matches(v) for v in values)  # vacuously true for an empty or absent key
    return any(matches(v) for v in values)


def _matchers(base: str, policy_values: list[Any], request: Request, substitute: bool) -> list[Any]:
    out = []
    for value in policy_values:
        if not isinstance(value, str):
            raise UnsupportedPolicy(f"{base}: values must be strings, not {value!r}")
        parts = _resolve(value, request, substitute)
        if parts is None:
            continue
        if base == "StringEquals":
            text = "".join(t for t, _ in parts)
            out.append(lambda v, text=text: v == text)
        elif base in ("ArnEquals", "ArnLike"):
            out.append(lambda v, parts=parts: _arn_like(parts, v))
        else:
            out.append(_glob_parts(parts, crosses_colons=True).fullmatch)
    return out


def _context_value(request: Request, key: str) -> str | list[str] | None:
    lowered = key.lower()
    if lowered.startswith(PRINCIPAL_TAG):
        tag = lowered[len(PRINCIPAL_TAG):]
        for name, value in request.principal_tags.items():
            if name.lower() == tag:
                return value
        return None
    for name, value in request.context.items():
        if name.lower() == lowered:
            return value if isinstance(value, str) else list(value)
    if lowered == "aws:principalarn":
        return request.principal
    return None


def _bool(value: Any, operator: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise UnsupportedPolicy(f"{operator}: value must be true or false, not {value!r}")


# -- variables and patterns -------------------------------------------------------------------


def _resolve(text: str, request: Request, substitute: bool) -> list[tuple[str, bool]] | None:
    """`text` as (piece, is_literal) pieces with its variables filled; None if one cannot be.

    Pieces that came from a variable are literal: a ``*`` in a tag value is not a wildcard.
    """
    if not substitute:
        return [(text, False)]
    pieces: list[tuple[str, bool]] = []
    last = 0
    for match in _VARIABLE.finditer(text):
        pieces.append((text[last:match.start()], False))
        name = match.group(1)
        if name in _LITERAL_VARIABLES:
            pieces.append((_LITERAL_VARIABLES[name], True))
        else:
            if "," in name:
                raise UnsupportedPolicy(f"${{{name}}}: default values are not supported")
            value = _context_value(request, name.strip())
            if not isinstance(value, str):
                return None  # absent, or multivalued (not usable as a variable)
            pieces.append((value, True))
        last = match.end()
    pieces.append((text[last:], False))
    return pieces


def _glob(pattern: str, *, crosses_colons: bool) -> re.Pattern[str]:
    return _glob_parts([(pattern, False)], crosses_colons=crosses_colons)


def _glob_parts(parts: list[tuple[str, bool]], *, crosses_colons: bool) -> re.Pattern[str]:
    star, one = (".*", ".") if crosses_colons else ("[^:]*", "[^:]")
    regex = []
    for text, literal in parts:
        if literal:
            regex.append(re.escape(text))
            continue
        for ch in text:
            regex.append(star if ch == "*" else one if ch == "?" else re.escape(ch))
    return re.compile("".join(regex), re.DOTALL)


def _arn_regex(parts: list[tuple[str, bool]]) -> re.Pattern[str]:
    """ARN wildcards stay within a segment, except a ``*`` ending one (next to ':' or the end)."""
    chars: list[tuple[str, bool]] = [(ch, literal) for text, literal in parts for ch in text]
    regex = []
    for i, (ch, literal) in enumerate(chars):
        if literal or ch not in "*?":
            regex.append(re.escape(ch))
        elif ch == "?":
            regex.append("[^:]")
        else:
            ends_segment = i + 1 == len(chars) or chars[i + 1][0] == ":"
            regex.append(".*" if ends_segment else "[^:]*")
    return re.compile("".join(regex), re.DOTALL)


def _arn_like(parts: list[tuple[str, bool]], value: str) -> bool:
    """ArnLike / ArnEquals: part by part over the six colon-separated parts, wildcards inside a part."""
    chars = [(ch, literal) for text, literal in parts for ch in text]
    pattern_parts: list[list[tuple[str, bool]]] = [[]]
    for ch, literal in chars:
        if ch == ":" and len(pattern_parts) < 6:
            pattern_parts.append([])
        else:
            pattern_parts[-1].append((ch, literal))
    value_parts = value.split(":", 5)
    if len(pattern_parts) != 6 or len(value_parts) != 6:
        return False
    return all(_glob_parts([(ch, literal) for ch, literal in p], crosses_colons=True).fullmatch(v) is not None
               for p, v in zip(pattern_parts, value_parts))


def _tag_text(text: str) -> bool:
    return all(ch in _TAG_PUNCTUATION or unicodedata.category(ch)[0] in "LZN" for ch in text)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]

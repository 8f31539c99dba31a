"""The one YAML reader, with the Pulumi CLI's semantics, and the writer of the documents we render.

The Pulumi CLI reads Pulumi.yaml and Pulumi.<stack>.yaml with gopkg.in/yaml.v3 v3.0.1
(pulumi/pulumi sdk/go/common/encoding/marshal.go `yamlMarshaler.Unmarshal`, into `any`, from
sdk/go/common/workspace/loaders.go `LoadProjectStackBytes`; sdk/go.mod pins yaml.v3 v3.0.1;
read at pulumi/pulumi commit 1b5949891b3cefcb9974752b24a5ecef0acc86c8). So does every reader here
of YAML a user writes (stack files, Pulumi.yaml, bootstrap/Pulumi.ci.yaml, an outputs file) and of
our own data files, through `load`:

- **Scalars as yaml.v3 resolves them** (go-yaml/yaml tag v3.0.1, resolve.go `resolve`; decode.go
  `scalar`): YAML 1.2's core schema, so `yes`, `no`, `on`, `off`, `y`, `n` are strings, and only
  `true`/`True`/`TRUE` and `false`/`False`/`FALSE` are booleans; `null`, `Null`, `NULL`, `~` and
  nothing are null; `2:00` is a string (no base-60); `1e3` is a float. Where yaml.v3 goes beyond
  the core schema we follow it: underscores are dropped from numbers (`1_000` is 1000), and Go's
  `strconv.ParseInt(s, 0, 64)` reads `0x1F`, `0o17`, `0b101` and `017` (octal) as integers.
  One difference, on purpose: yaml.v3 gives a date-like plain scalar (`2024-01-31`) to the CLI as a
  time, which the CLI writes back as an RFC 3339 timestamp; here it stays the string as written
  (no key of this project takes a date).
- **A key given twice in one mapping is refused** (decode.go `mapping`: "mapping key … already
  defined"), where PyYAML would silently keep the last one.
- **Excessive aliasing is refused before anything is built**, by yaml.v3's own rule (decode.go
  `unmarshal` and `allowedAliasRatio`): every node the decoder would visit counts, those reached
  through an alias also count as aliased, and once more than 100 aliased among more than 1,000
  decoded exceed the allowed share (99% up to 400,000 decodes, falling to 10% at 4,000,000), the
  document is refused. A YAML "billion laughs" stops after a few thousand counted nodes instead of
  expanding to 10^9; an anchor that contains its own alias is refused too ("anchor … value contains
  itself").
- **Nesting deeper than Python follows is refused** with the source named: composing and
  constructing recurse once per level, so past a few hundred levels (Python's recursion limit; the
  exact depth depends on the caller's stack) the document is a YamlError, never an internal error.
  yaml.v3 itself refuses only past 10,000 levels ("exceeded max depth of 10000": scannerc.go
  `max_flow_level` and `max_indents`, go-yaml/yaml tag v3.0.1, commit
  f6f7691b1fdeb513f56608cd2c32c51f8194bf51), so a document nested between those depths is one the
  CLI reads and this reader does not; no key of this project nests deeper than about ten.

The parser is libyaml's when PyYAML has it (the PyPI wheels do); the resolver and the alias count
are ours, in Python, and cost about as much as PyYAML's own resolver.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import BaseResolver

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

STR, INT, FLOAT, BOOL, NULL, MERGE = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "merge"))
SEQ, MAP = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"

# go-yaml v3.0.1 decode.go: alias_ratio_range_low, alias_ratio_range_high.
ALIAS_RATIO_RANGE_LOW = 400_000
ALIAS_RATIO_RANGE_HIGH = 4_000_000


class YamlError(yaml.YAMLError):
    """A document yaml.v3 refuses although PyYAML would read it (excessive aliasing, an anchor that
    contains itself, nesting too deep). Its message names the document's source."""

    def __init__(self, message: str, *, decodes: int = 0):
        super().__init__(message)
        self.decodes = decodes  # nodes counted before the document was refused


# --- scalars as yaml.v3 resolves them ------------------------------------------------------------

_KNOWN = {
    **dict.fromkeys(("true", "True", "TRUE"), (BOOL, True)),
    **dict.fromkeys(("false", "False", "FALSE"), (BOOL, False)),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), (FLOAT, math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (FLOAT, math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (FLOAT, -math.inf)),
    "<<": (MERGE, "<<"),
}
# resolve.go `yamlStyleFloat`, and Go's ParseFloat for a plain scalar that starts with a dot.
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
# Go's strconv.ParseInt(s, 0, 64) / ParseUint: an optional sign, then 0x/0o/0b with digits of that
# base, 0 followed by octal digits, or decimal digits.
_GO_INT = re.compile(r"([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]+)|(0|[1-9][0-9]*))")
# resolve.go parseTimestamp's first test: four digits and a hyphen.
_DATE_LIKE = re.compile(r"[0-9]{4}-")


def _go_int(text: str) -> int | None:
    match = _GO_INT.fullmatch(text)
    if not match:
        return None
    sign, hexa, octal, binary, old_octal, decimal = match.groups()
    if hexa is not None:
        value = int(hexa, 16)
    elif octal is not None:
        value = int(octal, 8)
    elif binary is not None:
        value = int(binary, 2)
    elif old_octal is not None:
        value = int(old_octal, 8)
    else:
        value = int(decimal, 10)
    value = -value if sign == "-" else value
    # ParseInt's range, then ParseUint's (which takes no sign); outside both, yaml.v3 tries a float.
    if value < -(2**63) or value > 2**64 - 1 or (sign and value > 2**63 - 1):
        return None
    return value


def _finite(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None  # Go's ParseFloat fails on overflow: a string


def resolve_plain(text: str) -> tuple[str, Any]:
    """(tag, value) of a plain (unquoted, untagged) scalar, as yaml.v3 resolves it."""
    if text in _KNOWN:
        return _KNOWN[text]
    first = text[0]
    if first == ".":
        if _DOT_FLOAT.fullmatch(text):
            return FLOAT, float(text)
    elif first in "+-0123456789":
        if _DATE_LIKE.match(text):
            return STR, text  # a timestamp for yaml.v3 (see the module's docstring)
        plain = text.replace("_", "")
        value = _go_int(plain)
        if value is not None:
            return INT, value
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            number = _finite(plain)
            if number is not None:
                return FLOAT, number
    return STR, text


class _Resolver(BaseResolver):
    """Tags as yaml.v3 gives them: plain scalars by `resolve_plain`, quoted ones are strings."""

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode:
            return resolve_plain(value)[0] if implicit[0] else STR
        return SEQ if kind is SequenceNode else MAP


class _Constructor(SafeConstructor):
    def construct_plain_value(self, node: ScalarNode) -> Any:
        tag, value = resolve_plain(node.value)
        if tag != node.tag and node.tag in (INT, FLOAT, BOOL, NULL):
            raise ConstructorError(None, None, f"cannot decode {tag.rsplit(':', 1)[1]} as a {node.tag.rsplit(':', 1)[1]}", node.start_mark)
        return value

    def construct_strict_mapping(self, node: MappingNode) -> dict:
        """A key given twice is refused (merged keys, `<<`, may be overridden, as in yaml.v3)."""
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                raise ConstructorError(None, None, "a mapping key that is itself a mapping or list", key_node.start_mark) from None
            if first is not key_node:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        return self.construct_mapping(node, deep=True)

    def construct_unknown(self, node: Node) -> Any:
        """A tag yaml.v3 does not know is decoded by the node's kind (decode.go: into `any`)."""
        if isinstance(node, ScalarNode):
            return node.value
        if isinstance(node, SequenceNode):
            return self.construct_sequence(node, deep=True)
        return self.construct_strict_mapping(node)


for _tag in (INT, FLOAT, BOOL, NULL):
    _Constructor.add_constructor(_tag, _Constructor.construct_plain_value)
_Constructor.add_constructor("tag:yaml.org,2002:timestamp", SafeConstructor.construct_yaml_str)
_Constructor.add_constructor(MAP, _Constructor.construct_strict_mapping)
_Constructor.add_constructor(None, _Constructor.construct_unknown)


# --- the alias bound ------------------------------------------------------------------------------


def allowed_alias_ratio(decodes: int) -> float:
    """go-yaml v3.0.1 decode.go `allowedAliasRatio`."""
    if decodes <= ALIAS_RATIO_RANGE_LOW:
        return 0.99
    if decodes >= ALIAS_RATIO_RANGE_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decodes - ALIAS_RATIO_RANGE_LOW) / (ALIAS_RATIO_RANGE_HIGH - ALIAS_RATIO_RANGE_LOW))


class _AliasCount:
    """Counts the nodes yaml.v3's decoder would visit in a composed document, and refuses it as
    soon as the decoder would. PyYAML composes an alias as a second reference to its anchor's node,
    so an edge is an alias where its node was met before; the edges are classified when their
    parent is met first, in document order (an alias always follows its anchor)."""

    def __init__(self, source: str):
        self.source = source
        self.decodes = 1  # the document node itself
        self.aliased = 0
        self.depth = 0
        self.seen: set[int] = set()
        self.open: set[int] = set()
        self.aliases: dict[int, tuple[bool, ...]] = {}

    def count(self) -> None:
        self.decodes += 1
        if self.depth:
            self.aliased += 1
        if self.aliased > 100 and self.decodes > 1000 and self.aliased / self.decodes > allowed_alias_ratio(self.decodes):
            raise YamlError(
                f"{self.source}: document contains excessive aliasing: {self.aliased} of the first {self.decodes} values come from "
                f"aliases (the Pulumi CLI's YAML reader, gopkg.in/yaml.v3, refuses more than {allowed_alias_ratio(self.decodes):.0%}); "
                "write the values out instead of repeating anchors",
                decodes=self.decodes,
            )

    def visit(self, node: Node) -> None:
        self.count()
        if isinstance(node, ScalarNode):
            self.seen.add(id(node))
            return
        children = [n for pair in node.value for n in pair] if isinstance(node, MappingNode) else node.value
        key = id(node)
        if key not in self.seen:
            self.seen.add(key)
            self.open.add(key)
            flags = []
            for child in children:
                alias = id(child) in self.seen
                if alias and id(child) in self.open:
                    raise YamlError(f"{self.source}: an anchor's value contains an alias of itself (line {child.start_mark.line + 1})")
                flags.append(alias)
                self.walk(child, alias)
            self.aliases[key] = tuple(flags)
            self.open.discard(key)
        else:
            for child, alias in zip(children, self.aliases[key]):
                self.walk(child, alias)

    def walk(self, node: Node, alias: bool) -> None:
        if not alias:
            self.visit(node)
            return
        self.count()  # the alias node
        self.depth += 1
        self.visit(node)
        self.depth -= 1


def check_aliasing(node: Node, source: str) -> int:
    """Refuses a composed document that yaml.v3 would refuse for its aliases; the nodes counted."""
    counter = _AliasCount(source)
    try:
        counter.visit(node)
    except RecursionError:
        error = _too_deep(source)
        error.decodes = counter.decodes
        raise error from None
    return counter.decodes


# --- loading --------------------------------------------------------------------------------------

_Parser: Any = getattr(yaml, "CParser", None)


if _Parser is not None:

    class _Loader(_Parser, _Constructor, _Resolver):  # type: ignore[misc,valid-type]
        def __init__(self, stream):
            _Parser.__init__(self, stream)
            _Constructor.__init__(self)
            _Resolver.__init__(self)

else:  # pragma: no cover - PyYAML built without libyaml

    class _Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer, _Constructor, _Resolver):  # type: ignore[no-redef]
        def __init__(self, stream):
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _Constructor.__init__(self)
            _Resolver.__init__(self)


def _too_deep(source: str) -> YamlError:
    return YamlError(
        f"{source}: nested too deeply for this reader (past a few hundred levels, Python's recursion limit; the Pulumi CLI's "
        "gopkg.in/yaml.v3 stops at 10,000); write it with fewer levels"
    )


def _documents(text: str, source: str) -> Iterable[Any]:
    loader = _Loader(text)
    try:
        while loader.check_node():
            try:
                node = loader.get_node()
            except RecursionError:
                raise _too_deep(source) from None
            check_aliasing(node, source)
            try:
                document = loader.construct_document(node)
            except RecursionError:
                raise _too_deep(source) from None
            yield document
    finally:
        loader.dispose()


def load(text: str, source: str = "<text>") -> Any:
    """One YAML document as the Pulumi CLI reads it (see the module's docstring); `source` (a file
    name) is named by the errors this reader adds to PyYAML's (yaml.YAMLError, all of them)."""
    documents = list(_documents(text, source))
    if len(documents) > 1:
        raise YamlError(f"{source}: expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None


def load_all(text: str, source: str = "<text>") -> list[Any]:
    return list(_documents(text, source))


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def dump_all(documents: Iterable[Any]) -> str:
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, allow_unicode=True)

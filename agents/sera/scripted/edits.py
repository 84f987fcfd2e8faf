"""Edit families of the scripted SERA teacher: small, seeded, syntax-preserving changes to one function.

A family turns the source of one function (as the teacher saw it through ``str_replace_editor
view``) into a new version: add a guard clause, add a type or range check, change a constant,
rename a local variable, extract a helper, wrap a call in error handling, add a docstring. Each
edit is an :class:`EditSpec` whose :meth:`EditSpec.fact` is one plain-English sentence; the teacher
says it while fixing, the synthetic issue repeats it, and :func:`parse_fact` reads it back, so the
second rollout can redo the edit from the issue text alone. :func:`apply_edit` with ``q < 1``
reproduces each new line with probability ``q`` and otherwise writes a plausible alternative
(a different message, a comment), which gives a controllable patch-recall distribution.

Source manipulation is hand-written on ``ast`` and ``tokenize`` because the edits must keep every
untouched line byte-identical (a diff-level property) which code-rewriting libraries (libcst,
rope) could provide only as a heavy dependency for seven small transformations.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import random
import re
import sys
import tokenize
from dataclasses import dataclass, field

from icml26.errors import input_error

FAMILIES = ("guard_none", "type_check", "range_check", "change_constant", "rename_local", "extract_helper",
            "wrap_errors", "add_docstring")

SIMPLE_TYPES = ("int", "str", "float", "bool", "bytes", "list", "dict", "tuple", "set")
RENAMES = {"i": "index", "j": "inner", "k": "key", "n": "count", "s": "text", "x": "item", "v": "value",
           "val": "value", "res": "result", "ret": "result", "tmp": "temp_value", "d": "mapping", "l": "items",
           "lst": "items", "idx": "position", "obj": "instance", "msg": "message", "cnt": "count", "num": "number",
           "result": "outcome", "value": "current_value", "data": "payload", "name": "label", "key": "lookup_key"}
COMMENTS = ("validate early", "see the issue", "keep behaviour explicit", "defensive check", "clarify intent")
PARAPHRASES = (("must not be", "cannot be"), ("must be", "should be"), ("failed", "raised an error"),
               ("is required", "is mandatory"), ("expected", "need"), ("non-negative", "at least zero"))


@dataclass
class EditSpec:
    """What to change: a family, the function's qualified name and the family's parameters."""

    family: str
    function: str
    params: dict = field(default_factory=dict)

    def fact(self) -> str:
        f, p = self.function, self.params
        if self.family == "guard_none":
            return (f"Passing `None` as `{p['param']}` to `{f}` is not rejected; it should raise `ValueError` "
                    f"with the message `{p['message']}`.")
        if self.family == "type_check":
            return (f"`{f}` accepts a `{p['param']}` that is not a `{p['type']}`; it should raise `TypeError` "
                    f"with a message starting with `{p['param']} must be {p['type']}`.")
        if self.family == "range_check":
            return (f"`{f}` accepts a negative `{p['param']}`; it should raise `ValueError` with a message "
                    f"starting with `{p['param']} must be non-negative`.")
        if self.family == "change_constant":
            return f"`{f}` uses the value `{p['old']}` where `{p['new']}` is expected."
        if self.family == "rename_local":
            return f"In `{f}` the local variable `{p['old']}` has an unclear name; it should be called `{p['new']}`."
        if self.family == "extract_helper":
            return (f"The expression returned by `{f}` should be computed by a module-level helper "
                    f"`{p['helper']}` so that it can be reused.")
        if self.family == "wrap_errors":
            return (f"When the call to `{p['callee']}` inside `{f}` fails, the original exception escapes "
                    f"without context; it should be re-raised as `{p['wrapper']}` with a message starting with "
                    f"`{f} failed:`.")
        if self.family == "add_docstring":
            return f"`{f}` has no docstring; its summary line should read `{p['summary']}`."
        raise input_error("EditSpec", "family", f"one of {FAMILIES}", self.family)


_NAME = r"[A-Za-z_][\w.]*"
_FACTS = (
    ("guard_none", rf"Passing `None` as `(?P<param>\w+)` to `(?P<function>{_NAME})` is not rejected; it should "
                   r"raise `ValueError` with the message `(?P<message>[^`]+)`"),
    ("type_check", rf"`(?P<function>{_NAME})` accepts a `(?P<param>\w+)` that is not a `(?P<type>\w+)`"),
    ("range_check", rf"`(?P<function>{_NAME})` accepts a negative `(?P<param>\w+)`"),
    ("change_constant", rf"`(?P<function>{_NAME})` uses the value `(?P<old>[^`]+)` where `(?P<new>[^`]+)` is expected"),
    ("rename_local", rf"In `(?P<function>{_NAME})` the local variable `(?P<old>\w+)` has an unclear name; it should "
                     r"be called `(?P<new>\w+)`"),
    ("extract_helper", rf"The expression returned by `(?P<function>{_NAME})` should be computed by a module-level "
                       r"helper `(?P<helper>\w+)`"),
    ("wrap_errors", rf"When the call to `(?P<callee>\w+)` inside `(?P<function>{_NAME})` fails, the original "
                    r"exception escapes without context; it should be re-raised as `(?P<wrapper>\w+)`"),
    ("add_docstring", rf"`(?P<function>{_NAME})` has no docstring; its summary line should read `(?P<summary>[^`]+)`"),
)


def parse_fact(text: str) -> EditSpec | None:
    """The first edit fact stated in ``text`` (an issue, a rollout's reasoning), or None."""
    best = None
    for family, pattern in _FACTS:
        match = re.search(pattern, re.sub(r"\s+", " ", text or ""))
        if match and (best is None or match.start() < best[0]):
            groups = match.groupdict()
            best = (match.start(), EditSpec(family, groups.pop("function"), groups))
    return best[1] if best else None


# ------------------------------------------------------------------------------------- the function

@dataclass
class FunctionSource:
    """One function's lines as viewed, parsed after removing the ``def`` line's indentation."""

    lines: list[str]          # original lines, no newlines
    indent: str               # indentation of the def line
    node: ast.FunctionDef     # parsed from the dedented lines (line 1 = the def line)
    complete: bool            # False when the view stopped before the function's end

    @property
    def dedented(self) -> list[str]:
        n = len(self.indent)
        return [line[n:] if line.startswith(self.indent) else line.lstrip() for line in self.lines]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def params(self) -> list[tuple[str, ast.arg, ast.expr | None]]:
        args = self.node.args
        positional = args.posonlyargs + args.args
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        out = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        return [(a.arg, a, d) for a, d in out if a.arg not in ("self", "cls")]

    def docstring_node(self) -> ast.Expr | None:
        first = self.node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            return first
        return None

    def body_statements(self) -> list[ast.stmt]:
        return self.node.body[1:] if self.docstring_node() else list(self.node.body)


def parse_function(lines: list[str], name: str, *, complete: bool = True) -> FunctionSource | None:
    """Parse viewed lines that start at ``def name``.

    Lines after the function (the next definition) are cut off. ``complete`` says whether the view
    reached the end of the function or of the file; when it did not and no line after the function
    was seen, the function is marked incomplete (edits that need all of it are then not offered).
    """
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    if not lines:
        return None
    indent = re.match(r"\s*", lines[0]).group(0)
    n = len(indent)
    dedented = [line[n:] if line.startswith(indent) else line.lstrip() for line in lines]
    for k in range(len(dedented), 0, -1):
        try:
            tree = ast.parse("\n".join(dedented[:k]) + "\n")
        except SyntaxError:
            continue
        if len(tree.body) == 1 and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and tree.body[0].name == name and tree.body[0].body[0].lineno > 1:
            rest = [l for l in dedented[k:] if l.strip() and not l.lstrip().startswith("#")]
            ended = bool(rest) and not rest[0][:1].isspace() or (not rest and complete)
            lines = lines[:k]
            while len(lines) > 1 and not lines[-1].strip():
                lines = lines[:-1]
            node = ast.parse("\n".join(dedented[:len(lines)]) + "\n").body[0]
            return FunctionSource(lines, indent, node, ended)
    return None


def _body_indent(fs: FunctionSource) -> str:
    line = fs.dedented[fs.node.body[0].lineno - 1]
    return re.match(r"\s*", line).group(0)


def _insert_at(fs: FunctionSource) -> int:
    doc = fs.docstring_node()
    return doc.end_lineno if doc else fs.node.body[0].lineno - 1


# Edits are lists of (kind, value): ("orig", index) keeps a viewed line byte-identical; ("new", text)
# is a new line in the dedented domain (the def line's indentation is put back when assembling).
Items = list


def _insert_lines(fs: FunctionSource, at: int, new: list[str]) -> Items:
    items = [("orig", i) for i in range(len(fs.lines))]
    return items[:at] + [("new", t) for t in new] + items[at:]


def _replace_lines(fs: FunctionSource, replacements: dict[int, list[str]], append: list[str] = ()) -> Items:
    items = []
    for i in range(len(fs.lines)):
        items.extend(("new", t) for t in replacements[i]) if i in replacements else items.append(("orig", i))
    return items + [("new", t) for t in append]


def assemble(fs: FunctionSource, items: Items) -> str:
    out = []
    for kind, value in items:
        if kind == "orig":
            out.append(fs.lines[value])
        else:
            out.append(fs.indent + value if value.strip() else "")
    return "\n".join(out)


def _guard(fs, p):
    ind = _body_indent(fs)
    return _insert_lines(fs, _insert_at(fs), [f"{ind}if {p['param']} is None:",
                                              f'{ind}    raise ValueError("{p["message"]}")'])


def _type_check(fs, p):
    ind, name, typ = _body_indent(fs), p["param"], p["type"]
    return _insert_lines(fs, _insert_at(fs), [f"{ind}if not isinstance({name}, {typ}):",
                                              f'{ind}    raise TypeError(f"{name} must be {typ}, got {{type({name}).__name__}}")'])


def _range_check(fs, p):
    ind, name = _body_indent(fs), p["param"]
    return _insert_lines(fs, _insert_at(fs), [f"{ind}if {name} < 0:",
                                              f'{ind}    raise ValueError(f"{name} must be non-negative, got {{{name}!r}}")'])


def _constants(fs: FunctionSource) -> list[ast.Constant]:
    out = []
    for stmt in fs.body_statements():
        for node in ast.walk(stmt):
            if isinstance(node, ast.JoinedStr):
                continue
            if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.lineno == node.end_lineno:
                if ast.get_source_segment("\n".join(fs.dedented), node) == repr(node.value):
                    out.append(node)
    return out


def _byte_to_char(line: str, col: int) -> int:
    return len(line.encode("utf-8")[:col].decode("utf-8", "replace"))


def _change_constant(fs, p):
    target = ast.literal_eval(p["old"])
    for node in _constants(fs):
        if node.value == target and type(node.value) is type(target):
            line = fs.dedented[node.lineno - 1]
            a, b = _byte_to_char(line, node.col_offset), _byte_to_char(line, node.end_col_offset)
            return _replace_lines(fs, {node.lineno - 1: [line[:a] + p["new"] + line[b:]]})
    return None


def _rename(fs, p):
    old, new = p["old"], p["new"]
    if any(isinstance(n, ast.Name) and n.id == old for n in ast.walk(fs.node.args)):
        return None  # a default value reads a global of that name: renaming would change it
    dedented = fs.dedented
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("\n".join(dedented) + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    depth, hits = 0, []
    significant = [t for t in tokens if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT,
                                                       tokenize.INDENT, tokenize.DEDENT)]
    for k, tok in enumerate(significant):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.NAME and tok.string == old:
            before = significant[k - 1].string if k else ""
            after = significant[k + 1].string if k + 1 < len(significant) else ""
            if before == "." or (after == "=" and depth > 0):
                continue
            hits.append(tok.start)
    if not hits:
        return None
    by_row: dict[int, list[int]] = {}
    for row, col in hits:
        by_row.setdefault(row - 1, []).append(col)
    replacements = {}
    for row, cols in by_row.items():
        line = dedented[row]
        for col in sorted(cols, reverse=True):
            line = line[:col] + new + line[col + len(old):]
        replacements[row] = [line]
    return _replace_lines(fs, replacements)


def _returns(fs: FunctionSource) -> list[ast.Return]:
    out = []
    for node in ast.walk(fs.node):
        if isinstance(node, ast.Return) and node.value is not None and node.lineno == node.end_lineno \
                and not isinstance(node.value, (ast.Name, ast.Constant, ast.Attribute, ast.Lambda)):
            if not any(isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)) for n in ast.walk(node)) \
                    and not any(isinstance(n, ast.Name) and n.id in ("super", "__class__") for n in ast.walk(node)):
                out.append(node)
    return out


def _locals(fs: FunctionSource) -> set[str]:
    names = {a.arg for a in ast.walk(fs.node.args) if isinstance(a, ast.arg)}
    for node in ast.walk(fs.node):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _free_names(expr: ast.expr, local: set[str]) -> list[str]:
    bound = {n.id for c in ast.walk(expr) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
             if isinstance(n, ast.Name)}
    seen = []
    for node in sorted((n for n in ast.walk(expr) if isinstance(n, ast.Name)), key=lambda n: (n.lineno, n.col_offset)):
        if node.id in local and node.id not in bound and node.id not in seen:
            seen.append(node.id)
    return seen


def _extract(fs, p):
    if fs.indent or not fs.complete:
        return None
    returns = _returns(fs)
    if not returns:
        return None
    ret = returns[0]
    args = ", ".join(_free_names(ret.value, _locals(fs)))
    dedented = fs.dedented
    line = dedented[ret.lineno - 1]
    a, b = _byte_to_char(line, ret.col_offset), _byte_to_char(line, ret.end_col_offset)
    expr = ast.get_source_segment("\n".join(dedented), ret.value)
    helper = p["helper"]
    return _replace_lines(fs, {ret.lineno - 1: [line[:a] + f"return {helper}({args})" + line[b:]]},
                          append=["", "", f"def {helper}({args}):", f"    return {expr}"])


def _call_name(stmt: ast.stmt) -> str | None:
    value = getattr(stmt, "value", None)
    if isinstance(value, ast.Await):
        value = value.value
    if isinstance(value, ast.Call):
        func = value.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def _wrappable(fs: FunctionSource) -> list[ast.stmt]:
    return [s for s in fs.body_statements() if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr,
                                                               ast.Return))
            and s.lineno == s.end_lineno and _call_name(s)]


def _wrap(fs, p):
    for stmt in _wrappable(fs):
        if _call_name(stmt) == p["callee"]:
            line = fs.dedented[stmt.lineno - 1]
            ind = re.match(r"\s*", line).group(0)
            return _replace_lines(fs, {stmt.lineno - 1: [
                f"{ind}try:", f"    {line}", f"{ind}except Exception as exc:",
                f'{ind}    raise {p["wrapper"]}(f"{fs_name(fs, p)} failed: {{exc}}") from exc']})
    return None


def fs_name(fs: FunctionSource, p: dict) -> str:
    return p.get("_qualname") or fs.node.name


def _docstring(fs, p):
    if fs.docstring_node():
        return None
    ind = _body_indent(fs)
    params = [name for name, _a, _d in fs.params()]
    if not params:
        return _insert_lines(fs, _insert_at(fs), [f'{ind}"""{p["summary"]}"""'])
    lines = [f'{ind}"""{p["summary"]}', "", f"{ind}Args:"]
    lines += [f"{ind}    {name}: the {name.replace('_', ' ')}." for name in params]
    return _insert_lines(fs, _insert_at(fs), lines + [f'{ind}"""'])


_APPLY = {"guard_none": _guard, "type_check": _type_check, "range_check": _range_check,
          "change_constant": _change_constant, "rename_local": _rename, "extract_helper": _extract,
          "wrap_errors": _wrap, "add_docstring": _docstring}


# ----------------------------------------------------------------------------------------- planning

def _summary(name: str) -> str:
    words = [w.lower() for w in re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).split("_") if w]
    if not words:
        return "Run the operation."
    verbs = {"get", "set", "make", "build", "parse", "read", "write", "load", "save", "create", "compute", "check",
             "validate", "convert", "format", "find", "update", "add", "remove", "render", "normalize", "is", "has"}
    if words[0] in ("is", "has"):
        return f"Tell whether {' '.join(words[1:]) or 'the condition holds'}."
    if words[0] in verbs:
        return f"{words[0].capitalize()} {' '.join(words[1:]) or 'the value'}."
    return f"Return the {' '.join(words)}."


def _used_names(fs: FunctionSource) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", fs.text))


def candidates(fs: FunctionSource, qualname: str) -> list[EditSpec]:
    """Every edit the families can make to this function (the teacher draws one)."""
    out, used = [], _used_names(fs)
    for name, arg, default in fs.params():
        ann = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if default is None and "None" not in ann and "Optional" not in ann and f"{name} is None" not in fs.text:
            for message in (f"{name} must not be None", f"{name} is required", f"expected {name}, got None"):
                out.append(EditSpec("guard_none", qualname, {"param": name, "message": message}))
        if ann in SIMPLE_TYPES and "isinstance" not in fs.text:
            out.append(EditSpec("type_check", qualname, {"param": name, "type": ann}))
        if isinstance(default, ast.Constant) and type(default.value) in (int, float) and f"{name} < 0" not in fs.text:
            out.append(EditSpec("range_check", qualname, {"param": name}))
    if fs.complete:
        consts = _constants(fs)
        values = [c.value for c in consts]
        for c in consts:
            if values.count(c.value) == 1:
                v = c.value
                news = [v + 1, v * 2] + ([v - 1] if v > 1 else []) if isinstance(v, int) else [v * 2, v / 2]
                for new in dict.fromkeys(n for n in news if n != v):
                    out.append(EditSpec("change_constant", qualname, {"old": repr(v), "new": repr(new)}))
        params = {a.arg for a in ast.walk(fs.node.args) if isinstance(a, ast.arg)}
        declared = {n for s in ast.walk(fs.node) if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
        in_fstrings = {n.id for j in ast.walk(fs.node) if isinstance(j, ast.JoinedStr) for n in ast.walk(j)
                       if isinstance(n, ast.Name)} if sys.version_info < (3, 12) else set()
        stored = sorted({n.id for n in ast.walk(fs.node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
        for old in stored:
            if old in params or old in declared or old in in_fstrings or old.startswith("__"):
                continue
            for new in (RENAMES.get(old), f"{old}_value", f"current_{old}"):
                if new and new not in used and not keyword.iskeyword(new) and not hasattr(builtins, new):
                    out.append(EditSpec("rename_local", qualname, {"old": old, "new": new}))
                    break
        if not fs.indent and len(_returns(fs)) == 1 and not any(isinstance(n, (ast.Yield, ast.YieldFrom))
                                                                for n in ast.walk(fs.node)):
            for helper in (f"_{fs.node.name.strip('_')}_result", f"_compute_{fs.node.name.strip('_')}"):
                if helper not in used:
                    out.append(EditSpec("extract_helper", qualname, {"helper": helper}))
                    break
    names = [_call_name(s) for s in _wrappable(fs)]
    for callee in dict.fromkeys(names):
        if names.count(callee) == 1 and "try" not in {type(s).__name__.lower() for s in fs.body_statements()}:
            for wrapper in ("RuntimeError", "ValueError"):
                out.append(EditSpec("wrap_errors", qualname, {"callee": callee, "wrapper": wrapper}))
    if not fs.docstring_node():
        out.append(EditSpec("add_docstring", qualname, {"summary": _summary(fs.node.name)}))
    return [spec for spec in out if apply_edit(fs, spec) is not None]


def plan_edit(fs: FunctionSource, qualname: str, rng: random.Random, prefer=()) -> EditSpec | None:
    """Draw an edit: a family (uniformly), then its parameters; with probability 0.8 only among the
    ``prefer`` families that apply (those that suit the issue's wording)."""
    options = candidates(fs, qualname)
    if not options:
        return None
    preferred = [s for s in options if s.family in set(prefer)]
    pool = preferred if preferred and rng.random() < 0.8 else options
    families = sorted({s.family for s in pool})
    family = rng.choice(families)
    return rng.choice([s for s in pool if s.family == family])


# ------------------------------------------------------------------------------------------ applying

def alternative_line(line: str, rng: random.Random) -> str:
    """A plausible different version of a new line: a reworded message or an added comment."""
    options = []
    for old, new in PARAPHRASES:
        if old in line:
            options.append(line.replace(old, new, 1))
    if "#" not in line:
        options.append(f"{line}  # {rng.choice(COMMENTS)}")
    return rng.choice(options) if options else line + " "


def apply_edit(fs: FunctionSource, spec: EditSpec, *, q: float = 1.0, rng: random.Random | None = None) -> str | None:
    """The function's new source (None when the edit does not apply), each new line kept with probability q."""
    params = dict(spec.params, _qualname=spec.function)
    try:
        items = _APPLY[spec.family](fs, params)
    except (KeyError, ValueError, SyntaxError):
        return None
    if items is None:
        return None
    clean = assemble(fs, items)
    if not _parses(clean, fs):
        return None
    if q >= 1.0:
        return clean
    rng = rng or random.Random(0)
    noisy = [(kind, alternative_line(value, rng) if kind == "new" and value.strip() and rng.random() >= q else value)
             for kind, value in items]
    text = assemble(fs, noisy)
    return text if _parses(text, fs) else clean


def _parses(text: str, fs: FunctionSource) -> bool:
    lines = text.split("\n")
    n = len(fs.indent)
    body = "\n".join(line[n:] if line.startswith(fs.indent) else line.lstrip() for line in lines)
    try:  # the viewed lines always parse (parse_function keeps only a parseable prefix), so must the edit
        ast.parse(body + "\n")
    except SyntaxError:
        return False
    return True

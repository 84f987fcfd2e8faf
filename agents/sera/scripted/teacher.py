"""A scripted, noisy teacher for SERA's pipeline, for runs without an LLM.

:class:`ScriptedTeacher` is a policy for :class:`~icml26.agents.backends.ScriptedBackend`
(``teacher.backend()``). It answers the same three kinds of requests a real teacher model gets, and
reads everything it needs from the messages it receives and the tool output it sees, never from the
pipeline:

* **agent rollouts** (tools given): it reads ``<pr_description>``. When the description states a
  concrete problem (a sentence :func:`~icml26.agents.sera.scripted.edits.parse_fact` understands) it is a
  second rollout: it searches for the function with ``grep``, outlines the file, views the
  function, redoes the change *noisily* (each new line kept with probability ``q``, otherwise an
  alternative line), checks that the file compiles and submits. Otherwise it is a first rollout
  from a vague issue: it takes the function and file named in backticks, outlines and views the
  file, draws a seeded edit from the edit families (preferring those that suit the issue's wording),
  says what the problem is, applies it with ``str_replace_editor``, compiles and submits. At the
  submit review (SWE-agent's "Thank you for your work on this issue" step) it deletes, with
  ``bash``, any file the shown diff adds (its fixes never add files, so those are leftovers such as
  a reproduction script) and calls ``submit`` again;
* **synthetic pull requests** (a ``<demonstration>`` in the request): it finds the problem
  statement in the fix steps and writes an issue imitating the demonstration's layout (title,
  headings, code block, length) without describing the code change;
* **the patch judge**: yes when the diff touches the file the task names.

Randomness comes from the teacher's ``seed`` and the text of the task, so a run is reproducible and
independent of scheduling.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shlex

from icml26.agents.tools import is_review_observation
from icml26.errors import input_error

from ..prompts import extract_pr_description
from .edits import EditSpec, apply_edit, parse_fact, parse_function, plan_edit

_SCRATCH_PATH = re.compile(r"\S*icml26-sandbox-[^/\s]+/repo")

MAX_VIEW_LINES = 80
OUTLINE_MARK = "(class|def|async def) "

# Words of a vague issue -> edit families that answer it (the category is never given explicitly).
WORD_FAMILIES = (
    (r"valid|reject|checking|trust|type|contract|untrusted", ("type_check", "range_check", "guard_none")),
    (r"error|fail|exception|cleanup|release|platform|depend|async|thread|race|environment|brittle",
     ("wrap_errors", "guard_none")),
    (r"constant|setting|default|hard-coded|limit|off by|rule|value", ("change_constant",)),
    (r"document|readab|names|maintain|follow|unclear", ("add_docstring", "rename_local")),
    (r"factor|reuse|responsibilit|separate|performance|more work|tangled", ("extract_helper",)),
    (r"missing|edge|empty|guard|early exit|boundary|case", ("guard_none", "range_check")),
)


def _call(name: str, arguments: dict, key: str) -> dict:
    digest = hashlib.sha1(f"{key}|{name}|{json.dumps(arguments, sort_keys=True)}".encode()).hexdigest()[:12]
    return {"id": f"call_{digest}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _reply(content: str, name: str | None = None, arguments: dict | None = None, key: str = "") -> dict:
    message = {"role": "assistant", "content": content}
    if name is not None:
        message["tool_calls"] = [_call(name, arguments or {}, key)]
    return message


def _history(messages: list[dict]) -> list[tuple[str, dict, str]]:
    """(tool name, arguments, observation) of every tool call so far."""
    answers = {m.get("tool_call_id"): m.get("content") or "" for m in messages if m.get("role") == "tool"}
    out = []
    for m in messages:
        for call in (m.get("tool_calls") or ()) if m.get("role") == "assistant" else ():
            fn = call.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {}
            out.append((fn.get("name"), args if isinstance(args, dict) else {}, answers.get(call.get("id"), "")))
    return out


def outline_entries(output: str) -> list[tuple[int, int, str, str]]:
    """``grep -n`` output of class/def lines -> (line, indent, kind, qualified name)."""
    entries, stack = [], []
    for line in output.splitlines():
        m = re.match(r"(\d+):(\s*)(class|def|async def)\s+(\w+)", line)
        if not m:
            continue
        lineno, indent, kind, name = int(m.group(1)), len(m.group(2)), m.group(3), m.group(4)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        entries.append((lineno, indent, kind, ".".join([s[1] for s in stack] + [name])))
        stack.append((indent, name))
    return entries


def parse_view(output: str) -> list[tuple[int, str]]:
    """The numbered lines of a ``cat -n`` style view (a line cut by truncation is dropped)."""
    rows = [(int(m.group(1)), m.group(2)) for m in
            (re.match(r"^\s*(\d+)\t(.*)$", line) for line in output.split("\n")) if m]
    if "truncated" in output.split("\n")[-1] and rows:
        rows = rows[:-1]
    return rows


def demonstration_style(demo: str) -> dict:
    lines = demo.strip().split("\n")
    headings = [(i, l) for i, l in enumerate(lines)
                if re.match(r"^#{1,4} \S", l) or re.match(r"^\*\*[^*]+\*\*:?$", l.strip())]
    first = lines[0].strip() if lines else ""
    has_title = bool(first) and len(first) < 100 and (len(lines) == 1 or not lines[1].strip()) \
        and not (headings and headings[0][0] == 0 and len(headings) > 1 and not first.startswith("## "))
    title_prefix = re.match(r"^(#+ )?", first).group(0) if has_title else ""
    if has_title and headings and headings[0][0] == 0:
        headings = headings[1:]
    marker = "**" if headings and headings[0][1].startswith("**") else (
        re.match(r"^#+ ", headings[0][1]).group(0) if headings else "")
    names = [re.sub(r"^#+ |\*\*|:$", "", h).strip("* :") for _, h in headings]
    return {"title": has_title and len(lines) > 1, "title_prefix": title_prefix, "marker": marker,
            "headings": names, "code": "```" in demo, "words": len(demo.split())}


class ScriptedTeacher:
    """Deterministic noisy teacher acting through the agent tools (see the module docstring).

    Args:
        seed: base seed; every decision also depends on the request text.
        q: probability that the second rollout reproduces each new line of the fix; a pair
            ``(low, high)`` draws ``q`` uniformly per instance, for a spread of recalls.
        judge_accepts: answer of the patch judge when the diff touches the task's file.
    """

    def __init__(self, seed: int = 0, q: float | tuple[float, float] = 0.8, *, judge_accepts: bool = True):
        low, high = (q, q) if isinstance(q, (int, float)) else tuple(q)
        if not 0.0 <= low <= high <= 1.0:
            raise input_error("ScriptedTeacher", "q", "a probability or a (low, high) pair within [0, 1]", q)
        self.seed, self.q_range, self.judge_accepts = int(seed), (float(low), float(high)), judge_accepts

    def backend(self, *, keep_calls: int = 32, **kw):
        """A :class:`~icml26.agents.backends.ScriptedBackend` driven by this teacher.

        Only the last ``keep_calls`` requests stay in its ``calls`` log: a long run would otherwise
        hold every prompt it ever sent in memory.
        """
        import collections

        from icml26.agents.backends import ScriptedBackend

        backend = ScriptedBackend(self, **kw)
        backend.calls = collections.deque(maxlen=keep_calls)
        return backend

    def __call__(self, messages: list[dict], tools: list[dict] | None = None) -> dict:
        users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        request = users[-1] if users else ""
        if "<demonstration>" in request:
            return {"role": "assistant", "content": self.write_issue(request)}
        if "Is the final fix valid" in request:
            return {"role": "assistant", "content": self.judge(request)}
        if not users:
            return {"role": "assistant", "content": "There is no task to work on."}
        return self.act(users[0], messages)

    # -- helpers ------------------------------------------------------------------------------------

    def _rng(self, text: str, salt: str = "") -> random.Random:
        # The task names the sandbox's scratch folder, whose name is random: leave it out of the seed,
        # so the same instance draws the same edit in every run.
        text = _SCRATCH_PATH.sub("<repo>", text)
        return random.Random(f"{self.seed}|{salt}|{hashlib.sha256(text.encode()).hexdigest()}")

    @staticmethod
    def _section(text: str, tag: str) -> str:
        m = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", text, re.S)
        return m.group(1) if m else ""

    # -- agent rollouts -----------------------------------------------------------------------------

    def act(self, task: str, messages: list[dict]) -> dict:
        workdir = self._section(task, "uploaded_files").strip() or "."
        if workdir != ".":
            task = task.replace(workdir, "<repo>")  # decisions must not depend on where the copy lives
        pr = extract_pr_description(task)
        spec = parse_fact(pr)
        history = _history(messages)
        key = task + str(len(history))
        if history and history[-1][0] == "submit":
            return self._review(history[-1][2], workdir, key)
        if history and history[-1][0] == "bash" and len(history) > 1 and history[-2][0] == "submit" \
                and str(history[-1][1].get("command", "")).startswith("rm -f "):
            return _reply("The extra files are gone and the diff now holds only the fix. Submitting again.",
                          "submit", {}, key)
        if spec is not None:  # second rollout: the problem is stated, the location is not
            target, hint = spec.function, None
        else:
            names = re.findall(r"`([A-Za-z_][\w.]*)`", pr)
            files = re.findall(r"`([\w./-]+\.py)`", pr)
            target = next((n for n in names if not n.endswith(".py")), None)
            hint = f"{workdir}/{files[0]}" if files else None
            if target is None:
                return _reply("The description does not name any code I can locate, so there is nothing to change.",
                              "submit", {}, key)
        short = target.rsplit(".", 1)[-1]
        searched = next((obs for name, args, obs in history if name == "bash"
                         and args.get("command", "").startswith("grep -rn")), None)
        outline_cmds = [args["command"] for name, args, _ in history
                        if name == "bash" and str(args.get("command", "")).startswith("grep -n -E")]
        outlined = [c.rsplit(" ", 1)[-1] for c in outline_cmds]
        last_name, last_args, last_obs = history[-1] if history else (None, {}, "")
        last_cmd = last_args.get("command", "") if isinstance(last_args.get("command"), str) else ""

        if last_name == "bash" and last_cmd.startswith("python -m py_compile"):
            return _reply("The file compiles. The change is complete, so I'll submit it.", "submit", {}, key)
        if last_name == "str_replace_editor" and last_cmd == "str_replace":
            if last_obs.startswith("Error"):
                return _reply("The edit could not be applied; I'll stop here.", "submit", {}, key)
            return _reply("Let me make sure the edited file still compiles.", "bash",
                          {"command": f"python -m py_compile {last_args['path']} && echo compiled OK"}, key)
        if last_name == "str_replace_editor" and last_cmd == "view":
            return self._edit(task, pr, spec, target, last_args, last_obs, key)
        if last_name == "bash" and last_cmd.startswith("grep -n -E"):
            path = last_cmd.rsplit(" ", 1)[-1]
            entries = outline_entries(last_obs)
            exact = [e for e in entries if e[2] != "class" and e[3] == target]
            loose = [e for e in entries if e[2] != "class" and "." not in target and e[3].rsplit(".", 1)[-1] == short]
            if exact or loose:
                lineno, indent, _kind, _qual = (exact or loose)[0]
                after = entries[entries.index((exact or loose)[0]) + 1:]
                end = next((e[0] - 1 for e in after if e[1] <= indent), None)
                stop = -1 if end is None or end - lineno + 1 > MAX_VIEW_LINES else end
                return _reply(f"`{target}` starts at line {lineno} of {path}. Let me read it.",
                              "str_replace_editor", {"command": "view", "path": path,
                                                     "view_range": [lineno, stop]}, key)
            narrow = f'grep -n -E "^\\s*(class \\w+|(async )?def {short}\\b)" {path}'
            if "output truncated" in last_obs and narrow not in outline_cmds:
                return _reply(f"The outline is too long to show `{target}`; let me list only the classes and "
                              f"the definitions of `{short}`.", "bash", {"command": narrow}, key)
        # choose the next file to outline: the hinted one, else the search hits
        candidates = [hint] if hint else []
        if searched is not None:
            hits = [line.split(":", 1)[0] for line in searched.splitlines() if re.match(r"[^:]+\.py:\d+:", line)]
            hits.sort(key=lambda p: ("test" in p.rsplit("/", 1)[-1] or "/tests/" in p, p))
            candidates += hits
        for path in dict.fromkeys(candidates):
            if path not in outlined:
                return _reply(f"Let me look at the structure of {path} to find `{target}`.", "bash",
                              {"command": f'grep -n -E "^\\s*{OUTLINE_MARK}" {path}'}, key)
        if searched is None:
            if "." in target:  # a method: find its class first
                head = target.split(".", 1)[0]
                return _reply(f"Let me search the repository for the class `{head}`.", "bash",
                              {"command": f'grep -rn --include="*.py" -E "^\\s*class {head}\\b" {workdir}'}, key)
            return _reply(f"Let me search the repository for the definition of `{short}`.", "bash",
                          {"command": f'grep -rn --include="*.py" -E "^\\s*(async\\s+)?def {short}\\b" {workdir}'},
                          key)
        return _reply(f"I could not find `{target}` in the repository, so I cannot make a change.", "submit", {}, key)

    def _review(self, observation: str, workdir: str, key: str) -> dict:
        """Answer the submit review: delete files the diff adds besides the fix, then submit again."""
        if not is_review_observation(observation):  # a plain submit result: nothing left to do
            return _reply("Submitting the change.", "submit", {}, key)
        diff = self._section(observation, "diff")
        added = re.findall(r"^diff --git a/(\S+) b/\S+\nnew file mode", diff, re.M)
        if added:  # this policy's fixes never add files: anything new is a leftover script
            paths = " ".join(shlex.quote(f"{workdir}/{path}" if workdir != "." else path) for path in added)
            return _reply("The diff contains files that are not part of the fix; I'll remove them before "
                          "submitting.", "bash", {"command": f"rm -f {paths}"}, key)
        return _reply("I did not create a reproduction script or touch any test file, and the diff contains "
                      "only the intended change. Submitting it again to confirm.", "submit", {}, key)

    def _edit(self, task, pr, spec, target, view_args, observation, key) -> dict:
        rows = parse_view(observation)
        lines = [text for _, text in rows]
        cut = len(lines) > MAX_VIEW_LINES or "truncated" in observation
        lines = lines[:MAX_VIEW_LINES]
        if rows and not cut:  # drop what belongs to the next definition: decorators, comments, blank lines
            indent = len(lines[0]) - len(lines[0].lstrip())
            while len(lines) > 1 and (not lines[-1].strip() or lines[-1].lstrip().startswith(("#", "@"))
                                      and len(lines[-1]) - len(lines[-1].lstrip()) <= indent):
                lines.pop()
        fs = parse_function(lines, target.rsplit(".", 1)[-1], complete=not cut) if lines else None
        if fs is None:
            return _reply(f"I cannot read `{target}` reliably from this view, so I'll leave the code as it is.",
                          "submit", {}, key)
        if spec is None:  # first rollout: decide what the problem is
            prefer = {f for pattern, families in WORD_FAMILIES if re.search(pattern, pr, re.I) for f in families}
            spec = plan_edit(fs, target, self._rng(task, "plan"), prefer)
            if spec is None:
                return _reply(f"`{target}` looks correct for the cases described; I don't see a safe, focused "
                              "change to make.", "submit", {}, key)
            new = apply_edit(fs, spec)
            thought = f"After reading `{target}`, I think the problem is this: {spec.fact()} I'll change it."
        else:
            rng = self._rng(task, "noise")
            q = rng.uniform(*self.q_range)
            new = apply_edit(fs, spec, q=q, rng=rng)
            thought = f"This is the code the issue is about. I'll change `{target}` so that it behaves as requested."
        if new is None:
            return _reply(f"The change the issue asks for does not fit `{target}` as it is written; I'll stop here.",
                          "submit", {}, key)
        return _reply(thought, "str_replace_editor", {"command": "str_replace", "path": view_args["path"],
                                                      "old_str": fs.text, "new_str": new}, key)

    # -- synthetic pull request and judge -----------------------------------------------------------

    def judge(self, request: str) -> str:
        task, diff = self._section(request, "task"), self._section(request, "diff")
        files = re.findall(r"`([\w./-]+\.py)`", task)
        touched = set(re.findall(r"^diff --git a/(\S+)", diff, re.M))
        ok = bool(touched) and (not files or any(f in touched for f in files))
        return "yes" if ok and self.judge_accepts else "no"

    def write_issue(self, request: str) -> str:
        demo, steps, diff = (self._section(request, t) for t in ("demonstration", "fix_steps", "diff"))
        spec = parse_fact(steps)
        files = re.findall(r"^diff --git a/(\S+)", diff, re.M)
        module = files[0][:-3].replace("/", ".").removesuffix(".__init__") if files else ""
        if spec is None:
            task = self._section(request, "task")
            return "<issue>\n" + (extract_pr_description(task).split(". The issue may be")[0] or task) + "\n</issue>"
        return "<issue>\n" + render_issue(spec, demonstration_style(demo), module, self._rng(request, "pr")) + "\n</issue>"


# ------------------------------------------------------------------------------------------- issues

def _texts(spec: EditSpec, module: str) -> dict:
    f, p = spec.function, spec.params
    obj = f.rsplit(".", 1)
    call = f"{obj[0].lower()}.{obj[1]}" if len(obj) == 2 else obj[0]
    imp = f"from {module} import {obj[0]}" if module else ""
    fam = spec.family
    if fam == "guard_none":
        return {"title": f"`{f}` does not reject `{p['param']}=None`",
                "description": f"Calling `{f}` without a real value for `{p['param']}` is accepted at first and only "
                               "fails later, with an error that has nothing to do with the actual mistake.",
                "actual": "The call goes through and the failure shows up further down, far from its cause.",
                "expected": f"A `ValueError` right away, saying `{p['message']}`.",
                "code": f"{imp}\n\n{call}(..., {p['param']}=None)" if imp else ""}
    if fam == "type_check":
        bad = "'3'" if p["type"] != "str" else "3"
        return {"title": f"`{f}` silently accepts a non-{p['type']} `{p['param']}`",
                "description": f"`{f}` documents `{p['param']}` as `{p['type']}` but happily takes anything, "
                               "which produces confusing results.",
                "actual": "No error; the wrong type leaks into later computations.",
                "expected": f"A `TypeError` explaining that `{p['param']}` must be `{p['type']}`.",
                "code": f"{imp}\n\n{call}(..., {p['param']}={bad})" if imp else ""}
    if fam == "range_check":
        return {"title": f"`{f}` accepts negative `{p['param']}`",
                "description": f"A negative `{p['param']}` makes no sense for `{f}`, yet it is accepted.",
                "actual": "The negative value is used as is and the result is meaningless.",
                "expected": f"A `ValueError` saying that `{p['param']}` must be non-negative.",
                "code": f"{imp}\n\n{call}(..., {p['param']}=-1)" if imp else ""}
    if fam == "change_constant":
        return {"title": f"`{f}` uses a wrong value",
                "description": f"The results of `{f}` are slightly off: it relies on `{p['old']}` where the rest of "
                               f"the library and the documentation imply `{p['new']}`.",
                "actual": f"Behaviour consistent with `{p['old']}`.", "expected": f"Behaviour consistent with `{p['new']}`.",
                "code": ""}
    if fam == "rename_local":
        return {"title": f"Unclear variable name in `{f}`",
                "description": f"Reading `{f}` is harder than it needs to be: the local name `{p['old']}` says "
                               "nothing about what it holds.",
                "actual": f"The variable is called `{p['old']}`.", "expected": f"The variable is called `{p['new']}`.",
                "code": ""}
    if fam == "extract_helper":
        return {"title": f"Make the computation in `{f}` reusable",
                "description": f"The value `{f}` returns is computed inline, so other code that needs the same "
                               "computation has to duplicate it.",
                "actual": "The computation is only available inside the function.",
                "expected": f"A separate helper, `{p['helper']}`, that `{f}` and others can call.", "code": ""}
    if fam == "wrap_errors":
        return {"title": f"Errors from `{f}` lack context",
                "description": f"When something goes wrong inside `{f}`, the exception that reaches the caller "
                               "does not say which operation failed.",
                "actual": "A low-level exception without any mention of the failing operation.",
                "expected": f"A `{p['wrapper']}` whose message names `{f}`, chained to the original error.",
                "code": ""}
    return {"title": f"`{f}` is undocumented",
            "description": f"`{f}` has no documentation, so users have to read its code to know what it does.",
            "actual": "`help()` shows nothing useful.", "expected": f"A docstring starting with `{p['summary']}`",
            "code": ""}


def render_issue(spec: EditSpec, style: dict, module: str, rng: random.Random) -> str:
    """An issue stating ``spec``'s problem in the layout of a demonstration (see demonstration_style)."""
    t = _texts(spec, module)
    fact = spec.fact()
    body_first = f"{t['description']} {fact}"
    code = f"```python\n{t['code']}\n```" if style["code"] and t["code"] else ""
    out = []
    if style["title"]:
        out.append(style["title_prefix"] + t["title"])
    if len(style["headings"]) >= 2:
        mark = style["marker"]
        used_fact = False
        for name in style["headings"]:
            low = name.lower()
            if any(w in low for w in ("reproduc", "steps", "example", "code")):
                text = code or f"1. Call `{spec.function}` as described above.\n2. Look at what happens."
            elif "expect" in low:
                text = t["expected"]
            elif any(w in low for w in ("actual", "observed", "current")):
                text = t["actual"]
            elif any(w in low for w in ("environment", "version", "system")):
                text = "- current main branch\n- Python 3"
            elif any(w in low for w in ("why", "motivation", "context", "impact")):
                text = rng.choice(("This keeps biting us in day-to-day use.",
                                   "We rely on this code path in production."))
            elif any(w in low for w in ("proposal", "suggest", "solution", "request")):
                text = t["expected"]
            else:
                text, used_fact = (body_first if not used_fact else t["description"]), True
            out.append(f"{mark}{name}{'**' if mark == '**' else ''}\n\n{text}")
        if not used_fact:
            out.insert(1 if style["title"] else 0, body_first)
    elif style["words"] < 40:
        out = [f"{fact} {t['actual']}"]
    else:
        out.append(body_first)
        if code:
            out.append(code)
        out.append(f"Expected: {t['expected']}")
    return "\n\n".join(out).strip()

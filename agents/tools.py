"""The agent's tools: ``bash``, ``str_replace_editor`` and ``submit``, executed against a Sandbox.

The schemas and the editor's behaviour follow SWE-agent's ``edit_anthropic`` bundle (the
scaffold SERA's teachers used): ``view`` numbers lines like ``cat -n`` and lists folders two
levels deep, ``create`` refuses to overwrite, ``str_replace`` needs exactly one occurrence,
``insert`` adds text after a line, ``undo_edit`` reverts the last edit of a file. They are written
here rather than imported because SWE-agent runs its tools inside a container through SWE-ReX and
is not a library; ours run against :class:`~icml26.agents.sandbox.Sandbox`.

``submit`` can run SWE-agent's review step (``review_submit=True``, what SERA's pipeline uses): the
first call answers with the diff and asks the agent to rerun and then remove its reproduction
script and to revert test-file changes; the second call submits. The review text always starts
with :data:`REVIEW_PREFIX` (:func:`is_review_observation`), which is how the trajectory filters
leave it out of the average tool-response length.

The editor reads and writes files from the host process (fast, and no shell quoting), so every
path is resolved with symlinks followed and refused unless it stays inside the scratch copy.
Absolute paths under the sandbox's ``display_root`` (``/testbed``: where commands see the copy)
are mapped onto the copy, and observations name files relative to the repository root, so they
never show the scratch folder's real, random path.
Every error becomes observation text for the model; nothing here raises on what the agent does: a
:class:`~icml26.agents.sandbox.SandboxError` (a refused patch, :class:`~icml26.agents.sandbox.PatchRefused`,
included) or a time-out of the sandbox's machinery is an ``Error: ...`` observation and the session goes on,
a bash command holding a NUL byte (which no argv or shell can carry) is refused without running, and
every observation is at most the sandbox's ``max_output_chars`` characters.
"""

from __future__ import annotations

import itertools
import os
import stat
import subprocess
from pathlib import Path

from icml26.errors import InputTypeError, described
from icml26.validation import check_int

from .backends_base import check_tools
from .sandbox import PatchRefused, Sandbox, SandboxError
from .toolcalls import ToolCall

__all__ = ["BASH_TOOL", "EDITOR_TOOL", "REVIEW_PREFIX", "SUBMIT_TOOL", "ToolExecutor", "default_tools",
           "is_review_observation", "review_message"]

BASH_TOOL: dict = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command in the repository (the working directory is its root). "
                       "Each call starts a new shell; there is no network access.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to run."}},
            "required": ["command"],
        },
    },
}

EDITOR_TOOL: dict = {
    "type": "function",
    "function": {
        "name": "str_replace_editor",
        "description": (
            "View, create and edit files.\n"
            "* `view` shows a file with line numbers (`cat -n`) or lists a directory two levels deep.\n"
            "* `create` writes a new file; it fails if the file exists.\n"
            "* `str_replace` replaces `old_str`, which must occur exactly once, by `new_str`.\n"
            "* `insert` inserts `new_str` after line `insert_line` (0 inserts at the top).\n"
            "* `undo_edit` reverts the last edit made to the file.\n"
            "Paths are absolute or relative to the repository root."),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                            "description": "The operation."},
                "path": {"type": "string", "description": "File or directory path."},
                "file_text": {"type": "string", "description": "Content of the file, for `create`."},
                "old_str": {"type": "string", "description": "Exact text to replace, for `str_replace`."},
                "new_str": {"type": "string", "description": "Replacement (`str_replace`) or text to insert (`insert`)."},
                "insert_line": {"type": "integer", "description": "Line after which `new_str` goes, for `insert`."},
                "view_range": {"type": "array", "items": {"type": "integer"},
                               "description": "[start, end] lines to view (1-based, end -1 = to the end)."},
            },
            "required": ["command", "path"],
        },
    },
}

SUBMIT_TOOL: dict = {
    "type": "function",
    "function": {
        "name": "submit",
        "description": "Submit your changes when the task is done; this ends the session.",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}


# SWE-agent's ``review_on_submit_m`` step: the first ``submit`` shows the diff and asks for a cleanup;
# the second one submits. Step 3 names `git show HEAD:<path> > <path>` rather than SWE-agent's
# `git checkout -- <path>`: the sandbox's git metadata is read-only to commands (no index writes).
# Every review observation starts with REVIEW_PREFIX, which is how the export filters recognise it
# (SERA leaves it out of the average tool-response length).
REVIEW_PREFIX = "Thank you for your work on this issue."
REVIEW_TEMPLATE = REVIEW_PREFIX + """ Please carefully follow the steps below to help review your changes.

1. If you made any changes to your code after running the reproduction script, please run the reproduction script again.
  If the reproduction script is failing, please revisit your changes and make sure they are correct.
  If you have already removed your reproduction script, please ignore this step.
2. Remove your reproduction script (if you haven't done so already).
3. If you have modified any TEST files, please revert them to the state they had before you started fixing the issue.
  You can do this with `git show HEAD:path/to/test_file.py > path/to/test_file.py` (paths relative to the repository root),
  and delete test files you created. Use the <diff> below to find the files you need to revert.
4. Run the submit command again to confirm.

Here is a list of all of your changes:

<diff>
{diff}
</diff>"""


REVIEW_TRUNCATED = ("\n[... the diff is cut here: {n} more characters. See all of your changes with "
                    "`git status` (it lists new files) and `git diff` (changes to tracked files) in bash ...]")


def review_message(diff: str, max_chars: int | None = None) -> str:
    """The observation of a first ``submit`` under ``review_submit``: the cleanup steps and the diff.

    With ``max_chars`` the diff is cut so that the message fits, and the message says how much was
    left out and how to see it (``git status`` and ``git diff`` work inside the sandbox)."""
    if not isinstance(diff, str):
        raise InputTypeError("review_message", "diff", "a str (a unified diff)", described(type(diff).__name__))
    if max_chars is not None:
        max_chars = check_int("review_message", "max_chars", max_chars, low=1)
    diff = diff.rstrip("\n")
    message = REVIEW_TEMPLATE.format(diff=diff)
    if max_chars is None or len(message) <= max_chars:
        return message
    room = max_chars - len(REVIEW_TEMPLATE.format(diff="")) - len(REVIEW_TRUNCATED.format(n=len(diff)))
    if room <= 0:  # too small a limit for the steps themselves: the head of the message
        return message[:max_chars]
    return REVIEW_TEMPLATE.format(diff=diff[:room] + REVIEW_TRUNCATED.format(n=len(diff) - room))


def is_review_observation(text) -> bool:
    """True for the observation :func:`review_message` writes (the submit review step)."""
    return isinstance(text, str) and text.startswith(REVIEW_PREFIX)


def default_tools() -> list[dict]:
    """The three tools, as OpenAI function schemas (fresh copies)."""
    import copy

    return copy.deepcopy([BASH_TOOL, EDITOR_TOOL, SUBMIT_TOOL])


SNIPPET_LINES = 4
#: the largest file the editor reads (bytes): larger ones are refused with a pointer to bash
MAX_FILE_BYTES = 4 << 20


class _ToolInputError(Exception):
    pass


def _numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(text.split("\n"), start))


class ToolExecutor:
    """Execute parsed tool calls in a sandbox and return observation text.

    ``submitted`` turns true after a ``submit`` call; ``patch`` then holds the sandbox's diff.

    With ``review_submit`` (SWE-agent's review step, used by SERA's pipeline) the first ``submit``
    does not finish: it answers with :func:`review_message` (the current diff and a request to rerun
    and then remove the reproduction script and to revert test-file changes) and the next
    ``submit`` finishes, with the diff at that moment as ``patch``.
    """

    def __init__(self, sandbox: Sandbox, *, tools: list[dict] | None = None, review_submit: bool = False):
        if not all(callable(getattr(sandbox, name, None)) for name in ("run", "diff")) or \
                getattr(sandbox, "root", None) is None:
            raise InputTypeError("ToolExecutor", "sandbox", "a Sandbox (with root, run and diff)",
                                 described(type(sandbox).__name__))
        check_tools("ToolExecutor", tools)
        if not isinstance(review_submit, bool):
            raise InputTypeError("ToolExecutor", "review_submit", "a bool", review_submit)
        self.sandbox = sandbox
        self.review_submit = review_submit
        self.reviewed = False
        self.root = Path(os.path.realpath(sandbox.root))
        self.submitted = False
        self.patch: str | None = None
        self._history: dict[Path, list[str | None]] = {}
        names = [t["function"]["name"] for t in (tools if tools is not None else default_tools())]
        self.available = names

    # -- dispatch -------------------------------------------------------------------------------------

    def execute(self, call: ToolCall) -> str:
        """The observation for ``call``: never raises on what the agent asked, never longer than the
        sandbox's ``max_output_chars``."""
        return self._fit(self._execute(call))

    def _fit(self, text: str) -> str:
        limit = getattr(self.sandbox, "max_output_chars", None)
        if not isinstance(limit, int) or len(text) <= limit:
            return text
        note = "\n[... observation truncated ...]"
        return text[:max(limit - len(note), 0)] + note[:limit]

    def _execute(self, call: ToolCall) -> str:
        if call.error is not None or call.name is None or call.arguments is None:
            why = call.error or "the tool call could not be parsed"
            return (f"Error: {why}. Call one tool per <tool_call> block as a JSON object "
                    f'{{"name": <tool name>, "arguments": {{...}}}}; available tools: {", ".join(self.available)}.')
        if call.name not in self.available:
            return f"Error: unknown tool {call.name!r}; available tools: {', '.join(self.available)}."
        try:
            if call.name == "bash":
                return self._bash(call.arguments)
            if call.name == "str_replace_editor":
                return self._editor(call.arguments)
            if call.name == "submit":
                return self._submit()
            return f"Error: tool {call.name!r} has no implementation in this executor."
        except _ToolInputError as exc:
            return f"Error: {exc}"
        except SandboxError as exc:  # the sandbox's machinery or a refused patch: the agent can go on
            return f"Error: {call.name} failed: {self._hide_scratch(str(exc))}"
        except subprocess.TimeoutExpired as exc:
            return f"Error: {call.name} failed: a step took longer than {exc.timeout:g} s; try again"
        except (OSError, UnicodeError, ValueError) as exc:
            return f"Error: {call.name} failed: {type(exc).__name__}: {self._hide_scratch(str(exc))}"

    @staticmethod
    def _arg(args: dict, name: str, kind: type, *, required: bool = True):
        value = args.get(name)
        if value is None:
            if required:
                raise _ToolInputError(f"missing required argument `{name}`")
            return None
        if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _ToolInputError(f"argument `{name}` must be {kind.__name__}, got {type(value).__name__}: {value!r:.80}")
        return value

    # -- tools ----------------------------------------------------------------------------------------

    def _bash(self, args: dict) -> str:
        command = self._arg(args, "command", str)
        if not command.strip():
            raise _ToolInputError("`command` is empty")
        if "\0" in command:
            raise _ToolInputError("`command` contains a NUL byte (\\0), which bash cannot take; write it as "
                                  "printf '\\0' or $'\\x00' where a command needs one. The command did not run")
        result = self.sandbox.run(command)
        text, note = result.output, ""
        if result.timed_out:
            return self._squeeze(text, "")  # the sandbox already appended why it was killed
        if result.memory_exceeded and "[killed:" not in text:
            note += f"\n[the command ran out of memory (limit {self.sandbox.memory_limit_mb} MB)]"
        if result.returncode != 0:
            note += f"\n[exit code {result.returncode}]"
        return self._squeeze(text, note) if (text + note).strip() else "[no output]"

    def _squeeze(self, text: str, note: str) -> str:
        """``text + note`` within ``max_output_chars``, keeping the head and the tail of ``text`` (where
        errors are) and all of ``note``."""
        limit = getattr(self.sandbox, "max_output_chars", None)
        if not isinstance(limit, int) or len(text) + len(note) <= limit:
            return text + note
        cut = "\n[... output truncated ...]\n"
        room = limit - len(note) - len(cut)
        if room < 2:
            return (text + note)[-limit:]
        return text[:room // 2] + cut + text[len(text) - (room - room // 2):] + note

    def _submit(self) -> str:
        nested = self.sandbox.nested_repositories() if hasattr(self.sandbox, "nested_repositories") else []
        if nested:
            names = ", ".join(nested[:10]) + (" ..." if len(nested) > 10 else "")
            return (f"Error: cannot submit: the repository holds nested git repositories ({names}); their files "
                    "cannot be part of the diff. Remove their .git folders (for example `rm -rf "
                    f"{nested[0]}/.git`) or the folders themselves, then submit again.")
        try:
            patch = self.sandbox.diff()
        except PatchRefused as exc:
            return f"Error: {self._hide_scratch(str(exc))}"
        if self.review_submit and not self.reviewed:
            self.reviewed = True
            return review_message(patch, getattr(self.sandbox, "max_output_chars", None))
        self.submitted = True
        self.patch = patch
        return "Submitted." + ("" if self.patch.strip() else " (no changes were made)")

    def _hide_scratch(self, text: str) -> str:
        """``text`` with the scratch copy's real path shown as the path commands see (``display_root``)."""
        shown = self._display_root()
        for real in dict.fromkeys([str(self.root), str(self.sandbox.root)]):
            text = text.replace(real, shown)
        return text

    def _display_root(self) -> str:
        return getattr(self.sandbox, "display_root", None) or str(self.sandbox.root)

    def _resolve(self, raw: str) -> Path:
        raw_path = Path(raw)
        if raw_path.is_absolute():
            shown = Path(self._display_root()).parts
            # the path commands see the copy at (/testbed/...) names the same file in the copy
            inside = raw_path.parts[:len(shown)] == shown
            path = self.root.joinpath(*raw_path.parts[len(shown):]) if inside else raw_path
        else:
            path = self.root / raw_path
        real = Path(os.path.realpath(path))
        if real != self.root and self.root not in real.parents:
            raise _ToolInputError(f"path {raw!r} is outside the repository ({self._display_root()}); "
                                  "only files inside it can be viewed or edited")
        return real

    def _editor(self, args: dict) -> str:
        command = self._arg(args, "command", str)
        path = self._resolve(self._arg(args, "path", str))
        if command == "view":
            return self._view(path, args.get("view_range"))
        if command == "create":
            return self._create(path, self._arg(args, "file_text", str))
        if command == "str_replace":
            return self._str_replace(path, self._arg(args, "old_str", str), self._arg(args, "new_str", str, required=False) or "")
        if command == "insert":
            return self._insert(path, self._arg(args, "insert_line", int), self._arg(args, "new_str", str))
        if command == "undo_edit":
            return self._undo(path)
        raise _ToolInputError(f"unknown editor command {command!r}; expected view, create, str_replace, insert or undo_edit")

    def _rel(self, path: Path) -> str:
        # relative paths keep observations free of the scratch folder's random name
        return path.relative_to(self.root).as_posix() or "."

    def _special(self, path: Path, mode: int) -> None:
        """Refuse what is not a regular file: a command may have made a FIFO (reading it would block
        forever), a socket or a device node where a file was."""
        if stat.S_ISREG(mode):
            return
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file")
        raise _ToolInputError(f"{self._rel(path)} is {kind}; the editor only views and edits regular files")

    def _open(self, path: Path, flags: int) -> int:
        """A descriptor on the regular file ``path``, never blocking (``O_NONBLOCK``) and never
        following a symlink swapped in after :meth:`_resolve` (``O_NOFOLLOW``)."""
        try:
            fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if os.path.lexists(path):
                self._special(path, os.lstat(path).st_mode)
            raise exc
        try:
            self._special(path, os.fstat(fd).st_mode)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _read(self, path: Path) -> str:
        if not os.path.lexists(path):
            raise _ToolInputError(f"the path {self._rel(path)} does not exist")
        self._special(path, os.lstat(path).st_mode)
        fd = self._open(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(fd).st_size
            if size > MAX_FILE_BYTES:
                raise _ToolInputError(self._too_big(path, size))
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise _ToolInputError(self._too_big(path, len(data)))
        if b"\0" in data[:8192]:
            raise _ToolInputError(f"{self._rel(path)} is a binary file")
        return data.decode("utf-8", "replace")

    def _too_big(self, path: Path, size: int) -> str:
        return (f"{self._rel(path)} is {size / 2**20:.1f} MB, over the editor's limit of {MAX_FILE_BYTES >> 20} MB; "
                "look at parts of it with bash (head, sed -n 'START,ENDp', grep -n)")

    def _limit(self, text: str) -> str:
        limit = self.sandbox.max_output_chars
        if len(text) <= limit:
            return text
        note = "\n[... output truncated; use view_range to see a part of the file ...]"
        return text[:max(limit - len(note), 0)] + note[:limit]

    def _view(self, path: Path, view_range) -> str:
        if path.is_dir():
            if view_range is not None:
                raise _ToolInputError("view_range is not allowed when viewing a directory")
            entries = []
            for current, dirs, files in os.walk(path):
                depth = len(Path(current).relative_to(path).parts)
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < 2 else []
                for name in sorted(dirs) + sorted(f for f in files if not f.startswith(".")):
                    entries.append(self._rel(Path(current) / name))
            listing = "\n".join(sorted(entries))
            return self._limit(f"Files and directories up to 2 levels deep in {self._rel(path)}, "
                               f"excluding hidden items:\n{self._rel(path)}\n{listing}")
        text = self._read(path)
        n_lines = text.count("\n") + 1
        start, end = 1, n_lines
        if view_range is not None:
            if (not isinstance(view_range, list) or len(view_range) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)):
                raise _ToolInputError(f"view_range must be a list of two integers, got {view_range!r}")
            start, end = view_range
            if not 1 <= start <= n_lines:
                raise _ToolInputError(f"view_range start {start} is outside the file's lines [1, {n_lines}]")
            if end == -1:
                end = n_lines
            elif not start <= end <= n_lines:
                raise _ToolInputError(f"view_range end {end} must be -1 or within [{start}, {n_lines}]")
        lines = itertools.islice(_lines(text), start - 1, end)
        return self._limit(f"Here's the result of running `cat -n` on {self._rel(path)}:\n"
                           f"{_numbered_upto(lines, start, self.sandbox.max_output_chars + 1)}")

    def _write(self, path: Path, text: str, previous: str | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._put(path, text)
        self._history.setdefault(path, []).append(previous)

    def _put(self, path: Path, text: str) -> None:
        fd = self._open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)

    def _snippet(self, text: str, first_line: int, n_lines: int) -> str:
        lines = text.split("\n")
        lo = max(0, first_line - 1 - SNIPPET_LINES)
        hi = min(len(lines), first_line - 1 + n_lines + SNIPPET_LINES)
        return _numbered("\n".join(lines[lo:hi]), lo + 1)

    def _create(self, path: Path, file_text: str) -> str:
        if os.path.lexists(path):
            raise _ToolInputError(f"file already exists at {self._rel(path)}; `create` cannot overwrite files, "
                                  "use `str_replace` to edit it")
        self._write(path, file_text, None)
        return f"File created successfully at: {self._rel(path)}"

    def _str_replace(self, path: Path, old: str, new: str) -> str:
        text = self._read(path)
        if old == "":
            raise _ToolInputError("`old_str` is empty; give the exact text to replace")
        count = text.count(old)
        if count == 0:
            raise _ToolInputError(f"no replacement was performed: old_str `{old}` did not appear verbatim in "
                                  f"{self._rel(path)}")
        if count > 1:
            lines = sorted({text[:i].count("\n") + 1 for i in _find_all(text, old)})
            raise _ToolInputError(f"no replacement was performed: old_str `{old}` occurs {count} times, in lines "
                                  f"{lines}; make it unique")
        first_line = text[:text.index(old)].count("\n") + 1
        updated = text.replace(old, new, 1)
        self._write(path, updated, text)
        return (f"The file {self._rel(path)} has been edited. Here's the result of running `cat -n` on a snippet:\n"
                f"{self._snippet(updated, first_line, new.count(chr(10)) + 1)}\n"
                "Review the changes and make sure they are as expected. Edit the file again if necessary.")

    def _insert(self, path: Path, line: int, new: str) -> str:
        text = self._read(path)
        lines = text.split("\n")
        if not 0 <= line <= len(lines):
            raise _ToolInputError(f"insert_line {line} is outside the file's lines [0, {len(lines)}]")
        new_lines = new.split("\n")
        updated = "\n".join(lines[:line] + new_lines + lines[line:])
        self._write(path, updated, text)
        return (f"The file {self._rel(path)} has been edited. Here's the result of running `cat -n` on a snippet:\n"
                f"{self._snippet(updated, line + 1, len(new_lines))}\n"
                "Review the changes (correct indentation, no duplicate lines). Edit the file again if necessary.")

    def _undo(self, path: Path) -> str:
        history = self._history.get(path)
        if not history:
            raise _ToolInputError(f"no edit history found for {self._rel(path)}")
        previous = history.pop()
        if previous is None:  # the edit created the file
            path.unlink(missing_ok=True)
            return f"Last edit to {self._rel(path)} undone: the file it created was removed."
        self._put(path, previous)
        return (f"Last edit to {self._rel(path)} undone successfully. Here's the result of running `cat -n`:\n"
                f"{self._limit(_numbered(previous))}")


def _lines(text: str):
    """The lines of ``text`` one at a time (no list of every line of a large file)."""
    begin = 0
    while True:
        stop = text.find("\n", begin)
        if stop < 0:
            yield text[begin:]
            return
        yield text[begin:stop]
        begin = stop + 1


def _numbered_upto(lines, start: int, limit: int) -> str:
    """``cat -n`` of ``lines`` numbered from ``start``, stopping once ``limit`` characters are made:
    a large file costs no more than the output it can show."""
    out, size = [], 0
    for number, line in enumerate(lines, start):
        out.append(f"{number:6d}\t{line}")
        size += len(out[-1]) + 1
        if size > limit:
            break
    return "\n".join(out)


def _find_all(text: str, sub: str):
    start = text.find(sub)
    while start >= 0:
        yield start
        start = text.find(sub, start + 1)

"""What the agent's patch is: the exact, bounded diff of a :class:`~icml26.agents.sandbox.Sandbox`'s copy.

:meth:`Sandbox.diff <icml26.agents.sandbox.Sandbox.diff>` calls :func:`diff`. The patch is the change, no
more and no less, whatever the agent wrote into the tree:

* **attributes are neutral**: before any host git call that reads the tree, ``$GIT_DIR/info/attributes``
  (which outranks every ``.gitattributes``) says ``* !diff !filter !working-tree-encoding !text !eol !crlf
  !ident !merge``, so a ``*.py -diff`` cannot hide a change behind "Binary files differ", a
  ``working-tree-encoding`` cannot make the host's ``git add`` fail, and no clean filter, CRLF or
  ``$Id$`` conversion changes the staged bytes; ``--no-ext-diff --no-textconv`` keep drivers out too;
* **new files by the base's ignore rules**: a new file belongs to the patch unless the ``.gitignore``
  files of the *base commit* (and the sandbox's ``info/exclude``: ``__pycache__/``, ``*.pyc``,
  ``.pytest_cache/``) ignore it, so a ``.gitignore`` of ``*`` the agent writes hides nothing. The base's
  files are flattened into one exclude file in git's order of precedence (deeper files later, so they
  win; a pattern without a slash gets ``<folder>/**/``) and git's own matcher applies it, an ignored
  folder hiding everything under it;
* **exact bytes**: the diff is taken with ``--binary``, not ``--text``: a file git sees as binary (a NUL
  byte) becomes a base85 ``GIT binary patch`` that ``git apply`` restores byte for byte, where ``--text``
  would put raw bytes (NULs, invalid UTF-8) into a patch that is a ``str``. A text file whose old or new
  content is not UTF-8 is marked binary for a second pass (its section of the patch is found by its
  header), so nothing is ever decoded with ``"replace"``; renames are off (``--no-renames``) so each
  section names one path. A file name that is not UTF-8 cannot be written in a ``str`` patch and is
  refused (:class:`PatchRefused` names it);
* **bounded**: the changed and new files are counted (``max_diff_files``) and their sizes summed from
  ``lstat`` (``max_diff_mb``, naming the largest files) *before* anything is staged, so git objects grow
  by at most the cap; the diff streams into a file and is read back only within ``max_diff_mb``; every
  git call shares the ``diff_time_limit``. Past a cap :class:`PatchRefused` says which cap, by what,
  and what to do.

Staging goes into a copy of the sandbox's index (``GIT_INDEX_FILE``), never the index itself, which stays
at the base commit: inside the sandbox ``git diff`` and ``git status`` keep showing every change.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .sandbox_exec import SandboxError

__all__ = ["NEUTRAL_ATTRIBUTES", "PatchRefused", "diff", "neutralise_attributes"]

#: what ``$GIT_DIR/info/attributes`` holds: every attribute that changes what git stores or shows, unset
NEUTRAL_ATTRIBUTES = "* !diff !filter !working-tree-encoding !text !eol !crlf !ident !merge\n"
_SHOWN = 5  # names a refusal lists
_CHUNK = 1 << 16


class PatchRefused(SandboxError):
    """The patch of the sandbox's copy was not made: a cap (``max_diff_files``, ``max_diff_mb``,
    ``diff_time_limit``) was passed, or a file name is not UTF-8. The message is written for the agent:
    which cap, by what, and what to do."""


def neutralise_attributes(git_dir: Path, binary: tuple[str, ...] = ()) -> None:
    """Write the neutral ``info/attributes``; ``binary`` paths (relative) are also marked ``-diff``."""
    lines = [NEUTRAL_ATTRIBUTES] + [f"{_quote(_glob_escape('/' + rel))} -diff\n" for rel in binary]
    info = Path(git_dir) / "info"
    info.mkdir(exist_ok=True)
    target = info / "attributes"
    text = "".join(lines)
    try:
        if target.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeError):
        pass
    temporary = info / "attributes.tmp"
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)


def diff(sb) -> str:
    """The patch of ``sb`` (a Sandbox) against its base commit; see the module docstring."""
    from .sandbox import _GIT_IDENTITY  # the one set of host git options (sandbox.py imports this module)

    git = _Git(sb, _GIT_IDENTITY)
    neutralise_attributes(sb.git_dir)
    excluded = [f":(exclude,literal){rel}" for rel in sb.nested_repositories()]
    work = Path(tempfile.mkdtemp(prefix="diff-", dir=sb.git_dir))
    try:
        git.index = work / "index"
        if (Path(sb.git_dir) / "index").exists():
            # At the base, with its stat data, and with the index file's own mtime: git re-reads an entry whose
            # file changed in the same clock tick as the index was written ("racily clean") only when the
            # index is not newer than that file. A fresh copy is newer, so a same-size edit made right after
            # the checkout would pass for clean and vanish from the patch.
            shutil.copy2(Path(sb.git_dir) / "index", git.index)
        else:
            git.run(["read-tree", sb.base], "read-tree")
        excludes = _base_excludes(sb, git)
        limit = sb.max_diff_files
        names: dict[bytes, None] = {}
        git.stream(["ls-files", "-z", "--modified", "--deleted", "--", ".", *excluded], "ls-files",
                   _collect(names, limit + 1))
        tracked = len(names)
        new: dict[bytes, None] = {}
        if len(names) <= limit:
            git.stream(["ls-files", "-z", "--others", f"--exclude-from={excludes}", "--", ".", *excluded],
                       "ls-files", _collect(new, limit + 1 - len(names)))
        _refuse_bad_names(list(names) + list(new))
        if len(names) + len(new) > limit:
            _refuse_count(sb, [*names, *new])
        new_files = [n for n in new if _is_file_or_link(sb.root, n)]
        _check_sizes(sb, [*names, *new_files], tracked)
        git.run(["add", "-u", "--", ".", *excluded], "add")
        if new_files:
            listing = b"\0".join(b":(literal)" + n for n in new_files)
            git.run(["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"], "add", stdin=listing)
        data = _diff_bytes(sb, git, work)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        # a text file whose old or new bytes are not UTF-8: again, with those files binary
        binary = tuple(_sections_not_utf8(data))
        del data
        neutralise_attributes(sb.git_dir, binary)
        try:
            data = _diff_bytes(sb, git, work)
        finally:
            neutralise_attributes(sb.git_dir)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            shown = ", ".join(_sections_not_utf8(data)[:_SHOWN])
            raise PatchRefused(f"cannot make the patch: the changes to {shown} are not UTF-8 even as a binary "
                               "patch; delete or rewrite these files, then submit again") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# the caps


def _collect(found: dict, room: int):
    """A sink for NUL-separated names that stops (returns False) once ``room`` new names are in."""
    pending = bytearray()

    def sink(chunk: bytes) -> bool:
        nonlocal room
        pending.extend(chunk)
        *complete, rest = pending.split(b"\0")
        pending[:] = rest
        for name in map(bytes, complete):
            if name and name not in found:
                if room <= 0:
                    return False
                found[name] = None
                room -= 1
        return True

    return sink


def _refuse_bad_names(names: list[bytes]) -> None:
    bad = []
    for name in names:
        try:
            name.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(name)
    if bad:
        shown = ", ".join(repr(n)[:120] for n in bad[:_SHOWN]) + (f" and {len(bad) - _SHOWN} more"
                                                                  if len(bad) > _SHOWN else "")
        raise PatchRefused(f"cannot make the patch: these file names are not UTF-8, so a patch cannot name them "
                           f"exactly: {shown} (bytes as Python writes them). Rename them to UTF-8 names or delete "
                           "them, then submit again")


def _refuse_count(sb, names: list[bytes]) -> None:
    folders: dict[str, int] = {}
    for name in names:
        top = name.decode("utf-8").split("/")[0] + ("/" if b"/" in name else "")
        folders[top] = folders.get(top, 0) + 1
    busiest = sorted(folders.items(), key=lambda item: -item[1])[:_SHOWN]
    shown = ", ".join(f"{folder} ({count})" for folder, count in busiest)
    raise PatchRefused(f"cannot make the patch: more than {sb.max_diff_files} files are changed or new (the limit, "
                       f"max_diff_files). Of the first {len(names)} found, most are in: {shown}. Delete the files that are not part of your change "
                       "(build outputs, data, caches, virtual environments; a .gitignore you add does not leave them "
                       "out), then submit again")


def _is_file_or_link(root: Path, name: bytes) -> bool:
    """What git can stage: FIFOs, sockets and devices a command made are left out."""
    try:
        mode = os.lstat(os.path.join(os.fsencode(root), name)).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def _check_sizes(sb, names: list[bytes], tracked: int) -> None:
    """Refuse past ``max_diff_mb`` (from ``lstat``: nothing is read), or for a tracked file (the first
    ``tracked`` names) that a command turned into a FIFO, socket or device, which no patch can hold."""
    sizes, special = [], []
    for index, name in enumerate(names):
        try:
            info = os.lstat(os.path.join(os.fsencode(sb.root), name))
        except OSError:
            continue  # deleted
        if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            sizes.append((info.st_size, name))
        elif index < tracked and not stat.S_ISDIR(info.st_mode):
            special.append(name.decode("utf-8"))
    if special:
        raise PatchRefused(f"cannot make the patch: {', '.join(special[:_SHOWN])} "
                           f"{'is' if len(special) == 1 else 'are'} no longer a regular file or symlink (a FIFO, "
                           "socket or device), which a patch cannot hold. Remove it or put a file back, then "
                           "submit again")
    total = sum(size for size, _ in sizes)
    if total > sb.max_diff_mb * 2**20:
        largest = sorted(sizes, reverse=True)[:_SHOWN]
        shown = ", ".join(f"{n.decode('utf-8')} ({_mb(size)})" for size, n in largest)
        raise PatchRefused(f"cannot make the patch: the {len(sizes)} changed and new files hold {_mb(total)}, over "
                           f"the limit of {_mb(sb.max_diff_mb * 2**20)} (max_diff_mb). Largest: {shown}. Delete or "
                           "shrink the files that are not part of your change (a .gitignore you add does not leave "
                           "them out), then submit again")


def _mb(size: float) -> str:
    return f"{size / 2**20:.1f} MB" if size >= 2**20 / 10 else f"{size / 2**10:.1f} KB"


def _diff_bytes(sb, git, work: Path) -> bytes:
    """The staged diff, streamed into a file and read back only within ``max_diff_mb``."""
    cap = int(sb.max_diff_mb * 2**20)
    out = work / "patch"
    with open(out, "wb") as handle:
        written = 0

        def sink(chunk: bytes) -> bool:
            nonlocal written
            written += len(chunk)
            if written > cap:
                return False
            handle.write(chunk)
            return True

        finished = git.stream(["diff", "--cached", "--binary", "--no-renames", "--no-ext-diff", "--no-textconv",
                               "--no-color", sb.base, "--"], "diff", sink)
    if not finished:
        raise PatchRefused(f"cannot make the patch: it is larger than {_mb(cap)} (max_diff_mb); the old content "
                           "of deleted and rewritten files counts too. Look at `git status` and `git diff --stat` "
                           "in bash, undo the changes that are not part of your change, then submit again")
    return out.read_bytes()


def _sections_not_utf8(data: bytes) -> list[str]:
    """The paths whose sections of ``data`` (a patch without renames) are not valid UTF-8."""
    found = []
    starts = [0] if data.startswith(b"diff --git ") else []
    at = data.find(b"\ndiff --git ")
    while at >= 0:
        starts.append(at + 1)
        at = data.find(b"\ndiff --git ", at + 1)
    for begin, end in zip(starts, [*starts[1:], len(data)]):
        section = data[begin:end]
        try:
            section.decode("utf-8")
        except UnicodeDecodeError:
            header = section[len(b"diff --git "):section.find(b"\n")].decode("utf-8", "surrogateescape")
            found.append(_header_path(header))
    return found


def _header_path(header: str) -> str:
    """The path of ``a/P b/P`` (each side C-quoted when git quotes it): both halves have one length."""
    half = header[:(len(header) - 1) // 2]
    if half.startswith('"'):
        half = _unquote(half)
    return half[2:]  # "a/"


_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


def _unquote(text: str) -> str:
    """git's C-style quoting undone (octal escapes are bytes of UTF-8)."""
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and body[i + 1:i + 4].isdigit() and len(body[i + 1:i + 4]) == 3:
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
        elif ch == "\\" and i + 1 < len(body):
            out.extend(_ESCAPES.get(body[i + 1], body[i + 1]).encode())
            i += 2
        else:
            out.extend(ch.encode("utf-8", "surrogateescape"))
            i += 1
    return out.decode("utf-8", "surrogateescape")


def _quote(text: str) -> str:
    """A C-quoted pattern for an attributes line (git unquotes a pattern that starts with a quote)."""
    inverse = {v: k for k, v in _ESCAPES.items()}
    return '"' + "".join("\\" + inverse[ch] if ch in inverse else ch for ch in text) + '"'


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


# --------------------------------------------------------------------------------------------------
# the base's ignore rules


def _base_excludes(sb, git) -> Path:
    """One exclude file equal to the base commit's ``.gitignore`` files and the sandbox's ``info/exclude``
    (made once per sandbox: the base never changes)."""
    target = Path(sb.git_dir) / f"icml26-base-excludes-{sb.base}"
    if target.exists():
        return target
    listing = git.run(["ls-tree", "-r", "-z", "--full-tree", sb.base], "ls-tree").stdout
    files = []
    for entry in filter(None, listing.split(b"\0")):
        meta, _, path = entry.partition(b"\t")
        mode, kind, blob = meta.split()
        if kind == b"blob" and mode != b"120000" and (path == b".gitignore" or path.endswith(b"/.gitignore")):
            folder = path[:-len(b".gitignore")].rstrip(b"/")
            if b"\n" not in folder and b"\r" not in folder:
                files.append((folder.count(b"/") + bool(folder), folder, blob))
    lines = []
    try:
        lines.append((Path(sb.git_dir) / "info" / "exclude").read_bytes())
    except OSError:
        pass
    for _depth, folder, blob in sorted(files):  # shallow first: a deeper file's later lines win
        text = git.run(["cat-file", "blob", blob.decode()], "cat-file").stdout
        lines.extend(_rebased(line, folder) + b"\n" for line in text.split(b"\n"))
    temporary = target.with_suffix(".tmp")
    temporary.write_bytes(b"".join(part if part.endswith(b"\n") else part + b"\n" for part in lines))
    os.replace(temporary, target)
    return target


def _rebased(line: bytes, folder: bytes) -> bytes:
    """A ``.gitignore`` line of ``folder`` as a line of a top-level exclude file."""
    if not folder or not line.strip() or line.startswith(b"#"):
        return line
    negate = line.startswith(b"!")
    pattern = line[1:] if negate else line
    escaped = b"".join(b"\\" + bytes([c]) if bytes([c]) in b"*?[]\\" else bytes([c]) for c in folder)
    if escaped[:1] in (b"#", b"!"):
        escaped = b"\\" + escaped
    if b"/" in pattern.rstrip(b"/ \r"):  # a slash at the start or in the middle: relative to its folder
        rebased = escaped + b"/" + pattern.lstrip(b"/") if pattern.startswith(b"/") else escaped + b"/" + pattern
    else:
        rebased = escaped + b"/**/" + pattern
    return (b"!" if negate else b"") + rebased


# --------------------------------------------------------------------------------------------------
# host git calls, all within one time budget


class _Git:
    def __init__(self, sb, identity: tuple[str, ...]):
        self.sb = sb
        self.identity = identity
        self.deadline = time.monotonic() + sb.diff_time_limit
        self.index: Path | None = None

    def _env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", LC_ALL="C",
                   GIT_DIR=str(self.sb.git_dir), GIT_WORK_TREE=str(self.sb.root), GIT_OPTIONAL_LOCKS="0")
        if self.index is not None:
            env["GIT_INDEX_FILE"] = str(self.index)
        return env

    def _left(self, step: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            self._late(step)
        return left

    def _late(self, step: str):
        raise PatchRefused(f"cannot make the patch within {self.sb.diff_time_limit:g} s (diff_time_limit): git {step} "
                           "did not finish in time. Delete the files that are not part of your change (many or large "
                           "files make it slow), then submit again")

    def _failed(self, step: str, code: int, err: bytes):
        text = err.decode("utf-8", "replace").strip().replace(str(self.sb.root), self.sb.display_root)
        raise PatchRefused(f"cannot make the patch: git {step} failed (exit {code}): {text[:1000]}")

    def run(self, args: list[str], step: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(["git", *self.identity, *args], cwd=self.sb.root, env=self._env(),
                                  capture_output=True, timeout=self._left(step), input=stdin,
                                  stdin=None if stdin is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            self._late(step)
        if proc.returncode != 0:
            self._failed(step, proc.returncode, proc.stderr)
        return proc

    def stream(self, args: list[str], step: str, sink) -> bool:
        """Feed git's stdout to ``sink`` in chunks; ``sink`` returning False ends git: returns False."""
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(["git", *self.identity, *args], cwd=self.sb.root, env=self._env(),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
            late = threading.Event()

            def expire():
                late.set()
                proc.kill()

            timer = threading.Timer(max(self._left(step), 0.0), expire)
            timer.start()
            stopped = False
            try:
                while chunk := proc.stdout.read1(_CHUNK):
                    if not sink(chunk):
                        stopped = True
                        proc.kill()
                        break
            finally:
                proc.stdout.close()
                code = proc.wait()
                timer.cancel()
            if late.is_set():
                self._late(step)
            if stopped:
                return False
            if code != 0:
                err.seek(0)
                self._failed(step, code, err.read(4000))
        return True

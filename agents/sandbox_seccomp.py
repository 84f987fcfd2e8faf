"""The system calls a sandboxed command may not make: a seccomp filter built with libseccomp.

Namespaces do not cover every part of the kernel. Some of it is shared by every process of the machine
whatever namespaces they are in, and an untrusted command could reach the host through it:

* **vsock** (``AF_VSOCK`` sockets) shares one port space with the host and its hypervisor;
* **kernel keyrings** (``add_key``, ``keyctl``, ``request_key``): the user keyring of a uid is shared
  by all its processes, so a command could read a secret the caller keeps there or plant one the host
  and the next sandbox see;
* **large attack surfaces** a command has no need of: ``io_uring_*``, ``userfaultfd``, ``bpf``,
  ``perf_event_open``, ``kexec_*``, and **new user namespaces** (``unshare``/``clone`` with
  ``CLONE_NEWUSER``), in which a command would get every capability back (and nf_tables, mounts...).

:func:`filter_program` asks libseccomp (through the ``pyseccomp`` binding, ctypes over the system's
``libseccomp.so.2``) for a filter that refuses exactly those calls with an error the caller can read
(``EAFNOSUPPORT`` for vsock, ``EPERM`` for the rest; ``clone3``, whose flags a filter cannot see, gets
``ENOSYS`` so that the C library falls back to ``clone``, which the filter can check) and allows the
rest, and exports it as a classic BPF program. The launcher (:mod:`icml26.agents.sandbox_launcher`)
installs that program in the command's first process just before it executes the command; every
process the command starts inherits it and none can remove it. System calls of another ABI than the
native one (32-bit calls on x86-64) are refused by libseccomp's default for a foreign architecture (the
process is killed).

The BPF is made by libseccomp rather than written here by hand: it knows each architecture's system call
numbers and ABIs. The program is built once per process.
"""

from __future__ import annotations

import errno
import functools
import tempfile

__all__ = ["REFUSED", "filter_program"]

_AF_VSOCK = 40
_CLONE_NEWUSER = 0x10000000
#: system call -> (errno it fails with, why it is refused): every one refused whatever its arguments
REFUSED: dict[str, tuple[int, str]] = {
    "add_key": (errno.EPERM, "kernel keyrings are shared with the host"),
    "keyctl": (errno.EPERM, "kernel keyrings are shared with the host"),
    "request_key": (errno.EPERM, "kernel keyrings are shared with the host"),
    "io_uring_setup": (errno.EPERM, "io_uring: a large kernel surface"),
    "io_uring_enter": (errno.EPERM, "io_uring: a large kernel surface"),
    "io_uring_register": (errno.EPERM, "io_uring: a large kernel surface"),
    "userfaultfd": (errno.EPERM, "userfaultfd: a classic exploit primitive"),
    "bpf": (errno.EPERM, "eBPF programs run in the kernel"),
    "perf_event_open": (errno.EPERM, "performance counters see the whole machine"),
    "kexec_load": (errno.EPERM, "loading a new kernel"),
    "kexec_file_load": (errno.EPERM, "loading a new kernel"),
}
#: refused only with some arguments (described for the docs)
CONDITIONAL = {
    "socket": "with family AF_VSOCK: EAFNOSUPPORT (vsock is not namespaced)",
    "unshare": "with CLONE_NEWUSER: EPERM (no new user namespaces)",
    "clone": "with CLONE_NEWUSER: EPERM (no new user namespaces)",
    "clone3": "always: ENOSYS, so that the C library falls back to clone, whose flags the filter checks",
}


@functools.cache
def filter_program() -> tuple[bytes | None, str]:
    """``(program, "")``: the seccomp filter as a classic BPF program (8 bytes an instruction), or
    ``(None, reason)`` when it cannot be built here (no ``pyseccomp`` or no ``libseccomp.so.2``)."""
    try:
        import pyseccomp as seccomp
    except ImportError:
        return None, ("the seccomp filter needs the pyseccomp package (`pip install pyseccomp`), a binding to the "
                      "system's libseccomp")
    except (OSError, AttributeError, TypeError) as exc:  # the binding loads libseccomp.so.2 on import
        return None, (f"the seccomp filter needs the system's libseccomp (libseccomp.so.2; Debian/Ubuntu: "
                      f"`apt install libseccomp2`): {type(exc).__name__}: {exc}")
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        for name, (code, _) in REFUSED.items():
            try:
                rules.add_rule(seccomp.ERRNO(code), name)
            except (OSError, ValueError, RuntimeError):  # not a system call of this architecture
                continue
        rules.add_rule(seccomp.ERRNO(errno.EAFNOSUPPORT), "socket", seccomp.Arg(0, seccomp.EQ, _AF_VSOCK))
        for name in ("unshare", "clone"):
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name,
                           seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_NEWUSER, _CLONE_NEWUSER))
        try:
            rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        except (OSError, ValueError, RuntimeError):
            pass
        with tempfile.TemporaryFile() as handle:
            rules.export_bpf(handle)
            handle.seek(0)
            program = handle.read()
    except Exception as exc:  # noqa: BLE001 - any failure of the binding is a reason to refuse isolation
        return None, f"libseccomp could not build the filter: {type(exc).__name__}: {exc}"
    if not program or len(program) % 8:
        return None, f"libseccomp exported a filter of {len(program)} bytes, not whole instructions"
    return program, ""

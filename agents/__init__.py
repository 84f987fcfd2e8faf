"""LLM-driven pipelines: chat backends, sandboxed tools, generation loops (``icml26.agents``).

Shared infrastructure lives at the top (``backends``, ``toolcalls``, ``sandbox`` and its stdlib-only
``sandbox_launcher``, ``tools``, ``loop``); each method is a subpackage (``sera``, ``optminer``). The names
below load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from icml26.lazy import lazy_exports

_EXPORTS = {
    "ChatBackend": "backends", "OpenAIChatBackend": "backends", "TransformersChatBackend": "backends",
    "ScriptedBackend": "backends", "BackendError": "backends", "backend_from_spec": "backends",
    "to_template_messages": "backends", "ToolCall": "toolcalls", "parse_tool_calls": "toolcalls",
    "Sandbox": "sandbox", "SandboxError": "sandbox", "PatchRefused": "sandbox", "default_tools": "tools", "run_agent": "loop",
    "Trajectory": "loop",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

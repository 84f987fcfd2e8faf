"""The RDL structure optimiser: the public face of ``icml26.models.rdl_graph``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icml26.lazy import lazy_exports
from icml26.models.rdl_graph.templates import (
    TemplateSpec,
    add_templates,
    candidate_templates,
    count_messages,
    parse_template,
    template_edges,
)

if TYPE_CHECKING:
    from icml26.models.rdl_graph.modeling import (
        COLUMN_GATINGS,
        NEIGHBOR_AGGRS,
        HardConcreteGate,
        RDLGraphConfig,
        RDLGraphModel,
        RDLGraphOutput,
        RDLGraphPlan,
    )

# Names whose modules import transformers or TRL load on first use, so importing this package
# stays a torch-only import.
_LAZY = {
    **dict.fromkeys(("COLUMN_GATINGS", "HardConcreteGate", "NEIGHBOR_AGGRS", "RDLGraphConfig", "RDLGraphModel", "RDLGraphOutput", "RDLGraphPlan"), "modeling"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "COLUMN_GATINGS", "HardConcreteGate", "NEIGHBOR_AGGRS", "RDLGraphConfig", "RDLGraphModel", "RDLGraphOutput",
    "RDLGraphPlan", "TemplateSpec", "add_templates", "candidate_templates", "count_messages", "parse_template",
    "template_edges",
]

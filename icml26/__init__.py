"""icml26: methods of ICML 2026 papers as installable, tested software.

The top level holds the light core only (no torch import): claims and results, the experiment
and benchmark registry, the run configuration and the seeding utility.
"""

__version__ = "0.4.0"

from .errors import InputError  # noqa: E402
from .registry import benchmark, experiment  # noqa: E402
from .results import Claim, Result  # noqa: E402
from .runner import RunConfig  # noqa: E402
from .utils import set_seed  # noqa: E402

__all__ = ["Claim", "InputError", "Result", "RunConfig", "benchmark", "experiment", "set_seed", "__version__"]

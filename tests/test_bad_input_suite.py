"""The bad-input suite as a whole: every area's probes are counted, so the suite cannot shrink unnoticed.

The probes themselves run in ``tests/test_bad_input_<area>.py`` (see ``tests/probes.py`` for what
counts as clear, silent and cryptic). This test only imports those modules and counts.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
MINIMUM = 300


def _areas() -> dict[str, list]:
    areas = {}
    for path in sorted(HERE.glob("test_bad_input_*.py")):
        if path.name == Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"_bad_input_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        areas[path.stem.removeprefix("test_bad_input_")] = list(module.PROBES)
    return areas


def test_suite_holds_at_least_300_probes_over_the_api_and_the_cli():
    areas = _areas()
    total = sum(len(p) for p in areas.values())
    assert total >= MINIMUM, f"{total} probes in {sorted(areas)}; the suite keeps at least {MINIMUM}"
    assert any(p.kind == "cli" for probes in areas.values() for p in probes), "no CLI probes"
    empty = [name for name, probes in areas.items() if not probes]
    assert not empty, f"areas without probes: {empty}"

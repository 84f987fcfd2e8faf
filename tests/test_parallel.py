"""``icml26.eval.parallel.map_jobs``: results in order, and the jobs' progress phases relayed to the parent."""

import os

import pytest

torch = pytest.importorskip("torch")

from icml26.eval.parallel import map_jobs  # noqa: E402
from icml26.progress import listening, phase  # noqa: E402


def _job(n: int) -> tuple[int, int]:
    with phase(f"job {n}", total=n) as bar:
        for _ in range(n):
            bar.update()
    return n * n, os.getpid()


@pytest.mark.parametrize("device", ["cpu", "meta"])  # meta: the serial path a GPU takes
def test_results_keep_the_job_order_and_the_phases_reach_the_parent(device):
    events = []
    with listening(lambda tracker, event: events.append((tracker.name, event, tracker.n, os.getpid()))):
        results = map_jobs(_job, [3, 1, 2], torch.device(device), phase_name="jobs")
    assert [square for square, _ in results] == [9, 1, 4]
    if device == "cpu":
        assert all(pid != os.getpid() for _, pid in results)  # each job ran in a forked worker
    # every event is seen in the parent, by the parent's listener (workers never call it themselves)
    assert {pid for *_, pid in events} == {os.getpid()}
    closed = {name: n for name, event, n, _ in events if event == "close"}
    assert closed == {"job 3": 3, "job 1": 1, "job 2": 2, "jobs": 3}

"""The settle check of ``benchmarks/scale_apiserver.py``: a phase is settled only once the
controller finished a disruption evaluation that began after the cluster's last change
(:func:`scale_apiserver.evaluated_since`), on recorded scrapes of the evaluation histogram."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scale_apiserver
from scale_apiserver import Evaluations, evaluated_since


def test_a_pass_running_through_the_quiet_time_proves_nothing_until_it_is_followed():
    """The recorded failure: the last change at t=100, then one 97 s pass (begun at t=98, before
    the change) finished at t=195; scrapes every 5 s. Its finish proves nothing (it began before
    the change); a 3 s pass finishing at t=204 does."""
    scrapes = [Evaluations(t, 4.0, 20.0) for t in range(90, 196, 5)]  # silent: the pass is running
    scrapes.append(Evaluations(200.0, 5.0, 117.0))  # the 97 s pass finished between 195 and 200
    assert not evaluated_since(scrapes, 100.0)
    scrapes.append(Evaluations(205.0, 6.0, 120.0))  # a 3 s pass finished between 200 and 205: began >= 197
    assert evaluated_since(scrapes, 100.0)
    assert not evaluated_since(scrapes, 198.0)  # ... but not provably after 198


def test_short_passes_after_the_change_settle_and_restarts_prove_nothing():
    scrapes = [Evaluations(100.0, 10.0, 5.0), Evaluations(105.0, 11.0, 5.5)]  # finished after 100, lasted 0.5 s
    assert evaluated_since(scrapes, 99.5)  # so it began at or after 99.5
    assert not evaluated_since(scrapes, 100.0)  # not provably after 100
    restart = [Evaluations(100.0, 10.0, 5.0), Evaluations(105.0, 1.0, 0.2)]  # the counter went down
    assert not evaluated_since(restart, 90.0)
    assert not evaluated_since([], 0.0) and not evaluated_since([Evaluations(1.0, 1.0, 1.0)], 0.0)


def test_the_histogram_is_summed_over_labels():
    scraped = {f"{scale_apiserver.EVALUATION}_count{{consolidation_type=\"single\"}}": 3.0,
               f"{scale_apiserver.EVALUATION}_count{{consolidation_type=\"multi\"}}": 2.0,
               f"{scale_apiserver.EVALUATION}_sum{{consolidation_type=\"single\"}}": 1.5}
    assert scale_apiserver.metric_total(scraped, scale_apiserver.EVALUATION + "_count") == 5.0
    assert scale_apiserver.metric_total(scraped, scale_apiserver.EVALUATION + "_sum") == 1.5

"""Fault domain: MTBF, Young/Daly, and the devices one failure stops."""

from __future__ import annotations

import math

import pytest

from migrator.plan import fault
from migrator.plan.clusters import load
from migrator.plan.cost import Layout


def test_worked_example_one_failure_per_10_hours_on_1000_cards_per_hour_on_10000():
    assert fault.mtbf_hours(1e-4, 1_000) == pytest.approx(10.0)
    assert fault.mtbf_hours(1e-4, 10_000) == pytest.approx(1.0)


def test_young_daly_interval():
    assert fault.young_daly_hours(360, 10.0) == pytest.approx(math.sqrt(2 * 0.1 * 10.0))


def test_default_rate_is_the_llama3_figure():
    assert fault.LLAMA3_FAILURES_PER_DEVICE_HOUR == pytest.approx(419 / (16384 * 54 * 24))


def test_a_tp_group_inside_the_supernode_stops_the_whole_domain():
    cluster = load(["supernode-384"])[0]
    blast, reason = fault.blast_radius(Layout(tp=8, dp=48), cluster)
    assert blast == 384 and "domain" in reason


def test_data_parallel_only_loses_one_machine():
    cluster = load(["a100-dgx"])[0].with_devices(64)
    blast, _ = fault.blast_radius(Layout(dp=64), cluster)
    assert blast == 8


def test_checkpoint_interval_from_the_write_time():
    cluster = load(["supernode-384"])[0]
    plan = fault.plan_faults(Layout(tp=8, dp=48), cluster, 1e9, failure_rate=1e-4, checkpoint_write_s=60)
    assert plan.mtbf_h == pytest.approx(1 / (1e-4 * 384))
    assert plan.interval_h == pytest.approx(math.sqrt(2 * (60 / 3600) * plan.mtbf_h))
    without = fault.plan_faults(Layout(tp=8, dp=48), cluster, 1e9, failure_rate=1e-4)
    assert without.interval_h is None and "storage_write_GBps" in without.missing

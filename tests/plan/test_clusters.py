"""Cluster profiles: every figure sourced and flagged; a missing one is a named required input."""

from __future__ import annotations

import pytest

from migrator.plan import clusters
from migrator.plan.clusters import ClusterError, MissingFigure

SHIPPED = ("a100-dgx", "h100-dgx", "a2-8x", "supernode-384", "atlas-950-superpod", "atlas-960-superpod")


def test_the_shipped_profiles_are_there_and_every_figure_has_a_flag_and_a_source():
    profiles = clusters.builtin()
    assert set(SHIPPED) <= set(profiles)
    for profile in profiles.values():
        for key, fig in profile.figures:
            assert fig.flag in clusters.FLAGS, (profile.name, key)
            if fig.value is not None:
                assert fig.source, (profile.name, key)


def test_a_null_figure_is_a_required_input_naming_key_and_where_to_set_it():
    a2 = clusters.load(["a2-8x"])[0]
    with pytest.raises(MissingFigure, match=r"storage_write_GBps.*\[tool\.migrate\.clusters\.a2-8x\]"):
        a2.need("storage_write_GBps")


@pytest.mark.parametrize("name", ["a2-8x", "supernode-384", "atlas-950-superpod", "atlas-960-superpod"])
def test_every_ascend_profile_has_each_figure_a_bf16_plan_reads_with_its_kind(name):
    cluster = clusters.load([name])[0]
    for key in ("devices", "domain_size", "domain_GBps", "peak_tflops_bf16", "hbm_GB", "hbm_GBps"):
        assert cluster.need(key) > 0, key
        assert cluster.figure(key).flag in clusters.FLAGS and cluster.figure(key).source, key


def test_derived_defaults_come_from_calibration_and_never_replace_a_sourced_figure():
    from migrator.plan.calibration import DERIVED_FIGURES

    a2 = clusters.load(["a2-8x"])[0]
    fig = a2.figure("peak_tflops_bf16")
    assert fig.flag == "derived" and fig.value == DERIVED_FIGURES["a2-8x"]["peak_tflops_bf16"][0]
    assert "arXiv:2506.12708" in fig.source and "fitted to one published run" in fig.source
    assert a2.figure("scale_out_GBps").flag == "first-party" and "2504.07866" in a2.figure("scale_out_GBps").source
    assert clusters.load(["atlas-950-superpod"])[0].figure("domain_GBps").flag == "announced"  # shipped wins
    assert "domain_GBps (derived)" in a2.not_strict("bf16") and "scale_out_GBps (first-party)" not in str(
        a2.not_strict("bf16"))
    assert clusters.load(["a100-dgx"])[0].not_strict("bf16") == []


def test_the_old_verified_flag_reads_as_first_party(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.migrate.clusters.lab]\nbase = "a100-dgx"\n'
        'hbm_GBps = {value = 1800, flag = "verified", source = "our datasheet"}\n')
    assert clusters.load(["lab"], tmp_path)[0].figure("hbm_GBps").flag == "first-party"


def test_user_profiles_in_pyproject_fill_missing_figures(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.migrate.clusters.a2-8x]\npeak_tflops_bf16 = 300\nhbm_GBps = 1500\ndomain_GBps = 50\n'
        '[tool.migrate.clusters.lab]\nbase = "a100-dgx"\ntitle = "our lab"\ndevices = 64\n')
    a2, lab = clusters.load(["a2-8x", "lab"], tmp_path)
    assert a2.peak_tflops("bf16") == 300 and a2.figure("peak_tflops_bf16").flag == "user"
    assert a2.figure("hbm_GB").flag == "announced"  # the rest stays as shipped
    assert lab.need("devices") == 64 and lab.need("domain_size") == 8 and lab.title == "our lab"


def test_bad_user_profiles_name_the_file_and_the_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.migrate.clusters.lab]\nhbm_gigabytes = 80\n')
    with pytest.raises(ClusterError, match=r"pyproject\.toml.*'lab'.*hbm_gigabytes"):
        clusters.load(["lab"], tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.migrate.clusters.lab]\nhbm_GB = -1\n')
    with pytest.raises(ClusterError, match="positive number"):
        clusters.load(["lab"], tmp_path)


def test_unknown_cluster_lists_the_known_ones():
    with pytest.raises(ClusterError, match="unknown cluster.*supernode-384"):
        clusters.load(["nope"])

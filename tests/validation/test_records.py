"""The parent/child contract of validation: every job and status record round-trips through JSON with
every field set, and a file that does not match its record is refused with the file and the field named
(by the reader, by the worker that writes a status, and by the launcher that reads it)."""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import sys
import time
import types
import typing
from collections.abc import Mapping

import pytest

from migrator.census.records import CensusJob, CensusStatus
from migrator.ground import process_scope
from migrator.validation import records
from migrator.validation.child import worker
from migrator.validation.parent import launcher

JOBS = [*records.JOB_KINDS.values(), CensusJob]
STATUSES = [records.Status, *records.STATUS_OF.values(), CensusStatus]


def _example(tp, name: str):
    """A value of type ``tp`` that differs from every field default (so a dropped field shows)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _example(next(a for a in args if a is not type(None)), name)
    if origin is typing.Literal:
        return args[-1]
    if origin is tuple:
        return (_example(args[0], name), _example(args[0], name + "2"))
    if origin in (dict, Mapping) or tp is Mapping:
        return {f"{name}-key": _example(args[1], name) if args else 1}
    if dataclasses.is_dataclass(tp):
        return _build(tp)
    if typing.is_typeddict(tp):
        return {key: _example(hint, key) for key, hint in typing.get_type_hints(tp).items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return list(tp)[-1]
    if tp is typing.Any:
        return {"nested": [1, "two", {"three": 3.5}]}
    return {str: f"{name}-value", int: 7, float: 2.5, bool: True}[tp]


def _build(cls):
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _example(hints[f.name], f.name) for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("cls", JOBS + STATUSES, ids=lambda c: c.__name__)
def test_every_record_round_trips_through_json_with_every_field_set(cls):
    record = _build(cls)
    text = json.dumps(records.to_json(record))
    data = json.loads(text)
    back = records.job_from_json(data) if cls in records.JOB_KINDS.values() else \
        records.from_json({k: v for k, v in data.items() if k != "kind"}, cls)
    assert back == record
    assert dataclasses.is_dataclass(back) and type(back).__dataclass_params__.frozen  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.out = "elsewhere"  # type: ignore[misc]


@pytest.mark.parametrize("cls", STATUSES, ids=lambda c: c.__name__)
def test_a_status_with_nothing_in_it_is_a_failed_one(cls):
    empty = records.from_json({}, cls)
    assert empty == cls() and not empty.ok and empty.error is None


def test_an_unknown_field_is_refused_naming_the_file_and_the_field():
    data = records.to_json(_build(records.SideJob))
    data["polcies"] = ["fp32"]
    with pytest.raises(records.RecordError, match=r"job\.json: .*polcies"):
        records.job_from_json(data, "job.json")


def test_a_value_of_the_wrong_kind_is_refused_naming_the_field():
    data = records.to_json(_build(records.ParallelJob))
    data["steps"] = ["not a step"]
    with pytest.raises(records.RecordError, match=r"steps"):
        records.job_from_json(data)
    with pytest.raises(records.RecordError, match=r"unknown job kind 'sidee'"):
        records.job_from_json({**data, "kind": "sidee"})
    with pytest.raises(records.RecordError, match="phase"):
        records.from_json({"phase": "exploded"}, records.Status)


@pytest.mark.parametrize("field, value", [("seed", "12"), ("seed", True), ("threads", 1.5)])
def test_a_number_is_never_read_from_a_string_or_a_bool(field, value):
    """The records read scalars as they are (the fix record's rule): "12" is no seed, True no count."""
    data = records.to_json(_build(records.ParallelJob))
    assert isinstance(data[field], int)
    with pytest.raises(records.RecordError, match=field):
        records.job_from_json({**data, field: value})


def test_a_verdict_reads_as_its_member_and_an_unknown_one_is_refused():
    from migrator.validation.verdict import Verdict

    row = {"check": "mesh builds", "status": "pass"}
    status = records.from_json({"ok": True, "checks": [row]}, records.PlanStatus)
    assert status.checks[0]["status"] is Verdict.PASS
    with pytest.raises(records.RecordError, match="status"):
        records.from_json({"ok": True, "checks": [{**row, "status": "passed"}]}, records.PlanStatus)


def _table(run):
    return {"side": worker.Runner(records.SideJob, records.SideStatus, lambda: run)}


def test_the_worker_freezes_what_a_runner_built_and_refuses_an_unknown_field(tmp_path):
    job = records.SideJob(side="original", tree=str(tmp_path), out=str(tmp_path / "out"), shared=str(tmp_path),
                          steps=(0,))
    records.write(job, str(tmp_path / "job.json"))
    assert worker.serve(str(tmp_path / "job.json"), _table(lambda job: {"ok": True, "runs": {"fp32/step0": "d"}})) == 0
    status = records.read_status(str(tmp_path / "out" / "status.json"), records.SideStatus)
    assert status.ok and status.runs == {"fp32/step0": "d"}

    assert worker.serve(str(tmp_path / "job.json"), _table(lambda job: {"ok": True, "runz": {}})) == 1
    status = records.read_status(str(tmp_path / "out" / "status.json"), records.SideStatus)
    assert not status.ok and status.phase == "harness" and "runz" in status.error.summary


def test_the_worker_given_a_broken_job_file_leaves_a_status_saying_so(tmp_path):
    (tmp_path / "job.json").write_text('{"kind": "plan", "tree": "t"}')  # no out, no world_size
    assert worker.main([str(tmp_path / "job.json")]) == 1
    status = records.read_status(str(tmp_path / "status.json"), records.Status)
    assert status.phase == "harness" and "job.json" in status.error.summary and "out" in status.error.summary


@pytest.mark.parametrize("data", [{"kind": "sidee", "tree": "t", "out": "o"}, {"tree": "t", "out": "o"}, [1, 2]],
                         ids=["misspelt", "none", "not-an-object"])
def test_a_job_of_a_kind_the_child_does_not_run_is_a_harness_failure_naming_the_job_file(tmp_path, data):
    (tmp_path / "job.json").write_text(json.dumps(data))
    assert worker.main([str(tmp_path / "job.json")]) == 1
    status = records.read_status(str(tmp_path / "status.json"), records.Status)
    assert status.phase == "harness" and not status.ok
    assert status.error.summary.startswith(str(tmp_path / "job.json")) and "unknown job kind" in status.error.summary


def test_a_census_job_is_refused_by_the_validation_table_and_served_by_its_own(tmp_path, monkeypatch):
    from migrator.census import child as census_child

    job = CensusJob(tree=str(tmp_path), out=str(tmp_path / "out"))
    records.write(job, str(tmp_path / "job.json"))
    assert worker.main([str(tmp_path / "job.json")]) == 1
    assert "unknown job kind 'census'" in records.read_status(str(tmp_path / "status.json"), records.Status).error.summary

    seen = []
    monkeypatch.setattr(census_child, "run", lambda job: seen.append(job) or {"ok": True, "torch": "x"})
    assert census_child.main([str(tmp_path / "job.json")]) == 0
    assert seen == [job]
    assert records.read_status(str(tmp_path / "out" / "status.json"), CensusStatus).torch == "x"


def test_the_table_holds_one_runner_per_job_record_each_with_its_status_record():
    assert set(worker.RUNNERS) == set(records.JOB_KINDS)
    for kind, runner in worker.RUNNERS.items():
        assert runner.job is records.JOB_KINDS[kind] and runner.status is records.STATUS_OF[kind]
        run = runner.load()
        hints = typing.get_type_hints(run)
        assert hints["job"] is runner.job, kind


def test_the_launcher_reads_a_status_that_does_not_match_as_a_harness_failure(tmp_path):
    out = tmp_path / "child"
    out.mkdir()
    (out / "status.json").write_text(json.dumps({"ok": True, "checks": [], "colour": "green"}))
    scope = process_scope.Scope([sys.executable, "-c", "pass"], env=dict(os.environ), cwd=str(out), stdout=None)
    child = launcher.Child("plan", scope, str(out), str(out / "log.txt"), time.monotonic(), timeout=30)
    result = launcher.wait(child, records.PlanStatus)
    assert not result.ok
    failure = result.failure()
    assert failure is not None and failure.phase == "harness"
    assert "status.json" in failure.error.summary and "colour" in failure.error.summary


def test_a_child_that_left_no_status_is_named_with_its_exit_code(tmp_path):
    scope = process_scope.Scope([sys.executable, "-c", "raise SystemExit(3)"], env=dict(os.environ),
                                cwd=str(tmp_path), stdout=None)
    child = launcher.Child("side", scope, str(tmp_path), str(tmp_path / "log.txt"), time.monotonic(), timeout=30)
    result = launcher.wait(child, records.SideStatus)
    assert result.status == records.SideStatus() and not result.ok
    failure = result.failure()
    assert failure is not None and failure.phase == "harness" and "code 3" in failure.error.summary


def test_a_program_serving_its_own_job_kind_refuses_another(tmp_path):
    side = records.to_json(_build(records.SideJob))
    with pytest.raises(records.RecordError, match=r"unknown job kind 'side' \(known: census\)"):
        records.job_from_json(side, cls=CensusJob)
    (tmp_path / "job.json").write_text("{not json")
    with pytest.raises(records.RecordError, match=r"job\.json: not JSON"):
        records.read_job(str(tmp_path / "job.json"))


# ------------------------------------------------------------------ the child's facts (precision, training, dropout, bench)
POLICY = {"module_forwards": 4, "autocast_on": 4, "autocast_dtype": "bfloat16", "activation_dtypes": {"bfloat16": 4},
          "param_dtypes": {"float32": 2}, "grad_dtypes": {"float32": 2}, "autocast_regions": {"_root": "bfloat16"}}
SCALER = {"class": "GradScaler", "enabled": True, "init_scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5,
          "growth_interval": 2000.0, "dynamic": True, "trajectory": [1024.0, 1024.0, 1024.0], "skipped_steps": 0}
TRAIN = {"steps": 3, "losses": [0.5, 0.4, 0.3], "optimizer": "AdamW", "train_step": True, "policy": POLICY,
         "phases": [{"step": 0, "phase": "clip", "state": [1.0, 2.0], "args": {"fn": "clip_grad_norm_", "max_norm": 1.0}}],
         "scaler": SCALER, "dir": "/work/train/fp32"}
DROPOUT = {"sites": {"drop": [0.1]}, "neutralised": True,
           "statistics": {"sites": {"drop": [0.1]}, "losses": [0.5, 0.6], "kept": {"drop": [90.0, 100.0]}}}


def _status_file(tmp_path, data):
    (tmp_path / "status.json").write_text(json.dumps(data))
    return str(tmp_path / "status.json")


def test_the_facts_a_child_writes_read_back_as_records_and_write_out_the_same(tmp_path):
    data = {"ok": True, "train": {"fp32": TRAIN}, "dropout": DROPOUT}
    status = records.read_status(_status_file(tmp_path, data), records.SideStatus)
    fp32 = status.train["fp32"]
    assert fp32.losses == (0.5, 0.4, 0.3) and fp32.policy.autocast_regions == {"_root": "bfloat16"}
    assert fp32.scaler.class_name == "GradScaler" and fp32.scaler_recorded and fp32.phases[0].args["max_norm"] == 1.0
    assert status.dropout.statistics.kept == {"drop": (90.0, 100.0)}
    written = records.to_json(status)
    assert json.loads(json.dumps(written["train"])) == {"fp32": TRAIN}
    assert json.loads(json.dumps(written["dropout"])) == DROPOUT


@pytest.mark.parametrize("precision, recorded", [({"policy": POLICY}, False), ({"policy": POLICY, "scaler": None}, True)],
                         ids=["not-recorded", "no-scaler"])
def test_a_scaler_not_recorded_is_not_a_missing_scaler(tmp_path, precision, recorded):
    status = records.read_status(_status_file(tmp_path, {"ok": True, "precision": precision}), records.ScriptStatus)
    assert status.precision.scaler is None and status.precision.scaler_recorded is recorded
    assert records.to_json(status)["precision"] == precision  # written back as the child wrote it


@pytest.mark.parametrize("cls, data, field", [
    (records.SideStatus, {"train": {"fp32": dict(TRAIN, losses="low")}}, r"SideStatus\.train\['fp32'\]\.losses"),
    (records.SideStatus, {"train": {"fp32": dict(TRAIN, policy=dict(POLICY, autocast_on="all"))}},
     r"SideStatus\.train\['fp32'\]\.policy\.autocast_on"),
    (records.SideStatus, {"train": {"fp32": dict(TRAIN, scaler=dict(SCALER, init_scale="big"))}},
     r"SideStatus\.train\['fp32'\]\.scaler\.init_scale"),
    (records.SideStatus, {"dropout": dict(DROPOUT, sites=["drop"])}, r"SideStatus\.dropout\.sites"),
    (records.SideStatus, {"dropout": dict(DROPOUT, statistics={"losses": [0.5], "seeds": 8})},
     r"extra fields found \(seeds\) @ SideStatus\.dropout\.statistics"),
    (records.ScriptStatus, {"precision": {"policy": POLICY, "scaler": {"enabled": True}}},
     r"ScriptStatus\.precision\.scaler.*class"),
    (records.BenchStatus, {"comm_share": {"total": 0.1}}, r"BenchStatus\.comm_share\.all_reduce"),
    (records.BenchStatus, {"peak_memory": {"bytes": [1], "kind": "rss"}}, r"BenchStatus\.peak_memory\.bytes"),
    (records.PlanStatus, {"checks": [{"check": "mesh builds", "status": "fine"}]}, r"PlanStatus\.checks\[0\]\.status"),
], ids=["losses", "policy", "scaler", "dropout-sites", "statistics-extra-key", "scaler-class", "comm-share",
        "peak-memory", "check-status"])
def test_a_status_with_a_wrong_fact_is_refused_naming_the_file_and_the_field(tmp_path, cls, data, field):
    path = _status_file(tmp_path, {"ok": True, **data})
    with pytest.raises(records.RecordError, match=rf"^{path}: .*{field}"):
        records.read_status(path, cls)

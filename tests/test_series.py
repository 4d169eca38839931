"""rlsweep.series reads what apps already write, exactly: event files written by torch's
SummaryWriter, TorchRL's loggers and tensorboard's own writer (checked against
TensorBoard's own EventAccumulator), TorchRL's per-metric CSV files, Lightning's and
Stable-Baselines3's CSV loggers' wide files, and rlsweep's metrics.csv first. Values are
chosen exact in float32 so they can be checked by hand."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.types_pb2 import DT_FLOAT
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_crc
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util
from torch.utils.tensorboard import SummaryWriter

# At collection, unlike the suite's other optional imports (about 1.4 CPU-s per pytest worker):
# importing TorchRL sets multiprocessing's start method to spawn. Imported here, it does so in
# every pytest worker before any test runs, not half-way through a worker's tests (which
# tests then ran under spawn would depend on the order the files reached the worker).
from torchrl.record.loggers import CSVLogger, TensorboardLogger

from rlsweep.series import job_series
from rlsweep.series.tfrecord import masked_crc32c

LOSS = [0.5, 0.25, -0.125, 1.5, 2.0]  # at steps 0, 10, 20, 30, 40


def pairs(series) -> list[tuple[float, float]]:
    return list(zip(series.steps.tolist(), series.values.tolist(), strict=True))


def tb_scalars(run_dir: Path, tag: str) -> list[tuple[float, float]]:
    """TensorBoard's own reading of a run's simple_value scalars: last value per step,
    events in wall-time order (restarts purged as TensorBoard does). TensorBoard reads a
    run's files in name order, and a name ends with its writer's count in the process,
    unpadded (``.10`` sorts before ``.9``): it reads copies whose count is padded, in the
    order they were written, however many writers the process made before."""
    with tempfile.TemporaryDirectory() as copies:
        for path in run_dir.glob("events.out.tfevents.*"):
            head, _, count = path.name.rpartition(".")
            shutil.copy(path, Path(copies, f"{head}.{int(count):09d}"))
        acc = event_accumulator.EventAccumulator(copies, size_guidance={"scalars": 0})
        acc.Reload()
    by_step = {}
    for e in sorted(acc.Scalars(tag), key=lambda e: e.wall_time):
        by_step[float(e.step)] = e.value
    return sorted(by_step.items())


def event_file(run_dir: Path) -> Path:
    (path,) = run_dir.glob("events.out.tfevents.*")
    return path


def write_loss(run_dir: Path, steps_values: list[tuple[int, float]]) -> None:
    writer = SummaryWriter(str(run_dir))
    for step, value in steps_values:
        writer.add_scalar("train/loss", value, step)
    writer.close()


def test_masked_crc32c_is_tensorboards() -> None:
    rng = random.Random(0)
    for length in (0, 1, 8, 13, 100):
        rows = [bytes(rng.getrandbits(8) for _ in range(length)) for _ in range(5)]
        array = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(5, length)
        assert masked_crc32c(array).tolist() == [tb_crc(r) for r in rows]


def test_summary_writer_scalars_exactly(tmp_path: Path) -> None:
    writer = SummaryWriter(str(tmp_path / "runs" / "a"))
    for i, value in enumerate(LOSS):
        writer.add_scalar("train/loss", value, 10 * i)
        writer.add_histogram("weights", np.arange(4.0), 10 * i)  # not a scalar: not read
    writer.add_text("note", "hello", 0)
    writer.add_scalar("eval/reward", 21.0, 40)
    writer.close()
    got = job_series(tmp_path)
    assert sorted(got) == ["eval/reward", "train/loss"]
    assert pairs(got["train/loss"]) == [
        (0.0, 0.5),
        (10.0, 0.25),
        (20.0, -0.125),
        (30.0, 1.5),
        (40.0, 2.0),
    ]
    assert pairs(got["eval/reward"]) == [(40.0, 21.0)]
    assert (
        got["train/loss"].source
        == event_file(tmp_path / "runs" / "a").relative_to(tmp_path).as_posix()
    )
    assert got["train/loss"].last == 2.0
    assert pairs(got["train/loss"]) == tb_scalars(tmp_path / "runs" / "a", "train/loss")


def test_scalar_tensors_float_double_half_and_content(tmp_path: Path) -> None:
    """New-style scalars: float/double tensors of empty shape (TF2, tensorboard's scalar_pb),
    value in float_val, double_val, half_val or tensor_content; a shape-[1] tensor is not."""
    writer = EventFileWriter(str(tmp_path))
    content = TensorProto(
        dtype=DT_FLOAT, tensor_shape=TensorShapeProto(), tensor_content=np.float32(2.5).tobytes()
    )
    summaries = {
        1: scalar_pb("f32", 0.1),  # float_val, 0.1 rounded to float32
        2: Summary(
            value=[Summary.Value(tag="f64", tensor=tensor_util.make_tensor_proto(np.float64(0.1)))]
        ),
        3: Summary(
            value=[Summary.Value(tag="f16", tensor=tensor_util.make_tensor_proto(np.float16(0.5)))]
        ),
        4: Summary(value=[Summary.Value(tag="content", tensor=content)]),
        5: Summary(
            value=[
                Summary.Value(
                    tag="vector",
                    tensor=tensor_util.make_tensor_proto(np.array([1.0], dtype=np.float32)),
                )
            ]
        ),
    }
    for step, summary in summaries.items():
        writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()
    got = job_series(tmp_path)
    assert sorted(got) == ["content", "f16", "f32", "f64"]
    assert pairs(got["f32"]) == [(1.0, float(np.float32(0.1)))]
    assert pairs(got["f64"]) == [(2.0, 0.1)]  # double precision kept
    assert pairs(got["f16"]) == [(3.0, 0.5)]
    assert pairs(got["content"]) == [(4.0, 2.5)]
    acc = plugin_event_accumulator.EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    acc.Reload()
    for tag in got:
        (event,) = acc.Tensors(tag)
        assert pairs(got[tag]) == [
            (float(event.step), float(tensor_util.make_ndarray(event.tensor_proto)))
        ]


def test_a_truncated_last_record_is_dropped(tmp_path: Path) -> None:
    """A job killed mid-write: every cut inside the last record reads the records before it."""
    write_loss(tmp_path / "full", [(10 * i, v) for i, v in enumerate(LOSS)])
    data = event_file(tmp_path / "full").read_bytes()
    last = _record_starts(data)[-1]
    assert len(data) - last == 12 + 32 + 4  # a header, a 32-byte scalar Event, its crc
    for cut in range(last, len(data)):
        run = tmp_path / f"cut{cut}"
        run.mkdir()
        (run / event_file(tmp_path / "full").name).write_bytes(data[:cut])
        got = job_series(run)
        assert pairs(got["train/loss"]) == [(0.0, 0.5), (10.0, 0.25), (20.0, -0.125), (30.0, 1.5)]
        assert pairs(got["train/loss"]) == tb_scalars(run, "train/loss")


def _record_starts(data: bytes) -> list[int]:
    """Where each record begins (walking the framing: uint64 length, crc, data, crc)."""
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += 12 + int.from_bytes(data[pos : pos + 8], "little") + 4
    return starts


def test_a_damaged_record_stops_the_file_as_tensorboard_does(tmp_path: Path) -> None:
    write_loss(tmp_path / "full", [(10 * i, v) for i, v in enumerate(LOSS)])
    data = bytearray(event_file(tmp_path / "full").read_bytes())
    at = data.index(np.float32(-0.125).tobytes())  # the value logged at step 20
    data[at] ^= 0x01
    run = tmp_path / "damaged"
    run.mkdir()
    (run / event_file(tmp_path / "full").name).write_bytes(bytes(data))
    got = job_series(run)
    assert pairs(got["train/loss"]) == [(0.0, 0.5), (10.0, 0.25)]
    assert pairs(got["train/loss"]) == tb_scalars(run, "train/loss")


def test_a_resumed_run_merges_by_step_later_file_wins(tmp_path: Path) -> None:
    """Two event files in one directory (the job resumed from its step-20 checkpoint)."""
    run = tmp_path / "logs"
    write_loss(run, [(0, 0.5), (10, 0.25), (20, -0.125), (30, 1.5)])
    time.sleep(0.01)
    write_loss(run, [(20, 4.0), (30, 8.0), (40, 16.0)])
    got = job_series(tmp_path)
    assert pairs(got["train/loss"]) == [
        (0.0, 0.5),
        (10.0, 0.25),
        (20.0, 4.0),
        (30.0, 8.0),
        (40.0, 16.0),
    ]
    assert pairs(got["train/loss"]) == tb_scalars(run, "train/loss")
    assert got["train/loss"].source.count("events.out.tfevents.") == 2


def test_a_restart_marker_drops_later_steps_as_tensorboard_does(tmp_path: Path) -> None:
    """SessionLog.START at step 20 (rlsweep's tracker on resume): the first attempt's step 30
    is dropped although the second attempt never logged step 30."""
    run = tmp_path / "logs"
    write_loss(run, [(0, 0.5), (10, 0.25), (20, -0.125), (30, 1.5)])
    time.sleep(0.01)
    writer = EventFileWriter(str(run))
    writer.add_event(
        Event(wall_time=time.time(), step=20, session_log=SessionLog(status=SessionLog.START))
    )
    for step, value in ((20, 4.0), (40, 16.0)):
        summary = Summary(value=[Summary.Value(tag="train/loss", simple_value=value)])
        writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()
    got = job_series(tmp_path)
    assert pairs(got["train/loss"]) == [(0.0, 0.5), (10.0, 0.25), (20.0, 4.0), (40.0, 16.0)]
    assert pairs(got["train/loss"]) == tb_scalars(run, "train/loss")


def test_concurrent_runs_logging_one_tag_are_named_by_directory(tmp_path: Path) -> None:
    """train/ and eval/ writers each logging "reward" at the same time: two series, named by
    sub-directory; a tag only one of them logs keeps its own name."""
    train = SummaryWriter(str(tmp_path / "logs" / "train"))
    evaluation = SummaryWriter(str(tmp_path / "logs" / "eval"))
    for step in (0, 100, 200):
        train.add_scalar("reward", step / 100 + 0.5, step)
        train.add_scalar("loss", -step / 100, step)
        evaluation.add_scalar("reward", step / 50 + 0.25, step)
    train.close()
    evaluation.close()
    got = job_series(tmp_path)
    assert sorted(got) == ["eval/reward", "loss", "train/reward"]
    assert pairs(got["train/reward"]) == [(0.0, 0.5), (100.0, 1.5), (200.0, 2.5)]
    assert pairs(got["eval/reward"]) == [(0.0, 0.25), (100.0, 2.25), (200.0, 4.25)]
    assert pairs(got["eval/reward"]) == tb_scalars(tmp_path / "logs" / "eval", "reward")
    assert pairs(got["loss"]) == [(0.0, 0.0), (100.0, -1.0), (200.0, -2.0)]


def test_add_scalars_sub_runs_are_named_by_directory(tmp_path: Path) -> None:
    """SummaryWriter.add_scalars writes each key to its own sub-run ``<tag>_<key>/`` under the
    tag "reward": concurrent runs, named by directory."""
    writer = SummaryWriter(str(tmp_path / "runs"))
    for step in (0, 1):
        writer.add_scalars("reward", {"train": step + 0.5, "eval": step + 0.75}, step)
    writer.add_scalar("reward_new_style", 1.25, 3, new_style=True)  # a tensor with metadata
    writer.close()
    got = job_series(tmp_path)
    assert sorted(got) == ["reward_eval/reward", "reward_new_style", "reward_train/reward"]
    assert pairs(got["reward_train/reward"]) == [(0.0, 0.5), (1.0, 1.5)]
    assert pairs(got["reward_eval/reward"]) == [(0.0, 0.75), (1.0, 1.75)]
    assert pairs(got["reward_new_style"]) == [(3.0, 1.25)]


def test_torchrl_runs_one_after_another_are_one_series(tmp_path: Path) -> None:
    """TorchRL's TensorboardLogger, a resumed job under a new experiment name: one after the
    other in time, so one series merged by step."""
    first = TensorboardLogger(exp_name="DQN_a", log_dir=str(tmp_path / "dqn"))
    for step, value in ((1000, 9.0), (2000, 11.0)):
        first.log_scalar("eval/reward", value, step=step)
    first.experiment.close()
    time.sleep(0.01)
    second = TensorboardLogger(exp_name="DQN_b", log_dir=str(tmp_path / "dqn"))
    for step, value in ((2000, 12.0), (3000, 30.5)):
        second.log_scalar("eval/reward", value, step=step)
    second.experiment.close()
    got = job_series(tmp_path)
    assert list(got) == ["eval/reward"]
    assert pairs(got["eval/reward"]) == [(1000.0, 9.0), (2000.0, 12.0), (3000.0, 30.5)]


def test_torchrl_csv_logger(tmp_path: Path) -> None:
    logger = CSVLogger(exp_name="SAC_x", log_dir=str(tmp_path / "csv_logs"))
    for step, reward, loss in ((500, 9.0, 0.75), (1000, 22.5, 0.1), (1500, 31.0, 0.0625)):
        logger.log_scalar("eval/reward", reward, step=step)
        logger.log_scalar("train/q_loss", loss, step=step)
    logger.log_hparams({"lr": 0.001})  # a text file: not a metric
    got = job_series(tmp_path)
    assert sorted(got) == ["eval/reward", "train/q_loss"]
    assert pairs(got["eval/reward"]) == [(500.0, 9.0), (1000.0, 22.5), (1500.0, 31.0)]
    assert pairs(got["train/q_loss"]) == [(500.0, 0.75), (1000.0, 0.1), (1500.0, 0.0625)]
    assert got["eval/reward"].source == "csv_logs/SAC_x/scalars/eval/reward.csv"


def test_csv_resumed_runs_merge_by_modification_time_and_a_cut_line_is_dropped(
    tmp_path: Path,
) -> None:
    for name, rows in (("a", ((0, 1.0), (100, 2.0))), ("b", ((100, 5.0), (200, 7.0)))):
        logger = CSVLogger(exp_name=name, log_dir=str(tmp_path / "csv_logs"))
        for step, value in rows:
            logger.log_scalar("eval/reward", value, step=step)
        del logger
    old, new = (tmp_path / "csv_logs" / n / "scalars" / "eval" / "reward.csv" for n in ("a", "b"))
    with new.open("a") as f:
        f.write("300,")  # killed mid-write
    os.utime(old, ns=(1_000_000_000, 1_000_000_000))
    os.utime(new, ns=(2_000_000_000, 2_000_000_000))
    assert pairs(job_series(tmp_path)["eval/reward"]) == [(0.0, 1.0), (100.0, 5.0), (200.0, 7.0)]
    os.utime(old, ns=(3_000_000_000, 3_000_000_000))  # now "a" is the later file
    assert pairs(job_series(tmp_path)["eval/reward"]) == [(0.0, 1.0), (100.0, 2.0), (200.0, 7.0)]


def test_a_csv_with_a_header_is_read_and_one_with_other_lines_is_not(tmp_path: Path) -> None:
    scalars = tmp_path / "logs" / "scalars"
    scalars.mkdir(parents=True)
    (scalars / "reward.csv").write_text("step,value\n0,1.5\n10,nan\n20,-3\n")
    (scalars / "table.csv").write_text("0,1\n1,2,3\n")
    (tmp_path / "other.csv").write_text("0,1\n")  # not under scalars/
    got = job_series(tmp_path)
    assert list(got) == ["reward"]
    assert pairs(got["reward"]) == [(0.0, 1.5), (20.0, -3.0)]


def test_metrics_csv_first_then_event_files_then_csv_files(tmp_path: Path) -> None:
    (tmp_path / "metrics.csv").write_text("step,return\n0,1.0\n5,2.0\n")
    writer = SummaryWriter(str(tmp_path / "tb"))
    for name, value in (("return", 100.0), ("eval/reward", 3.0)):
        writer.add_scalar(name, value, 7)
    writer.close()
    logger = CSVLogger(exp_name="x", log_dir=str(tmp_path / "csv_logs"))
    for name in ("return", "eval/reward", "train/q_loss"):
        logger.log_scalar(name, 200.0, step=9)
    got = job_series(tmp_path)
    assert sorted(got) == ["eval/reward", "return", "train/q_loss"]
    assert (got["return"].source, pairs(got["return"])) == ("metrics.csv", [(0.0, 1.0), (5.0, 2.0)])
    assert pairs(got["eval/reward"]) == [(7.0, 3.0)]
    assert pairs(got["train/q_loss"]) == [(9.0, 200.0)]


def test_lightnings_csv_logger_versions_merge_by_step(tmp_path: Path) -> None:
    """Lightning's CSVLogger, a resumed run logging to version_1: each column a series at the
    steps it has a value (empty cells are no value; ``epoch`` is a column like another), the
    later version winning on a repeated step; rlsweep's own metrics.csv keeps its names."""
    # Imported here: Lightning costs each pytest worker that collects this file 3 CPU-s.
    from lightning.pytorch.loggers import CSVLogger as LightningCSVLogger

    (tmp_path / "metrics.csv").write_text("step,val/acc\n0,0.125\n")  # rlsweep's own
    runs: list[list[tuple[dict[str, Any], int]]] = [
        [({"train/loss": 0.5}, 0), ({"train/loss": 0.25}, 1), ({"val/acc": 0.75, "epoch": 0}, 1)],
        [({"train/loss": 2.0}, 1), ({"train/loss": 1.5, "val/acc": 0.875}, 2)],
    ]
    for version, rows in enumerate(runs):
        logger = LightningCSVLogger(str(tmp_path / "logs"), version=version)
        for metrics, step in rows:
            logger.log_metrics(metrics, step=step)
        logger.save()
        time.sleep(0.01)  # version_1 is the later file
    got = job_series(tmp_path)
    assert sorted(got) == ["epoch", "train/loss", "val/acc"]
    assert pairs(got["train/loss"]) == [(0.0, 0.5), (1.0, 2.0), (2.0, 1.5)]
    assert pairs(got["epoch"]) == [(1.0, 0.0)]
    assert (got["val/acc"].source, pairs(got["val/acc"])) == ("metrics.csv", [(0.0, 0.125)])
    assert got["train/loss"].source == (
        "logs/lightning_logs/version_0/metrics.csv, logs/lightning_logs/version_1/metrics.csv"
    )


def test_stable_baselines3s_progress_csv_is_read_at_its_timesteps(tmp_path: Path) -> None:
    """SB3's CSV output: a row per dump, rewritten with a wider header when a key first
    appears; the step is ``time/total_timesteps`` (what SB3 passes to ``dump`` is not in the
    file); a file named like a wide log without its step column is not read."""
    from stable_baselines3.common.logger import configure

    logger = configure(str(tmp_path / "sb3"), ["csv"])
    for timesteps in (64, 128):
        logger.record("time/total_timesteps", timesteps)
        logger.record("rollout/ep_rew_mean", timesteps / 8)
        logger.dump(step=timesteps // 64)
    logger.record("time/total_timesteps", 192)
    logger.record("eval/mean_reward", 30.5)  # a new key: the file is rewritten
    logger.dump(step=3)
    logger.close()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "metrics.csv").write_text("epoch,loss\n0,1.5\n")  # no step column
    # By hand: a cell that is not a number is no value, a row with no step is skipped, a last
    # line without its newline (a job killed mid-write) is dropped.
    (tmp_path / "other" / "progress.csv").write_text(
        "time/total_timesteps,note,custom/x\n256,done,1.5\n,,2.5\n320,,-1\n384,,7"  # cut short
    )
    got = job_series(tmp_path)
    assert sorted(got) == ["custom/x", "eval/mean_reward", "rollout/ep_rew_mean"]
    assert pairs(got["custom/x"]) == [(256.0, 1.5), (320.0, -1.0)]
    assert pairs(got["rollout/ep_rew_mean"]) == [(64.0, 8.0), (128.0, 16.0)]
    assert pairs(got["eval/mean_reward"]) == [(192.0, 30.5)]
    assert got["eval/mean_reward"].source == "sb3/progress.csv"


def test_a_link_to_a_log_that_is_gone_is_no_log(tmp_path: Path) -> None:
    """``outside_logs/`` links (as rlsweep makes them) to an event file, a per-metric CSV file
    and a wide CSV file: read through the links; once the app's logs are deleted, the links
    dangle and the job has no series (before, reading it raised FileNotFoundError)."""
    logs, links = tmp_path / "logs", tmp_path / "job" / "outside_logs" / "0"
    write_loss(logs / "tb", [(0, 0.5)])
    (logs / "scalars").mkdir()
    (logs / "scalars" / "reward.csv").write_text("0,1.5\n")
    (logs / "progress.csv").write_text("time/total_timesteps,rollout/ep_rew_mean\n64,9.5\n")
    (links / "scalars").mkdir(parents=True)
    for target, link in (
        (event_file(logs / "tb"), links / "events.out.tfevents.x"),
        (logs / "scalars" / "reward.csv", links / "scalars" / "reward.csv"),
        (logs / "progress.csv", links / "progress.csv"),
    ):
        link.symlink_to(os.path.relpath(target, link.parent))
    job = tmp_path / "job"
    assert sorted(job_series(job)) == ["reward", "rollout/ep_rew_mean", "train/loss"]
    shutil.rmtree(logs)
    assert job_series(job) == {}


@pytest.mark.parametrize("skipped", [".hydra", "wandb", "mlruns"])
def test_other_tools_copies_are_not_read(tmp_path: Path, skipped: str) -> None:
    write_loss(tmp_path / skipped / "run", [(0, 0.5)])
    logger = CSVLogger(exp_name="x", log_dir=str(tmp_path / skipped))
    logger.log_scalar("eval/reward", 1.0, step=0)
    assert job_series(tmp_path) == {}


def test_a_job_directory_without_logs(tmp_path: Path) -> None:
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text("a: 1\n")
    (tmp_path / "result.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.csv").write_text("not,a,metric\n")
    assert job_series(tmp_path) == {}
    assert job_series(tmp_path / "missing") == {}

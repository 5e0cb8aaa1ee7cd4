"""Data-parallel training: torchrun starts two CPU processes (Gloo) on a tiny model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.data import BucketBatchSampler
from modeling.ml.distributed import World, world_from_env

ROOT = Path(__file__).resolve().parents[2]


def _script() -> str:
    # the trainer on six clips with the same seed on every rank; each rank writes what it
    # saw, its final parameters and the checkpoint events it emitted
    return textwrap.dedent(
        """
        import dataclasses, json, sys
        from pathlib import Path

        import torch

        from modeling.ml import distributed
        from modeling.ml.config import RunConfig
        from modeling.ml.presets import model_preset, train_preset
        from modeling.ml.registry import build_model
        from modeling.ml.runtime import seed_everything
        from modeling.ml.trainer import Trainer
        from tests.modeling.captioning import items, vocabulary

        out = Path(sys.argv[1])
        torch.set_num_threads(1)
        world = distributed.setup()
        config = dataclasses.replace(train_preset("tiny"), epochs=2, batch_size=2, lr=1e-2)
        run = RunConfig(model_name="lstm", model=model_preset("lstm", "tiny"), train=config)
        vocab = vocabulary()
        examples = items(vocab)
        seed_everything(config.seed + world.rank)  # different initial weights per rank
        model = build_model("lstm", run.model, vocab_size=len(vocab))
        initial = {k: v.clone() for k, v in model.state_dict().items()}
        trainer = Trainer(
            model, model_name="lstm", config=config, vocab=vocab, train_items=examples,
            val_items=examples[:2], out_dir=out / "run", run_config=run,
        )
        events = []
        trainer.add_callback("checkpoint", lambda t, info: events.append(info["kind"]))
        trainer.add_callback("step", lambda t, info: events.append("step"))
        result = trainer.fit()
        trainer.sampler.set_epoch(0)
        # a cancel seen by rank 0 alone (as the job's flag is) stops every rank together
        polls = []
        def cancel():
            polls.append(1)
            return len(polls) > 2
        stopper = Trainer(
            build_model("lstm", run.model, vocab_size=len(vocab)), model_name="lstm",
            config=config, vocab=vocab, train_items=examples, out_dir=out / "cancelled",
            run_config=run, cancel=cancel,
        )
        cancelled = stopper.fit()
        torch.save(
            {"final": model.state_dict(), "initial": initial}, out / f"rank{world.rank}.pt"
        )
        (out / f"rank{world.rank}.json").write_text(json.dumps({
            "world": [world.rank, world.size],
            "epoch0": trainer.sampler.batches(),
            "events": events,
            "steps": result.steps,
            "history": [[row["train_loss"], row["score"]] for row in result.history],
            "last": str(result.last_checkpoint),
            "cancelled": [cancelled.stopped, cancelled.steps, len(polls)],
        }))
        distributed.teardown()
        """
    )


GLOO_THREAD_ABORT = "terminate called without an active exception"


def test_torchrun_trains_two_ranks_to_the_same_weights_and_one_checkpoint(
    tmp_path: Path,
) -> None:
    script = tmp_path / "ddp_train.py"
    script.write_text(_script())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(script),
        str(tmp_path),
    ]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and GLOO_THREAD_ABORT in done.stderr:
        # Gloo's C++ worker threads can abort a rank on a loaded machine (seen once in four
        # full CI runs; see pytorch/pytorch#179291): one more try. Any other failure, or the
        # same one twice, still fails the test; the rank files are written again.
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr[-3000:]

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    states = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [[0, 2], [1, 2]]
    # each rank trained on its own half of the six clips: 2 batches of 2 and 1 per epoch
    shards = [sorted(i for batch in r["epoch0"] for i in batch) for r in ranks]
    assert sorted(shards[0] + shards[1]) == list(range(6))
    assert ranks[0]["steps"] == ranks[1]["steps"] == 2 * 2
    # the ranks started from different weights and ended with rank 0's, trained alike
    initial, final = states[0]["initial"], states[0]["final"]
    assert any(not torch.equal(initial[k], states[1]["initial"][k]) for k in initial)
    assert any(not torch.equal(initial[k], final[k]) for k in initial)
    for key, value in final.items():
        assert torch.equal(value, states[1]["final"][key]), key
    # the same validation outcome everywhere; only rank 0 called back and wrote files
    assert [h[1] for h in ranks[0]["history"]] == [h[1] for h in ranks[1]["history"]]
    assert "last" in ranks[0]["events"]
    assert ranks[1]["events"] == []
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["best.pt", "last.pt"]
    assert ranks[0]["cancelled"] == ["cancelled", 2, 3]
    assert ranks[1]["cancelled"] == ["cancelled", 2, 0]  # never polled, stopped all the same
    checkpoint = load_checkpoint(ranks[1]["last"])
    for key, value in checkpoint.model.state_dict().items():
        assert torch.equal(value, final[key]), key


def test_the_world_comes_from_torchruns_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert world_from_env() == World()
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert world_from_env() == World(rank=3, size=4, local_rank=1)
    monkeypatch.delenv("LOCAL_RANK")
    with pytest.raises(ValueError, match="start with torchrun"):
        world_from_env()


def test_ranks_get_disjoint_equal_shares_of_the_batches() -> None:
    lengths = [5, 9, 3, 7, 8, 2, 6]
    shares = []
    for rank in (0, 1):
        sampler = BucketBatchSampler(lengths, 2, num_replicas=2, rank=rank, seed=3)
        sampler.set_epoch(1)
        shares.append(sampler.batches())
    assert len(shares[0]) == len(shares[1]) == 2  # 7 clips padded to 4 per rank
    flat = [i for share in shares for batch in share for i in batch]
    assert set(flat) == set(range(7))
    assert len(flat) == 8

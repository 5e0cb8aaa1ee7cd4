"""Data-parallel training under torchrun: process-group set-up and the few collectives the
trainer needs. No Django here.

torchrun starts one process per GPU with RANK, WORLD_SIZE and LOCAL_RANK in the environment;
``setup()`` reads them and joins the process group (NCCL on CUDA, Gloo on CPU). Without those
variables (a plain ``python`` process) everything here is a no-op for a world of one, so the
trainer runs the same code either way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    """This process's place among the training processes."""

    rank: int = 0  # 0 .. size-1; rank 0 writes checkpoints, logs and metrics
    size: int = 1  # processes in the run (WORLD_SIZE)
    local_rank: int = 0  # index on this machine: the GPU this process uses

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def world_from_env() -> World:
    """The World torchrun describes in the environment (a world of one without it)."""
    size = _env_int("WORLD_SIZE")
    if size is None or size <= 1:
        return World()
    rank, local_rank = _env_int("RANK"), _env_int("LOCAL_RANK")
    if rank is None or local_rank is None:
        raise ValueError("WORLD_SIZE is set but RANK or LOCAL_RANK is not (start with torchrun)")
    return World(rank=rank, size=size, local_rank=local_rank)


def setup() -> World:
    """Join the process group torchrun describes (once per process; later calls return the
    same World). CUDA processes use NCCL and their LOCAL_RANK-th GPU; CPU ones use Gloo."""
    world = world_from_env()
    if not world.distributed or dist.is_initialized():
        return world
    # The other ranks wait in a collective while rank 0 validates (decoding the validation
    # split for CIDEr-D), which can outlast the default 10-30 minute timeouts.
    timeout = timedelta(hours=2)
    if torch.cuda.is_available():
        torch.cuda.set_device(world.local_rank)
        dist.init_process_group("nccl", timeout=timeout)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    return world


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier(world: World) -> None:
    if world.distributed:
        dist.barrier()


def broadcast(world: World, value: Any) -> Any:
    """Rank 0's ``value`` (any picklable object) on every rank."""
    if not world.distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def any_rank(world: World, flag: bool, device: torch.device) -> bool:
    """Whether ``flag`` is true on some rank (every rank must call it)."""
    if not world.distributed:
        return flag
    tensor = torch.tensor([int(flag)], device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return bool(tensor.item())

"""How a dataset job sizes its actor pool: how many actors, what each one asks Ray for, whether
it decodes ahead in threads of its own, and how many blocks the images are split into.

Each actor reserves the CPUs it uses. An actor that decodes ahead in reader threads keeps two
CPUs busy (its engine's torch thread and the readers), so it asks for two logical CPUs, and it
does so only where every actor of the pool can have two on one node: the spare CPUs of a
cluster help an actor only when they sit on its own node, and an actor that used more than it
asked for would take time from whatever else Ray placed beside it. On a GPU the actor's CPU is
free while the GPU works, so GPU actors always decode ahead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BLOCKS_PER_ACTOR",
    "CPUS_WITH_READERS",
    "READER_THREADS",
    "PoolPlan",
    "plan_pool",
]

BLOCKS_PER_ACTOR = 4
"""Blocks per actor at least, where the images allow: a small dataset in a few large blocks
would leave actors idle while the last block is explained."""
READER_THREADS = 2
"""Threads that read and decode files ahead of an engine that has a CPU to spare."""
CPUS_WITH_READERS = 2.0
"""Logical CPUs a CPU actor with reader threads asks for: its engine's and its readers'."""


@dataclass(frozen=True)
class PoolPlan:
    actors: int
    blocks: int
    """Blocks the images are split into: a multiple of ``actors`` where the images allow, so
    that the last round of blocks keeps every actor busy."""
    num_cpus: float | None
    """The logical CPUs each actor asks Ray for (``None`` for a GPU actor)."""
    num_gpus: float | None
    reader_threads: int
    torch_threads: int | None
    """Torch's intra-op threads per actor: one on CPUs; ``None`` (torch's default) on a GPU."""
    device: str


def plan_pool(
    images: int,
    node_cpus: Sequence[float],
    gpus: int,
    *,
    device: str = "auto",
    actors: int | None = None,
    rows_per_batch: int = 64,
) -> PoolPlan:
    """The pool for ``images`` images on a cluster whose live nodes offer ``node_cpus`` logical
    CPUs and ``gpus`` GPUs in all. ``actors``: the number asked for (default one per GPU, else
    one per CPU); never more than there are blocks."""
    on_gpu = gpus > 0 and device in ("auto", "cuda")
    total_cpus = sum(node_cpus)
    wanted = actors or (gpus if on_gpu else max(1, int(total_cpus)))
    least_blocks = min(images, max(BLOCKS_PER_ACTOR * wanted, -(-images // rows_per_batch)))
    pool = max(1, min(wanted, least_blocks))
    blocks = min(images, -(-least_blocks // pool) * pool)
    if on_gpu:
        return PoolPlan(pool, blocks, None, 1.0, READER_THREADS, None, "cuda")
    if _actors_with_two_cpus(node_cpus) >= pool:
        return PoolPlan(pool, blocks, CPUS_WITH_READERS, None, READER_THREADS, 1, device)
    # one CPU slot per actor, never more than the cluster has: the actors are all there is
    return PoolPlan(pool, blocks, min(1.0, total_cpus / pool), None, 0, 1, device)


def _actors_with_two_cpus(node_cpus: Sequence[float]) -> int:
    return sum(int(cpus // CPUS_WITH_READERS) for cpus in node_cpus)

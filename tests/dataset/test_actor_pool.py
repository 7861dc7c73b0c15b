"""The actor pool's plan: each actor reserves the CPUs it uses, and the blocks spread evenly."""

from __future__ import annotations

import pytest

from camserve.dataset.actor_pool import BLOCKS_PER_ACTOR, READER_THREADS, plan_pool


def test_one_actor_per_cpu_by_default_without_reader_threads() -> None:
    plan = plan_pool(1800, [1.0, 1.0], 0)
    assert (plan.actors, plan.reader_threads, plan.torch_threads) == (2, 0, 1)
    assert (plan.num_cpus, plan.num_gpus) == (1.0, None)
    assert plan.device == "auto"


def test_an_actor_decodes_ahead_where_its_node_has_a_second_cpu() -> None:
    plan = plan_pool(1800, [2.0], 0, actors=1)
    assert plan.reader_threads == READER_THREADS
    assert (plan.num_cpus, plan.num_gpus) == (2.0, None)


def test_spare_cpus_on_other_nodes_give_no_reader_threads() -> None:
    # two one-CPU nodes: the actor's node has no CPU beside the one it holds
    plan = plan_pool(1800, [1.0, 1.0], 0, actors=1)
    assert plan.reader_threads == 0
    assert (plan.num_cpus, plan.num_gpus) == (1.0, None)


def test_reader_threads_only_where_every_actor_gets_two_cpus() -> None:
    # 5 actors on two 4-CPU nodes: only 4 could hold two CPUs each
    assert plan_pool(5000, [4.0, 4.0], 0, actors=5).reader_threads == 0
    assert plan_pool(5000, [4.0, 4.0], 0, actors=4).num_cpus == 2.0


def test_more_actors_than_cpus_share_them() -> None:
    plan = plan_pool(1000, [2.0], 0, actors=4)
    assert plan.num_cpus == 0.5
    assert plan.reader_threads == 0


def test_gpu_actors_decode_ahead_one_per_gpu() -> None:
    plan = plan_pool(1000, [16.0], 2)
    assert (plan.actors, plan.reader_threads, plan.torch_threads) == (2, READER_THREADS, None)
    assert (plan.num_cpus, plan.num_gpus) == (None, 1.0)
    assert plan.device == "cuda"


def test_gpus_are_left_alone_on_the_cpu_device() -> None:
    plan = plan_pool(1000, [4.0], 2, device="cpu")
    assert (plan.num_cpus, plan.num_gpus) == (1.0, None)
    assert (plan.actors, plan.device) == (4, "cpu")


@pytest.mark.parametrize(
    ("images", "actors", "blocks"),
    [
        (1800, 2, 30),  # 29 blocks of 64 at most, rounded up to a multiple of 2
        (600, 2, 10),
        (600, 3, 12),
        (1800, 1, 29),
        (20, 2, BLOCKS_PER_ACTOR * 2),
        (5, 2, 5),  # never more blocks than images
    ],
)
def test_blocks_are_a_multiple_of_the_actors(images: int, actors: int, blocks: int) -> None:
    plan = plan_pool(images, [1.0] * actors, 0, actors=actors)
    assert plan.blocks == blocks
    assert plan.actors == min(actors, images)


def test_never_more_actors_than_blocks() -> None:
    plan = plan_pool(3, [8.0], 0)
    assert (plan.actors, plan.blocks) == (3, 3)

"""Where a dataset job runs: a small one in this process, a large one on Ray, and what forces
either."""

from __future__ import annotations

import pytest

from camserve.dataset.run_place import IN_PROCESS_BELOW, RunPlace, RunPlaceError, choose_where


def test_fewer_images_than_the_threshold_run_here_and_more_on_ray() -> None:
    small = choose_where(RunPlace.AUTO, IN_PROCESS_BELOW - 1, address=None, actors=None)
    large = choose_where(RunPlace.AUTO, IN_PROCESS_BELOW, address=None, actors=None)
    assert not small.on_ray
    assert small.reason == f"fewer than {IN_PROCESS_BELOW} images; --ray for Ray"
    assert large.on_ray
    assert large.reason == f"{IN_PROCESS_BELOW} images or more; --in-process for here"


def test_a_forced_place_wins_over_the_count() -> None:
    assert choose_where(RunPlace.RAY, 1, address=None, actors=None).on_ray
    assert not choose_where(RunPlace.HERE, 10 * IN_PROCESS_BELOW, address=None, actors=None).on_ray


@pytest.mark.parametrize(
    ("address", "actors", "reason"),
    [("127.0.0.1:6379", None, "--address given"), (None, 2, "--actors given")],
)
def test_an_address_or_a_number_of_actors_means_ray(
    address: str | None, actors: int | None, reason: str
) -> None:
    where = choose_where(RunPlace.AUTO, 3, address=address, actors=actors)
    assert where.on_ray
    assert where.reason == reason


def test_in_process_with_options_only_ray_has_is_refused() -> None:
    with pytest.raises(RunPlaceError, match="--address and --actors need Ray"):
        choose_where(RunPlace.HERE, 3, address="127.0.0.1:6379", actors=2)

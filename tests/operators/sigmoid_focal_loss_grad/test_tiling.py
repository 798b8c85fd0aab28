"""Tests of precision/operators/sigmoid_focal_loss_grad/tiling.py (the production ubFormer) and of the g4_tiling study's
variants: kernel[tile=ubFormer] against the one-tile kernel and kernel-G4 on the study's own fp32 points."""

from pathlib import Path

import numpy as np
import pytest

from precision.engine.points import study_pred_values
from precision.engine.study import load_study
from precision.errors import ParameterError
from precision.operators.sigmoid_focal_loss_grad import TILED_GUARDS
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate_variants, get_variant
from precision.operators.sigmoid_focal_loss_grad.tiling import (PRODUCTION_TILE, UB_BYTES_ASCEND950, block_former,
                                                      per_elem_bytes, task_tile, ub_former)

ROOT = Path(__file__).resolve().parents[3]


def test_ub_former_on_the_ascend950_ub():
    # AlignDown(253952 / 84, 64) and AlignDown(253952 / 78, 128) (ComputeUbSplit)
    assert UB_BYTES_ASCEND950 == 253952
    assert (per_elem_bytes("fp32"), per_elem_bytes("fp16")) == (84, 78)
    assert (ub_former("fp32"), ub_former("fp16")) == (3008, 3200)
    assert PRODUCTION_TILE == {"fp32": 3008, "fp16": 3200}
    assert all(n * per_elem_bytes(f) <= UB_BYTES_ASCEND950 for f, n in PRODUCTION_TILE.items())


def test_ub_former_other_profiles_and_ub_sizes():
    # with a weight: 76 + 2*pred + dout + weight bytes per element
    assert (per_elem_bytes("fp32", weight="fp32"), per_elem_bytes("fp16", weight="fp16")) == (92, 84)
    assert (ub_former("fp32", weight="fp32"), ub_former("fp16", weight="fp16")) == (2752, 2944)
    # mixed: an fp16 dout halves the smallest element, so the alignment is 128 elements
    assert ub_former("fp32", dout="fp16") == 253952 // 82 // 128 * 128 == 3072
    # the 256 KiB UB other arch35 tiling tests use
    assert (ub_former("fp32", 262144), ub_former("fp16", 262144)) == (3072, 3328)
    # the UB is aligned down to 256 bytes first
    assert ub_former("fp32", 253952 + 255) == 3008
    with pytest.raises(ParameterError):
        ub_former("bf16")
    with pytest.raises(ParameterError):
        ub_former("fp32", 100)


def test_task_tile_is_the_block_for_small_tasks():
    assert block_former(6, 32) == 512
    assert task_tile(6, "fp32") == 512  # the 2x3 reference example: one block of 512 >= 6 elements
    assert task_tile(2048, "fp32") == 1024  # two cores of 1024
    assert task_tile(64 * 3008, "fp32") == 3008 and task_tile(10 ** 6, "fp16") == 3200
    with pytest.raises(ParameterError):
        block_former(0, 32)


def test_tiled_guards_name_registered_variants():
    study, variants = TILED_GUARDS["G4"]
    assert study == "g4_tiling" and variants == {"fp32": "kernel[tile=3008]", "fp16": "kernel[tile=3200]"}
    for name in variants.values():
        get_variant(name)  # parses
    text = (ROOT / "studies" / "g4_tiling.toml").read_text()
    assert all(f'"{name}"' in text for name in variants.values()) and '"kernel-G4"' in text


@pytest.fixture(scope="module")
def study_points():
    """The g4_tiling study's fp32 preds (sorted, as a task holds them) x both selectors, pred-major."""
    study = load_study(ROOT / "studies" / "g4_tiling.toml")
    x = study_pred_values(study, 2.0).astype(np.float32)
    pred = np.repeat(x, 2).reshape(-1, 2)
    target = np.tile(np.array([0, 1], np.int32), x.size).reshape(-1, 2)
    return pred, target


@pytest.mark.parametrize("gamma", [2.0, 5.0])
def test_production_tile_differs_from_one_tile_only_where_the_tile_matters(study_points, gamma):
    pred, target = study_points
    tile = PRODUCTION_TILE["fp32"]
    names = ["kernel", f"kernel[tile={tile}]", "kernel-G4"]
    out, steps = evaluate_variants(names, pred, target, np.ones_like(pred), alpha=0.25, gamma=gamma,
                                   reduction="none", machine="npu", keep_steps=("g4_tile",))
    one, tiled, off = (out[n].ravel().view(np.uint32) for n in names)
    flag_one = np.broadcast_to(steps["kernel"]["g4_tile"], pred.shape).ravel()
    flag_tiled = np.asarray(steps[names[1]]["g4_tile"]).ravel()
    x = pred.ravel()
    assert flag_one.all()  # one tile: a clamped base somewhere flags every point
    # at the production tile only the tiles holding a clamped base are flagged: the first (x < -87.3, p
    # underflows) and those of the q-hole (x > 25 ln 2 = 17.33, where q = 1 - p is 0); the rest, -80 <= x < 17.4
    # (the moderate logits and -80 <= x < -20, where p^g underflows), is not
    tiles = np.arange(x.size) // tile
    clamped = (x < -87.3) | (x > 17.33)
    assert set(np.unique(tiles[flag_tiled])) == set(np.unique(tiles[clamped]))
    assert 0 < (~flag_tiled).sum() < x.size and ((x[~flag_tiled] >= -80) & (x[~flag_tiled] < 17.4)).all()
    # in a flagged tile the production tile computes what the one-tile kernel does; elsewhere what kernel-G4 does
    assert np.array_equal(tiled[flag_tiled], one[flag_tiled])
    assert np.array_equal(tiled[~flag_tiled], off[~flag_tiled])
    # so the two differ only outside the flagged tiles, on points where p^g or p^(g+1) underflows without a
    # clamped base: x < -87.3 / (g + 1) (-29.1 at gamma 2, -14.6 at gamma 5)
    differ = tiled != one
    assert differ.any() and not (differ & flag_tiled).any()
    assert ((x[differ] >= -80) & (x[differ] < -87.3 / (gamma + 1) + 0.1)).all()

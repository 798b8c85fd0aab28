"""The oracle cache: hits, integrity check, concurrency, info/clear."""

import multiprocessing
import warnings

import numpy as np
import pytest

from precision.engine.cache import RESULTS_VERSION, CacheIntegrityWarning, TermCache
from precision.operators.sigmoid_focal_loss_grad.terms import focal_term_table


def table_for(x, g):
    return focal_term_table(x, g)


class TestTermCache:
    def test_roundtrip_and_partial_hits(self, tmp_path):
        cache = TermCache(tmp_path)
        x = np.array([-3.0, 0.5, 2.0])
        cache.store(2.0, x, table_for(x, 2.0))
        found, t = cache.lookup(2.0, np.array([2.0, 7.0, -3.0]))
        assert list(found) == [True, False, True]
        want = table_for(np.array([2.0, -3.0]), 2.0)
        assert np.array_equal(t.hi, want.hi) and np.array_equal(t.exp, want.exp)
        assert not cache.lookup(-2.0, x)[0].any()  # another gamma, another shard
        cache.store(2.0, np.array([7.0, 0.5]), table_for(np.array([7.0, 0.5]), 2.0))  # merged into the shard
        everything = np.array([7.0, -3.0, 0.5, 2.0])
        found, t = cache.lookup(2.0, everything)
        assert found.all()
        for name, column in table_for(everything, 2.0).as_arrays().items():
            np.testing.assert_array_equal(t.as_arrays()[name], column, err_msg=name)

    def test_signed_zero_keys_are_distinct(self, tmp_path):
        cache = TermCache(tmp_path)
        cache.store(1.0, np.array([0.0]), table_for([0.0], 1.0))
        assert list(cache.lookup(1.0, np.array([0.0, -0.0]))[0]) == [True, False]

    @pytest.mark.parametrize("damage", ["truncate", "flip"])
    def test_integrity_failure_warns_once_and_recomputes(self, tmp_path, damage):
        cache = TermCache(tmp_path)
        x = np.linspace(-5, 5, 50)
        cache.store(2.0, x, table_for(x, 2.0))
        shard = next(tmp_path.glob("terms-*.npz"))
        data = bytearray(shard.read_bytes())
        if damage == "truncate":
            data = data[: len(data) // 2]
        else:
            data[len(data) // 2] ^= 0xFF
        shard.write_bytes(bytes(data))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found, _ = cache.lookup(2.0, x)
        assert not found.any()
        assert len([w for w in caught if issubclass(w.category, CacheIntegrityWarning)]) == 1
        assert not shard.exists()
        cache.store(2.0, x, table_for(x, 2.0))
        assert cache.lookup(2.0, x)[0].all()

    def test_disabled_cache(self):
        cache = TermCache(None)
        cache.store(2.0, np.array([1.0]), table_for([1.0], 2.0))
        assert not cache.lookup(2.0, np.array([1.0]))[0].any()
        assert cache.info()["entries"] == 0

    def test_info_and_clear(self, tmp_path):
        cache = TermCache(tmp_path)
        for g in (1.0, 2.0):
            cache.store(g, np.array([1.0, 2.0]), table_for([1.0, 2.0], g))
        info = cache.info()
        assert info["shards"] == 2 and info["entries"] == 4 and info["bytes"] > 0
        assert cache.clear() == 2 and cache.info()["shards"] == 0


def _store_range(args):
    folder, start = args
    x = np.arange(start, start + 40, dtype=np.float64) / 8
    TermCache(folder).store(2.0, x, focal_term_table(x, 2.0))


def test_concurrent_stores_lose_nothing(tmp_path):
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        pool.map(_store_range, [(str(tmp_path), s) for s in range(0, 320, 40)])
    x = np.arange(0, 320, dtype=np.float64) / 8
    assert TermCache(tmp_path).lookup(2.0, x)[0].all()


class TestResultBundles:
    def test_each_distinct_array_is_stored_once_and_read_back_for_every_piece(self, tmp_path):
        from precision.engine.cache import ResultCache
        import safetensors.numpy
        cache = ResultCache(tmp_path)
        hist = np.arange(30_000, dtype=np.int32).reshape(3, -1)  # large: shared by identity
        names = np.array(["count", "max_ulp"])  # small: equal by content in two pieces
        pieces = {"a": {"hist": hist, "names": names, "values": np.array([1.0, 2.0])},
                  "b": {"hist": hist, "names": np.array(["count", "max_ulp"]), "values": np.array([1.0, 3.0])},
                  "c": {"hist": hist.copy(), "names": names, "values": np.array([1.0, 2.0])}}
        cache.put_bundle("k" * 64, pieces)
        path = tmp_path / f"results-v{RESULTS_VERSION}/kk/{'k' * 64}.safetensors"
        raw = safetensors.numpy.load(path.read_bytes())
        # a/hist stored; b/hist is a's object; c/hist is equal but large and another object: stored again;
        # names and values equal by content alias the first
        assert sorted(k for k in raw if not k.startswith(("aliases", "digest"))) == \
            ["a/hist", "a/names#text", "a/values", "b/values", "c/hist"]
        assert raw["aliases#tsv"].tobytes().decode().split("\n") == \
            ["b/hist\ta/hist", "b/names\ta/names", "c/names\ta/names", "c/values\ta/values"]
        back = cache.get_bundle("k" * 64)
        for piece, arrays in pieces.items():
            assert set(back[piece]) == set(arrays)
            for name, a in arrays.items():
                np.testing.assert_array_equal(back[piece][name], a, err_msg=f"{piece}/{name}")
        assert back["b"]["hist"] is back["a"]["hist"]  # one object again: a rewrite stores it once
        cache.put_bundle("k" * 64, back)
        assert path.stat().st_size == len(path.read_bytes()) and \
            sorted(safetensors.numpy.load(path.read_bytes())) == sorted(raw)

    def test_an_altered_alias_table_is_caught_by_the_digest(self, tmp_path):
        from precision.engine.cache import ResultCache
        cache = ResultCache(tmp_path)
        v = np.arange(5.0)
        cache.put_bundle("a" * 64, {"x": {"v": v}, "y": {"v": v}})
        path = tmp_path / f"results-v{RESULTS_VERSION}/aa/{'a' * 64}.safetensors"
        data = path.read_bytes().replace(b"y/v\tx/v", b"y/v\ty/v")  # the alias table, in place
        assert data != path.read_bytes()
        path.write_bytes(data)
        with pytest.warns(CacheIntegrityWarning):
            assert cache.get_bundle("a" * 64) == {}

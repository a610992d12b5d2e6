"""``dmk bench``: the runner (:mod:`compare.bench.run`) and its results (:mod:`compare.bench.results`)."""

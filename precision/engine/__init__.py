"""The sweep engine: study files, tasks, executors, caches and the run folder.

:mod:`~precision.engine.study` reads a study file and
:mod:`~precision.engine.points` draws its pred values;
:mod:`~precision.engine.sweep` splits it into tasks
(:mod:`~precision.engine.task`), runs them on an executor
(:mod:`~precision.engine.executor`) against the term and result caches
(:mod:`~precision.engine.cache`) and writes the run's tables;
:mod:`~precision.engine.attribution_table` and
:mod:`~precision.engine.threshold_search` are the run's attribution and
threshold-search stages.  May import :mod:`precision.sigmoid_focal_loss_grad`
and every layer below it; never the products or the command line.
"""

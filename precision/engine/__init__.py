"""The sweep engine: study files, tasks, executors, caches and the run folder.

:mod:`~precision.engine.study` reads a study file and
:mod:`~precision.engine.points` draws its pred values;
:mod:`~precision.engine.sweep` splits it into tasks
(:mod:`~precision.engine.task`), runs them on an executor
(:mod:`~precision.engine.executor`) against the term and result caches
(:mod:`~precision.engine.cache`) and writes the run's tables;
:mod:`~precision.engine.attribution_table` is the run's attribution stage
(an operator's own stages, such as SigmoidFocalLossGrad's threshold search,
live in its package).  The operator is not imported but received as an
object: :mod:`~precision.engine.operators` resolves the name a study file
gives (:attr:`~precision.engine.study.Study.operator`), and a task carries
that name to its worker.  May import :mod:`precision.analysis` and every layer
below it; never an operator, the products or the command line.
"""

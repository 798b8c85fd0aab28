"""Files and tables: atomic writes with the user's umask, DataFrames to and from arrays.

:mod:`~precision.io.files` writes files atomically; :mod:`~precision.io.frames`
converts between pandas DataFrames and named numpy arrays and writes CSV.
The lowest layer beside :mod:`precision.exact`: imports nothing of
``precision`` but :mod:`precision.errors`.
"""

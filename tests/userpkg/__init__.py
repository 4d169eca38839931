"""A user's own package of gymnasium envs, for tests of ``env.id=<module>:<id>``.

Importable when ``tests/`` is on the path (pytest puts it there; the CLI tests set
``PYTHONPATH``), as a user's package would be once installed.
"""

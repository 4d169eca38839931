"""A user's own package: a gymnasium env (``mypkg.envs``) and an agent (``mypkg.qlearning``)
that rlsweep's built-in job runs without any change to rlsweep.

    PYTHONPATH=examples python -m rlsweep --config-dir examples/mypkg/conf \\
        -m agent=qlearning,ppo env=tinychain 'seed=range(4)'

On the path as an installed package would be (the tests set ``PYTHONPATH``; pytest's
``pythonpath`` setting puts ``examples/`` on its own path).
"""

"""rlsweep's Hydra plugins: the ``rlsweep`` launcher and the ``rlsweep`` sweeper."""

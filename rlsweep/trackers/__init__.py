"""Trackers: every row a job logs (:meth:`rlsweep.Job.log`, which rlsweep's own agents use
too) also goes to TensorBoard, Weights & Biases and MLflow, as the launcher's settings choose
(any app: ``rlsweep/trackers=[tensorboard,wandb,mlflow]``, settings under
``hydra.launcher.trackers.<name>``; the built-in app: ``logger=[...]``, ``logger.<name>``;
see each backend's ``Settings``).

- A tracker is opened at the job's first row and sent each row as it is logged (live
  progress: a row per evaluation), from a background thread: a slow store or network never
  holds the job up.
- A tracker that fails (not installed, a full disk, the network) is reported once, on
  stderr and in the job's log, and dropped: the job and its other trackers go on.
- Trackers never change what a job is: they are launcher settings (under ``hydra``), out of
  its identity (its seeds, its results) and out of its directory's name; an app's own
  ``logger:`` section is the app's.
- A resumed job continues its runs, each step sent once and none lost: the rows after the
  last step each run holds (read from the tracker: :mod:`.feed`), first those the job
  restored from its checkpoint. ``.trackers.json`` in the job's directory keeps each
  tracker's run id and the last step it was sent (used when a tracker cannot be read).

One module per backend: :mod:`~rlsweep.trackers.tensorboard`,
:mod:`~rlsweep.trackers.wandb`, :mod:`~rlsweep.trackers.mlflow`; what they share in
:mod:`~rlsweep.trackers.base`; choosing and checking them in
:mod:`~rlsweep.trackers.settings`; feeding them in :mod:`~rlsweep.trackers.feed`.
"""

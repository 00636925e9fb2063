"""Running many simulations: the local process pool (``pool``), what a chunk of tasks returns
on a local worker or a cluster's (``batches``), the pool's contract on a Dask cluster
(``cluster``: ``--cluster``) and the progress bar over them (``progress``). Used by
``harness sim --seeds``, ``compare``'s seeds, ``sweep`` and ``tune``; it imports neither
``search`` nor the command layer."""

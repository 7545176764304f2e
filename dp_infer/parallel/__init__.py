"""Running one plan on more hardware: row blocks, row-sharded data, several hosts, reduced precision.

* :mod:`~dp_infer.parallel.row_blocks`: per-example sums and clipping in row blocks;
* :mod:`~dp_infer.parallel.sharding`: row-sharded data on a device mesh;
* :mod:`~dp_infer.parallel.distributed`: several processes (hosts) running one plan;
* :mod:`~dp_infer.parallel.precision`: reduced-precision storage of the rows, the row bound rechecked.

Nothing here changes a plan or its privacy: the same plan gives the same draws to float tolerance.
"""

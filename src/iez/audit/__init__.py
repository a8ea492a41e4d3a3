"""`iez advise` and `iez audit`: what Darshan logs say about a file system's striping, and what
iez would have done (docs/audit.md).

Pure: `findings` (one file's known striping problems), `advice` (one job: recorded layouts and
OSTCost, iez's layouts, the findings), `site` (many jobs summed up, in constant memory).
Adapters: `job` (one log read, advised and simulated: the task a Dask worker runs), `simulate`
(the job's write and read times on the simulator), `execute` (Dask: embedded LocalCluster or an
existing scheduler), `page` (HTML pages with figures, Parquet tables).
"""

"""One traced file of one process: the miniRecorder record (docs/references.md#s000-minirecorder).

libiez writes these into per-process shards (format: docs/trace-format.md, reader:
`iez.trace.shard`); Darshan import produces the same records.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileRecord:
    path: str
    app: str = ""
    run: str = ""
    rank: int = 0
    pid: int = 0
    host: str = ""
    api: str = "posix"  # posix | stdio | mpiio | hdf5
    created: bool = False  # this process created the file (it did not exist before)
    bytes_written: int = 0
    bytes_read: int = 0
    max_offset: int = 0  # highest byte offset written + 1
    stripe_count: int = 0  # of the layout the file ended up with (0 = unknown)
    stripe_size: int = 0
    osts: tuple[int, ...] = ()  # OSTs of that layout, in stripe order (empty = unknown)
    layout: str = ""  # the whole layout in plan grammar (docs/plan-format.md), "" = unknown
    open_time: float = 0.0  # epoch seconds of the first open
    close_time: float = 0.0  # epoch seconds of the last close
    comm_size: int = 1  # MPI communicator size (1 = POSIX/COMM_SELF)
    plan_hit: bool | None = None  # placed from the plan (True), missed (False), no plan (None)
    # How this process wrote it (0 = unknown, e.g. no write seen); Request's fields of the same name.
    transfer_size: int = 0  # its typical write: libiez the largest, rounded up to a power of two;
    #                         Darshan the most common access size
    write_align: int = 0  # the largest power of two dividing every write's offset and size
    writers: int = 1  # processes this record stands for: 1, or all ranks for Darshan's shared record
    # Version 3 shards (0 / "" when the trace does not know):
    writer_segments: int = 0  # contiguous extents this process wrote (1 = one block)
    read_size: int = 0  # its typical read: libiez the largest, rounded up to a power of two
    renamed_to: str = ""  # the name the file ended up with after renames in the run
    program: str = ""  # the process's own program name (app may be the run's: IEZ_APP)
    job_id: str = ""  # the batch system's job id (SLURM_JOB_ID, PBS_JOBID, LSB_JOBID, FLUX_JOB_ID)
    array_task: str = ""  # its array task id (SLURM_ARRAY_TASK_ID, PBS_ARRAY_INDEX, ...)
    name_random: int = 0  # created: its name ends in this many generated characters (mkstemp: 6)
    read_collective: bool = False  # this process read it with a collective MPI-IO call

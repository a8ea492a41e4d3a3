"""Readers for real Lustre text formats: `lctl get_param` output and parameter trees, lprocfs
stats, brw_stats, job_stats, `lfs df`, `lfs getstripe`, target space and LOD tunables.

Every parser takes text and returns plain dataclasses; lines it cannot read are reported in a
`skipped` list, never fatal. Only `params.py` touches the file system (docs/lustre-formats.md).
"""

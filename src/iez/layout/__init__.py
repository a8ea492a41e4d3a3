"""Layouts: the layout type, RAID-0 mapping, stripe sizing, and the lov_user_md codec."""

from iez.layout.layout import LUSTRE_EOF, Component, FileLayout, Layout

__all__ = ["LUSTRE_EOF", "Component", "FileLayout", "Layout"]

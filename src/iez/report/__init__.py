"""Pictures and pages for people: matplotlib PNGs and self-contained HTML reports, shared by
`iez report`, `iez demo` and the other report writers."""

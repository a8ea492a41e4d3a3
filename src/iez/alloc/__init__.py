"""OST allocation: Lustre's own LOD allocator (`lod`, `lustre_rr`, `lustre_qos`) and iez's
policies behind one interface (`policy`), found by name in one table (`registry.get_policy`:
balanced, iez-paper, rr, qos)."""

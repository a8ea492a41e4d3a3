"""OST allocators. `lod` is Lustre's own (LOD round-robin and QoS, lustre-allocator.md), the
baseline every iez placement is measured against."""

"""The catalog: one owner per data layout (benchmark sources, sample ids, schemas, score runs)."""

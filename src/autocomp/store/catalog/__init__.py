"""The catalog: one owner per data layout. `benchmarks` (where a benchmark comes from: a table,
a folder of parts or a published name), `published` (the benchmarks a store holds, a name
checked against them, fetched), `ids` (the sample id, made and parsed), `schemas` (the column
schemas of every table autocomp writes), `runs` (one model's score-run folder)."""

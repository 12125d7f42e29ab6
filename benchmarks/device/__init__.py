"""The parts of the accelerator check (`python -m benchmarks.bench_device`), one module each: the
training loop (`loop`), populations (`population`), the A/B of command buffers and scan unrolling
(`ab`), and the train steps and recurrences (`steps`: the `unreached` and `measured` parts); what
they share, the one table writer included, is `common`."""

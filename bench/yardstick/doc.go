// Package yardstick measures what the Go compiler costs on Fulcrum's fast
// path, apart from what Fulcrum does.
//
// The fast-path issue compares Fulcrum with the same pipeline written in C
// (bench/cref). That C pipeline does less than Fulcrum (a 16-byte key, one
// VIP compare, no health, pins, second chance or next-hop checks), so
// "Fulcrum / C" mixes two things: the extra work, and Go's code for the
// same work. This package separates them. It runs, in one process, on the
// same frames:
//   - C: the C pipeline's per-burst function itself (bench/cref/pipeline.h,
//     the code cref.c runs), through one cgo call per burst;
//   - Go: a line-by-line transliteration of it into Go (Pipeline.Burst),
//     written as fast Go is written here (whole-word loads, one bounds
//     check hint per frame, the burst's prefetches through
//     internal/prefetch), with no work added or left out.
//
// TestGoMatchesC runs bursts of established flows, new flows and SYNs
// through both and requires the same output frames, verdicts, counters and
// conntrack table, so the two do the same work. BenchmarkPipeline measures
// both (and the frames' refill alone, to subtract); dataplane's
// BenchmarkProcess measures Fulcrum's own path on the same input shape
// (64-byte TCP frames to 203.0.113.7:80 from 10k or 1M sources, bursts of
// 32). docs/benchmarks.md has the figures.
package yardstick

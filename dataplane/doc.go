// Package dataplane is the per-core forwarding code: what one lcore does to
// a burst of packets, and nothing else.
//
//   - worker.go: Worker.Process, the pipeline, one function per stage with
//     the burst as the unit of work: parse and classify every packet, one
//     batched conntrack lookup, then select a backend and encapsulate.
//   - services.go, vipindex.go: the snapshot the workers read (Services:
//     VIPs, backends, Maglev tables, the encapsulator and the next hop) and
//     its fast VIP index. The control plane builds it (package control,
//     snapshot.go) and publishes it with one atomic pointer store; a worker
//     loads it once per burst, so every setting a reload changes reaches a
//     burst all together or not at all.
//   - echo.go: pings to a VIP answered in place.
//   - counters.go: per-worker counters, read by the control plane through
//     a snapshot request served between bursts.
//   - ops.go: work the control plane posts to a worker's conntrack table
//     (clearing a removed VIP, counting flows, a lookup), run between
//     bursts by the worker itself, so the table needs no lock.
//   - engine.go, engine_dpdk.go: the DPDK polling loops (build tag dpdk)
//     that feed Process from the NIC queues and transmit its verdicts.
//
// The fast path (Process and everything it calls) allocates nothing, takes
// no lock and makes no syscall; tests prove the first with
// testing.AllocsPerRun. The package does not read the configuration file:
// the control plane maps it (control.EngineConfig, control.BuildServices),
// and the kernel's side of the exception path is package exception.
package dataplane

// Package sim holds fulcrum-sim's experiments, each a seed's measurement
// rerun with Fulcrum's own code:
//
//   - Compare (hashing.go): the chapter's section 3.4 comparison of
//     modulo, ring and Maglev hashing, with package maglev's tables.
//   - Policies (policies.go): the chapter's section 1.1 queueing
//     experiment, four rules and more, choosing with package sched.
//   - Slow (slow.go): section 4.2's slow server and the HAProxy patch's
//     farms (seed 002) in a closed loop, choosing with package sched.
//   - Pool (ewma.go): the seed 003 exercise's PICK/DONE/STATUS protocol
//     on sched.EWMA and sched.Cost.
//
// The schedulers are never reimplemented here: the simulations turn their
// state into sched.Load values and call the same pickers the dataplane
// calls for a new flow.
package sim
